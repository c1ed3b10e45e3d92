package webhook

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The authorization metrics kube-apiserver serves (k8s.io/apiserver's
// authorization/metrics, authorization/cel and the webhook authorizer's
// metrics), kept here and written on /metrics by app:
//   - apiserver_authorization_decisions_total{type,name,decision}: each
//     allowance ("allowed") or denial ("denied") of a configured
//     authorizer (no opinion is not counted, nor system:masters');
//   - apiserver_authorization_webhook_evaluations_total{name,result} and
//     ..._webhook_duration_seconds{name,result}: each call of a webhook
//     (each retry too), "success", "timeout", "canceled" or "error";
//   - apiserver_authorization_webhook_evaluations_fail_open_total
//     {name,result}: the failed questions a NoOpinion webhook let pass
//     to the next authorizer, by its last call's result;
//   - apiserver_authorization_match_condition_evaluation_seconds,
//     ..._evaluation_errors_total and ..._exclusions_total{type,name}:
//     a webhook's matchConditions evaluated, failing, or skipping it.

var (
	// webhookBounds are upstream's buckets of a call (Prometheus' default).
	webhookBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	// matchBounds are upstream's buckets of a match condition evaluation.
	matchBounds = []float64{0.001, 0.005, 0.01, 0.025, 0.1, 0.2, 0.25}
)

// AuthorizationMetrics are the authorizers' figures, shared by the
// authorizers of one server (and those a reloaded configuration makes).
type AuthorizationMetrics struct {
	mu         sync.Mutex
	decisions  map[[2]string]*DecisionCounts // type, name
	calls      map[[2]string]*series
	failOpen   map[[2]string]uint64
	matchTimes map[string]*series // by webhook name
	matchErrs  map[string]uint64
	excluded   map[string]uint64
}

// DecisionCounts count one authorizer's allowances and denials.
type DecisionCounts struct{ allowed, denied atomic.Uint64 }

// Count counts d (no opinion is not counted).
func (c *DecisionCounts) Count(d registry.Decision) {
	switch d {
	case registry.Allow:
		c.allowed.Add(1)
	case registry.Deny:
		c.denied.Add(1)
	}
}

// Decisions returns the counts of the authorizer of that type and name,
// the same for each authorizer a reloaded configuration makes again.
func (m *AuthorizationMetrics) Decisions(typ, name string) *DecisionCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.decisions == nil {
		m.decisions = map[[2]string]*DecisionCounts{}
	}
	k := [2]string{typ, name}
	if m.decisions[k] == nil {
		m.decisions[k] = &DecisionCounts{}
	}
	return m.decisions[k]
}

// call records a webhook call that took d and ended in err.
func (m *AuthorizationMetrics) call(ctx context.Context, name string, d time.Duration, err error) string {
	result := callResult(ctx, err)
	if m == nil {
		return result
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[[2]string]*series{}
	}
	k := [2]string{name, result}
	s := m.calls[k]
	if s == nil {
		s = &series{counts: make([]uint64, len(webhookBounds)+1)}
		m.calls[k] = s
	}
	s.observe(webhookBounds, d)
	return result
}

// callResult is upstream's name for how a call ended.
func callResult(ctx context.Context, err error) string {
	var st *apierrors.StatusError
	switch {
	case err == nil:
		return "success"
	case ctx.Err() != nil:
		return "canceled"
	case utilnet.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) ||
		errors.As(err, &st) && st.ErrStatus.Code == http.StatusGatewayTimeout:
		return "timeout"
	}
	return "error"
}

// failedOpen counts a question a NoOpinion webhook could not answer.
func (m *AuthorizationMetrics) failedOpen(name, result string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failOpen == nil {
		m.failOpen = map[[2]string]uint64{}
	}
	m.failOpen[[2]string{name, result}]++
}

// matched records an evaluation of a webhook's match conditions that
// took d: excluded if one was false, failed if one did not evaluate.
func (m *AuthorizationMetrics) matched(name string, d time.Duration, excluded, failed bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.matchTimes == nil {
		m.matchTimes, m.matchErrs, m.excluded = map[string]*series{}, map[string]uint64{}, map[string]uint64{}
	}
	s := m.matchTimes[name]
	if s == nil {
		s = &series{counts: make([]uint64, len(matchBounds)+1)}
		m.matchTimes[name] = s
	}
	s.observe(matchBounds, d)
	if excluded {
		m.excluded[name]++
	}
	if failed {
		m.matchErrs[name]++
	}
}

// AuthorizationSeries are the metrics' series, each in label order.
type AuthorizationSeries struct {
	Decisions, Calls, FailOpen, MatchTimes, MatchErrors, MatchExclusions []Series
}

// Series returns the figures so far.
func (m *AuthorizationMetrics) Series() AuthorizationSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out AuthorizationSeries
	for k, c := range m.decisions {
		for decision, n := range map[string]uint64{"allowed": c.allowed.Load(), "denied": c.denied.Load()} {
			if n > 0 {
				out.Decisions = append(out.Decisions, Series{Labels: []string{"decision", decision, "name", k[1], "type", k[0]}, Counts: []uint64{n}})
			}
		}
	}
	for k, s := range m.calls {
		out.Calls = append(out.Calls, Series{Labels: []string{"name", k[0], "result", k[1]}, Bounds: webhookBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	for k, n := range m.failOpen {
		out.FailOpen = append(out.FailOpen, Series{Labels: []string{"name", k[0], "result", k[1]}, Counts: []uint64{n}})
	}
	for name, s := range m.matchTimes {
		labels := []string{"name", name, "type", "Webhook"}
		out.MatchTimes = append(out.MatchTimes, Series{Labels: labels, Bounds: matchBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
		if n := m.matchErrs[name]; n > 0 {
			out.MatchErrors = append(out.MatchErrors, Series{Labels: labels, Counts: []uint64{n}})
		}
		if n := m.excluded[name]; n > 0 {
			out.MatchExclusions = append(out.MatchExclusions, Series{Labels: labels, Counts: []uint64{n}})
		}
	}
	for _, ss := range [][]Series{out.Decisions, out.Calls, out.FailOpen, out.MatchTimes, out.MatchErrors, out.MatchExclusions} {
		sort.Slice(ss, func(i, j int) bool { return lessLabels(ss[i].Labels, ss[j].Labels) })
	}
	return out
}
