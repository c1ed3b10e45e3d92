package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// A CRD's versions each have their own subresources, as upstream serves
// them: v1 (stored) has /status and /scale, v2 neither, v3 only /status.
// Discovery, the routes, the strategies (status kept or written on the
// main resource, dropped on create) and OpenAPI follow the request's
// version.
func TestCRDSubresourcesPerVersion(t *testing.T) {
	schema := `"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer"}}},
"status":{"type":"object","properties":{"replicas":{"type":"integer"},"note":{"type":"string"}}}}}}`
	do, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.per.example.com"},
"spec":{"group":"per.example.com","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
"versions":[
 {"name":"v1","served":true,"storage":true,"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},`+schema+`},
 {"name":"v2","served":true,"storage":false,`+schema+`},
 {"name":"v3","served":true,"storage":false,"subresources":{"status":{}},`+schema+`}]}}`)
	subresources := func(v string) []string {
		t.Helper()
		w := get(t, h, "/apis/per.example.com/"+v)
		var list struct{ Resources []struct{ Name string } }
		if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != http.StatusOK || err != nil {
			t.Fatalf("discovery of %s: %d %s", v, w.Code, w.Body)
		}
		var names []string
		for _, r := range list.Resources {
			names = append(names, r.Name)
		}
		return names
	}
	for v, want := range map[string]string{"v1": "widgets widgets/status widgets/scale", "v2": "widgets", "v3": "widgets widgets/status"} {
		if got := strings.Join(subresources(v), " "); got != want {
			t.Errorf("discovery of %s: %s, want %s", v, got, want)
		}
	}
	var agg struct {
		Items []struct {
			Metadata struct{ Name string }
			Versions []struct {
				Version   string
				Resources []struct {
					Resource     string
					Subresources []struct{ Subresource string }
				}
			}
		}
	}
	w := get(t, h, "/apis", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	if err := json.Unmarshal(w.Body.Bytes(), &agg); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, g := range agg.Items {
		if g.Metadata.Name != "per.example.com" {
			continue
		}
		for _, v := range g.Versions {
			var subs []string
			for _, s := range v.Resources[0].Subresources {
				subs = append(subs, s.Subresource)
			}
			want := map[string]string{"v1": "status scale", "v2": "", "v3": "status"}[v.Version]
			if seen++; strings.Join(subs, " ") != want {
				t.Errorf("aggregated discovery of %s: %v, want %s", v.Version, subs, want)
			}
		}
	}
	if seen != 3 {
		t.Fatalf("aggregated discovery has %d versions of the group", seen)
	}

	base := func(v string) string { return "/apis/per.example.com/" + v + "/namespaces/default/widgets" }
	status := func(name string) string {
		t.Helper()
		w := do(http.MethodGet, base("v1")+"/"+name, "")
		var obj struct{ Status map[string]any }
		if err := json.Unmarshal(w.Body.Bytes(), &obj); w.Code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s", name, w.Code, w.Body)
		}
		b, _ := json.Marshal(obj.Status)
		return string(b)
	}
	// Created through each version with a status: dropped where the
	// version has /status, kept where it has none.
	for _, v := range []string{"v1", "v2", "v3"} {
		if w := do(http.MethodPost, base(v), `{"apiVersion":"per.example.com/`+v+`","kind":"Widget","metadata":{"name":"w-`+v+`"},"spec":{"replicas":1},"status":{"note":"sent"}}`); w.Code != http.StatusCreated {
			t.Fatalf("create through %s: %d %s", v, w.Code, w.Body)
		}
	}
	if got := []string{status("w-v1"), status("w-v2"), status("w-v3")}; !slices.Equal(got, []string{"null", `{"note":"sent"}`, "null"}) {
		t.Errorf("statuses after the creates: %v", got)
	}
	// A merge patch of the status on the main resource: ignored where
	// the version has /status, written where it has none.
	patch := func(v, path, body string) int {
		t.Helper()
		return patchJSON(t, h, base(v)+"/w-v1"+path, body)
	}
	if code := patch("v1", "", `{"status":{"note":"v1-main"}}`); code != http.StatusOK || status("w-v1") != "null" {
		t.Errorf("v1's main resource: %d, status %s", code, status("w-v1"))
	}
	if code := patch("v2", "", `{"status":{"note":"v2-main"}}`); code != http.StatusOK || status("w-v1") != `{"note":"v2-main"}` {
		t.Errorf("v2's main resource: %d, status %s", code, status("w-v1"))
	}
	if code := patch("v3", "/status", `{"status":{"note":"v3-status"}}`); code != http.StatusOK || status("w-v1") != `{"note":"v3-status"}` {
		t.Errorf("v3's /status: %d, status %s", code, status("w-v1"))
	}
	for _, path := range []string{"/status", "/scale"} {
		if code := patch("v2", path, `{"status":{"note":"x"}}`); code != http.StatusNotFound {
			t.Errorf("v2's %s: %d, want 404", path, code)
		}
	}
	if code := patch("v3", "/scale", `{"spec":{"replicas":2}}`); code != http.StatusNotFound {
		t.Errorf("v3's /scale: %d, want 404", code)
	}
	// OpenAPI: each version's paths.
	for v, want := range map[string][2]bool{"v1": {true, true}, "v2": {false, false}, "v3": {true, false}} {
		var doc struct{ Paths map[string]any }
		if err := json.Unmarshal(get(t, h, "/openapi/v3/apis/per.example.com/"+v).Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		p := "/apis/per.example.com/" + v + "/namespaces/{namespace}/widgets/{name}"
		if _, st := doc.Paths[p+"/status"]; st != want[0] {
			t.Errorf("OpenAPI of %s: /status %v", v, st)
		}
		if _, sc := doc.Paths[p+"/scale"]; sc != want[1] {
			t.Errorf("OpenAPI of %s: /scale %v", v, sc)
		}
	}
}

// patchJSON sends a merge patch to path and returns the answer's code.
func patchJSON(t *testing.T, h http.Handler, path, body string) int {
	t.Helper()
	r := httptest.NewRequest(http.MethodPatch, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/merge-patch+json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// A resource or version a group of custom resources does not serve (a
// deleted CRD's) is Go's plain 404, as upstream's CRD handler passes it
// on; in a group of built-in kinds it is the router's Status.
func TestUnknownResourceOfACustomGroup(t *testing.T) {
	_, h := newCustomResourcesHandler(t, gizmoCRD)
	for path, want := range map[string]string{
		"/apis/test.kplane.dev/v1/namespaces/default/nothings":     "text/plain; charset=utf-8",
		"/apis/test.kplane.dev/v9/namespaces/default/gizmos":       "text/plain; charset=utf-8",
		"/apis/coordination.k8s.io/v1/namespaces/default/nothings": "application/json",
	} {
		w := get(t, h, path)
		if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != want {
			t.Errorf("%s: %d %q %s, want 404 %s", path, w.Code, w.Header().Get("Content-Type"), w.Body, want)
		}
	}
}
