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

type policyMetrics struct {
	mu     sync.Mutex
	checks map[[4]string]*series // policy, binding, error type, action
}

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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checks == nil {
		m.checks = map[[4]string]*series{}
	}
	k := [4]string{policy, binding, policyErrorType(message), action}
	if m.checks[k] == nil {
		m.checks[k] = &series{counts: make([]uint64, len(policyBounds)+1)}
	}
	m.checks[k].observe(policyBounds, d)
}

// PolicyMetrics are the admission policy metrics' series (histograms;
// the check counts are their totals), in label order.
func (w *Webhooks) PolicyMetrics() []Series {
	m := &w.policyMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Series
	for k, s := range m.checks {
		out = append(out, Series{
			Labels: []string{"enforcement_action", k[3], "error_type", k[2], "policy", k[0], "policy_binding", k[1]},
			Bounds: policyBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum,
		})
	}
	byLabels(out)
	return out
}

// mutationMetrics are the mutating admission policy metrics
// kube-apiserver serves (policy/mutating/metrics), by policy, binding
// and error type ("no_error" for a mutation that applied):
//   - apiserver_mutating_admission_policy_check_total: each mutation
//     evaluated;
//   - apiserver_mutating_admission_policy_check_duration_seconds: how
//     long each took, with its patch applied.
type mutationMetrics struct {
	mu     sync.Mutex
	checks map[[3]string]*series // policy, binding, error type
}

func (m *mutationMetrics) observe(policy, binding, errorType string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checks == nil {
		m.checks = map[[3]string]*series{}
	}
	k := [3]string{policy, binding, errorType}
	if m.checks[k] == nil {
		m.checks[k] = &series{counts: make([]uint64, len(policyBounds)+1)}
	}
	m.checks[k].observe(policyBounds, d)
}

// MutationMetrics are the mutating admission policy metrics' series
// (histograms; the check counts are their totals), in label order.
func (w *Webhooks) MutationMetrics() []Series {
	m := &w.mutationMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Series
	for k, s := range m.checks {
		out = append(out, Series{
			Labels: []string{"error_type", k[2], "policy", k[0], "policy_binding", k[1]},
			Bounds: policyBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum,
		})
	}
	byLabels(out)
	return out
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
	mu      sync.Mutex
	errors  map[[4]string]uint64
	seconds map[[4]string]*series
}

// conditionBounds are upstream's buckets of the conditions' duration.
var conditionBounds = []float64{0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25}

// observe records one evaluation of the conditions of name that took d:
// whether it matched, and how many conditions failed.
func (m *conditionMetrics) observe(name, kind, typ string, op registry.Operation, matched bool, failed int, d time.Duration) {
	if matched && failed == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.errors == nil {
		m.errors, m.seconds = map[[4]string]uint64{}, map[[4]string]*series{}
	}
	k := [4]string{name, kind, typ, string(op)}
	if failed > 0 {
		m.errors[k] += uint64(failed)
	}
	if m.seconds[k] == nil {
		m.seconds[k] = &series{counts: make([]uint64, len(conditionBounds)+1)}
	}
	m.seconds[k].observe(conditionBounds, d)
}

// ConditionErrors are the matchCondition evaluation errors' series (each
// with one count), and ConditionSeconds the durations', in label order.
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

func (w *Webhooks) ConditionSeconds() []Series {
	m := &w.conditionMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Series
	for k, s := range m.seconds {
		out = append(out, Series{Labels: conditionLabels(k), Bounds: conditionBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	byLabels(out)
	return out
}

func conditionLabels(k [4]string) []string {
	return []string{"kind", k[1], "name", k[0], "operation", k[3], "type", k[2]}
}
