package apiserver

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/registry"
)

// The metrics of kube-apiserver's authentication and authorization
// filters (k8s.io/apiserver's endpoints/filters/metrics.go, read for the
// behaviour):
//   - apiserver_authentication_attempts{result} and
//     apiserver_authentication_duration_seconds{result}: each request's
//     authentication, "success" (a client certificate, a token, or no
//     credential let in as system:anonymous), "failure" (no credential,
//     and none let in) or "error" (a credential that is not valid);
//   - apiserver_authenticated_user_requests{username}: the successes by
//     user, the names folded as upstream folds them ("admin", "email_id",
//     "other", ...) so that the series stay few and name no one;
//   - apiserver_authorization_attempts_total{result} and
//     apiserver_authorization_duration_seconds{result}: each
//     authenticated request's authorization, "allowed", "denied",
//     "no-opinion" or "error".

// authBuckets are upstream's buckets of both durations: 1 ms doubling 15
// times.
var authBuckets = func() [15]float64 {
	var b [15]float64
	for i := range b {
		b[i] = 0.001 * float64(int(1)<<i)
	}
	return b
}()

// The results, as upstream labels them.
var (
	authnResults = [...]string{"error", "failure", "success"}
	authzResults = [...]string{"allowed", "denied", "error", "no-opinion"}
	// usernames are the folded user names (compressUsername).
	usernames = [...]string{"admin", "client", "email_id", "kube_proxy", "kubelet", "other", "system:serviceaccount:kube-system:default"}
)

// authSeries is the histogram of one result.
type authSeries struct {
	buckets [len(authBuckets) + 1]atomic.Uint64
	nanos   atomic.Int64
}

func (s *authSeries) observe(d time.Duration) {
	s.buckets[sort.SearchFloat64s(authBuckets[:], d.Seconds())].Add(1)
	s.nanos.Add(int64(d))
}

// authMetrics are a server's authentication and authorization figures:
// a request costs a few atomic adds.
type authMetrics struct {
	authn [len(authnResults)]authSeries
	authz [len(authzResults)]authSeries
	users [len(usernames)]atomic.Uint64
}

// authenticated records a request's authentication: result is one of
// authnResults; u is the user of a success.
func (m *authMetrics) authenticated(result string, u registry.User, d time.Duration) {
	m.authn[indexOf(authnResults[:], result)].observe(d)
	if result == "success" {
		m.users[indexOf(usernames[:], compressUsername(u.Name))].Add(1)
	}
}

// authorized records a request's authorization.
func (m *authMetrics) authorized(d registry.Decision, err error, took time.Duration) {
	result := "no-opinion"
	switch {
	case d == registry.Allow:
		result = "allowed"
	case err != nil:
		result = "error"
	case d == registry.Deny:
		result = "denied"
	}
	m.authz[indexOf(authzResults[:], result)].observe(took)
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	panic("apiserver: no metric label " + s)
}

// compressUsername folds a user name as upstream does: a few well-known
// names as they are, one with an @ as email_id, any other as other.
func compressUsername(name string) string {
	switch {
	case name == "admin" || name == "client" || name == "kube_proxy" || name == "kubelet" ||
		name == "system:serviceaccount:kube-system:default":
		return name
	case strings.Contains(name, "@"):
		return "email_id"
	}
	return "other"
}

// write appends the metrics in the Prometheus text format, the series
// seen so far in label order.
func (m *authMetrics) write(b *bytes.Buffer) {
	var users bytes.Buffer
	for i, name := range usernames {
		if n := m.users[i].Load(); n > 0 {
			fmt.Fprintf(&users, "apiserver_authenticated_user_requests{username=%q} %d\n", name, n)
		}
	}
	writeCounter(b, "apiserver_authenticated_user_requests", "Authenticated requests, by user name folded into a few kinds.", &users)
	writeAuthSeries(b, "apiserver_authentication", "Authentications", authnResults[:], m.authn[:])
	writeAuthSeries(b, "apiserver_authorization", "Authorizations", authzResults[:], m.authz[:])
}

// writeAuthSeries writes <prefix>_attempts (authentication) or
// <prefix>_attempts_total (authorization) and <prefix>_duration_seconds.
func writeAuthSeries(b *bytes.Buffer, prefix, what string, results []string, series []authSeries) {
	attempts := prefix + "_attempts"
	if prefix == "apiserver_authorization" {
		attempts += "_total"
	}
	var counts, durations bytes.Buffer
	for i, result := range results {
		var c [len(authBuckets) + 1]uint64
		loadCounts(c[:], series[i].buckets[:])
		var n uint64
		for _, x := range c {
			n += x
		}
		if n == 0 {
			continue
		}
		labels := fmt.Sprintf("result=%q", result)
		fmt.Fprintf(&counts, "%s{%s} %d\n", attempts, labels, n)
		writeHistogram(&durations, prefix+"_duration_seconds", labels, authBuckets[:], c[:], seconds(series[i].nanos.Load()))
	}
	if counts.Len() == 0 {
		return
	}
	fmt.Fprintf(b, "# HELP %s %s of requests, by result.\n# TYPE %s counter\n", attempts, what, attempts)
	b.Write(counts.Bytes())
	fmt.Fprintf(b, "# HELP %s_duration_seconds How long the %s of requests took in seconds, by result.\n# TYPE %s_duration_seconds histogram\n", prefix, strings.ToLower(what), prefix)
	b.Write(durations.Bytes())
}

// writeAuditMetrics appends kube-apiserver's audit metrics, with the
// audit log on: apiserver_audit_event_total (the events sent to the
// backends), apiserver_audit_error_total{plugin} (those lost: "log", a
// write that failed; "webhook", a list not taken; "buffered", a full
// batch queue) and
// apiserver_audit_requests_rejected_total (requests refused for an event
// not written, --audit-log-mode=blocking-strict).
func (s *Server) writeAuditMetrics(b *bytes.Buffer) {
	if s.cfg.AuditLog == nil {
		return
	}
	f := s.cfg.AuditLog.Figures()
	fmt.Fprintf(b, "# HELP apiserver_audit_event_total Audit events sent to the audit backends.\n# TYPE apiserver_audit_event_total counter\napiserver_audit_event_total %d\n", f.Events)
	var lost bytes.Buffer
	for _, plugin := range f.Plugins() {
		if n := f.Errors[plugin]; n > 0 { // a series from its first loss, as upstream's
			fmt.Fprintf(&lost, "apiserver_audit_error_total{plugin=%q} %d\n", plugin, n)
		}
	}
	writeCounter(b, "apiserver_audit_error_total", "Audit events lost, by the stage that lost them: log (a write that failed), webhook (a list the webhook did not take) or buffered (a full queue in batch mode).", &lost)
	var levels bytes.Buffer
	for i, level := range auditLevelNames {
		if n := s.auditLevels[i].Load(); n > 0 {
			fmt.Fprintf(&levels, "apiserver_audit_level_total{level=%q} %d\n", level, n)
		}
	}
	writeCounter(b, "apiserver_audit_level_total", "The levels the audit policy gave requests, one per request.", &levels)
	fmt.Fprintf(b, "# HELP apiserver_audit_requests_rejected_total Requests refused because their first audit event could not be written (blocking-strict).\n# TYPE apiserver_audit_requests_rejected_total counter\napiserver_audit_requests_rejected_total %d\n", s.auditRejected.Load())
}

// auditLevelNames are the audit levels, in the order their counts are
// kept.
var auditLevelNames = [...]audit.Level{audit.LevelMetadata, audit.LevelNone, audit.LevelRequest, audit.LevelRequestResponse}

// countAuditLevel counts the level the policy gave a request, for
// apiserver_audit_level_total.
func (s *Server) countAuditLevel(level audit.Level) {
	for i, l := range auditLevelNames {
		if l == level {
			s.auditLevels[i].Add(1)
			return
		}
	}
}

// writeCounter writes a counter's HELP and TYPE and its series, if it
// has any.
func writeCounter(b *bytes.Buffer, name, help string, series *bytes.Buffer) {
	if series.Len() == 0 {
		return
	}
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
	b.Write(series.Bytes())
}
