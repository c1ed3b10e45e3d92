package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
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
