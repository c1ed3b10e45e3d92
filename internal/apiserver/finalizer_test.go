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

// A finalizer without a domain is refused on the built-in kinds whose
// validation upstream is core's, and taken on the others, as a running
// kube-apiserver v1.37.2 answered the same creates; the standard names
// need no domain, and an update that adds one is refused too.
func TestFinalizerNamesAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	send := func(method, path, ctype, body string) (int, string) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st metav1.Status
		if w.Code >= 300 {
			json.Unmarshal(w.Body.Bytes(), &st)
		}
		return w.Code, st.Message
	}
	const unqualified = `metadata.finalizers[0]: Invalid value: "nodomain": name is neither a standard finalizer name nor is it fully qualified`
	for _, c := range []struct {
		path, kind string
		refused    bool
	}{
		{"/api/v1/namespaces/default/configmaps", "ConfigMap", true},
		{"/api/v1/namespaces/default/secrets", "Secret", true},
		{"/api/v1/namespaces/default/serviceaccounts", "ServiceAccount", true},
		{"/api/v1/namespaces", "Namespace", true},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", "ClusterRole.rbac.authorization.k8s.io", true},
		{"/apis/coordination.k8s.io/v1/namespaces/default/leases", "Lease", false},
	} {
		code, msg := send(http.MethodPost, c.path, "application/json", `{"metadata":{"name":"fz","finalizers":["nodomain"]}}`)
		want := "201 "
		if c.refused {
			want = "422 " + c.kind + ` "fz" is invalid: ` + unqualified
		}
		if got := strconv.Itoa(code) + " " + msg; got != want {
			t.Errorf("POST %s: %q, want %q", c.path, got, want)
		}
	}

	const cms = "/api/v1/namespaces/default/configmaps"
	if code, msg := send(http.MethodPost, cms, "application/json",
		`{"metadata":{"name":"std","finalizers":["kubernetes","orphan","kubernetes.io/pv-protection","example.com/cleanup"]}}`); code != http.StatusCreated {
		t.Errorf("standard and qualified finalizers: %d %s", code, msg)
	}
	code, msg := send(http.MethodPatch, cms+"/std", "application/merge-patch+json", `{"metadata":{"finalizers":["nodomain"]}}`)
	if want := `ConfigMap "std" is invalid: ` + unqualified; code != http.StatusUnprocessableEntity || msg != want {
		t.Errorf("adding one by a patch: %d %q, want 422 %q", code, msg, want)
	}
}
