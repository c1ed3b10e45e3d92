package apiserver_test

import (
	"net/http"
	"testing"
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
