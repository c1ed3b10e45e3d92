package apiserver_test

import (
	"net/http"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A finalizer without a domain is refused on the built-in kinds whose
// validation upstream is core's, and taken on the others, as a running
// kube-apiserver v1.37.2 answered the same creates; the standard names
// need no domain, and an update that adds one is refused too.
func TestFinalizerNamesAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
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
		got, _ := statusLine(h, http.MethodPost, c.path, "application/json", `{"metadata":{"name":"fz","finalizers":["nodomain"]}}`)
		want := "201"
		if c.refused {
			want = "422 " + c.kind + ` "fz" is invalid: ` + unqualified
		}
		if got != want {
			t.Errorf("POST %s: %q, want %q", c.path, got, want)
		}
	}

	const cms = "/api/v1/namespaces/default/configmaps"
	if got, _ := statusLine(h, http.MethodPost, cms, "application/json",
		`{"metadata":{"name":"std","finalizers":["kubernetes","orphan","kubernetes.io/pv-protection","example.com/cleanup"]}}`); got != "201" {
		t.Errorf("standard and qualified finalizers: %s", got)
	}
	got, _ := statusLine(h, http.MethodPatch, cms+"/std", "application/merge-patch+json", `{"metadata":{"finalizers":["nodomain"]}}`)
	if want := `422 ConfigMap "std" is invalid: ` + unqualified; got != want {
		t.Errorf("adding one by a patch: %q, want %q", got, want)
	}
}

// An update that removes the last finalizer of an object being deleted
// deletes it, and answers with the object it computed (the finalizers
// gone, the update's changes in) at the revision it replaced, even for
// an update without a resourceVersion; a dry run answers the same and
// deletes nothing. A running kube-apiserver v1.37.2 answered the same
// patch and update so.
func TestEmptyingTheFinalizersAnswersTheUpdatedObjectAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	const cm = "/api/v1/namespaces/default/configmaps/fin"
	if got, _ := statusLine(h, http.MethodPost, "/api/v1/namespaces/default/configmaps", "application/json",
		`{"metadata":{"name":"fin","finalizers":["example.com/x"]}}`); got != "201" {
		t.Fatal(got)
	}
	if got, _ := statusLine(h, http.MethodDelete, cm, "", ""); got != "200" {
		t.Fatal(got)
	}
	_, body := statusLine(h, http.MethodGet, cm, "", "")
	var before unstructured.Unstructured
	if err := before.UnmarshalJSON(body); err != nil || before.GetDeletionTimestamp() == nil {
		t.Fatalf("the object being deleted: %v %s", err, body)
	}
	// A dry-run patch, then an unconditional update (no resourceVersion).
	put := before.DeepCopy()
	put.SetResourceVersion("")
	put.SetFinalizers(nil)
	put.Object["data"] = map[string]any{"a": "b"}
	putBody, err := put.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{cm + "?dryRun=All", cm} {
		method, ctype, sent := http.MethodPatch, "application/merge-patch+json", `{"metadata":{"finalizers":null},"data":{"a":"b"}}`
		if path == cm {
			method, ctype, sent = http.MethodPut, "application/json", string(putBody)
		}
		got, body := statusLine(h, method, path, ctype, sent)
		var out unstructured.Unstructured
		if err := out.UnmarshalJSON(body); got != "200" || err != nil {
			t.Fatalf("%s %s: %s %v", method, path, got, err)
		}
		if len(out.GetFinalizers()) != 0 || out.Object["data"] == nil || out.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("%s %s answered finalizers %v, data %v, resourceVersion %s; want none, the change's, %s",
				method, path, out.GetFinalizers(), out.Object["data"], out.GetResourceVersion(), before.GetResourceVersion())
		}
		want := "200"
		if path == cm {
			want = `404 configmaps "fin" not found`
		}
		if got, _ := statusLine(h, http.MethodGet, cm, "", ""); got != want {
			t.Errorf("GET after %s %s: %s, want %s", method, path, got, want)
		}
	}
}
