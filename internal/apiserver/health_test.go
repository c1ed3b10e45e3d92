package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
