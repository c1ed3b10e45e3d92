package webhook

import (
	"strings"
	"sync"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The admission policy metrics kube-apiserver serves (k8s.io/apiserver's
// admission/plugin/policy/validating/metrics), kept here and written on
// /metrics by app, by policy, binding, error type and enforcement action:
//   - apiserver_validating_admission_policy_check_total: each validation
//     that failed, once for each of its binding's actions ("deny", "warn",
//     "audit"), and each that could not be evaluated under failurePolicy
//     Ignore ("allow");
//   - apiserver_validating_admission_policy_check_duration_seconds: how
//     long each of those validations took.
//
// As upstream's, the error type of a false validation is "invalid_error"
// like that of a validation that failed to evaluate; "compile_error" and
// "out_of_budget" are told by the message.

// policyBounds are upstream's buckets of a validation's duration.
var policyBounds = []float64{0.0000005, 0.001, 0.01, 0.1, 1.0}

// histograms are one histogram's series by their labels' values (K, an
// array of them); its bounds are given with each call.
type histograms[K comparable] struct {
	mu     sync.Mutex
	series map[K]*series
}

func (h *histograms[K]) observe(bounds []float64, k K, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.series == nil {
		h.series = map[K]*series{}
	}
	if h.series[k] == nil {
		h.series[k] = &series{counts: make([]uint64, len(bounds)+1)}
	}
	h.series[k].observe(bounds, d)
}

// export is the series, labelled by labels, in label order.
func (h *histograms[K]) export(bounds []float64, labels func(K) []string) []Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Series
	for k, s := range h.series {
		out = append(out, Series{Labels: labels(k), Bounds: bounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	byLabels(out)
	return out
}

// policyMetrics are by policy, binding, error type and action.
type policyMetrics struct{ checks histograms[[4]string] }

// policyErrorType is upstream's error type of a failed validation, read
// off its message.
func policyErrorType(message string) string {
	switch {
	case strings.HasPrefix(message, "compilation"):
		return "compile_error"
	case strings.HasPrefix(message, "validation failed due to running out of cost budget"):
		return "out_of_budget"
	}
	return "invalid_error"
}

func (m *policyMetrics) observe(policy, binding, message, action string, d time.Duration) {
	m.checks.observe(policyBounds, [4]string{policy, binding, policyErrorType(message), action}, d)
}

// PolicyMetrics are the admission policy metrics' series (histograms;
// the check counts are their totals), in label order.
func (w *Webhooks) PolicyMetrics() []Series {
	return w.policyMetrics.checks.export(policyBounds, func(k [4]string) []string {
		return []string{"enforcement_action", k[3], "error_type", k[2], "policy", k[0], "policy_binding", k[1]}
	})
}

// mutationMetrics are the mutating admission policy metrics
// kube-apiserver serves (policy/mutating/metrics), by policy, binding
// and error type ("no_error" for a mutation that applied):
//   - apiserver_mutating_admission_policy_check_total: each mutation
//     evaluated;
//   - apiserver_mutating_admission_policy_check_duration_seconds: how
//     long each took, with its patch applied.
type mutationMetrics struct{ checks histograms[[3]string] }

func (m *mutationMetrics) observe(policy, binding, errorType string, d time.Duration) {
	m.checks.observe(policyBounds, [3]string{policy, binding, errorType}, d)
}

// MutationMetrics are the mutating admission policy metrics' series
// (histograms; the check counts are their totals), in label order.
func (w *Webhooks) MutationMetrics() []Series {
	return w.mutationMetrics.checks.export(policyBounds, func(k [3]string) []string {
		return []string{"error_type", k[2], "policy", k[0], "policy_binding", k[1]}
	})
}

// conditionMetrics are the matchCondition metrics kube-apiserver serves
// (admission/metrics), by the name of the webhook or policy, its kind
// ("webhook" or "policy"), type ("admit" or "validating" for webhooks,
// "validate" for policies of either kind, as upstream labels them) and
// the operation:
//   - apiserver_admission_match_condition_evaluation_errors_total: each
//     condition that failed to evaluate before the answer was known;
//   - apiserver_admission_match_condition_evaluation_seconds: how long
//     the conditions took, observed as upstream observes it: when one was
//     false or some failed, not when all were true.
//
// Upstream declares match_condition_exclusions_total but never counts
// it; it is not served.
type conditionMetrics struct {
	seconds histograms[[4]string] // name, kind, type, operation
	mu      sync.Mutex
	errors  map[[4]string]uint64
}

// conditionBounds are upstream's buckets of the conditions' duration.
var conditionBounds = []float64{0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25}

// observe records one evaluation of the conditions of name that took d:
// whether it matched, and how many conditions failed.
func (m *conditionMetrics) observe(name, kind, typ string, op registry.Operation, matched bool, failed int, d time.Duration) {
	if matched && failed == 0 {
		return
	}
	k := [4]string{name, kind, typ, string(op)}
	if failed > 0 {
		m.mu.Lock()
		if m.errors == nil {
			m.errors = map[[4]string]uint64{}
		}
		m.errors[k] += uint64(failed)
		m.mu.Unlock()
	}
	m.seconds.observe(conditionBounds, k, d)
}

// ConditionErrors are the matchCondition evaluation errors' series (each
// with one count), in label order.
func (w *Webhooks) ConditionErrors() []Series {
	m := &w.conditionMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Series
	for k, n := range m.errors {
		out = append(out, Series{Labels: conditionLabels(k), Counts: []uint64{n}})
	}
	byLabels(out)
	return out
}

// ConditionSeconds are the matchConditions' durations' series.
func (w *Webhooks) ConditionSeconds() []Series {
	return w.conditionMetrics.seconds.export(conditionBounds, conditionLabels)
}

func conditionLabels(k [4]string) []string {
	return []string{"kind", k[1], "name", k[0], "operation", k[3], "type", k[2]}
}
