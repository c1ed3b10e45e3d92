package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
	"github.com/kplane-dev/kplane/internal/storage"
)

// BenchmarkCreate is the server's part of a create, without the network:
// a ConfigMap of 1 KiB as client-go sends it, through the handler, the
// registry (decode, field manager, validation, admission), the store (in
// memory) and the answer, with the watch caches following. It is the
// write path kplane-bench's create scenario loads, less HTTP/2 and TLS.
func BenchmarkCreate(b *testing.B) {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer kvs.Close()
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	kinds := append(core.Kinds(), crd.Kind())
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := core.Bootstrap(ctx, reg); err != nil {
		b.Fatal(err)
	}
	go reg.Run(ctx)
	h := apiserver.New(apiserver.Config{Registry: reg, Anonymous: true})
	payload := strings.Repeat("x", 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		body := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"bench-%d","creationTimestamp":null,"labels":{"app":"kplane-bench"}},"data":{"payload":%q}}`, i, payload)
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", bytes.NewBufferString(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json")
		r.Header.Set("User-Agent", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
}
