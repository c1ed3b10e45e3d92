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
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// tokenServer is an in-process server that refuses anonymous requests,
// with the ServiceAccount default/robot, and a token for it.
func tokenServer(t testing.TB) (h http.Handler, admin func(*http.Request), token string) {
	return tokenServerAuthorizing(t, false)
}

// tokenServerAuthorizing is tokenServer, authorizing by RBAC if rbac is
// set: an in-process server without anonymous requests, a way to send a
// request as its admin, and a token of the ServiceAccount default/robot.
func tokenServerAuthorizing(t testing.TB, rbac bool) (h http.Handler, admin func(*http.Request), token string) {
	h = newInProcessAuthorizing(t, rbac, func(c *apiserver.Config) { c.Anonymous = false })
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
