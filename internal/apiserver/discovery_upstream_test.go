package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery says what kube-apiserver v1.37.2's says, in the details a
// client can read: the storage version hashes (sha256 of
// group/version/kind, the core group's empty), the groups' order, a
// custom resource's verbs in apiextensions' order, and in the aggregated
// form a built-in kind's responseKind without its group and version and
// its subresources by name.
func TestDiscoveryAsKubeAPIServer(t *testing.T) {
	_, h := newCustomResourcesHandler(t, gizmoCRD)
	get := func(path, accept string, into any) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), into) != nil {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
	hashes := map[string]string{ // kube-apiserver v1.37.2's
		"/api/v1 configmaps": "qFsyl6wFWjQ=", "/api/v1 events": "r2yiGXH7wu8=", "/api/v1 namespaces": "Q3oi5N2YM8M=",
		"/api/v1 secrets": "S6u1pOWzb84=", "/api/v1 serviceaccounts": "pbx9ZvyFpBE=",
		"/apis/coordination.k8s.io/v1 leases": "gqkMMb/YqFM=", "/apis/rbac.authorization.k8s.io/v1 clusterrolebindings": "48tpQ8gZHFc=",
		"/apis/rbac.authorization.k8s.io/v1 roles": "7FuwZcIIItM=",
		"/api/v1 resourcequotas":                   "8uhSgffRX6w=", "/apis/storagemigration.k8s.io/v1 storageversionmigrations": "pCjmmKOkLy4=",
		"/apis/flowcontrol.apiserver.k8s.io/v1 flowschemas": "GJVAJZSZBIw=", "/apis/flowcontrol.apiserver.k8s.io/v1 prioritylevelconfigurations": "Kir5PVfvNeI=",
		// Stored as v1beta1 upstream.
		"/apis/apiextensions.k8s.io/v1 customresourcedefinitions": "jfWCUB31mvA=",
	}
	for key, want := range hashes {
		path, name, _ := strings.Cut(key, " ")
		var list metav1.APIResourceList
		get(path, "application/json", &list)
		found := false
		for _, r := range list.APIResources {
			if r.Name == name {
				found = true
				if r.StorageVersionHash != want {
					t.Errorf("%s: storageVersionHash %s, want %s", key, r.StorageVersionHash, want)
				}
			}
		}
		if !found {
			t.Errorf("%s: not listed", key)
		}
	}
	// The resources of a version in kube-apiserver v1.37.2's order: by
	// name, a built-in kind's subresources too.
	var core metav1.APIResourceList
	get("/api/v1", "application/json", &core)
	var names []string
	for _, r := range core.APIResources {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, " "); got != "configmaps events namespaces namespaces/finalize namespaces/status resourcequotas resourcequotas/status secrets serviceaccounts serviceaccounts/token" {
		t.Errorf("/api/v1's resources: %s", got)
	}
	// The groups in kube-apiserver v1.37.2's order (its /apis, the ones
	// kplane serves), a CRD's after them.
	var groups metav1.APIGroupList
	get("/apis", "application/json", &groups)
	upstream := []string{"apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling",
		"batch", "certificates.k8s.io", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "storage.k8s.io",
		"admissionregistration.k8s.io", "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
		"discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io", "test.kplane.dev"}
	var got, want []string
	for _, g := range groups.Groups {
		got = append(got, g.Name)
	}
	for _, g := range upstream {
		if slices.Contains(got, g) {
			want = append(want, g)
		}
	}
	if !slices.Equal(got, want) || len(got) < 8 {
		t.Errorf("groups %v, want %v", got, want)
	}
	var gizmos metav1.APIResourceList
	get("/apis/test.kplane.dev/v1", "application/json", &gizmos)
	if want := []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}; len(gizmos.APIResources) == 0 ||
		!reflect.DeepEqual([]string(gizmos.APIResources[0].Verbs), want) {
		t.Errorf("custom resource verbs %v, want %v", gizmos.APIResources, want)
	}

	// The groups' list does not repeat kind and apiVersion in its members,
	// and /api/v1's list has no apiVersion, as upstream's JSON.
	for path, want := range map[string]string{
		"/apis":   `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"`,
		"/api/v1": `{"kind":"APIResourceList","groupVersion":"v1","resources":[`,
	} {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if !strings.HasPrefix(w.Body.String(), want) {
			t.Errorf("GET %s: %.80s, want it to start %s", path, w.Body, want)
		}
	}

	var agg apidiscoveryv2.APIGroupDiscoveryList
	get("/api", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", &agg)
	for _, r := range agg.Items[0].Versions[0].Resources {
		if *r.ResponseKind != (metav1.GroupVersionKind{Kind: r.ResponseKind.Kind}) {
			t.Errorf("%s: responseKind %v, want the kind alone", r.Resource, r.ResponseKind)
		}
		if r.Resource == "namespaces" {
			var subs []string
			for _, s := range r.Subresources {
				subs = append(subs, s.Subresource)
				if *s.ResponseKind != (metav1.GroupVersionKind{Kind: "Namespace"}) {
					t.Errorf("namespaces/%s: responseKind %v", s.Subresource, s.ResponseKind)
				}
			}
			if !reflect.DeepEqual(subs, []string{"finalize", "status"}) {
				t.Errorf("namespaces' subresources %v, want [finalize status]", subs)
			}
		}
	}
	get("/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", &agg)
	for _, g := range agg.Items {
		if g.Name != "test.kplane.dev" {
			continue
		}
		r := g.Versions[0].Resources[0]
		if want := (metav1.GroupVersionKind{Group: "test.kplane.dev", Version: "v1", Kind: "Gizmo"}); *r.ResponseKind != want {
			t.Errorf("gizmos: responseKind %v, want %v", r.ResponseKind, want)
		}
	}
}
