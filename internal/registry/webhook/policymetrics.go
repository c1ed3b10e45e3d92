package webhook

import (
	"strings"
	"sync"
	"time"
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
