package apiserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	asTable    = "application/json;as=Table;v=v1;g=meta.k8s.io"
	asMetaList = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
	asMeta     = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
)

// gizmos have printer columns reading spec, status and metadata, and an
// AGE column of their own (a CRD that declares columns gets no other).
const gizmoCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.test.kplane.dev"},
"spec":{"group":"test.kplane.dev","scope":"Namespaced","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo","listKind":"GizmoList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},
"additionalPrinterColumns":[{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"},{"name":"Phase","type":"string","jsonPath":".status.phase"},
{"name":"Team","type":"string","jsonPath":".metadata.labels.team"},{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}],
"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"replicas":{"type":"integer"},"payload":{"type":"string"}}},
"status":{"type":"object","properties":{"phase":{"type":"string"}}}}}}}]}}`

// Tables and PartialObjectMetadata, now written from the records, say
// what the typed encoding of the decoded objects says (the reference
// here, built from the JSON answers with the metav1 types): whole and
// paged lists, single objects and watch events, for metadata in the
// plain form the records serve as they are and in forms that go through
// a decode, for a built-in kind and a custom resource whose columns read
// spec, status and metadata.
func TestTableAndMetadataFromRecords(t *testing.T) {
	do, h := newCustomResourcesHandler(t, gizmoCRD)
	srv := httptest.NewServer(h)
	defer srv.Close()
	must := func(w *httptest.ResponseRecorder, code int) {
		t.Helper()
		if w.Code != code {
			t.Fatalf("%d, want %d: %s", w.Code, code, w.Body)
		}
	}
	get := func(path, accept string) []byte {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		must(w, http.StatusOK)
		return w.Body.Bytes()
	}
	cms := "/api/v1/namespaces/default/configmaps"
	gizmos := "/apis/test.kplane.dev/v1/namespaces/default/gizmos"
	for _, body := range []string{
		`"metadata":{"name":"plain","labels":{"app":"x","team":"a.b"},"annotations":{"note":"é\u2028\"q\"","html":"<a&b>"}},"data":{"a":"1","b":"2"},"binaryData":{"c":"AA=="}}`,
		`"metadata":{"generateName":"gen-","finalizers":["example.com/keep"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"plain","uid":"u-1","controller":true,"blockOwnerDeletion":true}]}}`,
		`"metadata":{"name":"empties","labels":{},"annotations":{},"finalizers":[]},"data":{}}`,
		`"metadata":{"name":"deleting","finalizers":["example.com/keep"]},"data":{"k":"v"}}`,
	} {
		must(do(http.MethodPost, cms, `{"apiVersion":"v1","kind":"ConfigMap",`+body), http.StatusCreated)
	}
	must(do(http.MethodDelete, cms+"/deleting", ""), http.StatusOK)
	for i, md := range []string{`{"name":"g1","labels":{"team":"infra"}}`, `{"name":"g2","annotations":{"a":"b"},"unknownMember":"x"}`, `{"name":"g3"}`} {
		must(do(http.MethodPost, gizmos, fmt.Sprintf(`{"apiVersion":"test.kplane.dev/v1","kind":"Gizmo","metadata":%s,"spec":{"replicas":%d,"payload":"p"}}`, md, i)), http.StatusCreated)
	}
	r := httptest.NewRequest(http.MethodPatch, gizmos+"/g1/status", strings.NewReader(`{"status":{"phase":"Ready"}}`))
	r.Header.Set("Content-Type", "application/merge-patch+json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	must(w, http.StatusOK)

	kinds := []struct {
		path, apiVersion, kind string
		columns                []string
		cells                  func(obj map[string]any) []any // the kind's own, as decoded JSON
	}{
		{cms, "v1", "ConfigMap", []string{"Name", "Data", "Age"}, func(obj map[string]any) []any {
			d, _ := obj["data"].(map[string]any)
			b, _ := obj["binaryData"].(map[string]any)
			return []any{float64(len(d) + len(b))}
		}},
		{gizmos, "test.kplane.dev/v1", "Gizmo", []string{"Name", "Replicas", "Phase", "Team", "Age"}, func(obj map[string]any) []any {
			at := func(path ...string) any {
				var cur any = obj
				for _, p := range path {
					m, _ := cur.(map[string]any)
					cur = m[p]
				}
				return cur
			}
			return []any{at("spec", "replicas"), at("status", "phase"), at("metadata", "labels", "team")}
		}},
	}
	for _, k := range kinds {
		for _, q := range []string{"", "?limit=2"} {
			var list struct {
				Metadata metav1.ListMeta `json:"metadata"`
				Items    []map[string]any
			}
			decode(t, get(k.path+q, "application/json"), &list)
			for _, it := range list.Items { // a built-in kind's list items go without them
				it["apiVersion"], it["kind"] = k.apiVersion, k.kind
			}
			if q == "" && len(list.Items) < 3 {
				t.Fatalf("%s: %d items", k.path, len(list.Items))
			}
			wantMeta := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}, ListMeta: list.Metadata}
			for _, it := range list.Items {
				wantMeta.Items = append(wantMeta.Items, *partialOf(t, it))
			}
			sameJSON(t, k.path+q+" as metadata", get(k.path+q, asMetaList), marshal(t, &wantMeta), nil)
			for _, include := range []string{"", "Object", "None"} {
				sep := "?"
				if q != "" {
					sep = "&"
				}
				path := k.path + q
				if include != "" {
					path += sep + "includeObject=" + include
				}
				want := tableOf(t, list.Metadata, k.columns, list.Items, k.cells, include)
				sameJSON(t, path+" as Table", get(path, asTable), want, ages)
			}
			for _, it := range list.Items {
				name := it["metadata"].(map[string]any)["name"].(string)
				sameJSON(t, name+" as metadata", get(k.path+"/"+name, asMeta), marshal(t, partialOf(t, it)), nil)
				rv := it["metadata"].(map[string]any)["resourceVersion"].(string)
				want := tableOf(t, metav1.ListMeta{ResourceVersion: rv}, k.columns, []map[string]any{it}, k.cells, "")
				sameJSON(t, name+" as Table", get(k.path+"/"+name, asTable), want, ages)
			}
		}
	}

	// An includeObject a Table does not know is refused, as upstream's
	// TableOptions are, in kube-apiserver v1.37.2's words (a get, a list
	// and a watch alike).
	for _, path := range []string{cms, cms + "/plain", cms + "?watch=1"} {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		r := httptest.NewRequest(http.MethodGet, path+sep+"includeObject=Everything", nil)
		r.Header.Set("Accept", asTable)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"Unable to convert to Table as requested: includeObject: Invalid value: \"Everything\": must be 'Metadata', 'Object', 'None', or empty"`) {
			t.Errorf("%s with includeObject=Everything: %d %s", path, w.Code, w.Body)
		}
	}

	// Watches, from the state above: each form's events against the JSON
	// watch's, for updates, a delete held by a finalizer, a delete.
	var list metav1.List
	decode(t, get(cms, "application/json"), &list)
	watches := map[string]*bufio.Scanner{}
	for _, accept := range []string{"application/json", asMeta, asTable} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+cms+"?watch=1&resourceVersion="+list.ResourceVersion, nil)
		req.Header.Set("Accept", accept)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		watches[accept] = bufio.NewScanner(resp.Body)
		watches[accept].Buffer(nil, 1<<20)
	}
	must(do(http.MethodPut, cms+"/plain", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"plain","labels":{"app":"y"}},"data":{"a":"3"}}`), http.StatusOK)
	must(do(http.MethodDelete, cms+"/empties", ""), http.StatusOK)
	must(do(http.MethodPost, cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"late","finalizers":["example.com/keep"]}}`), http.StatusCreated)
	must(do(http.MethodDelete, cms+"/late", ""), http.StatusOK)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			srv.CloseClientConnections() // a lost event fails the reads below
		}
	}()
	for i := range 4 {
		var ev struct {
			Type   string
			Object map[string]any
		}
		line := func(accept string) []byte {
			if !watches[accept].Scan() {
				t.Fatalf("event %d as %s: the watch ended: %v", i, accept, watches[accept].Err())
			}
			return watches[accept].Bytes()
		}
		decode(t, line("application/json"), &ev)
		event := func(obj []byte) []byte {
			return []byte(`{"type":"` + ev.Type + `","object":` + string(obj) + `}`)
		}
		sameJSON(t, fmt.Sprintf("event %d as metadata", i), line(asMeta), event(marshal(t, partialOf(t, ev.Object))), nil)
		rv := ev.Object["metadata"].(map[string]any)["resourceVersion"].(string)
		want := tableOf(t, metav1.ListMeta{ResourceVersion: rv}, kinds[0].columns, []map[string]any{ev.Object}, kinds[0].cells, "")
		sameJSON(t, fmt.Sprintf("event %d as Table", i), line(asTable), event(want), func(v any) { ages(v.(map[string]any)["object"]) })
	}
}

// partialOf is the reference PartialObjectMetadata of a decoded object:
// its metadata converted to the metav1 type.
func partialOf(t *testing.T, obj map[string]any) *metav1.PartialObjectMetadata {
	t.Helper()
	p := &metav1.PartialObjectMetadata{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"metadata": obj["metadata"]}, p); err != nil {
		t.Fatal(err)
	}
	p.Kind, p.APIVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	return p
}

// tableOf is the reference Table of decoded objects: NAME, cells, AGE
// (left empty: ages compares it), and each row's object by include.
func tableOf(t *testing.T, lm metav1.ListMeta, columns []string, objs []map[string]any, cells func(map[string]any) []any, include string) []byte {
	t.Helper()
	tb := metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: lm, Rows: []metav1.TableRow{}}
	for _, c := range columns {
		tb.ColumnDefinitions = append(tb.ColumnDefinitions, metav1.TableColumnDefinition{Name: c})
	}
	for _, obj := range objs {
		row := metav1.TableRow{Cells: append(append([]any{obj["metadata"].(map[string]any)["name"]}, cells(obj)...), "")}
		switch include {
		case "None":
		case "Object":
			row.Object.Raw = marshal(t, obj)
		default:
			row.Object.Raw = marshal(t, partialOf(t, obj))
		}
		tb.Rows = append(tb.Rows, row)
	}
	return marshal(t, &tb)
}

// ages blanks what the reference cannot know in a decoded Table: each
// row's last cell (AGE), once checked to be an age, and the columns'
// definitions but for their names.
func ages(v any) {
	tb, _ := v.(map[string]any)
	if rows, ok := tb["rows"].([]any); ok {
		for _, r := range rows {
			cells := r.(map[string]any)["cells"].([]any)
			if age, _ := cells[len(cells)-1].(string); age != "" && strings.TrimRight(age, "0123456789smhdy") == "" {
				cells[len(cells)-1] = ""
			}
		}
	}
	if defs, ok := tb["columnDefinitions"].([]any); ok {
		for i, d := range defs {
			defs[i] = map[string]any{"name": d.(map[string]any)["name"], "type": "", "format": "", "description": "", "priority": float64(0)}
		}
	}
}

// sameJSON fails unless got and want decode to the same value, after
// blank (when set) has had its way with both.
func sameJSON(t *testing.T, what string, got, want []byte, blank func(any)) {
	t.Helper()
	var g, w any
	decode(t, got, &g)
	decode(t, want, &w)
	if blank != nil {
		blank(g)
		blank(w)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
