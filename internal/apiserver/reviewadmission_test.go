package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Creates of reviews and token requests pass admission, as upstream's:
// mutating admission may change the request (a policy sets a token's
// audiences), validating admission may refuse it (a policy caps a token's
// lifetime, another forbids asking about deletes).
func TestReviewsPassAdmission(t *testing.T) {
	h := newInProcess(t)
	send := func(path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, o := range []struct{ path, body string }{
		{"/api/v1/namespaces/default/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"robot"}}`},
		{"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"reviews"},
			"spec":{"failurePolicy":"Fail","matchConstraints":{"resourceRules":[
				{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["serviceaccounts/token"]},
				{"apiGroups":["authorization.k8s.io"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["selfsubjectaccessreviews"]}]},
			"validations":[
				{"expression":"object.kind != 'TokenRequest' || object.spec.expirationSeconds <= 3600","message":"tokens last an hour at most"},
				{"expression":"object.kind != 'SelfSubjectAccessReview' || object.spec.resourceAttributes.verb != 'delete'","message":"no asking about deletes"}]}}`},
		{"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","metadata":{"name":"reviews"},
			"spec":{"policyName":"reviews","validationActions":["Deny"]}}`},
		{"/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicy","metadata":{"name":"audiences"},
			"spec":{"failurePolicy":"Fail","reinvocationPolicy":"Never","matchConstraints":{"resourceRules":[
				{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["serviceaccounts/token"]}]},
			"mutations":[{"patchType":"ApplyConfiguration","applyConfiguration":{"expression":"Object{spec: Object.spec{audiences: ['set-by-policy']}}"}}]}}`},
		{"/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicyBinding","metadata":{"name":"audiences"},
			"spec":{"policyName":"audiences"}}`},
	} {
		if w := send(o.path, o.body); w.Code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", o.path, w.Code, w.Body)
		}
	}
	token := func(seconds int) *httptest.ResponseRecorder {
		return send("/api/v1/namespaces/default/serviceaccounts/robot/token",
			`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":`+itoa(seconds)+`}}`)
	}
	// The policies take effect once read. A validation without a reason
	// refuses with 422, in upstream's words.
	var w *httptest.ResponseRecorder
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if w = token(7200); w.Code == http.StatusUnprocessableEntity || time.Now().After(deadline) {
			break
		}
	}
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(),
		`serviceaccounts \"robot\" is forbidden: ValidatingAdmissionPolicy 'reviews' with binding 'reviews' denied request: tokens last an hour at most`) {
		t.Fatalf("a two-hour token: %d %s", w.Code, w.Body)
	}
	if w = token(3600); w.Code != http.StatusCreated {
		t.Fatalf("an hour's token: %d %s", w.Code, w.Body)
	}
	var tr struct {
		Spec   struct{ Audiences []string }
		Status struct{ Token string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &tr); err != nil || tr.Status.Token == "" || strings.Join(tr.Spec.Audiences, ",") != "set-by-policy" {
		t.Fatalf("the token request's answer (%v): %s", err, w.Body)
	}
	ssar := func(verb string) *httptest.ResponseRecorder {
		return send("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
			"spec":{"resourceAttributes":{"verb":"`+verb+`","resource":"configmaps","namespace":"default"}}}`)
	}
	if w := ssar("delete"); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "denied request: no asking about deletes") {
		t.Fatalf("asking about deletes: %d %s", w.Code, w.Body)
	}
	if w := ssar("get"); w.Code != http.StatusCreated {
		t.Fatalf("asking about gets: %d %s", w.Code, w.Body)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
