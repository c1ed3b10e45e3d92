package apiserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkListTable is the server's part of kubectl get: a list of 1,000
// objects answered as a Table, for ConfigMaps (a counted column) and
// Events (columns reading several members).
func BenchmarkListTable(b *testing.B) {
	for _, k := range []struct{ name, path, body string }{
		{"configmaps", "/api/v1/namespaces/default/configmaps",
			`{"metadata":{"name":"cm-%d","labels":{"app":"x"}},"data":{"a":%q,"b":"2"}}`},
		{"events", "/api/v1/namespaces/default/events",
			`{"metadata":{"name":"ev-%d"},"involvedObject":{"kind":"ConfigMap","name":"cm","namespace":"default"},"reason":"R","message":%q,"type":"Normal","count":2,"source":{"component":"c"},"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-02T00:00:00Z"}`},
	} {
		b.Run(k.name, func(b *testing.B) {
			h := newInProcess(b)
			payload := strings.Repeat("x", 512)
			for i := range 1000 {
				r := httptest.NewRequest(http.MethodPost, k.path, strings.NewReader(fmt.Sprintf(k.body, i, payload)))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				if h.ServeHTTP(w, r); w.Code != http.StatusCreated {
					b.Fatalf("create: %d %s", w.Code, w.Body)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r := httptest.NewRequest(http.MethodGet, k.path, nil)
				r.Header.Set("Accept", asTable)
				w := httptest.NewRecorder()
				if h.ServeHTTP(w, r); w.Code != http.StatusOK {
					b.Fatalf("list: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
