package apiserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// Lists answered at once from many goroutines (their JSON assembled in
// pooled buffers, the whole lists' in several pieces) are each whole and
// right: paged walks of different page sizes over objects of different
// sizes see every object once, in order, with its own data.
func TestConcurrentListsAreWhole(t *testing.T) {
	h := newInProcess(t)
	const objects = 240
	createConfigMaps(t, h, objects, func(i int) string { return strings.Repeat(fmt.Sprint(i%10), 1+i*37%4000) })
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit := []int{7, 50, 240, 1000, 33, 120}[g]
			for range 15 {
				next, cont := 0, ""
				for {
					q := url.Values{"limit": {fmt.Sprint(limit)}}
					if cont != "" {
						q.Set("continue", cont)
					}
					r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps?"+q.Encode(), nil)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					var page struct {
						Items []struct {
							Metadata struct{ Name string }
							Data     map[string]string
						}
						Metadata struct{ Continue string }
					}
					if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != http.StatusOK {
						errs <- fmt.Errorf("limit %d: %d %v", limit, w.Code, err)
						return
					}
					for _, it := range page.Items {
						want := fmt.Sprintf("cm-%04d", next)
						data := strings.Repeat(fmt.Sprint(next%10), 1+next*37%4000)
						if it.Metadata.Name != want || it.Data["v"] != data {
							errs <- fmt.Errorf("limit %d: item %s (%d bytes of data), want %s", limit, it.Metadata.Name, len(it.Data["v"]), want)
							return
						}
						next++
					}
					if cont = page.Metadata.Continue; cont == "" {
						break
					}
				}
				if next != objects {
					errs <- fmt.Errorf("limit %d: walked %d objects, want %d", limit, next, objects)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkListPageProtobuf is the server's part of a page of 500
// ConfigMaps in protobuf, as an informer's paged list asks for it.
func BenchmarkListPageProtobuf(b *testing.B) {
	h := newInProcess(b)
	createConfigMaps(b, h, 1000, func(int) string { return strings.Repeat("x", 400) })
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps?limit=500", nil)
		r.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/vnd.kubernetes.protobuf" || w.Body.Len() < 500*400 {
			b.Fatalf("list: %d %s, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
	}
}

// The protobuf messages kept with objects listed again are given back
// when the objects change, not when Go's GC collects the old versions
// (which the watch cache's history holds on to): after every object is
// updated, the new versions are kept in their place. GC is off, so
// nothing is given back by a collection.
func TestProtoKeptFollowsUpdates(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	h := newInProcess(t)
	const objects = 20
	createConfigMaps(t, h, objects, func(int) string { return strings.Repeat("x", 1024) })
	defer apiserver.SetProtoKeptMax(1 << 20)()
	list := func(accept string) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != accept {
			t.Fatalf("list: %d %s", w.Code, w.Header().Get("Content-Type"))
		}
	}
	const pb = "application/vnd.kubernetes.protobuf"
	list(pb)
	list(pb)
	kept := apiserver.ProtoKeptBytes()
	if kept < objects*1024 {
		t.Fatalf("listed twice: %d bytes kept, want the %d objects' messages", kept, objects)
	}
	patchConfigMaps(t, h, objects, func(int) string { return strings.Repeat("y", 1024) })
	// A consistent list answers once the watch cache has every patch.
	list("application/json")
	if got := apiserver.ProtoKeptBytes(); got != 0 {
		t.Fatalf("every object updated: %d bytes still kept, want 0", got)
	}
	list(pb)
	list(pb)
	if got := apiserver.ProtoKeptBytes(); got < kept*9/10 || got > kept*11/10 {
		t.Fatalf("the new versions listed twice: %d bytes kept, want about %d", got, kept)
	}
}

// createConfigMaps creates n ConfigMaps "cm-0000"… in default through h,
// ConfigMap i with data v = value(i).
func createConfigMaps(tb testing.TB, h http.Handler, n int, value func(i int) string) {
	tb.Helper()
	for i := range n {
		postConfigMap(tb, h, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%04d"},"data":{"v":%q}}`, i, value(i)))
	}
}

// patchConfigMaps sets data v of ConfigMaps "cm-0000"… in default to
// value(i) through h, with merge patches.
func patchConfigMaps(tb testing.TB, h http.Handler, n int, value func(i int) string) {
	tb.Helper()
	for i := range n {
		r := httptest.NewRequest(http.MethodPatch, fmt.Sprintf("/api/v1/namespaces/default/configmaps/cm-%04d", i), strings.NewReader(fmt.Sprintf(`{"data":{"v":%q}}`, value(i))))
		r.Header.Set("Content-Type", "application/merge-patch+json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			tb.Fatalf("patch: %d %s", w.Code, w.Body)
		}
	}
}

// postConfigMap creates the ConfigMap of JSON body in default.
func postConfigMap(tb testing.TB, h http.Handler, body string) {
	tb.Helper()
	r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		tb.Fatalf("create: %d %s", w.Code, w.Body)
	}
}

// BenchmarkListWhole is the server's part of a consistent list of 10,000
// ConfigMaps of 1 KiB (the list scenario of kplane-bench; in protobuf, an
// informer's first list), its answer counted and dropped as a network
// would take it.
func BenchmarkListWhole(b *testing.B) {
	benchListWhole(b, func(int) string { return strings.Repeat("x", 1024) })
}

// BenchmarkListWholeText is BenchmarkListWhole with values of 1 KiB of
// configuration text (as kplane-bench --payload text), different in each
// object: lines, so JSON escapes, and far less to gain from gzip.
func BenchmarkListWholeText(b *testing.B) {
	benchListWhole(b, func(i int) string {
		var v strings.Builder
		for n := i; v.Len() < 1024; n = n*7 + 3 {
			fmt.Fprintf(&v, "server.timeout = %ds\nlisten = 10.0.%d.%d:%d\n", n%300, n%256, n/7%256, 1024+n%60000)
		}
		return v.String()[:1024]
	})
}

// benchListWhole lists 10,000 ConfigMaps holding value(i) in each way.
func benchListWhole(b *testing.B, value func(i int) string) {
	h := newInProcess(b)
	createConfigMaps(b, h, 10000, value)
	for _, c := range []struct{ name, accept, contentType string }{
		{"json", "application/json", "application/json"},
		{"vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"},
		// To a remote client that takes gzip, as Go clients do.
		{"json-gzip", "application/json", "application/json"},
		{"vnd.kubernetes.protobuf-gzip", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf"},
		// What a metadata-only informer lists, and kubectl get.
		{"metadata", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "application/json"},
		{"metadata-protobuf", metaListAccept, "application/vnd.kubernetes.protobuf"}, // client-go's metadata client
		{"table", "application/json;as=Table;v=v1;g=meta.k8s.io", "application/json"},
	} {
		least := 10000 * 1024
		gz := strings.HasSuffix(c.name, "-gzip")
		switch {
		case strings.HasPrefix(c.name, "metadata") || c.name == "table":
			least = 10000 * 100
		case gz:
			least = 10000 * 10 // payloads of one letter repeated compress ~37×
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
				r.Header.Set("Accept", c.accept)
				if gz {
					r.RemoteAddr = "192.0.2.7:40000"
					r.Header.Set("Accept-Encoding", "gzip")
				}
				w := &countingWriter{header: http.Header{}}
				h.ServeHTTP(w, r)
				if w.code != http.StatusOK || w.n < least || w.header.Get("Content-Type") != c.contentType || gz != (w.header.Get("Content-Encoding") == "gzip") {
					b.Fatalf("list: %d %s, %d bytes", w.code, w.header.Get("Content-Type"), w.n)
				}
			}
		})
	}
}

// BenchmarkListProtoUpdated is BenchmarkListWhole's protobuf list of
// 10,000 ConfigMaps read again by the same clients, after every object
// was updated once: the old versions stay in the watch cache's history,
// and what was kept for reading them again must not crowd out the new.
func BenchmarkListProtoUpdated(b *testing.B) {
	h := newInProcess(b)
	createConfigMaps(b, h, 10000, func(int) string { return strings.Repeat("x", 1024) })
	list := func() {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
		r.Header.Set("Accept", "application/vnd.kubernetes.protobuf")
		w := &countingWriter{header: http.Header{}}
		h.ServeHTTP(w, r)
		if w.code != http.StatusOK || w.n < 10000*1024 {
			b.Fatalf("list: %d, %d bytes", w.code, w.n)
		}
	}
	list()
	list()
	patchConfigMaps(b, h, 10000, func(int) string { return strings.Repeat("y", 1024) })
	goruntime.GC()
	b.ReportAllocs()
	for b.Loop() {
		list()
	}
}

// countingWriter is a ResponseWriter that keeps only the status and the
// body's length.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}

// Whole lists over HTTP/2 with TLS, as clients get them (in pieces from
// pooled buffers), while other clients on the same connection walk away
// mid-list: every list read to its end is whole and right.
func TestListsWhileOthersAbort(t *testing.T) {
	h := newInProcess(t)
	const objects = 1500
	value := func(i int) string { return strings.Repeat(fmt.Sprint(i%10), 800+i*53%1200) }
	createConfigMaps(t, h, objects, value)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 6 {
		wg.Go(func() {
			for i := range 8 {
				resp, err := client.Get(srv.URL + "/api/v1/namespaces/default/configmaps")
				if err != nil {
					errs <- err
					return
				}
				if g%2 == 1 { // read part of it, then go
					_, err := io.CopyN(io.Discard, resp.Body, int64(20_000+(g*8+i)*97_000%1_500_000))
					resp.Body.Close()
					if err != nil {
						errs <- fmt.Errorf("a partial read: %w", err)
						return
					}
					continue
				}
				var list struct {
					Items []struct {
						Metadata struct{ Name string }
						Data     map[string]string
					}
				}
				err = json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || len(list.Items) != objects {
					errs <- fmt.Errorf("list: %d, %d items, %v", resp.StatusCode, len(list.Items), err)
					return
				}
				for n, it := range list.Items {
					if it.Metadata.Name != fmt.Sprintf("cm-%04d", n) || it.Data["v"] != value(n) {
						errs <- fmt.Errorf("item %d: %s with %d bytes of data", n, it.Metadata.Name, len(it.Data["v"]))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A custom resource's list always has metadata.continue, empty on the
// last page, as upstream's (an UnstructuredList); a built-in kind's has
// none there (its ListMeta omits an empty one). From the stored bytes and
// from decoded objects (YAML) alike.
func TestCustomResourceListsHaveContinue(t *testing.T) {
	do, h := newCustomResourcesHandler(t, gizmoCRD)
	for _, name := range []string{"a", "b"} {
		if w := do(http.MethodPost, "/apis/test.kplane.dev/v1/namespaces/default/gizmos", `{"apiVersion":"test.kplane.dev/v1","kind":"Gizmo","metadata":{"name":"`+name+`"}}`); w.Code != http.StatusCreated {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	for _, c := range []struct {
		path, accept string
		want         bool
	}{
		{"/apis/test.kplane.dev/v1/namespaces/default/gizmos", "application/json", true},
		{"/apis/test.kplane.dev/v1/namespaces/default/gizmos?limit=1", "application/json", true},
		{"/apis/test.kplane.dev/v1/namespaces/default/gizmos", "application/yaml", true},
		{"/api/v1/namespaces", "application/json", false},
	} {
		w := get(t, h, c.path, "Accept", c.accept)
		var list struct{ Metadata map[string]any }
		if err := yaml.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
		}
		if _, has := list.Metadata["continue"]; has != c.want {
			t.Errorf("%s as %s: metadata %v", c.path, c.accept, list.Metadata)
		}
	}
}

// A list's JSON ends with a newline, as every answer of upstream's JSON
// encoder does, however it is written: from the stored records (a page
// too), or from the objects presented in another version (core/v1
// Events are stored as events.k8s.io/v1).
func TestListJSONEndsWithNewline(t *testing.T) {
	h := newInProcess(t)
	createConfigMaps(t, h, 3, func(int) string { return "v" })
	for _, path := range []string{
		"/api/v1/namespaces/default/configmaps",
		"/api/v1/namespaces/default/configmaps?limit=2",
		"/api/v1/namespaces/default/events",
		"/apis/events.k8s.io/v1/namespaces/default/events",
	} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("User-Agent", "kubectl/v1.37.2") // not indented
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if b := w.Body.String(); w.Code != http.StatusOK || !strings.HasSuffix(b, "}\n") || !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: %d %q", path, w.Code, b[max(0, len(b)-40):])
		}
	}
}
