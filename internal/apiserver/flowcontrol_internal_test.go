package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
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

// A list's seats are upstream's size-based estimate: a seat per 100 KB of
// the objects it reads, at most 1 MB counted; by name or by page, fewer;
// a watch from a resourceVersion, one.
func TestListSeats(t *testing.T) {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	for _, k := range core.Kinds() {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Run(ctx)
	if err := core.Bootstrap(ctx, reg); err != nil { // the default namespace
		t.Fatal(err)
	}
	cms, _ := reg.Lookup("", "v1", "configmaps")
	// 30 ConfigMaps of about 10 KB: 300 KB.
	for i := range 30 {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("c", i), "namespace": "default"}, "data": map[string]any{"k": strings.Repeat("x", 10_000)}}}
		if _, err := cms.Create(ctx, "v1", "default", cm, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.List(ctx, "v1", "", registry.ListOptions{}); err != nil { // the cache caught up
		t.Fatal(err)
	}
	s := &Server{cfg: Config{Registry: reg}}
	for _, c := range []struct {
		path string
		want int
	}{
		{"/api/v1/configmaps", 4}, // 30 × ~10.2 KB: 3 seats and a part
		{"/api/v1/namespaces/default/configmaps", 4},
		{"/api/v1/namespaces/default/configmaps?limit=5", 1},
		{"/api/v1/namespaces/default/configmaps?limit=15", 2},
		{"/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dc1", 1},
		{"/api/v1/namespaces/default/configmaps/c1", 1},
		{"/api/v1/configmaps?watch=true", 4},
		{"/api/v1/configmaps?watch=true&resourceVersion=0", 4},
		{"/api/v1/configmaps?watch=true&resourceVersion=5", 1},
		{"/api/v1/configmaps?watch=true&resourceVersion=5&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", 4},
		{"/api/v1/secrets", 1}, // none stored
		{"/version", 1},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		a := requestAttributes(r, registry.User{})
		if got := s.listSeats(r, &a); got != c.want {
			t.Errorf("%s: %d seats, want %d", c.path, got, c.want)
		}
	}
	// Of a resource of 10 MB, 1 MB is counted: 10 seats.
	for i := 30; i < 1000; i++ {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("c", i), "namespace": "default"}, "data": map[string]any{"k": strings.Repeat("x", 10_000)}}}
		if _, err := cms.Create(ctx, "v1", "default", cm, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cms.List(ctx, "v1", "", registry.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/configmaps", nil)
	if a := requestAttributes(r, registry.User{}); s.listSeats(r, &a) != 10 {
		t.Errorf("a list of 10 MB: %d seats, want 10", s.listSeats(r, &a))
	}
}
