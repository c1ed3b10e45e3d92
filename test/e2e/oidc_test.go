package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kplane-dev/kplane/internal/registry/jws"
)

// oidcIssuer is an OpenID Connect issuer for the tests: discovery and
// keys over HTTPS, and tokens signed with its RSA or EC key.
type oidcIssuer struct {
	srv      *httptest.Server
	url      string
	mu       sync.Mutex
	keys     map[string]crypto.Signer
	requests []string
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	is := &oidcIssuer{keys: map[string]crypto.Signer{}}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is.keys["rsa"], is.keys["ec"] = rsaKey, ecKey
	is.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		is.requests = append(is.requests, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/idp/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": is.url, "jwks_uri": is.srv.URL + "/idp/keys"})
		case "/idp/keys":
			var keys []map[string]string
			enc := jws.Encoding.EncodeToString
			for kid, k := range is.keys {
				switch pub := k.Public().(type) {
				case *rsa.PublicKey:
					keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "n": enc(pub.N.Bytes()), "e": "AQAB"})
				case *ecdsa.PublicKey:
					p, _ := pub.Bytes()
					keys = append(keys, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": enc(p[1:33]), "y": enc(p[33:])})
				}
			}
			json.NewEncoder(w).Encode(map[string]any{"keys": keys})
		default:
			http.NotFound(w, r)
		}
	}))
	is.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	is.srv.StartTLS()
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL + "/idp"
	return is
}

// caFile writes the issuer's certificate to a file.
func (is *oidcIssuer) caFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "idp-ca.crt")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// token signs claims for the audience kplane, valid for an hour unless
// they say otherwise.
func (is *oidcIssuer) token(t *testing.T, kid string, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": is.url, "aud": "kplane", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		c[k] = v
	}
	payload, _ := json.Marshal(c)
	alg := "RS256"
	if kid == "ec" {
		alg = "ES256"
	}
	tok, err := jws.Sign(is.keys[kid], jws.Header{Alg: alg, Kid: kid}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authnConfig is an AuthenticationConfiguration for the issuer with the
// given username prefix, letting anonymous requests only to /livez and
// /readyz.
func (is *oidcIssuer) authnConfig(prefix string) string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw})
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %s
    audiences: [kplane]
    certificateAuthority: |
      %s
  claimValidationRules:
  - expression: 'claims.?tenant.orValue("") == "acme"'
    message: only acme's users
  - expression: 'claims.?email_verified.orValue(false) == true'
    message: email not verified
  claimMappings:
    username:
      expression: '%q + claims.email'
    groups:
      claim: groups
      prefix: "oidc:"
    uid:
      claim: sub
    extra:
    - key: acme.io/tenant
      valueExpression: claims.tenant
  userValidationRules:
  - expression: '!user.username.endsWith("@evil.io")'
    message: no evil
anonymous:
  enabled: true
  conditions:
  - path: /livez
  - path: /readyz
`, is.url, strings.ReplaceAll(strings.TrimSpace(string(ca)), "\n", "\n      "), prefix)
}

// --authentication-config: a real kplane takes the ID tokens of an
// OpenID Connect issuer, found by discovery, for the user its claims
// map to through CEL, refuses what the rules refuse, lets anonymous
// requests only to the paths configured, and takes a changed file
// while it runs; kubectl, client-go and RBAC see the users as on
// kube-apiserver.
func TestAuthenticationConfig(t *testing.T) {
	is := newOIDCIssuer(t)
	path := filepath.Join(t.TempDir(), "authn.yaml")
	if err := os.WriteFile(path, []byte(is.authnConfig("acme:")), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--authorization-mode", "RBAC", "--authentication-config", path)
	alice := map[string]any{"sub": "u-1", "email": "alice@acme.io", "email_verified": true, "groups": []string{"devs"}, "tenant": "acme", "jti": "t-1"}
	whoami := func(token string) (string, string, error) {
		return s.kubectl("--kubeconfig", tokenKubeconfig(t, s, token, "default"), "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
	}
	want := `{"extra":{"acme.io/tenant":["acme"],"authentication.kubernetes.io/credential-id":["JTI=t-1"]},"groups":["oidc:devs","system:authenticated"],"uid":"u-1","username":"acme:alice@acme.io"}`
	for _, kid := range []string{"rsa", "ec"} {
		if out, errOut, err := whoami(is.token(t, kid, alice)); err != nil || out != want {
			t.Errorf("whoami (%s): %q %v %s\nwant %s", kid, out, err, errOut, want)
		}
	}
	// RBAC by the mapped names.
	kc := tokenKubeconfig(t, s, is.token(t, "rsa", alice), "default")
	_, errOut, err := s.kubectl("--kubeconfig", kc, "get", "configmaps")
	if want := `User "acme:alice@acme.io" cannot list resource "configmaps"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("before a binding: %v %s", err, errOut)
	}
	s.mustKubectl(t, "create", "rolebinding", "devs-view", "--clusterrole", "view", "--group", "oidc:devs", "-n", "default")
	if _, errOut, err := s.kubectl("--kubeconfig", kc, "get", "configmaps"); err != nil {
		t.Errorf("after binding the group: %v %s", err, errOut)
	}
	// Refused tokens: 401, and a TokenReview says why.
	admin := kubernetes.NewForConfigOrDie(s.config())
	review := func(token string) string {
		tr, err := admin.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return err.Error()
		}
		b, _ := json.Marshal(tr.Status)
		return string(b)
	}
	with := func(change map[string]any) map[string]any {
		c := map[string]any{}
		for k, v := range alice {
			c[k] = v
		}
		for k, v := range change {
			c[k] = v
		}
		return c
	}
	for _, c := range []struct {
		name   string
		claims map[string]any
		error  string
	}{
		{"another tenant", with(map[string]any{"tenant": "other"}), `oidc: error evaluating claim validation expression: validation expression 'claims.?tenant.orValue(\"\") == \"acme\"' failed: only acme's users`},
		{"a user the rules refuse", with(map[string]any{"email": "mallory@evil.io"}), `oidc: error evaluating user info validation rule: validation expression '!user.username.endsWith(\"@evil.io\")' failed: no evil`},
		{"another audience", with(map[string]any{"aud": "other"}), `oidc: verify token: oidc: expected audience \"kplane\" got [\"other\"]`},
		{"expired", with(map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}), `oidc: verify token: oidc: token is expired (Token Expiry: `},
	} {
		tok := is.token(t, "rsa", c.claims)
		if _, errOut, err := whoami(tok); err == nil || !strings.Contains(errOut, "Unauthorized") {
			t.Errorf("%s: whoami %v %s", c.name, err, errOut)
		}
		if got := review(tok); !strings.HasPrefix(got, `{"user":{},"error":"[invalid bearer token, `+c.error) {
			t.Errorf("%s: TokenReview %s\nwant error %s", c.name, got, c.error)
		}
	}

	// Anonymous requests: only the configured paths.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.config().CAData)
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	for p, code := range map[string]int{"/livez": 200, "/readyz": 200, "/healthz": 401, "/version": 401, "/api": 401} {
		resp, err := anon.Get("https://" + s.addr + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("anonymous %s: %d, want %d", p, resp.StatusCode, code)
		}
	}

	// The file changes: the new prefix applies once the issuer is
	// found again, and the reload is counted.
	if err := os.WriteFile(path, []byte(is.authnConfig("corp:")), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new prefix", func() (bool, string) {
		out, errOut, _ := whoami(is.token(t, "rsa", alice))
		return strings.Contains(out, `"username":"corp:alice@acme.io"`), out + errOut
	})
	// A file changing the anonymous section is refused; the last one
	// stays in force.
	if err := os.WriteFile(path, []byte(strings.Replace(is.authnConfig("other:"), "  - path: /readyz\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the refused reload counted", func() (bool, string) {
		out := s.mustKubectl(t, "get", "--raw", "/metrics")
		return strings.Contains(out, `apiserver_authentication_config_controller_automatic_reloads_total{apiserver_id_hash=`) &&
			strings.Contains(out, `status="failure"} 1`) && strings.Contains(out, `status="success"} 1`), grepLines(out, "apiserver_authentication_")
	})
	if out, _, _ := whoami(is.token(t, "rsa", alice)); !strings.Contains(out, `"username":"corp:alice@acme.io"`) {
		t.Errorf("after a refused reload: %s", out)
	}
	metrics := s.mustKubectl(t, "get", "--raw", "/metrics")
	for _, m := range []string{
		`apiserver_authentication_jwt_authenticator_latency_seconds_count{jwt_issuer_hash="sha256:`,
		`apiserver_authentication_jwt_authenticator_jwks_fetch_last_key_set_info{apiserver_id_hash="sha256:`,
		`apiserver_authentication_config_controller_last_config_info{apiserver_id_hash="sha256:`,
	} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s:\n%s", m, grepLines(metrics, "apiserver_authentication_"))
		}
	}
}

// The legacy --oidc-* flags make one authenticator: the username claim
// prefixed by the issuer (or not, for email), the groups claim, the
// required claims, and RS256 alone unless --oidc-signing-algs says
// otherwise.
func TestOIDCFlags(t *testing.T) {
	is := newOIDCIssuer(t)
	s := startServer(t, "--oidc-issuer-url", is.url, "--oidc-client-id", "kplane", "--oidc-ca-file", is.caFile(t),
		"--oidc-groups-claim", "groups", "--oidc-required-claim", "tenant=acme")
	claims := map[string]any{"sub": "u-1", "groups": "devs", "tenant": "acme"}
	out, errOut, err := s.kubectl("--kubeconfig", tokenKubeconfig(t, s, is.token(t, "rsa", claims), "default"), "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
	if want := `{"groups":["devs","system:authenticated"],"username":"` + is.url + `#u-1"}`; err != nil || out != want {
		t.Errorf("whoami: %q %v %s\nwant %s", out, err, errOut, want)
	}
	admin := kubernetes.NewForConfigOrDie(s.config())
	for _, c := range []struct {
		name, kid string
		claims    map[string]any
		error     string
	}{
		{"ES256", "ec", claims, `oidc: verify token: oidc: id token signed with unsupported algorithm, expected [\"RS256\"] got \"ES256\"`},
		{"the required claim", "rsa", map[string]any{"sub": "u-1", "tenant": "other"}, `oidc: required claim tenant value does not match. Got = other, want = acme`},
	} {
		tr, err := admin.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: is.token(t, c.kid, c.claims)}}, metav1.CreateOptions{})
		got, _ := json.Marshal(tr.Status)
		if err != nil || !strings.HasPrefix(string(got), `{"user":{},"error":"[invalid bearer token, `+c.error) {
			t.Errorf("%s: %s %v\nwant error %s", c.name, got, err, c.error)
		}
	}
}

// --token-auth-file: static tokens name their users, groups included,
// for kubectl and RBAC; a token not in the file is 401.
func TestTokenAuthFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("ci-token-1,ci-bot,1001,\"deployers,ci\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--authorization-mode", "RBAC", "--token-auth-file", path)
	kc := tokenKubeconfig(t, s, "ci-token-1", "default")
	out, errOut, err := s.kubectl("--kubeconfig", kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
	if want := `{"groups":["deployers","ci","system:authenticated"],"uid":"1001","username":"ci-bot"}`; err != nil || out != want {
		t.Errorf("whoami: %q %v %s\nwant %s", out, err, errOut, want)
	}
	s.mustKubectl(t, "create", "rolebinding", "deployers-edit", "--clusterrole", "edit", "--group", "deployers", "-n", "default")
	if _, errOut, err := s.kubectl("--kubeconfig", kc, "create", "configmap", "from-ci"); err != nil {
		t.Errorf("a write the group's binding allows: %v %s", err, errOut)
	}
	if _, errOut, err := s.kubectl("--kubeconfig", tokenKubeconfig(t, s, "ci-token-2", "default"), "get", "configmaps"); err == nil || !strings.Contains(errOut, "You must be logged in to the server") {
		t.Errorf("a token not in the file: %v %s", err, errOut)
	}
}
