package apiserver_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// What client-go's metadata client sends for a list, and for one object.
const (
	metaListAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	metaAccept     = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	metaJSONList   = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	metaJSON       = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
)

// unenvelope checks a protobuf answer's envelope (the "k8s\x00" prefix
// and a runtime.Unknown of kind meta.k8s.io/v1 kind) and returns the
// message inside.
func unenvelope(t *testing.T, body []byte, kind string) []byte {
	t.Helper()
	if !bytes.HasPrefix(body, []byte("k8s\x00")) {
		t.Fatalf("no protobuf prefix: %q", body[:min(len(body), 40)])
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[4:]); err != nil {
		t.Fatal(err)
	}
	if u.APIVersion != "meta.k8s.io/v1" || u.Kind != kind || u.ContentEncoding != "" || u.ContentType != "" {
		t.Fatalf("envelope %s %s (%q, %q), want meta.k8s.io/v1 %s", u.APIVersion, u.Kind, u.ContentEncoding, u.ContentType, kind)
	}
	return u.Raw
}

// client-go's metadata client gets PartialObjectMetadata(List) in
// protobuf, as from kube-apiserver: for a get, a list (whole and paged)
// and a watch, the message is byte for byte the generated Marshal of
// what the JSON form of the same answer decodes to, managedFields,
// owners, finalizers and all.
func TestPartialObjectMetadataInProtobuf(t *testing.T) {
	h := newInProcess(t)
	do := func(method, path, accept, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if method == "PATCH" {
			r.Header.Set("Content-Type", "application/merge-patch+json")
		}
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return w
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	for i := range 3 {
		do("POST", cms, "application/json", fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m%d",
			"labels":{"i":"%d"},"annotations":{"html":"<a&b>","unicode":"é\u2028"},"finalizers":["example.com/hold"],
			"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u-%d","controller":true}]},
			"data":{"k":"v"}}`, i, i, i))
	}
	// A merge patch adds a second manager to m0's managedFields.
	do("PATCH", cms+"/m0?fieldManager=patcher", "application/json", `{"metadata":{"labels":{"patched":"yes"}}}`)

	t.Run("get", func(t *testing.T) {
		var want metav1.PartialObjectMetadata
		if err := json.Unmarshal(do("GET", cms+"/m0", metaJSON, "").Body.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if len(want.ManagedFields) != 2 || len(want.OwnerReferences) != 1 || want.Labels["patched"] != "yes" {
			t.Fatalf("the JSON form lacks metadata: %+v", want.ObjectMeta)
		}
		w := do("GET", cms+"/m0", metaAccept, "")
		if ct := w.Header().Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf" {
			t.Fatalf("Content-Type %q", ct)
		}
		wantMsg, _ := want.Marshal()
		if got := unenvelope(t, w.Body.Bytes(), "PartialObjectMetadata"); !bytes.Equal(got, wantMsg) {
			t.Errorf("message differs from the JSON form's:\n got %q\nwant %q", got, wantMsg)
		}
		// The answer to a write, asked for the same way.
		w = do("PATCH", cms+"/m1", metaAccept, `{"metadata":{"annotations":{"more":"x"}}}`)
		var again metav1.PartialObjectMetadata
		if err := again.Unmarshal(unenvelope(t, w.Body.Bytes(), "PartialObjectMetadata")); err != nil || again.Annotations["more"] != "x" || again.Name != "m1" {
			t.Errorf("patch answer: %v %+v", err, again.ObjectMeta)
		}
	})

	for _, q := range []string{"", "?limit=2"} {
		t.Run("list"+q, func(t *testing.T) {
			var want metav1.PartialObjectMetadataList
			if err := json.Unmarshal(do("GET", cms+q, metaJSONList, "").Body.Bytes(), &want); err != nil {
				t.Fatal(err)
			}
			if len(want.Items) < 2 || (q != "" && want.Continue == "") {
				t.Fatalf("the JSON list: %d items, continue %q", len(want.Items), want.Continue)
			}
			wantMsg, _ := want.Marshal()
			w := do("GET", cms+q, metaListAccept, "")
			if got := unenvelope(t, w.Body.Bytes(), "PartialObjectMetadataList"); !bytes.Equal(got, wantMsg) {
				t.Errorf("message differs from the JSON form's:\n got %q\nwant %q", got, wantMsg)
			}
		})
	}

	t.Run("watch", func(t *testing.T) {
		srv := httptest.NewServer(h)
		defer srv.Close()
		var list metav1.PartialObjectMetadataList
		if err := json.Unmarshal(do("GET", cms, metaJSONList, "").Body.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+cms+"?watch=1&allowWatchBookmarks=true&resourceVersion="+list.ResourceVersion, nil)
		req.Header.Set("Accept", metaAccept)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.kubernetes.protobuf;stream=watch" {
			t.Fatalf("Content-Type %q", ct)
		}
		do("POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late","labels":{"a":"b"}}}`)
		var want metav1.PartialObjectMetadata
		if err := json.Unmarshal(do("GET", cms+"/late", metaJSON, "").Body.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		wantMsg, _ := want.Marshal()
		br := bufio.NewReader(resp.Body)
		for {
			var n uint32
			if err := binary.Read(br, binary.BigEndian, &n); err != nil {
				t.Fatal(err)
			}
			frame := make([]byte, n)
			if _, err := io.ReadFull(br, frame); err != nil {
				t.Fatal(err)
			}
			var ev metav1.WatchEvent
			if err := ev.Unmarshal(frame); err != nil {
				t.Fatal(err)
			}
			got := unenvelope(t, ev.Object.Raw, "PartialObjectMetadata")
			if ev.Type == "BOOKMARK" {
				continue
			}
			if ev.Type != "ADDED" || !bytes.Equal(got, wantMsg) {
				t.Fatalf("event %s: message\n got %q\nwant %q", ev.Type, got, wantMsg)
			}
			return
		}
	})
}

// A watch-list (sendInitialEvents=true, an informer's first sync) to a
// remote client that takes gzip comes compressed, as from kube-apiserver:
// gzip members, one per flush, which read as one stream holding the
// initial events, the bookmark that ends them and the events after it. A
// plain watch, and any watch from this machine, comes as it is.
func TestWatchListIsCompressedForRemoteClients(t *testing.T) {
	h := newInProcess(t)
	createConfigMaps(t, h, 30, func(i int) string { return strings.Repeat("v", i*50) })
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "192.0.2.7:40000"
		h.ServeHTTP(w, r)
	}))
	defer remote.Close()
	local := httptest.NewServer(h)
	defer local.Close()
	const cms = "/api/v1/namespaces/default/configmaps"
	const watchList = "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	open := func(ctx context.Context, srv *httptest.Server, query string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+cms+query, nil)
		req.Header.Set("Accept-Encoding", "gzip") // set here, Go's transport hands the body over as sent
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct {
		name  string
		srv   *httptest.Server
		query string
		gzip  bool
	}{
		{"watch-list, remote", remote, watchList, true},
		{"watch-list, loopback", local, watchList, false},
		{"plain watch, remote", remote, "?watch=1&resourceVersion=0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp := open(ctx, c.srv, c.query)
			defer resp.Body.Close()
			if got := resp.Header.Get("Content-Encoding") == "gzip"; got != c.gzip {
				t.Fatalf("Content-Encoding %q, want gzip: %v", resp.Header.Get("Content-Encoding"), c.gzip)
			}
			var body io.Reader = resp.Body
			if c.gzip {
				gz, err := gzip.NewReader(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				body = gz
			}
			dec := json.NewDecoder(body)
			next := func() (typ, name string, annotations map[string]string) {
				t.Helper()
				var ev struct {
					Type   string
					Object struct {
						Metadata struct {
							Name        string
							Annotations map[string]string
						}
					}
				}
				if err := dec.Decode(&ev); err != nil {
					t.Fatal(err)
				}
				return ev.Type, ev.Object.Metadata.Name, ev.Object.Metadata.Annotations
			}
			for i := range 30 {
				if typ, name, _ := next(); typ != "ADDED" || name != fmt.Sprintf("cm-%04d", i) {
					t.Fatalf("event %d: %s %s", i, typ, name)
				}
			}
			if !strings.HasPrefix(c.query, watchList) {
				return
			}
			if typ, _, ann := next(); typ != "BOOKMARK" || ann["k8s.io/initial-events-end"] != "true" {
				t.Fatalf("after the initial events: %s %v", typ, ann)
			}
			// A later event, in a gzip member of its own.
			later := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"later"}}`
			r := httptest.NewRequest("POST", cms, strings.NewReader(later))
			r.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(httptest.NewRecorder(), r)
			if typ, name, _ := next(); typ != "ADDED" || name != "later" {
				t.Fatalf("after the bookmark: %s %s", typ, name)
			}
			r = httptest.NewRequest("DELETE", cms+"/later", nil)
			h.ServeHTTP(httptest.NewRecorder(), r)
		})
	}
}

// client-go's informer, which streams its first sync as a watch-list,
// syncs through a compressed stream from a remote server and then keeps
// up with the events after it.
func TestInformerSyncsThroughACompressedWatchList(t *testing.T) {
	h := newInProcess(t)
	createConfigMaps(t, h, 50, func(i int) string { return strings.Repeat("w", i*20) })
	var compressed atomic.Int32
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = "192.0.2.7:40000"
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			w = &encodingSpy{ResponseWriter: w, gzip: &compressed}
		}
		h.ServeHTTP(w, r)
	}))
	defer remote.Close()
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: remote.URL})
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer never synced")
	}
	if n := len(inf.GetStore().ListKeys()); n != 50 {
		t.Fatalf("synced %d ConfigMaps, want 50", n)
	}
	if compressed.Load() == 0 {
		t.Fatal("no answer was compressed: the informer did not sync through a compressed watch-list")
	}
	r := httptest.NewRequest("POST", "/api/v1/namespaces/default/configmaps", strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-0050"}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	if h.ServeHTTP(w, r); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for {
		if _, ok, _ := inf.GetStore().GetByKey("default/cm-0050"); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the informer never saw the ConfigMap created after its sync")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// encodingSpy counts answers (here, watch-lists) sent with
// Content-Encoding gzip.
type encodingSpy struct {
	http.ResponseWriter
	gzip *atomic.Int32
}

func (s *encodingSpy) WriteHeader(code int) {
	if s.Header().Get("Content-Encoding") == "gzip" {
		s.gzip.Add(1)
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *encodingSpy) Flush() { s.ResponseWriter.(http.Flusher).Flush() }
