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

// An update's resourceVersion 0 is no condition, as upstream: kinds that
// allow an unconditional update take it, the others refuse it naming the
// resource. A uid in the body is a precondition, checked before the
// resourceVersion: 409. A patch in a media type no patch route of a
// built-in kind takes gets the router's 415; a custom resource's, the
// list of those it takes. All as kube-apiserver v1.37.2 answered.
func TestUpdatePreconditionsAsKubeAPIServer(t *testing.T) {
	_, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.example.com"},
"spec":{"group":"example.com","scope":"Namespaced","names":{"plural":"gizmos","kind":"Gizmo"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	send := func(method, path, ctype, body string) string {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st metav1.Status
		if w.Code >= 300 {
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
				t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
			}
		}
		return strings.TrimSpace(strconv.Itoa(w.Code) + " " + string(st.Reason) + " " + st.Message)
	}
	const (
		cms    = "/api/v1/namespaces/default/configmaps"
		gizmos = "/apis/example.com/v1/namespaces/default/gizmos"
	)
	var created struct{ Metadata metav1.ObjectMeta }
	r := httptest.NewRequest(http.MethodPost, cms, strings.NewReader(`{"metadata":{"name":"p1"}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if got := send("POST", gizmos, "application/json", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g"}}`); got != "201" {
		t.Fatalf("create: %s", got)
	}
	uid := string(created.Metadata.UID)
	for _, c := range []struct{ method, path, ctype, body, want string }{
		{"PUT", cms + "/p1", "application/json", `{"metadata":{"name":"p1","resourceVersion":"0"},"data":{"a":"b"}}`, "200"},
		{"PUT", cms + "/none", "application/json", `{"metadata":{"name":"none","resourceVersion":"0"}}`, `404 NotFound configmaps "none" not found`},
		{"PUT", gizmos + "/g", "application/json", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g","resourceVersion":"0"}}`,
			`422 Invalid gizmos.example.com "g" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
		{"PUT", gizmos + "/g", "application/json", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g"}}`,
			`422 Invalid gizmos.example.com "g" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
		{"PUT", cms + "/p1", "application/json", `{"metadata":{"name":"p1","uid":"other"}}`,
			`409 Conflict Operation cannot be fulfilled on configmaps "p1": Precondition failed: UID in precondition: other, UID in object meta: ` + uid},
		{"PUT", cms + "/p1", "application/json", `{"metadata":{"name":"p1","uid":"other","resourceVersion":"1"}}`,
			`409 Conflict Operation cannot be fulfilled on configmaps "p1": Precondition failed: UID in precondition: other, UID in object meta: ` + uid},
		{"PUT", cms + "/p1", "application/json", `{"metadata":{"name":"p1","uid":"` + uid + `"},"data":{"c":"d"}}`, "200"},
		{"PATCH", cms + "/p1", "text/plain", `{}`, "415 UnsupportedMediaType 415: Unsupported Media Type"},
		{"PATCH", cms + "/p1", "application/json", `{}`, "415 UnsupportedMediaType 415: Unsupported Media Type"},
		{"PATCH", cms + "/p1", "application/apply-patch+cbor", `{}`, "415 UnsupportedMediaType 415: Unsupported Media Type"},
		{"PATCH", gizmos + "/g", "text/plain", `{}`, "415 UnsupportedMediaType the body of the request was in an unknown format - " +
			"accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"},
	} {
		if got := send(c.method, c.path, c.ctype, c.body); got != c.want {
			t.Errorf("%s %s %s:\n got %s\nwant %s", c.method, c.path, c.body, got, c.want)
		}
	}
}

// A strategic merge patch whose result does not fit the kind, or has
// fields Strict refuses, is a 422 naming the patch as Go prints its map,
// with the converter's or the strict decoder's words, as kube-apiserver
// v1.37.2 answered.
func TestStrategicMergeErrorsAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	if line, _ := statusLine(h, http.MethodPost, "/api/v1/namespaces/default/serviceaccounts", "application/json",
		`{"metadata":{"name":"smp"},"secrets":[{"name":"a"}]}`); line != "201" {
		t.Fatal(line)
	}
	if line, _ := statusLine(h, http.MethodPost, "/api/v1/namespaces/default/configmaps", "application/json",
		`{"metadata":{"name":"smp"},"data":{"a":"b"}}`); line != "201" {
		t.Fatal(line)
	}
	const smp = "application/strategic-merge-patch+json"
	for _, c := range []struct{ path, body, want string }{
		{"/api/v1/namespaces/default/serviceaccounts/smp", `{"secrets":{"name":"b"}}`,
			`422  "" is invalid: patch: Invalid value: "map[secrets:map[name:b]]": cannot restore slice from map`},
		{"/api/v1/namespaces/default/configmaps/smp?fieldValidation=Strict", `{"bogus":1}`,
			`422  "" is invalid: patch: Invalid value: "map[bogus:1]": strict decoding error: unknown field "bogus"`},
		{"/api/v1/namespaces/default/configmaps/smp?fieldValidation=Strict", `{"data":{"a":"b","a":"c"}}`,
			`422  "" is invalid: patch: Invalid value: "map[data:map[a:c]]": strict decoding error: duplicate field "data.a"`},
	} {
		if got, _ := statusLine(h, http.MethodPatch, c.path, smp, c.body); got != c.want {
			t.Errorf("%s %s:\n got  %s\n want %s", c.path, c.body, got, c.want)
		}
	}
}

// An update without a resourceVersion, of a kind that requires one, is
// refused (422) only once the object is found: of an object that does not
// exist it is 404, as a running kube-apiserver v1.37.2 answered.
func TestUpdateWithoutResourceVersionOfAMissingObjectAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	const vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	body := func(name string) string {
		return `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"` + name + `"}}`
	}
	if got, _ := statusLine(h, http.MethodPost, vwc, "application/json", body("there")); got != "201" {
		t.Fatal(got)
	}
	for _, c := range []struct{ name, want string }{
		{"nothere", `404 validatingwebhookconfigurations.admissionregistration.k8s.io "nothere" not found`},
		{"there", `422 validatingwebhookconfigurations.admissionregistration.k8s.io "there" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
	} {
		if got, _ := statusLine(h, http.MethodPut, vwc+"/"+c.name, "application/json", body(c.name)); got != c.want {
			t.Errorf("PUT %s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A merge patch's result is defaulted before the field manager sees it,
// as a body is: the patch's manager owns the defaults of what it sent, as
// a running kube-apiserver v1.37.2 recorded for this patch.
func TestMergePatchOwnsTheDefaultsAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	const vwc = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
	hook := func(name string) string {
		return `{"name":"` + name + `.example.com","clientConfig":{"url":"https://127.0.0.1:1/` + name + `"},` +
			`"rules":[{"operations":["CREATE"],"apiGroups":["x"],"apiVersions":["v1"],"resources":["y"]}],"sideEffects":"None","admissionReviewVersions":["v1"]}`
	}
	if got, _ := statusLine(h, http.MethodPost, vwc, "application/json",
		`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"mp"},"webhooks":[`+hook("a")+`]}`); got != "201" {
		t.Fatal(got)
	}
	got, body := statusLine(h, http.MethodPatch, vwc+"/mp?fieldManager=mp", "application/merge-patch+json", `{"webhooks":[`+hook("b")+`]}`)
	if got != "200" {
		t.Fatal(got)
	}
	var out struct {
		Metadata struct{ ManagedFields []metav1.ManagedFieldsEntry }
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	const want = `{"f:webhooks":{"k:{\"name\":\"b.example.com\"}":{".":{},"f:admissionReviewVersions":{},"f:clientConfig":{".":{},"f:url":{}},` +
		`"f:failurePolicy":{},"f:matchPolicy":{},"f:name":{},"f:namespaceSelector":{},"f:objectSelector":{},"f:rules":{},"f:sideEffects":{},"f:timeoutSeconds":{}}}}`
	for _, e := range out.Metadata.ManagedFields {
		if e.Manager == "mp" {
			if e.FieldsV1.GetRawString() != want {
				t.Errorf("the patch's manager owns\n%s\nwant\n%s", e.FieldsV1.GetRawString(), want)
			}
			return
		}
	}
	t.Errorf("no managedFields entry for the patch's manager: %s", body)
}
