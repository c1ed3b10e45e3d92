package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// default, kube-system and kube-public may not be deleted, dry run or
// not, as kube-apiserver v1.37.2's NamespaceLifecycle admission answered;
// kube-node-lease may.
func TestTheSystemNamespacesMayNotBeDeleted(t *testing.T) {
	h := newInProcess(t)
	del := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodDelete, path, nil))
		var st metav1.Status
		json.Unmarshal(w.Body.Bytes(), &st)
		return w.Code, st.Message
	}
	for _, name := range []string{"default", "kube-system", "kube-public"} {
		for _, query := range []string{"?dryRun=All", ""} {
			code, msg := del("/api/v1/namespaces/" + name + query)
			if want := `namespaces "` + name + `" is forbidden: this namespace may not be deleted`; code != http.StatusForbidden || msg != want {
				t.Errorf("DELETE %s%s: %d %q, want 403 %q", name, query, code, msg, want)
			}
		}
		var ns struct{ Status struct{ Phase string } }
		if w := get(t, h, "/api/v1/namespaces/"+name); w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &ns) != nil || ns.Status.Phase != "Active" {
			t.Errorf("GET %s afterwards: %d %s", name, w.Code, w.Body)
		}
	}
	if code, msg := del("/api/v1/namespaces/kube-node-lease?dryRun=All"); code != http.StatusOK {
		t.Errorf("DELETE kube-node-lease?dryRun=All: %d %s", code, msg)
	}
}

// A namespace's spec.finalizers are held to the finalizer rules on create
// (kubernetes added after the client's) and through /finalize, and its
// status.phase to its deletion, as kube-apiserver v1.37.2 answered.
func TestNamespaceFinalizersAndPhaseAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	send := func(method, path, body string) (string, []byte) {
		return statusLine(h, method, path, "application/json", body)
	}
	const (
		unqualified = `Invalid value: "nodomain": name is neither a standard finalizer name nor is it fully qualified`
		badName     = `Invalid value: "bad one": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/namespaces", `{"metadata":{"name":"zz5"},"spec":{"finalizers":["bad one","nodomain"]}}`,
			`422 Namespace "zz5" is invalid: [spec.finalizers: ` + badName + `, spec.finalizers: Invalid value: "bad one": name is neither a standard finalizer name nor is it fully qualified, spec.finalizers: ` + unqualified + "]"},
		{"POST", "/api/v1/namespaces", `{"metadata":{"name":"zz"}}`, "201"},
		{"PUT", "/api/v1/namespaces/zz/finalize", `{"metadata":{"name":"zz"},"spec":{"finalizers":["nodomain"]}}`, `422 Namespace "zz" is invalid: spec.finalizers[0]: ` + unqualified},
		{"PUT", "/api/v1/namespaces/zz/status", `{"metadata":{"name":"zz"},"status":{"phase":"Terminating"}}`,
			`422 Namespace "zz" is invalid: status.Phase: Invalid value: "Terminating": may only be 'Active' if ` + "`deletionTimestamp`" + ` is empty`},
		{"PUT", "/api/v1/namespaces/zz/finalize", `{"metadata":{"name":"zz"},"spec":{"finalizers":["kubernetes","example.com/x"]}}`, "200"},
	} {
		if got, _ := send(c.method, c.path, c.body); got != c.want {
			t.Errorf("%s %s %s:\n got %s\nwant %s", c.method, c.path, c.body, got, c.want)
		}
	}
	got, body := send(http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"kept"},"spec":{"finalizers":["example.com/x"]}}`)
	var ns struct{ Spec struct{ Finalizers []string } }
	if err := json.Unmarshal(body, &ns); got != "201" || err != nil || strings.Join(ns.Spec.Finalizers, ",") != "example.com/x,kubernetes" {
		t.Errorf("a create's finalizers: %s %s", got, body)
	}
}
