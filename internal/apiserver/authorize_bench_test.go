package apiserver_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthorize GETs one ConfigMap in process, with a service
// account token, without an authorizer and with --authorization-mode
// RBAC (allowed by a RoleBinding among 100 others in the namespace and
// 100 ClusterRoleBindings of other users), refused by RBAC (a refusal
// first catches up with the store), and with the admin's certificate
// under RBAC.
func BenchmarkAuthorize(b *testing.B) {
	for _, rbac := range []bool{false, true} {
		h, admin, token := tokenServerAuthorizing(b, rbac)
		do := adminCreate(b, h, admin)
		do("/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"c"},"data":{"k":"v"}}`)
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
			{"token", "/api/v1/namespaces/default/configmaps/c", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusOK, false},
			{"certificate", "/api/v1/namespaces/default/configmaps/c", admin, http.StatusOK, false},
			{"token-refused", "/api/v1/namespaces/default/secrets/s", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }, http.StatusForbidden, true},
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
