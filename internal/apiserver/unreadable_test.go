package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A create whose body kplane cannot read as an object (not JSON or YAML,
// or not an object) is refused as kube-apiserver v1.37.2 refuses it: a
// 400 naming the kind expected, why, and the start of the body (up to
// 30 bytes, as text when it starts as a JSON object, in hex otherwise).
// The messages are v1.37.2's, for the same bodies.
func TestUnreadableBodies(t *testing.T) {
	h := newInProcess(t)
	for _, c := range []struct{ path, ctype, body, want string }{
		{"/api/v1/namespaces/default/configmaps", "application/json", `not json`, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u') (6e6f74206a736f6e)`},
		{"/api/v1/namespaces/default/configmaps", "application/json", `nope nope nope nope nope nope nope nope nope nope`, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character 'o' in literal null (expecting 'u') (6e6f7065206e6f7065206e6f7065206e6f7065206e6f7065206e6f706520 ...)`},
		{"/api/v1/namespaces/default/secrets", "application/json", `{"metadata":{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `the object provided is unrecognized (must be of type Secret): couldn't get version/kind; json parse error: unexpected end of JSON input ({"metadata":{"name":"aaaaaaaaa ...)`},
		{"/api/v1/namespaces/default/configmaps", "application/json", ``, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)`},
		{"/api/v1/namespaces/default/configmaps", "application/json", `[]`, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (5b5d)`},
		{"/api/v1/namespaces/default/configmaps", "application/yaml", `a: [b`, `the object provided is unrecognized (must be of type ConfigMap): yaml: line 1: did not find expected ',' or ']' (613a205b62)`},
		{"/api/v1/namespaces/default/configmaps", "application/yaml", `- a`, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (2d2061)`},
		{"/apis/rbac.authorization.k8s.io/v1/clusterroles", "application/json", `12`, `the object provided is unrecognized (must be of type ClusterRole): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (3132)`},
	} {
		r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st struct{ Message string }
		if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil || w.Code != http.StatusBadRequest || st.Message != c.want {
			t.Errorf("%s %q:\n got  %d %s\n want 400 %s", c.ctype, c.body, w.Code, st.Message, c.want)
		}
	}
}
