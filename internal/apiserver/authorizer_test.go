package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/registry"
)

// recording answers what decide says, and records what it was asked.
type recording struct {
	mu     sync.Mutex
	asked  []registry.Attributes
	decide func(registry.Attributes) (registry.Decision, string, error)
}

func (r *recording) Authorize(_ context.Context, a registry.Attributes) (registry.Decision, string, error) {
	r.mu.Lock()
	r.asked = append(r.asked, a)
	r.mu.Unlock()
	return r.decide(a)
}

func (r *recording) last() registry.Attributes {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[len(r.asked)-1]
}

// A request no authorizer allows is 403 with their reasons; if one of
// them failed (a webhook it could not call), it is upstream's 500 in
// plain text instead, naming the request and the error. An allowance
// passes despite another's error.
func TestAuthorizerDecisions(t *testing.T) {
	boom := errors.New(`Post "https://authz.example/": dial tcp: connection refused`)
	failing := &recording{decide: func(a registry.Attributes) (registry.Decision, string, error) {
		switch a.Namespace {
		case "open":
			return registry.Allow, "", nil
		case "shut":
			return registry.Deny, "closed <today>", nil
		case "quiet":
			return registry.NoOpinion, "no idea", nil
		}
		return registry.NoOpinion, "", boom
	}}
	allowAfter := &recording{decide: func(a registry.Attributes) (registry.Decision, string, error) {
		if a.Namespace == "down-but-allowed" {
			return registry.Allow, "", nil
		}
		return registry.NoOpinion, "", nil
	}}
	h := newInProcess(t, func(c *apiserver.Config) {
		c.Authorizer = registry.Union{registry.Privileged, {Name: "default", Authorizer: failing}, {Name: "rbac", Authorizer: allowAfter}}
	})
	for _, c := range []struct {
		path        string
		code        int
		contentType string
		body        string
	}{
		{"/api/v1/namespaces/open/configmaps", 200, "application/json", ""},
		{"/api/v1/namespaces/down-but-allowed/configmaps", 200, "application/json", ""},
		{"/api/v1/namespaces/shut/configmaps?limit=1&x=<a>", 403, "application/json",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"shut\": closed \u003ctoday\u003e","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`},
		{"/api/v1/namespaces/quiet/configmaps", 403, "application/json",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"quiet\": default: no idea","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`},
		{"/api/v1/namespaces/down/configmaps?limit=1&x=<a>", 500, "text/plain; charset=utf-8",
			`Internal Server Error: "/api/v1/namespaces/down/configmaps?limit=1&amp;x=&lt;a&gt;": Post "https://authz.example/": dial tcp: connection refused` + "\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.path, nil))
		if rec.Code != c.code || rec.Header().Get("Content-Type") != c.contentType || c.body != "" && strings.TrimSpace(rec.Body.String()) != strings.TrimSpace(c.body) {
			t.Errorf("%s: %d %s %s, want %d %s %s", c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.code, c.contentType, c.body)
		}
	}
}

// A list's, watch's or deletecollection's selectors reach the
// authorizer as the authorization API's requirements; a /watch/ path's
// and a get's do not.
func TestAuthorizerSeesSelectors(t *testing.T) {
	authz := &recording{decide: func(registry.Attributes) (registry.Decision, string, error) { return registry.Allow, "", nil }}
	h := newInProcess(t, func(c *apiserver.Config) { c.Authorizer = authz })
	const selectors = "?labelSelector=app%3Dweb%2Ctier+notin+(db)&fieldSelector=metadata.namespace%21%3Dx"
	wantField := []metav1.FieldSelectorRequirement{{Key: "metadata.namespace", Operator: metav1.FieldSelectorOpNotIn, Values: []string{"x"}}}
	wantLabel := []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}, {Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}
	for _, c := range []struct {
		method, path string
		verb         string
		selectors    bool
	}{
		{http.MethodGet, "/api/v1/namespaces/default/configmaps" + selectors, "list", true},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps" + selectors + "&watch=true&timeoutSeconds=1", "watch", true},
		{http.MethodDelete, "/api/v1/namespaces/default/configmaps" + selectors, "deletecollection", true},
		{http.MethodGet, "/api/v1/watch/namespaces/default/configmaps" + selectors + "&timeoutSeconds=1", "watch", false},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/x" + selectors, "get", false},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps?labelSelector=a+in+(", "list", false}, // does not parse
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		a := authz.last()
		got := a.Verb == c.verb && len(a.FieldSelector) > 0 == c.selectors && len(a.LabelSelector) > 0 == c.selectors
		if c.selectors {
			got = got && canonicalJSON(t, a.FieldSelector) == canonicalJSON(t, wantField) && canonicalJSON(t, a.LabelSelector) == canonicalJSON(t, wantLabel)
		}
		if !got {
			t.Errorf("%s %s: %s %+v %+v", c.method, c.path, a.Verb, a.FieldSelector, a.LabelSelector)
		}
	}
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// Each request's authentication and authorization are counted under
// kube-apiserver's metric names and labels: successes by user name
// folded (the admin certificate's kplane-admin and a service account
// are "other"), a token that is not valid as an error, a request
// without credentials refused as a failure; authorizations by result.
func TestAuthMetrics(t *testing.T) {
	h, admin, token := tokenServerAuthorizing(t, true)
	send := func(path string, auth func(*http.Request)) {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		auth(r)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	withToken := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	// Before: the admin's writes of tokenServerAuthorizing.
	send("/api/v1/namespaces/default/configmaps", withToken(token)) // no-opinion (RBAC: not bound)
	send("/version", withToken(token))                              // allowed (system:public-info-viewer)
	send("/version", withToken("not-a-token"))                      // error
	send("/api/v1/namespaces", admin)                               // allowed, system:masters
	r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	admin(r)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	metrics := w.Body.String()
	for _, want := range []string{
		`apiserver_authentication_attempts{result="error"} 1` + "\n",
		`apiserver_authentication_attempts{result="success"} `,
		`apiserver_authenticated_user_requests{username="other"} `,
		`apiserver_authorization_attempts_total{result="no-opinion"} 1` + "\n",
		`apiserver_authorization_attempts_total{result="allowed"} `,
		`apiserver_authentication_duration_seconds_bucket{result="error",le="0.001"} `,
		`apiserver_authorization_duration_seconds_count{result="no-opinion"} 1` + "\n",
		"# TYPE apiserver_authorization_attempts_total counter\n",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %q in the metrics", want)
		}
	}
	if t.Failed() {
		for _, l := range strings.Split(metrics, "\n") {
			if strings.Contains(l, "authenticat") || strings.Contains(l, "authoriz") {
				t.Log(l)
			}
		}
	}
}
