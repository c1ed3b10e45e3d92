package app

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// discoveryServer is an issuer's discovery document and an empty key set
// for each path asked: https://<host>/<name> is an issuer.
func discoveryServer(t *testing.T) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, doc := strings.CutSuffix(r.URL.Path, "/.well-known/openid-configuration")
		w.Header().Set("Content-Type", "application/json")
		if doc {
			json.NewEncoder(w).Encode(map[string]string{"issuer": srv.URL + name, "jwks_uri": srv.URL + name + "/keys"})
			return
		}
		w.Write([]byte(`{"keys":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// authnFile is an AuthenticationConfiguration of one authenticator per
// issuer URL, with anonymous requests let only to path.
func authnFile(srv *httptest.Server, anonymousPath string, issuers ...string) string {
	ca := strings.ReplaceAll(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))), "\n", "\n      ")
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\njwt:\n")
	for _, iss := range issuers {
		fmt.Fprintf(&b, "- issuer:\n    url: %s\n    audiences: [kplane]\n    certificateAuthority: |\n      %s\n  claimMappings:\n    username: {claim: sub, prefix: \"\"}\n", iss, ca)
	}
	fmt.Fprintf(&b, "anonymous:\n  enabled: true\n  conditions: [{path: %s}]\n", anonymousPath)
	return b.String()
}

// The configuration file is read again when it changes: a valid one
// takes over once its issuers are found; one that does not decode, does
// not validate, changes the anonymous section, or whose issuer cannot be
// found within the time allowed is refused and counted, the last one
// staying in force. A file refused for what it says is not read again
// until it changes; one whose issuer was down is.
func TestAuthenticationConfigReloads(t *testing.T) {
	srv := discoveryServer(t)
	down := httptest.NewTLSServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	a, b := srv.URL+"/a", srv.URL+"/b"
	path := filepath.Join(t.TempDir(), "authn.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(authnFile(srv, "/livez", a))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := newConfigAuthenticator(ctx, path, nil, false, []string{"https://kubernetes.default.svc"}, &jwt.Metrics{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.updateTimeout, c.healthPoll = 300*time.Millisecond, 10*time.Millisecond
	counts := func() (uint64, uint64) {
		c.reloads.mu.Lock()
		defer c.reloads.mu.Unlock()
		return c.reloads.counts["success"], c.reloads.counts["failure"]
	}
	check := func(step string, issuers []string, success, failure uint64) {
		t.Helper()
		c.reload()
		if got := c.current.Load().Issuers(); !slices.Equal(got, issuers) {
			t.Errorf("%s: issuers %q, want %q", step, got, issuers)
		}
		if s, f := counts(); s != success || f != failure {
			t.Errorf("%s: reloads %d succeeded, %d failed; want %d, %d", step, s, f, success, failure)
		}
	}
	check("unchanged", []string{a}, 0, 0)
	good := authnFile(srv, "/livez", a, b)
	write(good)
	check("an issuer added", []string{a, b}, 1, 0)
	write("jwt: [")
	check("not YAML", []string{a, b}, 1, 1)
	check("not YAML, again", []string{a, b}, 1, 1)
	write(authnFile(srv, "/livez", "http://insecure.example"))
	check("not valid", []string{a, b}, 1, 2)
	write(authnFile(srv, "/readyz", a))
	check("the anonymous section changed", []string{a, b}, 1, 3)
	write(authnFile(srv, "/livez", "https://kubernetes.default.svc"))
	check("a service account issuer", []string{a, b}, 1, 4)
	write(authnFile(srv, "/livez", a, downURL))
	check("an issuer down", []string{a, b}, 1, 5)
	check("an issuer down, again", []string{a, b}, 1, 6)
	write(authnFile(srv, "/livez", b))
	check("an issuer removed", []string{b}, 2, 6)

	// The metrics: the counts, and the file in force.
	var got []string
	for _, m := range authenticationConfigMetrics(c, &jwt.Metrics{}, "sha256:id") {
		for _, s := range m.Read() {
			if !strings.HasSuffix(m.Name, "timestamp_seconds") {
				got = append(got, fmt.Sprintf("%s%v %v", m.Name, s.Labels, s.Value))
			}
		}
	}
	want := []string{
		"apiserver_authentication_config_controller_automatic_reloads_total[apiserver_id_hash sha256:id status failure] 6",
		"apiserver_authentication_config_controller_automatic_reloads_total[apiserver_id_hash sha256:id status success] 2",
		"apiserver_authentication_config_controller_last_config_info[apiserver_id_hash sha256:id hash " + configHash([]byte(authnFile(srv, "/livez", b))) + "] 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
