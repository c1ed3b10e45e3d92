package apiserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// A request without a credential is system:anonymous, in the group
// system:unauthenticated, as kube-apiserver v1.37.2 (--anonymous-auth's
// default) answered the same requests: with RBAC authorized by the roles
// bound to it (the default policy's system:public-info-viewer lets it
// read /version and the health checks), so a binding can open more (the
// OpenID documents, for relying parties outside the cluster). Without an
// authorizer it may read only those paths (upstream's AlwaysAllow would
// let it do everything). With RefuseAnonymous (--anonymous-auth=false)
// every such request is 401.
func TestAnonymousRequests(t *testing.T) {
	forbidden := func(msg, details string) string {
		return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + msg + `","reason":"Forbidden","details":` + details + `,"code":403}`
	}
	const unauthorized = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`
	type want struct {
		code int
		body string // "": not compared
	}
	cases := []struct {
		method, path, body   string
		rbac, always, refuse want
	}{
		{"GET", "/api/v1/namespaces", "",
			want{403, forbidden(`namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope`, `{"kind":"namespaces"}`)},
			want{401, unauthorized}, want{401, unauthorized}},
		{"GET", "/api/v1/namespaces/default/configmaps/x", "",
			want{403, forbidden(`configmaps \"x\" is forbidden: User \"system:anonymous\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\"`, `{"name":"x","kind":"configmaps"}`)},
			want{401, unauthorized}, want{401, unauthorized}},
		{"POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "{}",
			want{403, forbidden(`selfsubjectreviews.authentication.k8s.io is forbidden: User \"system:anonymous\" cannot create resource \"selfsubjectreviews\" in API group \"authentication.k8s.io\" at the cluster scope`, `{"group":"authentication.k8s.io","kind":"selfsubjectreviews"}`)},
			want{401, unauthorized}, want{401, unauthorized}},
		{"GET", "/apis", "",
			want{403, forbidden(`forbidden: User \"system:anonymous\" cannot get path \"/apis\"`, `{}`)},
			want{401, unauthorized}, want{401, unauthorized}},
		{"GET", "/openid/v1/jwks", "",
			want{403, forbidden(`forbidden: User \"system:anonymous\" cannot get path \"/openid/v1/jwks\"`, `{}`)},
			want{401, unauthorized}, want{401, unauthorized}},
		{"GET", "/healthz", "", want{200, "ok"}, want{200, "ok"}, want{401, unauthorized}},
		{"GET", "/readyz", "", want{200, "ok"}, want{200, "ok"}, want{401, unauthorized}},
		{"GET", "/livez", "", want{200, "ok"}, want{200, "ok"}, want{401, unauthorized}},
		{"GET", "/version", "", want{200, ""}, want{200, ""}, want{401, unauthorized}},
	}
	servers := map[string]http.Handler{
		"RBAC":        newInProcessAuthorizing(t, true, func(c *apiserver.Config) { c.Anonymous = false }),
		"AlwaysAllow": newInProcess(t, func(c *apiserver.Config) { c.Anonymous = false }),
		"refused":     newInProcessAuthorizing(t, true, func(c *apiserver.Config) { c.Anonymous, c.RefuseAnonymous = false, true }),
	}
	for _, h := range servers {
		h.(*apiserver.Server).MarkStarted()
	}
	send := func(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, c := range cases {
		for name, want := range map[string]want{"RBAC": c.rbac, "AlwaysAllow": c.always, "refused": c.refuse} {
			w := send(servers[name], c.method, c.path, c.body)
			if got := strings.TrimSuffix(w.Body.String(), "\n"); w.Code != want.code || want.body != "" && got != want.body {
				t.Errorf("%s: %s %s: %d %s\nwant %d %s", name, c.method, c.path, w.Code, got, want.code, want.body)
			}
		}
	}
	// The anonymous section's conditions (--authentication-config): only
	// the paths named let anonymous requests in, to be authorized.
	paths := newInProcessAuthorizing(t, true, func(c *apiserver.Config) { c.Anonymous, c.AnonymousPaths = false, []string{"/livez", "/apis"} })
	paths.(*apiserver.Server).MarkStarted()
	for path, code := range map[string]int{"/livez": 200, "/apis": 403, "/readyz": 401, "/version": 401, "/livez/": 401, "/api/v1/namespaces": 401} {
		if w := send(paths, "GET", path, ""); w.Code != code {
			t.Errorf("anonymous conditions: GET %s: %d %s, want %d", path, w.Code, w.Body, code)
		}
	}
	// A binding opens the OpenID documents to anyone, for relying parties
	// that check kplane's tokens from outside.
	rbac := servers["RBAC"]
	r := httptest.NewRequest(http.MethodPost, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", strings.NewReader(
		`{"metadata":{"name":"anonymous-discovery"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"system:service-account-issuer-discovery"},`+
			`"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"Group","name":"system:unauthenticated"}]}`))
	r.Header.Set("Content-Type", "application/json")
	admin := &x509.Certificate{Subject: pkix.Name{CommonName: "kplane-admin", Organization: []string{"system:masters"}}, Raw: []byte("a certificate")}
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{admin}}}
	w := httptest.NewRecorder()
	rbac.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		t.Fatalf("binding: %d %s", w.Code, w.Body)
	}
	for _, path := range []string{"/openid/v1/jwks", "/.well-known/openid-configuration"} {
		if w := send(rbac, "GET", path, ""); w.Code != http.StatusOK {
			t.Errorf("anonymous %s after the binding: %d %s", path, w.Code, w.Body)
		}
	}
}
