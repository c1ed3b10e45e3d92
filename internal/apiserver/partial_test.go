package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
