package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Without priority and fairness, --max-requests-inflight and
// --max-mutating-requests-inflight bound the requests of each kind served
// at once; watches and system:masters are not counted, as upstream's.
func TestMaxInflight(t *testing.T) {
	s := &Server{cfg: Config{MaxInflight: MaxInflight{ReadOnly: 2, Mutating: 1}}}
	as := func(method, path string, groups ...string) *http.Request {
		r := httptest.NewRequest(method, path, nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "u", Organization: groups}}}}}
		return r
	}
	take := func(r *http.Request) (func(), *httptest.ResponseRecorder) {
		w := httptest.NewRecorder()
		release, ok := s.limit(w, r, time.Now())
		if !ok {
			return nil, w
		}
		return release, w
	}
	post := func() *http.Request { return as(http.MethodPost, "/api/v1/namespaces/a/configmaps") }
	first, _ := take(post())
	if first == nil {
		t.Fatal("the first write was refused")
	}
	if release, w := take(post()); release != nil || w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" ||
		w.Body.String() != "Too many requests, please try again later.\n" {
		t.Fatalf("a second write at once: %d %q %q", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if release, _ := take(as(http.MethodPost, "/api/v1/namespaces/a/configmaps", "system:masters")); release == nil {
		t.Fatal("system:masters was limited")
	}
	var reads []func()
	for range 2 {
		release, _ := take(as(http.MethodGet, "/api/v1/configmaps"))
		if release == nil {
			t.Fatal("a read within the limit was refused")
		}
		reads = append(reads, release)
	}
	if release, _ := take(as(http.MethodGet, "/api/v1/configmaps")); release != nil {
		t.Fatal("a third read at once was served")
	}
	if release, _ := take(as(http.MethodGet, "/api/v1/configmaps?watch=true")); release == nil {
		t.Fatal("a watch was limited")
	}
	first()
	if release, _ := take(post()); release == nil {
		t.Fatal("a write was refused after the first ended")
	}
	reads[0]()
	if release, _ := take(as(http.MethodGet, "/api/v1/configmaps")); release == nil {
		t.Fatal("a read was refused after one ended")
	}
}
