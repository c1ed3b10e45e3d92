package apiserver

import (
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/flowcontrol"
)

// The response headers that name a request's flow schema and priority
// level, by uid, as upstream's.
const (
	headerFlowSchemaUID    = "X-Kubernetes-Pf-Flowschema-Uid"
	headerPriorityLevelUID = "X-Kubernetes-Pf-Prioritylevel-Uid"
)

// requestTimeout is kube-apiserver's default --request-timeout, which
// bounds a request's ?timeout=. A request may wait a quarter of its
// timeout for a seat: 15 s without one.
const requestTimeout = time.Minute

// admit classifies r and waits for its seat (see Config.FlowControl),
// naming the classification in the response's headers. It returns the
// ticket that holds the seat, or nil once it has refused the request
// (429, in plain text with a Retry-After, as upstream's).
func (s *Server) admit(w http.ResponseWriter, r *http.Request, fc *flowcontrol.Controller, start time.Time) *flowcontrol.Ticket {
	a := requestAttributes(r, flowUser(r))
	wait := requestTimeout / 4
	if strings.Contains(r.URL.RawQuery, "timeout=") && !isWatch(r) {
		t := r.URL.Query().Get("timeout")
		if d, err := time.ParseDuration(t); err == nil && d > 0 {
			wait = min(d, requestTimeout) / 4
		}
	}
	t, err := fc.Admit(r.Context(), &a, r.URL.Path, wait, s.listSeats(r, &a))
	h := w.Header()
	h[headerFlowSchemaUID], h[headerPriorityLevelUID] = t.HeaderValues()
	if err != nil {
		h.Set("Retry-After", strconv.FormatInt(t.RetryAfter, 10))
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
		s.countRefused(r, &a, start)
		return nil
	}
	return t
}

// flowControlDump serves kube-apiserver's debug dumps of priority and
// fairness (/debug/api_priority_and_fairness/...): a row per priority
// level, per queue, or per waiting or executing request (with
// ?includeRequestDetails=1, its user and what it asks), as aligned
// comma-separated text.
func (s *Server) flowControlDump(w http.ResponseWriter, r *http.Request) {
	fc := s.cfg.FlowControl
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var err error
	switch path.Base(r.URL.Path) {
	case "dump_priority_levels":
		err = fc.DumpPriorityLevels(w)
	case "dump_queues":
		err = fc.DumpQueues(w)
	default:
		err = fc.DumpRequests(w, r.URL.Query().Get("includeRequestDetails") != "")
	}
	if err != nil {
		s.cfg.Logger.Debug("priority and fairness dump not written", "path", r.URL.Path, "err", err)
	}
}

// countRefused counts a request refused before it was routed in the
// request metrics, as upstream counts its 429s, if it names a served
// resource (the others are not counted, see countRequest).
func (s *Server) countRefused(r *http.Request, a *registry.Attributes, start time.Time) {
	if !a.ResourceRequest || s.cfg.Registry == nil {
		return
	}
	if _, served := s.cfg.Registry.Lookup(a.APIGroup, a.APIVersion, a.Resource); !served {
		return
	}
	ri, ok := parsePath(r.URL.Path)
	if !ok || ri.discovery || ri.groupOnly {
		return
	}
	s.requests.of(labelsFor(r, ri, a.Verb == "watch")).refuse(http.StatusTooManyRequests)
}

// unauthenticated are an anonymous request's groups (not to be changed).
var unauthenticated = []string{"system:unauthenticated"}

// The size-based estimate of a list's work, upstream's (on by default in
// 1.37): a seat per listSeatBytes of the objects it reads at once, at
// most listMaxBytes of them counted (a list from the cache streams).
const (
	listSeatBytes = 100_000
	listMaxBytes  = 1_000_000
)

// listSeats is the seats request a takes: for a list, or a watch that
// starts with the state (no resourceVersion, "0", or sendInitialEvents),
// its estimated work from the resource's objects in the cache (their
// count and mean size; one object for a list by name, limit objects for
// a page); 1 for anything else. The level caps it.
func (s *Server) listSeats(r *http.Request, a *registry.Attributes) int {
	if !a.ResourceRequest || a.Verb != "list" && a.Verb != "watch" || s.cfg.Registry == nil {
		return 1
	}
	q := r.URL.Query()
	if rv := q.Get("resourceVersion"); a.Verb == "watch" && rv != "" && rv != "0" && q.Get("sendInitialEvents") != "true" {
		return 1
	}
	res, ok := s.cfg.Registry.Lookup(a.APIGroup, a.APIVersion, a.Resource)
	if !ok {
		return 1
	}
	st := res.CacheStats()
	if st.Objects == 0 {
		return 1
	}
	objects := int64(st.Objects)
	if a.Name != "" {
		objects = 1
	} else if limit, err := strconv.ParseInt(q.Get("limit"), 10, 64); err == nil && limit > 0 && limit < objects {
		objects = limit
	}
	bytes := min(objects*(st.Bytes/int64(st.Objects)), listMaxBytes)
	return int(max(1, (bytes+listSeatBytes-1)/listSeatBytes))
}

// flowUser is the user r is classified as: the authenticated (or
// impersonated) one, or that of its client certificate.
func flowUser(r *http.Request) registry.User {
	if u, ok := registry.UserFrom(r.Context()); ok {
		return u
	}
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return registry.User{Name: "system:anonymous", Groups: unauthenticated}
	}
	cert := r.TLS.VerifiedChains[0][0]
	return registry.User{Name: cert.Subject.CommonName, Groups: append(slices.Clip(cert.Subject.Organization), "system:authenticated")}
}

// MaxInflight are the limits of requests served at once without priority
// and fairness, as kube-apiserver's --max-requests-inflight and
// --max-mutating-requests-inflight with --enable-priority-and-fairness=false:
// reads (get, list) and the rest. 0 is no limit. Watches and system:masters
// are never limited.
type MaxInflight struct {
	ReadOnly, Mutating int
}

// inflightLimit counts the requests MaxInflight limits.
type inflightLimit struct {
	now [2]atomic.Int64 // readOnly, mutating
}

// limit takes a place for r, or refuses it (429, Retry-After 1, as
// upstream's) and returns false. release gives the place back.
func (s *Server) limit(w http.ResponseWriter, r *http.Request, start time.Time) (release func(), ok bool) {
	limits := [2]int{s.cfg.MaxInflight.ReadOnly, s.cfg.MaxInflight.Mutating}
	kind := kindOf(r)
	if limits[kind] <= 0 || isWatch(r) || slices.Contains(flowUser(r).Groups, "system:masters") {
		return func() {}, true
	}
	if s.limited.now[kind].Add(1) > int64(limits[kind]) {
		s.limited.now[kind].Add(-1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Too many requests, please try again later.", http.StatusTooManyRequests)
		a := requestAttributes(r, registry.User{})
		s.countRefused(r, &a, start)
		return nil, false
	}
	return func() { s.limited.now[kind].Add(-1) }, true
}
