package apiserver

import (
	"bytes"
	"cmp"
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

// serveSLIs serves /metrics/slis as kube-apiserver v1.37 does: each
// check's last result per endpoint (kubernetes_healthcheck{name,type}, 1
// passing, 0 failing), the results counted by status
// (kubernetes_healthchecks_total{name,status,type}), series in label
// order, and the process's start time.
// Any method is answered, as /metrics.
func (s *Server) serveSLIs(w http.ResponseWriter, r *http.Request) {
	s.slis.mu.Lock()
	keys := make([]sliKey, 0, len(s.slis.results))
	results := make(map[sliKey]sliResult, len(s.slis.results))
	for k, v := range s.slis.results {
		keys = append(keys, k)
		results[k] = *v
	}
	s.slis.mu.Unlock()
	slices.SortFunc(keys, func(a, b sliKey) int {
		return cmp.Or(strings.Compare(a.check, b.check), strings.Compare(a.endpoint, b.endpoint))
	})
	var b bytes.Buffer
	if len(keys) > 0 {
		b.WriteString("# HELP kubernetes_healthcheck The last result of each health check, by endpoint: 1 passed, 0 failed.\n# TYPE kubernetes_healthcheck gauge\n")
		for _, k := range keys {
			v := 0
			if results[k].passing {
				v = 1
			}
			fmt.Fprintf(&b, "kubernetes_healthcheck{name=%q,type=%q} %d\n", k.check, k.endpoint, v)
		}
		b.WriteString("# HELP kubernetes_healthchecks_total The results of the health checks run, by endpoint and status.\n# TYPE kubernetes_healthchecks_total counter\n")
		// By name, status, then type: a check's errors on every endpoint,
		// then its successes.
		for i := 0; i < len(keys); {
			j := i
			for j < len(keys) && keys[j].check == keys[i].check {
				j++
			}
			for _, status := range []string{"error", "success"} {
				for _, k := range keys[i:j] {
					n := results[k].success
					if status == "error" {
						n = results[k].errors
					}
					if n > 0 {
						fmt.Fprintf(&b, "kubernetes_healthchecks_total{name=%q,status=%q,type=%q} %d\n", k.check, status, k.endpoint, n)
					}
				}
			}
			i = j
		}
	}
	metric(&b, "process_start_time_seconds", "gauge", "When the process started, in seconds since the Unix epoch.", float64(processStart.UnixNano())/1e9)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b.Bytes())
	}
}
