package apiserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// BenchmarkAuthorize GETs one ConfigMap in process, with a service
// account token, without an authorizer and with --authorization-mode
// RBAC (allowed by a RoleBinding among 100 others in the namespace and
// 100 ClusterRoleBindings of other users), refused by RBAC (a refusal
// first catches up with the store), and with the admin's certificate
// under RBAC.
func BenchmarkAuthorize(b *testing.B) {
	for _, rbac := range []bool{false, true} {
		h := newInProcessAuthorizing(b, rbac, func(c *apiserver.Config) { c.Anonymous = false })
		cert := &x509.Certificate{Subject: pkix.Name{CommonName: "kplane-admin", Organization: []string{"system:masters"}}, Raw: []byte("a certificate")}
		admin := func(r *http.Request) { r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}} }
		do := func(path, body string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			admin(r)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("%s: %d %s", path, w.Code, w.Body)
			}
			return w
		}
		do("/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c"},"data":{"k":"v"}}`)
		do("/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"robot"}}`)
		var tr struct{ Status struct{ Token string } }
		if err := json.Unmarshal(do("/api/v1/namespaces/default/serviceaccounts/robot/token", `{}`).Body.Bytes(), &tr); err != nil {
			b.Fatal(err)
		}
		do("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", `{"metadata":{"name":"reader"},"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"],"resourceNames":["c"]}]}`)
		for i := range 100 {
			do("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", fmt.Sprintf(
				`{"metadata":{"name":"other-%03d"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},"subjects":[{"kind":"User","name":"user-%d"}]}`, i, i))
			do("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", fmt.Sprintf(
				`{"metadata":{"name":"other-%03d"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"user-%d"}]}`, i, i))
		}
		do("/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", `{"metadata":{"name":"robot-reads"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},"subjects":[{"kind":"ServiceAccount","name":"robot"}]}`)
		mode := "AlwaysAllow"
		if rbac {
			mode = "RBAC"
		}
		for _, c := range []struct {
			name, path string
			auth       func(*http.Request)
			code       int
			only       bool // RBAC only
		}{
			{"token", "/api/v1/namespaces/default/configmaps/c", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tr.Status.Token) }, http.StatusOK, false},
			{"certificate", "/api/v1/namespaces/default/configmaps/c", admin, http.StatusOK, false},
			{"token-refused", "/api/v1/namespaces/default/secrets/s", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tr.Status.Token) }, http.StatusForbidden, true},
		} {
			if c.only && !rbac {
				continue
			}
			b.Run(mode+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest(http.MethodGet, c.path, nil)
					c.auth(r)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != c.code {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}
