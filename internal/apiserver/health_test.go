package apiserver_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// /livez, /readyz and /healthz answer as a running kube-apiserver v1.37
// answered the same requests, with etcd up and then stopped: bodies,
// codes and headers, through start-up, a failing check of the caller's,
// exclusions, single checks and shutdown.
func TestHealthEndpointsAnswerAsKubeAPIServer(t *testing.T) {
	var etcdDown atomic.Bool
	h := newInProcess(t, func(c *apiserver.Config) {
		c.HealthChecks = []apiserver.HealthCheck{{Name: "etcd", Check: func(context.Context) error {
			if etcdDown.Load() {
				return errors.New("error getting data from etcd: context deadline exceeded")
			}
			return nil
		}}}
	})
	s := h.(*apiserver.Server)
	type answer struct {
		code int
		body string
	}
	check := func(stage, path string, want answer) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if got := (answer{w.Code, w.Body.String()}); got != want {
			t.Errorf("%s: GET %s: %d %q, want %d %q", stage, path, got.code, got.body, want.code, want.body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
			t.Errorf("%s: GET %s: Content-Type %q", stage, path, ct)
		}
	}
	const (
		ping     = "[+]ping ok\n"
		etcd     = "[+]etcd ok\n"
		started  = "[+]poststarthook/crd-informer-synced ok\n"
		shutdown = "[+]shutdown ok\n"
	)

	check("starting", "/readyz", answer{500, ping + etcd + "[-]poststarthook/crd-informer-synced failed: reason withheld\n" + shutdown + "readyz check failed\n"})
	check("starting", "/livez", answer{500, ping + etcd + "[-]poststarthook/crd-informer-synced failed: reason withheld\nlivez check failed\n"})
	check("starting", "/readyz/poststarthook/crd-informer-synced", answer{500, "internal server error: not finished\n"})
	check("starting", "/readyz/ping", answer{200, "ok"})

	s.MarkStarted()
	for _, p := range []string{"/readyz", "/livez", "/healthz", "/readyz?exclude=etcd"} {
		check("started", p, answer{200, "ok"})
	}
	check("started", "/readyz?verbose", answer{200, ping + etcd + started + shutdown + "readyz check passed\n"})
	check("started", "/healthz?verbose=false", answer{200, ping + etcd + started + "healthz check passed\n"})
	check("started", "/readyz?verbose&exclude=etcd&exclude=nope&exclude=etcd,ping&exclude=nope",
		answer{200, ping + "[+]etcd excluded: ok\n" + started + shutdown + "warn: some health checks cannot be excluded: no matches for \"etcd,ping\",\"nope\"\nreadyz check passed\n"})
	check("started", "/readyz/etcd", answer{200, "ok"})
	check("started", "/readyz/nope", answer{404, "404 page not found\n"})
	check("started", "/livez/shutdown", answer{404, "404 page not found\n"})
	check("started", "/readyz/ping/", answer{404, "404 page not found\n"})

	etcdDown.Store(true)
	check("etcd down", "/readyz", answer{500, ping + "[-]etcd failed: reason withheld\n" + started + shutdown + "readyz check failed\n"})
	check("etcd down", "/livez?verbose", answer{500, ping + "[-]etcd failed: reason withheld\n" + started + "livez check failed\n"})
	check("etcd down", "/readyz/etcd", answer{500, "internal server error: error getting data from etcd: context deadline exceeded\n"})
	check("etcd down", "/readyz?exclude=etcd", answer{200, "ok"})
	etcdDown.Store(false)

	s.MarkShuttingDown()
	check("shutting down", "/readyz", answer{500, ping + etcd + started + "[-]shutdown failed: reason withheld\nreadyz check failed\n"})
	check("shutting down", "/livez", answer{200, "ok"})
	check("shutting down", "/healthz", answer{200, "ok"})
	check("shutting down", "/readyz/shutdown", answer{500, "internal server error: process is shutting down\n"})
}

// /metrics/slis serves the checks' results as kube-apiserver v1.37.2's
// did for the same requests: the last result of each check per endpoint
// and the results counted by status, in label order, for every run of the
// three endpoints (what ?exclude leaves out is not run, and a single
// check's path is not counted), then the process's start time.
func TestHealthSLIs(t *testing.T) {
	var etcdDown atomic.Bool
	h := newInProcess(t, func(c *apiserver.Config) {
		c.HealthChecks = []apiserver.HealthCheck{{Name: "etcd", Check: func(context.Context) error {
			if etcdDown.Load() {
				return errors.New("down")
			}
			return nil
		}}}
	})
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w
	}
	h.(*apiserver.Server).MarkStarted()
	get("/livez")
	get("/readyz?exclude=etcd")
	get("/readyz/etcd")
	get("/healthz/ping")
	etcdDown.Store(true)
	get("/readyz")
	w := get("/metrics/slis")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("/metrics/slis: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	const started = "poststarthook/crd-informer-synced"
	want := "# HELP kubernetes_healthcheck The last result of each health check, by endpoint: 1 passed, 0 failed.\n" +
		"# TYPE kubernetes_healthcheck gauge\n" +
		`kubernetes_healthcheck{name="etcd",type="livez"} 1` + "\n" +
		`kubernetes_healthcheck{name="etcd",type="readyz"} 0` + "\n" +
		`kubernetes_healthcheck{name="ping",type="livez"} 1` + "\n" +
		`kubernetes_healthcheck{name="ping",type="readyz"} 1` + "\n" +
		`kubernetes_healthcheck{name="` + started + `",type="livez"} 1` + "\n" +
		`kubernetes_healthcheck{name="` + started + `",type="readyz"} 1` + "\n" +
		`kubernetes_healthcheck{name="shutdown",type="readyz"} 1` + "\n" +
		"# HELP kubernetes_healthchecks_total The results of the health checks run, by endpoint and status.\n" +
		"# TYPE kubernetes_healthchecks_total counter\n" +
		`kubernetes_healthchecks_total{name="etcd",status="error",type="readyz"} 1` + "\n" +
		`kubernetes_healthchecks_total{name="etcd",status="success",type="livez"} 1` + "\n" +
		`kubernetes_healthchecks_total{name="ping",status="success",type="livez"} 1` + "\n" +
		`kubernetes_healthchecks_total{name="ping",status="success",type="readyz"} 2` + "\n" +
		`kubernetes_healthchecks_total{name="` + started + `",status="success",type="livez"} 1` + "\n" +
		`kubernetes_healthchecks_total{name="` + started + `",status="success",type="readyz"} 2` + "\n" +
		`kubernetes_healthchecks_total{name="shutdown",status="success",type="readyz"} 2` + "\n" +
		"# HELP process_start_time_seconds When the process started, in seconds since the Unix epoch.\n" +
		"# TYPE process_start_time_seconds gauge\n" +
		"process_start_time_seconds "
	if got := w.Body.String(); !strings.HasPrefix(got, want) || strings.Count(got, "\n") != strings.Count(want, "\n")+1 {
		t.Errorf("/metrics/slis:\n%s\nwant\n%s<time>", got, want)
	}
}

// /metrics and /metrics/slis answer any method, as kube-apiserver
// v1.37.2's handlers did (POST, PUT, OPTIONS, TRACE: 200 and the
// figures; HEAD: no body); /version refuses them with its router's 405,
// indented for curl.
func TestMetricsAnswerAnyMethod(t *testing.T) {
	h := newInProcess(t)
	for _, path := range []string{"/metrics", "/metrics/slis"} {
		for _, m := range []string{"POST", "PUT", "OPTIONS", "TRACE", "HEAD"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(m, path, nil))
			hasBody := strings.Contains(w.Body.String(), "process_start_time_seconds")
			if w.Code != http.StatusOK || hasBody == (m == "HEAD") {
				t.Errorf("%s %s: %d, body %.40q", m, path, w.Code, w.Body)
			}
		}
	}
	r := httptest.NewRequest("POST", "/version", nil)
	r.Header.Set("User-Agent", "curl/8.14.1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || !strings.HasPrefix(w.Body.String(), "{\n  \"kind\": \"Status\"") {
		t.Errorf("POST /version from curl: %d %q", w.Code, w.Body)
	}
}

// /version produces JSON alone, as upstream's route: a client that does
// not accept it gets kube-apiserver v1.37.2's 406, in the error's own
// negotiated form (these bodies are upstream's, byte for byte).
func TestVersionNotAcceptableAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	for _, c := range []struct{ accept, contentType, answer string }{
		{"application/xml", "application/json", "ewogICJraW5kIjogIlN0YXR1cyIsCiAgImFwaVZlcnNpb24iOiAidjEiLAogICJtZXRhZGF0YSI6IHt9LAogICJzdGF0dXMiOiAiRmFpbHVyZSIsCiAgIm1lc3NhZ2UiOiAiNDA2OiBOb3QgQWNjZXB0YWJsZVxuXG5BdmFpbGFibGUgcmVwcmVzZW50YXRpb25zOiBhcHBsaWNhdGlvbi9qc29uIiwKICAicmVhc29uIjogIk5vdEFjY2VwdGFibGUiLAogICJkZXRhaWxzIjoge30sCiAgImNvZGUiOiA0MDYKfQ=="},
		{"application/*", "application/json", "eyJraW5kIjoiU3RhdHVzIiwiYXBpVmVyc2lvbiI6InYxIiwibWV0YWRhdGEiOnt9LCJzdGF0dXMiOiJGYWlsdXJlIiwibWVzc2FnZSI6IjQwNjogTm90IEFjY2VwdGFibGVcblxuQXZhaWxhYmxlIHJlcHJlc2VudGF0aW9uczogYXBwbGljYXRpb24vanNvbiIsInJlYXNvbiI6Ik5vdEFjY2VwdGFibGUiLCJkZXRhaWxzIjp7fSwiY29kZSI6NDA2fQo="},
		{"application/yaml", "application/yaml", "YXBpVmVyc2lvbjogdjEKY29kZTogNDA2CmRldGFpbHM6IHt9CmtpbmQ6IFN0YXR1cwptZXNzYWdlOiB8LQogIDQwNjogTm90IEFjY2VwdGFibGUKCiAgQXZhaWxhYmxlIHJlcHJlc2VudGF0aW9uczogYXBwbGljYXRpb24vanNvbgptZXRhZGF0YToge30KcmVhc29uOiBOb3RBY2NlcHRhYmxlCnN0YXR1czogRmFpbHVyZQo="},
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", "azhzAAoMCgJ2MRIGU3RhdHVzEnEKBgoAEgAaABIHRmFpbHVyZRpANDA2OiBOb3QgQWNjZXB0YWJsZQoKQXZhaWxhYmxlIHJlcHJlc2VudGF0aW9uczogYXBwbGljYXRpb24vanNvbiINTm90QWNjZXB0YWJsZSoKCgASABoAKAAyADCWAxoAIgA="},
	} {
		want, _ := base64.StdEncoding.DecodeString(c.answer)
		r := httptest.NewRequest(http.MethodGet, "/version", nil)
		r.Header.Set("User-Agent", "kubectl/v1.37.2")
		r.Header.Set("Accept", c.accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotAcceptable || w.Header().Get("Content-Type") != c.contentType || w.Body.String() != string(want) {
			t.Errorf("Accept %s: %d %s %q; want 406 %s %q", c.accept, w.Code, w.Header().Get("Content-Type"), w.Body, c.contentType, want)
		}
	}
	for _, accept := range []string{"*/*", "application/json;q=0.5, text/html", ""} {
		r := httptest.NewRequest(http.MethodGet, "/version", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Accept %q: %d", accept, w.Code)
		}
	}
}

// /version has kube-apiserver v1.37.2's members, in its order: the
// emulated version is the served one, compatible with the release before.
func TestVersionAsKubeAPIServer(t *testing.T) {
	w := get(t, newInProcess(t), "/version")
	var keys []string
	dec := json.NewDecoder(strings.NewReader(w.Body.String()))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v any
		dec.Decode(&v)
	}
	if got := strings.Join(keys, " "); got != "major minor emulationMajor emulationMinor minCompatibilityMajor minCompatibilityMinor gitVersion gitCommit gitTreeState buildDate goVersion compiler platform" {
		t.Fatalf("members %s", got)
	}
	var info struct{ Minor, EmulationMinor, MinCompatibilityMinor string }
	if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || info.EmulationMinor != info.Minor || info.MinCompatibilityMinor != "36" {
		t.Fatalf("%v %+v", err, info)
	}
}
