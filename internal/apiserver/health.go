package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// HealthCheck is one named check of the health endpoints, for what only
// the caller knows (app's: that etcd answers). Check returns nil when it
// passes; it should bound its own time.
type HealthCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Check names kplane gives the states of the server itself, after
// kube-apiserver's: the post-start hook that waits for the CRD informer
// (kplane is ready once every stored CRD is served), and shutdown.
const (
	startedCheck  = "poststarthook/crd-informer-synced"
	shutdownCheck = "shutdown"
)

// installHealth serves /livez, /readyz and /healthz as kube-apiserver
// v1.37 does (its answers were read off a running one, with etcd up and
// then stopped):
//   - each runs its checks in order: ping, the caller's, the start-up's,
//     and for /readyz shutdown;
//   - when all pass it answers 200 "ok", or with ?verbose a line per check
//     and "<name> check passed";
//   - when one fails it answers 500 with a line per check, a failed one's
//     reason withheld, and "<name> check failed";
//   - ?exclude=<check> (repeated for more) skips a check, and a name that
//     matches none is reported in a warning line;
//   - /<endpoint>/<check> runs one check: "ok", or 500 with its reason.
//
// Only the three endpoints themselves are counted in the request metrics
// and served without credentials; the single checks are not.
func (s *Server) installHealth() {
	checks := []HealthCheck{{Name: "ping", Check: func(context.Context) error { return nil }}}
	checks = append(checks, s.cfg.HealthChecks...)
	checks = append(checks, HealthCheck{Name: startedCheck, Check: func(context.Context) error {
		if !s.started.Load() {
			return errors.New("not finished")
		}
		return nil
	}})
	// /readyz's list is the others' and shutdown, in an array of its own.
	ready := append(slices.Clip(checks), HealthCheck{Name: shutdownCheck, Check: func(context.Context) error {
		if s.shuttingDown.Load() {
			return errors.New("process is shutting down")
		}
		return nil
	}})
	for name, list := range map[string][]HealthCheck{"livez": checks, "healthz": checks, "readyz": ready} {
		s.mux.HandleFunc("/"+name, s.healthAll(name, list))
		s.mux.HandleFunc("/"+name+"/", healthOne(name, list))
		s.healthPaths = append(s.healthPaths, "/"+name)
		for _, c := range list {
			s.healthPaths = append(s.healthPaths, "/"+name+"/"+c.Name)
		}
	}
}

// healthAll answers /<name>: every check but those excluded.
func (s *Server) healthAll(name string, checks []HealthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.countPath(w, r, "/"+name, "")
		q := r.URL.Query()
		excluded := map[string]bool{}
		for _, c := range q["exclude"] {
			excluded[c] = true
		}
		var out bytes.Buffer
		var failed []string
		for _, c := range checks {
			if excluded[c.Name] {
				delete(excluded, c.Name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			err := c.Check(r.Context())
			s.slis.record(name, c.Name, err == nil)
			if err != nil {
				// The endpoint is public: the reason goes to the log,
				// and to whoever may ask for the single check.
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name)
				failed = append(failed, c.Name)
				s.cfg.Logger.Debug("health check failed", "endpoint", name, "check", c.Name, "err", err)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", c.Name)
		}
		if len(excluded) > 0 {
			unknown := make([]string, 0, len(excluded))
			for c := range excluded {
				unknown = append(unknown, strconv.Quote(c))
			}
			sort.Strings(unknown)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(unknown, ","))
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", out.Bytes(), name)
			return
		}
		if _, verbose := q["verbose"]; !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprintf(w, "%s%s check passed\n", out.Bytes(), name)
	}
}

// healthOne answers /<name>/<check>: that check alone, with its reason
// when it fails; 404 for a check the endpoint does not have.
func healthOne(name string, checks []HealthCheck) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		check := strings.TrimPrefix(r.URL.Path, "/"+name+"/")
		for _, c := range checks {
			if c.Name != check {
				continue
			}
			if err := c.Check(r.Context()); err != nil {
				http.Error(w, "internal server error: "+err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "ok")
			return
		}
		http.NotFound(w, r)
	}
}

// healthSLIs are the results of the checks the three endpoints ran, for
// /metrics/slis: kube-apiserver's component SLIs. Each run of /livez,
// /readyz or /healthz (not excluded) counts, as upstream's; a single check
// (/livez/<check>) does not.
type healthSLIs struct {
	mu      sync.Mutex
	results map[sliKey]*sliResult
}

type sliKey struct{ endpoint, check string }

type sliResult struct {
	passing         bool
	success, errors int64
}

func (h *healthSLIs) record(endpoint, check string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.results == nil {
		h.results = map[sliKey]*sliResult{}
	}
	r := h.results[sliKey{endpoint, check}]
	if r == nil {
		r = &sliResult{}
		h.results[sliKey{endpoint, check}] = r
	}
	r.passing = ok
	if ok {
		r.success++
	} else {
		r.errors++
	}
}

// samples are each check's last result per endpoint and its results
// counted by status, each in the order of its labels' values.
func (h *healthSLIs) samples() (last, counts []Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, r := range h.results {
		passing := 0.0
		if r.passing {
			passing = 1
		}
		last = append(last, Sample{Labels: []string{"name", k.check, "type", k.endpoint}, Value: passing})
		for status, n := range map[string]int64{"error": r.errors, "success": r.success} {
			if n > 0 {
				counts = append(counts, Sample{Labels: []string{"name", k.check, "status", status, "type", k.endpoint}, Value: float64(n)})
			}
		}
	}
	byLabels := func(a, b Sample) int { return slices.Compare(a.Labels, b.Labels) }
	slices.SortFunc(last, byLabels)
	slices.SortFunc(counts, byLabels)
	return last, counts
}

// serveSLIs serves /metrics/slis as kube-apiserver v1.37 does: each
// check's last result per endpoint (kubernetes_healthcheck{name,type}, 1
// passing, 0 failing), the results counted by status
// (kubernetes_healthchecks_total{name,status,type}), series in label
// order, and the process's start time.
// Any method is answered, as /metrics.
func (s *Server) serveSLIs(w http.ResponseWriter, r *http.Request) {
	last, counts := s.slis.samples()
	var b bytes.Buffer
	Metric{Name: "kubernetes_healthcheck", Type: "gauge", Help: "The last result of each health check, by endpoint: 1 passed, 0 failed.",
		Read: func() []Sample { return last }}.write(&b)
	Metric{Name: "kubernetes_healthchecks_total", Type: "counter", Help: "The results of the health checks run, by endpoint and status.",
		Read: func() []Sample { return counts }}.write(&b)
	metric(&b, "process_start_time_seconds", "gauge", "When the process started, in seconds since the Unix epoch.", float64(processStart.UnixNano())/1e9)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}
