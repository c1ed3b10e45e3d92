package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admission webhook configurations (admissionregistration.k8s.io/v1
// ValidatingWebhookConfiguration and MutatingWebhookConfiguration) answer
// as kube-apiserver v1.37.2's. testdata/webhookconfigs-kube-apiserver-v1.37.2.json
// holds 72 requests and upstream's answers, 36 of each kind:
//   - creates with the v1 defaults (policies, selectors, timeout, a
//     service's port, a rule's scope, a mutating webhook's reinvocation
//     policy) and matchConditions that compile;
//   - every family of checks, in upstream's order and words: webhook
//     names and repeats, rules (operations, groups, versions, resources
//     with their wildcard quirks, scope), the policies and timeout,
//     sideEffects, admissionReviewVersions, the client config (a URL's
//     parts, a service's with its name and namespace reported swapped, as
//     upstream does), label selectors, matchConditions (names, repeats,
//     the limit, CEL compile errors and result type), the reserved
//     ".static.k8s.io" suffix and the metadata's;
//   - updates by every patch type: the generation bumped by a change of
//     the webhooks only, the update's checks, an update without a
//     resourceVersion refused; server-side apply by two managers; Tables
//     of one object and of the list; dry runs and deletes.
func TestWebhookConfigurationsAsKubeAPIServer(t *testing.T) {
	replayUpstream(t, "testdata/webhookconfigs-kube-apiserver-v1.37.2.json", 72)
}

// A rule that names a resource admission webhooks are never called for
// (the reviews) gets upstream's warning, on create and on update, once per
// resource and rule; a rule with a "*" group or resource gets none.
// The warnings are kube-apiserver v1.37.2's.
func TestWebhookConfigurationWarningsAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	send := func(method, path, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const (
		path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
		sar  = `webhooks[0].rules[0]: subjectaccessreviews.authorization.k8s.io is excluded from admission webhooks; this rule will have no effect`
		tr   = `webhooks[0].rules[0]: tokenreviews.authentication.k8s.io is excluded from admission webhooks; this rule will have no effect`
		ssrr = `webhooks[0].rules[1]: selfsubjectrulesreviews.authorization.k8s.io is excluded from admission webhooks; this rule will have no effect`
	)
	quoted := func(ws ...string) []string {
		for i, w := range ws {
			ws[i] = `299 - "` + w + `"`
		}
		return ws
	}
	for _, c := range []struct {
		what, method, path, ctype, body string
		code                            int
		warnings                        []string
	}{
		{"create", http.MethodPost, path, "application/json", `{"metadata":{"name":"warn"},"webhooks":[{"name":"a.example.com",` +
			`"clientConfig":{"url":"https://127.0.0.1:1/x"},"sideEffects":"None","admissionReviewVersions":["v1"],"rules":[` +
			`{"operations":["CREATE"],"apiGroups":["authorization.k8s.io","authentication.k8s.io"],"apiVersions":["v1"],"resources":["subjectaccessreviews","tokenreviews","subjectaccessreviews"]},` +
			`{"operations":["CREATE"],"apiGroups":["*"],"apiVersions":["v1"],"resources":["tokenreviews"]}]}]}`,
			http.StatusCreated, quoted(sar, tr)},
		{"update", http.MethodPatch, path + "/warn", "application/json-patch+json",
			`[{"op":"replace","path":"/webhooks/0/rules/1/apiGroups","value":["authorization.k8s.io"]},{"op":"replace","path":"/webhooks/0/rules/1/resources","value":["selfsubjectrulesreviews","pods"]}]`,
			http.StatusOK, quoted(sar, tr, ssrr)},
		{"an update of the metadata", http.MethodPatch, path + "/warn", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`,
			http.StatusOK, quoted(sar, tr, ssrr)},
		{"a mutating webhook's, dry run", http.MethodPost, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?dryRun=All", "application/json",
			`{"metadata":{"name":"warn"},"webhooks":[{"name":"a.example.com","clientConfig":{"url":"https://127.0.0.1:1/x"},"sideEffects":"None","admissionReviewVersions":["v1"],` +
				`"rules":[{"operations":["CREATE"],"apiGroups":["authentication.k8s.io"],"apiVersions":["v1"],"resources":["selfsubjectreviews"]}]}]}`,
			http.StatusCreated, quoted(`webhooks[0].rules[0]: selfsubjectreviews.authentication.k8s.io is excluded from admission webhooks; this rule will have no effect`)},
		{"a delete", http.MethodDelete, path + "/warn", "", "", http.StatusOK, nil},
	} {
		w := send(c.method, c.path, c.ctype, c.body)
		if got := w.Header().Values("Warning"); w.Code != c.code || !reflect.DeepEqual(got, c.warnings) {
			t.Errorf("%s: %d %q, want %d %q\n%s", c.what, w.Code, got, c.code, c.warnings, w.Body)
		}
	}
}

// The group's kinds are in discovery as v1.37.2 lists them:
// cluster-scoped, in the api-extensions category, with upstream's storage
// version hashes, and a validating policy's /status (a mutating one has
// none).
func TestWebhookConfigurationsDiscovery(t *testing.T) {
	h := newInProcess(t)
	var list metav1.APIResourceList
	if err := json.Unmarshal(get(t, h, "/apis/admissionregistration.k8s.io/v1").Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	want := []metav1.APIResource{
		{Name: "mutatingadmissionpolicies", SingularName: "mutatingadmissionpolicy", Kind: "MutatingAdmissionPolicy",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "mHCkTKpUTrE="},
		{Name: "mutatingadmissionpolicybindings", SingularName: "mutatingadmissionpolicybinding", Kind: "MutatingAdmissionPolicyBinding",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "ZKgZT1uTmZ0="},
		{Name: "mutatingwebhookconfigurations", SingularName: "mutatingwebhookconfiguration", Kind: "MutatingWebhookConfiguration",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "Sqi0GUgDaX0="},
		{Name: "validatingadmissionpolicies", SingularName: "validatingadmissionpolicy", Kind: "ValidatingAdmissionPolicy",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "6OxvlMmQ6is="},
		{Name: "validatingadmissionpolicies/status", Kind: "ValidatingAdmissionPolicy", Verbs: metav1.Verbs{"get", "patch", "update"}},
		{Name: "validatingadmissionpolicybindings", SingularName: "validatingadmissionpolicybinding", Kind: "ValidatingAdmissionPolicyBinding",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "v9715VZqakg="},
		{Name: "validatingwebhookconfigurations", SingularName: "validatingwebhookconfiguration", Kind: "ValidatingWebhookConfiguration",
			Verbs: verbs, Categories: []string{"api-extensions"}, StorageVersionHash: "B0wHjQmsGNk="},
	}
	if !reflect.DeepEqual(list.APIResources, want) {
		t.Errorf("resources %+v\nwant %+v", list.APIResources, want)
	}
}

// The enumerated fields of the webhooks and the mutating policies are
// published with upstream's values and their documentation (a rule's
// operations as the items' enum), as in kube-apiserver v1.37.2's OpenAPI v3
// document.
func TestWebhookConfigurationsOpenAPIEnums(t *testing.T) {
	h := newInProcess(t)
	var doc struct {
		Components struct{ Schemas map[string]map[string]any }
	}
	if err := json.Unmarshal(get(t, h, "/openapi/v3/apis/admissionregistration.k8s.io/v1").Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	prop := func(def, name string) map[string]any {
		props, _ := doc.Components.Schemas["io.k8s.api.admissionregistration.v1."+def]["properties"].(map[string]any)
		p, _ := props[name].(map[string]any)
		return p
	}
	for _, c := range []struct{ def, name, enum, docEnd string }{
		{"ValidatingWebhook", "failurePolicy", `["Fail","Ignore"]`, " - `\"Ignore\"` means that an error calling the webhook is ignored."},
		{"MutatingWebhook", "matchPolicy", `["Equivalent","Exact"]`, " - `\"Exact\"` means requests should only be sent to the webhook if they exactly match a given rule."},
		{"MutatingWebhook", "sideEffects", `["None","NoneOnDryRun","Some","Unknown"]`, "If a request with the dry-run attribute would trigger a call to this webhook, the request will instead fail."},
		{"MutatingWebhook", "reinvocationPolicy", `["IfNeeded","Never"]`, " - `\"Never\"` indicates that the mutation must not be called more than once in a single admission evaluation."},
		{"MutatingAdmissionPolicySpec", "failurePolicy", `["Fail","Ignore"]`, " - `\"Ignore\"` means that an error calling the webhook is ignored."},
		{"MutatingAdmissionPolicySpec", "reinvocationPolicy", `["IfNeeded","Never"]`, " - `\"Never\"` indicates that the mutation must not be called more than once in a single admission evaluation."},
		{"Mutation", "patchType", `["ApplyConfiguration","JSONPatch"]`, "Required.\n\n\nPossible enum values:\n - `\"ApplyConfiguration\"` ApplyConfiguration indicates that the mutation is using apply configuration to mutate the object.\n - `\"JSONPatch\"` JSONPatch indicates that the object is mutated through JSON Patch."},
		{"RuleWithOperations", "scope", `["*","Cluster","Namespaced"]`, "Default is \"*\".\n\n\nPossible enum values:\n - `\"*\"` means that all scopes are included.\n - `\"Cluster\"` means that scope is limited to cluster-scoped objects. Namespace objects are cluster-scoped.\n - `\"Namespaced\"` means that scope is limited to namespaced objects."},
	} {
		p := prop(c.def, c.name)
		desc, _ := p["description"].(string)
		if b, _ := json.Marshal(p["enum"]); string(b) != c.enum || !strings.HasSuffix(desc, c.docEnd) {
			t.Errorf("%s.%s: enum %s, description ending %q", c.def, c.name, b, desc[max(0, len(desc)-len(c.docEnd)):])
		}
	}
	items, _ := prop("RuleWithOperations", "operations")["items"].(map[string]any)
	if b, _ := json.Marshal(items["enum"]); string(b) != `["*","CONNECT","CREATE","DELETE","UPDATE"]` {
		t.Errorf("RuleWithOperations.operations items: %v", items)
	}
}
