package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// tokenServer is an in-process server that refuses anonymous requests,
// with the ServiceAccount default/robot, and a token for it.
func tokenServer(t testing.TB) (h http.Handler, admin func(*http.Request), token string) {
	return tokenServerAuthorizing(t, false)
}

// tokenServerAuthorizing is tokenServer, authorizing by RBAC if rbac is
// set: an in-process server without anonymous requests, a way to send a
// request as its admin, and a token of the ServiceAccount default/robot.
func tokenServerAuthorizing(t testing.TB, rbac bool, opts ...func(*apiserver.Config)) (h http.Handler, admin func(*http.Request), token string) {
	h = newInProcessAuthorizing(t, rbac, append([]func(*apiserver.Config){func(c *apiserver.Config) { c.Anonymous = false }}, opts...)...)
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "kplane-admin", Organization: []string{"system:masters"}}, Raw: []byte("a certificate")}
	admin = func(r *http.Request) { r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}} }
	do := adminCreate(t, h, admin)
	do("/api/v1/namespaces/default/serviceaccounts", `{"metadata":{"name":"robot"}}`)
	var tr struct{ Status struct{ Token string } }
	if err := json.Unmarshal(do("/api/v1/namespaces/default/serviceaccounts/robot/token", `{}`).Body.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	return h, admin, tr.Status.Token
}

// adminCreate returns a function that POSTs body (JSON) to path as the
// admin, failing the test unless it creates.
func adminCreate(t testing.TB, h http.Handler, admin func(*http.Request)) func(path, body string) *httptest.ResponseRecorder {
	return func(path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		admin(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		return w
	}
}

// A request without a client certificate is authenticated by its bearer
// token, as kube-apiserver's are: a valid one is the service account's
// user, and one that is not valid fails every request, even those anyone
// may send. A client certificate wins over a token.
func TestBearerTokens(t *testing.T) {
	h, admin, token := tokenServer(t)
	send := func(method, path, auth string, withCert bool) *httptest.ResponseRecorder {
		var body *strings.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
		} else {
			body = strings.NewReader("")
		}
		r := httptest.NewRequest(method, path, body)
		r.Header.Set("Content-Type", "application/json")
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if withCert {
			admin(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	whoami := "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	for _, c := range []struct {
		name, method, path, auth string
		cert                     bool
		code                     int
		user                     string
	}{
		{"token", http.MethodGet, "/api/v1/namespaces/default/configmaps", "Bearer " + token, false, 200, ""},
		{"token, whoami", http.MethodPost, whoami, "Bearer " + token, false, 201, "system:serviceaccount:default:robot"},
		{"the scheme in any case", http.MethodPost, whoami, "bEaReR " + token, false, 201, "system:serviceaccount:default:robot"},
		{"more after the token", http.MethodPost, whoami, "Bearer " + token + " more", false, 201, "system:serviceaccount:default:robot"},
		{"no credential", http.MethodGet, "/api/v1/namespaces/default/configmaps", "", false, 401, ""},
		{"no credential, a public path", http.MethodGet, "/version", "", false, 200, ""},
		{"a bad token", http.MethodGet, "/api/v1/namespaces/default/configmaps", "Bearer " + token + "x", false, 401, ""},
		{"a bad token, a public path", http.MethodGet, "/version", "Bearer garbage", false, 401, ""},
		{"a bad token, a health check", http.MethodGet, "/livez", "Bearer garbage", false, 401, ""},
		{"another scheme", http.MethodGet, "/version", "Basic YTpi", false, 200, ""},
		{"no token after the scheme", http.MethodGet, "/version", "Bearer", false, 200, ""},
		{"a certificate and a bad token", http.MethodPost, whoami, "Bearer garbage", true, 201, "kplane-admin"},
		{"a certificate and a token", http.MethodPost, whoami, "Bearer " + token, true, 201, "kplane-admin"},
	} {
		w := send(c.method, c.path, c.auth, c.cert)
		if w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.code)
			continue
		}
		if c.user != "" {
			var review struct {
				Status struct{ UserInfo struct{ Username string } }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Status.UserInfo.Username != c.user {
				t.Errorf("%s: %s, want user %s", c.name, w.Body, c.user)
			}
		}
	}
	// Deleting the service account revokes its tokens at once.
	r := httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/default/serviceaccounts/robot", nil)
	admin(r)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if w := send(http.MethodGet, "/api/v1/namespaces/default/configmaps", "Bearer "+token, false); w.Code != http.StatusUnauthorized {
		t.Errorf("after the service account's deletion: %d %s", w.Code, w.Body)
	}
}

// The issuer's OpenID discovery document and keys are served as
// kube-apiserver serves them, and the keys check the tokens kplane
// signs: a relying party can verify them without asking kplane.
func TestOpenIDDiscovery(t *testing.T) {
	h, admin, token := tokenServer(t)
	get := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Host = "kplane.example:6443"
		admin(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := get(http.MethodGet, "/.well-known/openid-configuration")
	want := `{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://kplane.example:6443/openid/v1/jwks",` +
		`"response_types_supported":["id_token"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}`
	if w.Code != http.StatusOK || w.Body.String() != want || w.Header().Get("Content-Type") != "application/json" ||
		w.Header().Get("Cache-Control") != "public, max-age=3600" {
		t.Errorf("configuration: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = get(http.MethodGet, "/openid/v1/jwks")
	var set struct {
		Keys []struct{ Use, Kty, Kid, Crv, Alg, X, Y string }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &set); err != nil || w.Header().Get("Content-Type") != "application/jwk-set+json" || len(set.Keys) != 1 {
		t.Fatalf("keys: %d %v %s", w.Code, w.Header(), w.Body)
	}
	k := set.Keys[0]
	if k.Use != "sig" || k.Kty != "EC" || k.Crv != "P-256" || k.Alg != "ES256" {
		t.Errorf("key %+v", k)
	}
	// Check the token with the published key, by RFC 7515 and 7518
	// alone.
	coord := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("coordinate %q: %v", s, err)
		}
		return b
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, coord(k.X)...), coord(k.Y)...))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	var hdr struct{ Alg, Kid string }
	if err := json.Unmarshal(header, &hdr); err != nil || hdr.Alg != "ES256" || hdr.Kid != k.Kid {
		t.Errorf("token header %s, key id %s", header, k.Kid)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if len(sig) != 64 || !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Error("the published key does not verify the token")
	}
	// The key id is the SHA-256 of the key's DER, as upstream derives it.
	der, _ := x509.MarshalPKIXPublicKey(pub)
	if id := sha256.Sum256(der); base64.RawURLEncoding.EncodeToString(id[:]) != k.Kid {
		t.Errorf("key id %s", k.Kid)
	}
	if w := get(http.MethodPost, "/openid/v1/jwks"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST keys: %d", w.Code)
	}
	// Both documents with a trailing slash too, in their one media type,
	// as v1.37.2 answers them (the same requests sent to both servers).
	for _, c := range []struct {
		method, path, accept string
		code                 int
		message              string
	}{
		{"GET", "/openid/v1/jwks/", "", 200, ""},
		{"GET", "/.well-known/openid-configuration/", "application/json", 200, ""},
		{"GET", "/openid/v1/jwks", "application/json, */*", 200, ""},
		{"GET", "/openid/v1/jwks", "application/jwk-set+json;q=0.5", 200, ""},
		{"GET", "/openid/v1/jwks", "application/json", 406, "406: Not Acceptable\n\nAvailable representations: application/jwk-set+json"},
		{"GET", "/openid/v1/jwks/", "application/*", 406, "406: Not Acceptable\n\nAvailable representations: application/jwk-set+json"},
		{"GET", "/.well-known/openid-configuration", "text/plain", 406, "406: Not Acceptable\n\nAvailable representations: application/json"},
		{"GET", "/openid/v1/jwks/foo", "", 404, "the server could not find the requested resource"},
		{"POST", "/.well-known/openid-configuration/foo", "", 404, "the server could not find the requested resource"},
		{"POST", "/openid/v1/jwks/", "", 405, ""},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		admin(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st struct{ Message, Reason string }
		json.Unmarshal(w.Body.Bytes(), &st)
		if w.Code != c.code || (c.message != "" && st.Message != c.message) {
			t.Errorf("%s %s [%s]: %d %q, want %d %q", c.method, c.path, c.accept, w.Code, st.Message, c.code, c.message)
		}
	}
	var index struct{ Paths []string }
	if err := json.Unmarshal(get(http.MethodGet, "/").Body.Bytes(), &index); err != nil ||
		!strings.Contains(strings.Join(index.Paths, " "), "/.well-known/openid-configuration /api") ||
		!strings.Contains(strings.Join(index.Paths, " "), "/openid/v1/jwks") {
		t.Errorf("index: %v", index.Paths)
	}
}

// BenchmarkGetWithToken is a GET of one ConfigMap, authenticated by a
// client certificate (checked by the TLS handshake, before the handler)
// or by a service account token: the token's cost is its signature's
// check and the read of its ServiceAccount.
func BenchmarkGetWithToken(b *testing.B) {
	h, admin, token := tokenServer(b)
	r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", strings.NewReader(`{"metadata":{"name":"c"},"data":{"k":"v"}}`))
	r.Header.Set("Content-Type", "application/json")
	admin(r)
	h.ServeHTTP(httptest.NewRecorder(), r)
	for _, c := range []struct {
		name string
		auth func(*http.Request)
	}{
		{"certificate", admin},
		{"token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps/c", nil)
				c.auth(r)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// The service account flags (--service-account-issuer, repeated,
// --api-audiences, --service-account-jwks-uri and
// --service-account-max-token-expiration) act as kube-apiserver v1.37.2's
// did with the same flags, on the same requests: the first issuer signs
// and is published, the others' tokens are still accepted; tokens asked
// for no audience get the API's audiences, and only those authenticate
// requests; a longer lifetime is shortened, with upstream's warning.
func TestServiceAccountIssuerFlags(t *testing.T) {
	const (
		issuer   = "https://issuer.example.com/a"
		previous = "https://kubernetes.default.svc.cluster.local"
	)
	var tokens *core.Tokens
	h, admin, _ := tokenServerAuthorizing(t, false, func(c *apiserver.Config) {
		tokens = c.Tokens.(*core.Tokens)
		tokens.Issuers = []string{issuer, previous}
		tokens.APIAudiences = []string{"api", "https://other"}
		tokens.MaxExpiration = 2 * time.Hour
		c.ServiceAccountJWKSURI = "https://keys.example.com/jwks"
	})
	send := func(method, path, body, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		} else {
			admin(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := send(http.MethodGet, "/.well-known/openid-configuration", "", "")
	if want := `{"issuer":"https://issuer.example.com/a","jwks_uri":"https://keys.example.com/jwks","response_types_supported":["id_token"],` +
		`"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["ES256"]}`; w.Body.String() != want {
		t.Errorf("discovery: %d %s\nwant %s", w.Code, w.Body, want)
	}
	type answer struct {
		Spec   map[string]any
		Status struct{ Token string }
	}
	request := func(body, warning, spec string) string {
		t.Helper()
		w := send(http.MethodPost, "/api/v1/namespaces/default/serviceaccounts/robot/token", body, "")
		var a answer
		if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != http.StatusCreated {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
		if got, _ := json.Marshal(a.Spec); string(got) != spec || w.Header().Get("Warning") != warning {
			t.Errorf("%s: spec %s, warning %q\nwant %s, %q", body, got, w.Header().Get("Warning"), spec, warning)
		}
		return a.Status.Token
	}
	claims := func(token string) (c struct {
		Aud           []string
		Iss           string
		Exp, Iat, Nbf int64
	}) {
		t.Helper()
		parts := strings.Split(token, ".")
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil || json.Unmarshal(payload, &c) != nil {
			t.Fatalf("token %s", token)
		}
		return c
	}
	apiToken := request(`{"spec":{}}`, "", `{"audiences":["api","https://other"],"boundObjectRef":null,"expirationSeconds":3600}`)
	if c := claims(apiToken); c.Iss != issuer || strings.Join(c.Aud, " ") != "api https://other" || c.Exp-c.Iat != 3600 {
		t.Errorf("claims %+v", c)
	}
	long := request(`{"spec":{"expirationSeconds":86400}}`, `299 - "requested expiration of 86400 seconds shortened to 7200 seconds"`,
		`{"audiences":["api","https://other"],"boundObjectRef":null,"expirationSeconds":7200}`)
	if c := claims(long); c.Exp-c.Iat != 7200 {
		t.Errorf("a day asked: %d seconds", c.Exp-c.Iat)
	}
	request(`{"spec":{"expirationSeconds":7200}}`, "", `{"audiences":["api","https://other"],"boundObjectRef":null,"expirationSeconds":7200}`)
	notAPI := request(`{"spec":{"audiences":["https://kubernetes.default.svc.cluster.local"]}}`, "",
		`{"audiences":["https://kubernetes.default.svc.cluster.local"],"boundObjectRef":null,"expirationSeconds":3600}`)

	// A token issued under the previous issuer alone, for the API: still
	// accepted. One of an issuer not named: refused.
	tokens.Issuers = []string{previous}
	before := request(`{"spec":{"audiences":["api"]}}`, "", `{"audiences":["api"],"boundObjectRef":null,"expirationSeconds":3600}`)
	tokens.Issuers = []string{"https://elsewhere.example.com"}
	elsewhere := request(`{"spec":{"audiences":["api"]}}`, "", `{"audiences":["api"],"boundObjectRef":null,"expirationSeconds":3600}`)
	tokens.Issuers = []string{issuer, previous}
	for _, c := range []struct {
		name, token string
		code        int
	}{
		{"the API's audiences", apiToken, 200},
		{"the previous issuer's", before, 200},
		{"not for the API", notAPI, 401},
		{"another issuer's", elsewhere, 401},
	} {
		if w := send(http.MethodGet, "/api/v1/namespaces/default/configmaps", "", c.token); w.Code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.code)
		}
	}
	review := func(spec string) string {
		t.Helper()
		w := send(http.MethodPost, "/apis/authentication.k8s.io/v1/tokenreviews", `{"spec":`+spec+`}`, "")
		var r struct {
			Status struct {
				Authenticated bool
				Audiences     []string
				Error         string
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if r.Status.Error != "" {
			return r.Status.Error
		}
		return fmt.Sprint(r.Status.Authenticated, r.Status.Audiences)
	}
	for _, c := range []struct{ spec, want string }{
		{`{"token":"` + apiToken + `"}`, "true [api https://other]"},
		{`{"token":"` + notAPI + `"}`, `[invalid bearer token, token audiences ["https://kubernetes.default.svc.cluster.local"] is invalid for the target audiences ["api" "https://other"]]`},
		{`{"token":"` + notAPI + `","audiences":["https://kubernetes.default.svc.cluster.local"]}`, "true [https://kubernetes.default.svc.cluster.local]"},
		{`{"token":"` + apiToken + `","audiences":["https://other","api","x"]}`, "true [https://other api]"},
		{`{"token":"` + before + `"}`, "true [api]"},
	} {
		if got := review(c.spec); got != c.want {
			t.Errorf("review %s:\n got  %s\n want %s", c.spec, got, c.want)
		}
	}
}

// An issuer that is not an https URL (or has a query or fragment) is not
// published: the discovery documents are not served, as upstream's, and
// its tokens still work.
func TestServiceAccountIssuerNotDiscoverable(t *testing.T) {
	for _, issuer := range []string{"kplane-issuer", "http://issuer.example.com", "https://issuer.example.com?x=1", "https://issuer.example.com#x"} {
		h, admin, token := tokenServerAuthorizing(t, false, func(c *apiserver.Config) {
			c.Tokens.(*core.Tokens).Issuers = []string{issuer}
		})
		for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			admin(r)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusNotFound || w.Body.String() != "404 page not found\n" {
				t.Errorf("%s: %s: %d %s", issuer, path, w.Code, w.Body)
			}
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		admin(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if strings.Contains(w.Body.String(), "openid") {
			t.Errorf("%s: index %s", issuer, w.Body)
		}
		r = httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("%s: its token: %d %s", issuer, w.Code, w.Body)
		}
	}
}
