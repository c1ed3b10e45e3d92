package apiserver_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// JSON answers are indented (two spaces, no final newline) when the
// request asks with ?pretty or comes from curl, Wget or a browser, as
// kube-apiserver v1.37.2 answered the same requests; /version and the
// root paths always are; refusals before routing (a bad token's 401) are
// when asked, on any path; watches never are (their events are not held).
func TestPrettyAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	get := func(path, ua string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("User-Agent", ua)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Body.String()
	}
	indented := func(s string) bool { return strings.HasPrefix(s, "{\n  \"") && !strings.HasSuffix(s, "\n") }
	compact := func(s string) bool { return strings.HasPrefix(s, "{\"") && !strings.Contains(s, "\n  ") }
	for _, c := range []struct {
		path, ua string
		pretty   bool
	}{
		{"/api/v1/namespaces/default", "kubectl/v1.37.2", false},
		{"/api/v1/namespaces/default?pretty=true", "kubectl/v1.37.2", true},
		{"/api/v1/namespaces/default", "curl/8.14.1", true},
		{"/api/v1/namespaces/default", "Wget/1.21", true},
		{"/api/v1/namespaces/default", "Mozilla/5.0 (X11)", true},
		{"/api/v1/namespaces/default?pretty=x", "curl/8.14.1", false},
		{"/api/v1/namespaces/default?pretty=false", "curl/8.14.1", false},
		{"/api/v1/namespaces?limit=1", "curl/8.14.1", true},
		{"/api/v1/namespaces/default/configmaps/nosuch", "curl/8.14.1", true},
		{"/apis", "curl/8.14.1", true},
		{"/apis", "kubectl/v1.37.2", false},
		{"/version", "kubectl/v1.37.2", true},
		{"/", "kubectl/v1.37.2", true},
	} {
		got := get(c.path, c.ua)
		if c.pretty && !indented(got) || !c.pretty && !compact(got) {
			t.Errorf("GET %s as %s: pretty %v, got %q", c.path, c.ua, c.pretty, got[:min(len(got), 60)])
		}
	}
	// So are refusals before routing, on every path: a bad token's 401.
	for _, c := range []struct {
		path, ua string
		pretty   bool
	}{
		{"/api/v1/namespaces", "curl/8.14.1", true},
		{"/foo", "curl/8.14.1", true},
		{"/version", "kubectl/v1.37.2", false},
	} {
		r := httptest.NewRequest(http.MethodGet, c.path, nil)
		r.Header.Set("User-Agent", c.ua)
		r.Header.Set("Authorization", "Bearer not.a.token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Body.String(); w.Code != http.StatusUnauthorized || c.pretty && !indented(got) || !c.pretty && !compact(got) {
			t.Errorf("GET %s as %s with a bad token: pretty %v, got %d %q", c.path, c.ua, c.pretty, w.Code, got[:min(len(got), 60)])
		}
	}
	watch := get("/api/v1/namespaces?watch=1&timeoutSeconds=1", "curl/8.14.1")
	if lines := strings.Split(strings.TrimSpace(watch), "\n"); len(lines) < 4 || !compact(lines[0]) {
		t.Errorf("a watch from curl: %q", watch[:min(len(watch), 120)])
	}
}
