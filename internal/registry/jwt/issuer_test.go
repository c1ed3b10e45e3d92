package jwt_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/jws"
	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// issuer is an OpenID Connect issuer for tests: an HTTPS server with a
// discovery document and a key set, and the keys to sign its tokens.
type issuer struct {
	t   testing.TB
	srv *httptest.Server
	url string

	mu       sync.Mutex
	keys     map[string]crypto.Signer // by kid, published
	unlisted map[string]crypto.Signer // signs, not published
	// docIssuer, if set, is the issuer the discovery document names.
	docIssuer string
	// cacheControl is the key set's Cache-Control header.
	cacheControl string
	// down answers every request 503.
	down bool
	// claims is the JWT /claims serves (distributed claims), and
	// claimsAuth the Authorization header it was last asked with.
	claims, claimsAuth string

	discoveries, fetches atomic.Int32
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{t: t, keys: map[string]crypto.Signer{}, unlisted: map[string]crypto.Signer{}}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is.keys["rsa"], is.keys["ec"] = rsaKey, ecKey
	is.srv = httptest.NewTLSServer(http.HandlerFunc(is.serve))
	t.Cleanup(is.srv.Close)
	is.url = is.srv.URL + "/realm"
	return is
}

func (is *issuer) serve(w http.ResponseWriter, r *http.Request) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/realm/.well-known/openid-configuration", "/elsewhere/discovery":
		is.discoveries.Add(1)
		iss := is.url
		if is.docIssuer != "" {
			iss = is.docIssuer
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": is.srv.URL + "/keys"})
	case "/claims":
		is.claimsAuth = r.Header.Get("Authorization")
		if is.claims == "" {
			http.Error(w, "no claims", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/jwt")
		w.Write([]byte(is.claims))
	case "/keys":
		is.fetches.Add(1)
		var keys []map[string]string
		for kid, k := range is.keys {
			keys = append(keys, jwk(kid, k.Public()))
		}
		if is.cacheControl != "" {
			w.Header().Set("Cache-Control", is.cacheControl)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	default:
		http.NotFound(w, r)
	}
}

func jwk(kid string, pub crypto.PublicKey) map[string]string {
	enc := jws.Encoding.EncodeToString
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "n": enc(pub.N.Bytes()), "e": "AQAB"}
	case *ecdsa.PublicKey:
		point, _ := pub.Bytes()
		return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": enc(point[1:33]), "y": enc(point[33:])}
	}
	panic("key")
}

// ca is the issuer's certificate, PEM, for certificateAuthority.
func (is *issuer) ca() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw}))
}

// token signs claims (JSON; "iss" and "aud" and "exp" added when
// missing) with the key kid, alg chosen by the key.
func (is *issuer) token(kid, claims string) string {
	is.t.Helper()
	c := map[string]any{}
	if err := json.Unmarshal([]byte(claims), &c); err != nil {
		is.t.Fatal(err)
	}
	if _, ok := c["iss"]; !ok {
		c["iss"] = is.url
	}
	if _, ok := c["aud"]; !ok {
		c["aud"] = "kplane"
	}
	if _, ok := c["exp"]; !ok {
		c["exp"] = time.Now().Add(time.Hour).Unix()
	}
	for k, v := range c {
		switch v {
		case nil:
			delete(c, k) // null: leave it out
		case "NULL":
			c[k] = nil // "NULL": null
		}
	}
	payload, _ := json.Marshal(c)
	is.mu.Lock()
	key := is.keys[kid]
	if key == nil {
		key = is.unlisted[kid]
	}
	is.mu.Unlock()
	alg := "RS256"
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = "ES256"
	}
	tok, err := jws.Sign(key, jws.Header{Alg: alg, Kid: kid}, payload)
	if err != nil {
		is.t.Fatal(err)
	}
	return tok
}

// config is an AuthenticationConfiguration of one authenticator for the
// issuer, with rest (YAML at the authenticator's level) after its issuer.
func (is *issuer) config(rest string) string {
	ca := strings.ReplaceAll(strings.TrimSpace(is.ca()), "\n", "\n      ")
	return fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %s
    audiences: [kplane]
    certificateAuthority: |
      %s
%s`, is.url, ca, rest)
}

// authenticators makes the configuration's authenticators and waits for
// their discovery.
func authenticators(t testing.TB, config string, opts jwt.Options) *jwt.Authenticators {
	t.Helper()
	c, err := jwt.ParseConfiguration([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	if errs := c.Validate(nil); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if opts.RetryInterval == 0 {
		opts.RetryInterval = 20 * time.Millisecond
	}
	as, err := jwt.New(context.Background(), c, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Stop)
	deadline := time.Now().Add(10 * time.Second)
	for as.Healthy() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not healthy: %v", as.Healthy())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return as
}
