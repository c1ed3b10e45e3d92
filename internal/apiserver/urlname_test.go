package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A body whose name is not the URL's is refused with kube-apiserver
// v1.37.2's messages: one for no name, one for another name. An apply
// may leave the name out of an object that exists, a Scale's too.
func TestTheNameInTheBodyIsTheURLs(t *testing.T) {
	do, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.example.com"},
"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"gizmos","kind":"Gizmo"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	const (
		cms    = "/api/v1/namespaces/default/configmaps/"
		gizmos = "/apis/example.com/v1/namespaces/default/gizmos/"
		apply  = "?fieldManager=m&force=true"
	)
	for _, c := range []struct{ path, body string }{
		{"/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"n1"}}`},
		{"/apis/example.com/v1/namespaces/default/gizmos", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g1"},"spec":{"replicas":1}}`},
	} {
		if w := do(http.MethodPost, c.path, c.body); w.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
	missing := func(name string) string {
		return "400 the name of the object (" + name + " based on URL) was undeterminable: name must be provided"
	}
	other := func(got, name string) string {
		return "400 the name of the object (" + got + ") does not match the name on the URL (" + name + ")"
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"PUT", cms + "n1", `{"metadata":{}}`, missing("n1")},
		{"PUT", cms + "n1", `{"metadata":{"name":"x"}}`, other("x", "n1")},
		{"MERGE", cms + "n1", `{"metadata":{"name":""}}`, missing("n1")},
		{"MERGE", cms + "n1", `{"metadata":{"name":"y"}}`, other("y", "n1")},
		{"APPLY", cms + "n2" + apply, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, missing("n2")},
		{"APPLY", cms + "n1" + apply, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`, "200 "},
		{"PUT", gizmos + "g1/scale", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{},"spec":{"replicas":3}}`, missing("g1")},
		{"MERGE", gizmos + "g1/scale", `{"metadata":{"name":""}}`, missing("g1")},
		{"APPLY", gizmos + "g1/scale" + apply, `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{},"spec":{"replicas":2}}`, "200 "},
		{"APPLY", gizmos + "g1/scale" + apply, `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"x"},"spec":{"replicas":2}}`, other("x", "g1")},
	} {
		method, ctype := c.method, "application/json"
		switch method {
		case "MERGE":
			method, ctype = http.MethodPatch, "application/merge-patch+json"
		case "APPLY":
			method, ctype = http.MethodPatch, "application/apply-patch+yaml"
		}
		r := httptest.NewRequest(method, c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st metav1.Status
		if w.Code != http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
				t.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
			}
		}
		got := strconv.Itoa(w.Code) + " " + st.Message
		if got != c.want {
			t.Errorf("%s %s %s: %q, want %q", c.method, c.path, c.body, got, c.want)
		}
	}
}
