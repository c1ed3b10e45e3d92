package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Paths and methods kube-apiserver has no route for get its router's
// generic answers, as a running v1.37.2 gave them to the same requests:
// 405 where the path is served but not the method, 404 where nothing is
// served, plain text where the group is unknown. None of them reaches a
// handler: nothing is deleted through a path that has no delete, and none
// is counted in the request metrics. Custom resources take the same
// routes; upstream's handler for them answers a few of these otherwise
// (docs/design.md).
func TestRoutesAnswerAsKubeAPIServer(t *testing.T) {
	const crd = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"},
		"spec":{"group":"example.com","names":{"plural":"widgets","kind":"Widget"},"scope":"Namespaced",
		"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`
	do, h := newCustomResourcesHandler(t, crd)
	if w := do(http.MethodPost, "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"keep"}}`); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	// The custom resource's group is served once the CRD is established.
	for i := 0; do(http.MethodGet, "/apis/example.com/v1", "").Code != http.StatusOK; i++ {
		if i == 500 {
			t.Fatal("example.com/v1 not served after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	requests := func() float64 {
		t.Helper()
		w := do(http.MethodGet, "/metrics", "")
		p := expfmt.NewTextParser(model.UTF8Validation)
		families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
		if err != nil {
			t.Fatalf("%v\n%s", err, w.Body)
		}
		var n float64
		for _, m := range families["apiserver_request_total"].GetMetric() {
			n += m.GetCounter().GetValue()
		}
		return n
	}
	before := requests()

	const (
		noMethod = "405 MethodNotAllowed the server does not allow this method on the requested resource"
		noRoute  = "404 NotFound the server could not find the requested resource"
		noGroup  = "404 text 404 page not found\n"
	)
	for _, c := range []struct{ method, path, want string }{
		// A method the path does not have.
		{"POST", "/api/v1/namespaces/default/configmaps/keep", noMethod},
		{"PUT", "/api/v1/namespaces/default/configmaps", noMethod},
		{"PATCH", "/api/v1/namespaces/default/configmaps", noMethod},
		{"PUT", "/api/v1/namespaces/default/configmaps/", noMethod},
		{"OPTIONS", "/api/v1/namespaces/default/configmaps", noMethod},
		{"HEAD", "/api/v1/namespaces/default/configmaps/keep", noMethod},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles/foo", noMethod},
		// Across all namespaces there are only lists and watches: no
		// create, and no delete of every ConfigMap in every namespace.
		{"POST", "/api/v1/configmaps", noMethod},
		{"DELETE", "/api/v1/configmaps", noMethod},
		// Namespaces have no deletecollection.
		{"DELETE", "/api/v1/namespaces", noMethod},
		// Subresources have their own methods; none deletes.
		{"DELETE", "/api/v1/namespaces/default/status", noMethod},
		{"POST", "/api/v1/namespaces/default/status", noMethod},
		{"GET", "/api/v1/namespaces/default/finalize", noMethod},
		{"POST", "/api/v1/namespaces/default/finalize", noMethod},
		{"PATCH", "/api/v1/namespaces/default/finalize", noMethod},
		{"DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com/status", noMethod},
		// The legacy /watch/ paths only watch.
		{"POST", "/api/v1/watch/namespaces/default/configmaps", noMethod},
		{"DELETE", "/api/v1/watch/namespaces/default/configmaps/keep", noMethod},
		// Discovery of a version is GET only; /version too.
		{"POST", "/api", noMethod},
		{"POST", "/api/v1", noMethod},
		{"HEAD", "/api/v1", noMethod},
		{"PUT", "/apis/rbac.authorization.k8s.io/v1", noMethod},
		{"POST", "/version", noMethod},

		// Nothing served there.
		{"GET", "/api/v1/namespaces/default/configmaps/keep/status", noRoute},
		{"PUT", "/api/v1/namespaces/default/configmaps/keep/status", noRoute},
		{"DELETE", "/api/v1/namespaces/default/configmaps/keep/status", noRoute},
		{"GET", "/api/v1/namespaces/default/configmaps/keep/bogus", noRoute},
		{"GET", "/api/v1/namespaces/default/configmaps/keep/x/y/z", noRoute},
		{"GET", "/api/v1/watch/namespaces/default/configmaps/keep/status", noRoute},
		{"GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com/scale", noRoute},
		{"GET", "/api/v1/namespaces/default/bogus", noRoute},
		{"GET", "/api/v1/bogus", noRoute},
		{"GET", "/api/v1/configmaps/keep", noRoute},
		{"DELETE", "/api/v1/configmaps/keep", noRoute},
		{"GET", "/api/v1/watch/configmaps/keep", noRoute},
		{"PUT", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles", noRoute},
		{"GET", "/apis/apiextensions.k8s.io/v1/namespaces/default/customresourcedefinitions", noRoute},
		{"GET", "/apis/rbac.authorization.k8s.io/v2", noRoute},
		{"POST", "/apis/rbac.authorization.k8s.io/v2", noRoute},
		{"GET", "/apis/rbac.authorization.k8s.io/v2/roles", noRoute},
		{"GET", "/api/v2", noRoute},
		{"GET", "/api/v2/pods", noRoute},
		{"GET", "/apis/nogroup.io/v1/things", noGroup},
		{"GET", "/apis/nogroup.io/v1", noGroup},
		{"GET", "/apis/nogroup.io", noGroup},
		{"GET", "/nothing/here", noGroup},

		// Served, as upstream: the trailing slash, group discovery by any
		// method, and the namespace's status.
		{"GET", "/api/", "200 APIVersions"},
		{"GET", "/apis/", "200 APIGroupList"},
		{"GET", "/api/v1/", "200 APIResourceList"},
		{"POST", "/apis/rbac.authorization.k8s.io", "200 APIGroup"},
		{"GET", "/api/v1/namespaces/default/status", "200 Namespace"},
	} {
		// Bounded, so that a path wrongly served as a watch ends.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r := httptest.NewRequestWithContext(ctx, c.method, c.path, strings.NewReader("{}"))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		cancel()
		if got := answer(w); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}

	// Only the routed request was counted: the namespace's status.
	if got := requests() - before; got != 1 {
		t.Errorf("the table added %v to apiserver_request_total, want 1", got)
	}
	// Nothing was deleted.
	for _, p := range []string{"/api/v1/namespaces/default", "/api/v1/namespaces/default/configmaps/keep",
		"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"} {
		if w := do(http.MethodGet, p, ""); w.Code != http.StatusOK {
			t.Errorf("GET %s afterwards: %d %s", p, w.Code, w.Body)
		}
	}
}

// statusLine sends a request and sums its answer up as "<code> <message>",
// the message being the Status's when it failed; it returns the body too.
func statusLine(h http.Handler, method, path, ctype, body string) (string, []byte) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", ctype)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var st metav1.Status
	if w.Code >= 300 {
		json.Unmarshal(w.Body.Bytes(), &st)
	}
	return strings.TrimSpace(strconv.Itoa(w.Code) + " " + st.Message), w.Body.Bytes()
}

// answer sums a response up: its code, then the Status's reason and
// message, the kind of anything else in JSON, or the text.
func answer(w *httptest.ResponseRecorder) string {
	code := strconv.Itoa(w.Code)
	var obj struct {
		Kind, Reason, Message string
		Details               *metav1.StatusDetails
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") || json.Unmarshal(w.Body.Bytes(), &obj) != nil {
		return code + " text " + w.Body.String()
	}
	if obj.Kind != "Status" {
		return code + " " + obj.Kind
	}
	if d := obj.Details; d != nil && (d.Name != "" || d.Group != "" || d.Kind != "" || len(d.Causes) > 0) {
		return code + " " + obj.Reason + " " + obj.Message + " (with details)"
	}
	return code + " " + obj.Reason + " " + obj.Message
}

// Namespaces have no deletecollection upstream; discovery, in both forms,
// and the OpenAPI document say so, as kube-apiserver v1.37.2's do.
func TestNamespacesHaveNoDeleteCollection(t *testing.T) {
	h := newInProcess(t)
	var legacy metav1.APIResourceList
	if err := json.Unmarshal(get(t, h, "/api/v1").Body.Bytes(), &legacy); err != nil {
		t.Fatal(err)
	}
	verbs := map[string][]string{}
	for _, r := range legacy.APIResources {
		verbs[r.Name] = r.Verbs
	}
	w := get(t, h, "/api", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	var aggregated apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(w.Body.Bytes(), &aggregated); err != nil || len(aggregated.Items) != 1 || len(aggregated.Items[0].Versions) != 1 {
		t.Fatalf("aggregated discovery: %v %s", err, w.Body)
	}
	for _, r := range aggregated.Items[0].Versions[0].Resources {
		verbs["aggregated "+r.Resource] = r.Verbs
	}
	all := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	noCollection := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
	for name, want := range map[string][]string{
		"namespaces": noCollection, "aggregated namespaces": noCollection,
		"configmaps": all, "aggregated configmaps": all,
	} {
		if !slices.Equal(verbs[name], want) {
			t.Errorf("%s: verbs %q, want %q", name, verbs[name], want)
		}
	}

	var doc struct{ Paths map[string]map[string]any }
	if err := json.Unmarshal(get(t, h, "/openapi/v3/api/v1").Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]string{
		"/api/v1/namespaces":                        {"get", "parameters", "post"},
		"/api/v1/namespaces/{namespace}/configmaps": {"delete", "get", "parameters", "post"},
	} {
		if got := slices.Sorted(maps.Keys(doc.Paths[path])); !slices.Equal(got, want) {
			t.Errorf("OpenAPI v3 %s: %q, want %q", path, got, want)
		}
	}
}

// / lists the paths served, as kube-apiserver's root does: discovery,
// each group and version, the health checks one by one, and the rest.
func TestRootListsThePaths(t *testing.T) {
	h := newInProcess(t)
	var root metav1.RootPaths
	if err := json.Unmarshal(get(t, h, "/").Body.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(root.Paths) {
		t.Errorf("not sorted: %q", root.Paths)
	}
	for _, p := range []string{"/api", "/api/v1", "/apis", "/apis/", "/apis/rbac.authorization.k8s.io",
		"/apis/rbac.authorization.k8s.io/v1", "/healthz", "/livez/ping", "/metrics", "/metrics/slis", "/openapi/v2",
		"/openapi/v3", "/openapi/v3/", "/readyz", "/readyz/poststarthook/crd-informer-synced",
		"/readyz/shutdown", "/version"} {
		if !slices.Contains(root.Paths, p) {
			t.Errorf("%s not listed: %q", p, root.Paths)
		}
		if w := get(t, h, p); w.Code == http.StatusNotFound && p != "/openapi/v3/" { // a prefix
			t.Errorf("%s listed but not served", p)
		}
	}
	if slices.Contains(root.Paths, "/livez/shutdown") {
		t.Error("/livez/shutdown listed: shutdown is a check of /readyz only")
	}
}

// No answer may be kept by a shared cache but those meant to be, as
// kube-apiserver v1.37.2's headers said for the same requests: every
// answer (errors, refusals, watches, health, discovery) is
// "no-cache, private"; an OpenAPI v3 document asked for by its hash is
// "public, immutable".
func TestCacheControlAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	get := func(path string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		return w
	}
	for _, path := range []string{
		"/healthz", "/version", "/apis", "/api/v1", "/openapi/v2", "/openapi/v3", "/metrics", "/nope",
		"/api/v1/namespaces/default/configmaps", "/api/v1/namespaces/default/configmaps/nope",
		"/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
	} {
		if got := get(path).Header().Values("Cache-Control"); len(got) != 1 || got[0] != "no-cache, private" {
			t.Errorf("%s: Cache-Control %q, want no-cache, private", path, got)
		}
	}
	var root struct {
		Paths map[string]struct{ ServerRelativeURL string }
	}
	if err := json.Unmarshal(get("/openapi/v3").Body.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	if got := get(root.Paths["api/v1"].ServerRelativeURL).Header().Values("Cache-Control"); len(got) != 1 || got[0] != "public, immutable" {
		t.Errorf("the OpenAPI v3 document by hash: Cache-Control %q, want public, immutable", got)
	}
}

// Every answer carries an Audit-Id header, as kube-apiserver v1.37.2's
// did: the request's Audit-ID as sent, or a new one per request (a UUID),
// refused requests included.
func TestAuditIDAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	do := func(path, auditID, token string) *httptest.ResponseRecorder {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
		if auditID != "" {
			r.Header.Set("Audit-ID", auditID)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	seen := map[string]bool{}
	for _, c := range []struct{ path, token string }{
		{"/healthz", ""}, {"/api/v1/namespaces/default", ""}, {"/api/v1/namespaces/nope", ""},
		{"/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1", ""}, {"/api/v1", "not-a-token"},
	} {
		w := do(c.path, "", c.token)
		got := w.Header().Values("Audit-Id")
		if len(got) != 1 || len(got[0]) != 36 || strings.Count(got[0], "-") != 4 || seen[got[0]] {
			t.Errorf("%s (%d): Audit-Id %q, want a new UUID", c.path, w.Code, got)
		}
		if len(got) == 1 {
			seen[got[0]] = true
		}
		if w := do(c.path, "my-id-123", c.token); w.Header().Get("Audit-Id") != "my-id-123" {
			t.Errorf("%s (%d) with Audit-ID my-id-123: Audit-Id %q", c.path, w.Code, w.Header().Values("Audit-Id"))
		}
	}
}
