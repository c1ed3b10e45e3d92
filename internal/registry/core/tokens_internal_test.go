package core

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/jws"
	"github.com/kplane-dev/kplane/internal/storage"
)

// tokenFixture is a registry serving the built-in kinds with tokens, and
// a namespace "ns" with the ServiceAccount "robot" and the Secret "bound".
type tokenFixture struct {
	t      *testing.T
	ctx    context.Context
	reg    *registry.Registry
	tokens *Tokens
	clock  time.Time // the tokens' now
}

func newTokenFixture(t *testing.T) *tokenFixture {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	f := &tokenFixture{t: t, reg: reg, tokens: &Tokens{Registry: reg}, clock: time.Now()}
	f.tokens.now = func() time.Time { return f.clock }
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.tokens.SetKey(key); err != nil {
		t.Fatal(err)
	}
	kinds := f.tokens.Install(Kinds())
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.ctx = ctx
	if err := Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	go reg.Run(ctx)
	f.create("namespaces", "", `{"metadata":{"name":"ns"}}`)
	f.create("serviceaccounts", "ns", `{"metadata":{"name":"robot"}}`)
	f.create("secrets", "ns", `{"metadata":{"name":"bound"}}`)
	return f
}

func (f *tokenFixture) res(resource string) *registry.Resource {
	r, ok := f.reg.Get(schema.GroupResource{Resource: resource})
	if !ok {
		f.t.Fatalf("no %s", resource)
	}
	return r
}

func (f *tokenFixture) create(resource, ns, body string) *unstructured.Unstructured {
	f.t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"X",` + body[1:])); err != nil {
		f.t.Fatal(err)
	}
	obj.SetKind(map[string]string{"namespaces": "Namespace", "serviceaccounts": "ServiceAccount", "secrets": "Secret"}[resource])
	out, _, err := f.res(resource).CreateEncoded(f.ctx, "v1", ns, obj, registry.WriteOptions{FieldManager: "test"})
	if err != nil {
		f.t.Fatalf("create %s: %v", resource, err)
	}
	return out
}

// token requests a token for ns/robot (spec is the TokenRequest's).
func (f *tokenFixture) token(spec string) string {
	f.t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":` + spec + `}`)); err != nil {
		f.t.Fatal(err)
	}
	defaultTokenRequest(obj)
	out, err := f.res("serviceaccounts").CreateSubreview(f.ctx, "token", "ns", "robot", obj, registry.WriteOptions{FieldManager: "test"})
	if err != nil {
		f.t.Fatalf("token: %v", err)
	}
	tok, _, _ := unstructured.NestedString(out.Object, "status", "token")
	return tok
}

// check authenticates tok for the API server's audiences and returns the
// error's text ("" when valid).
func (f *tokenFixture) check(tok string) string {
	f.t.Helper()
	u, auds, err := f.tokens.AuthenticateToken(f.ctx, tok, nil)
	if err != nil {
		return err.Error()
	}
	if u.Name != "system:serviceaccount:ns:robot" || len(auds) != 1 || auds[0] != ServiceAccountIssuer {
		f.t.Fatalf("user %+v, audiences %v", u, auds)
	}
	return ""
}

// A token is valid from a minute before it is issued (clock skew) to a
// minute after it expires, as upstream checks one.
func TestTokenLifetime(t *testing.T) {
	f := newTokenFixture(t)
	issued := f.clock.Truncate(time.Second)
	tok := f.token(`{"expirationSeconds":600}`)
	for _, c := range []struct {
		at   time.Duration // from the issue
		want string
	}{
		{-61 * time.Second, "service account token is not valid yet"},
		{-59 * time.Second, ""},
		{0, ""},
		{659 * time.Second, ""},
		{661 * time.Second, "service account token has expired"},
	} {
		f.clock = issued.Add(c.at)
		if got := f.check(tok); got != c.want {
			t.Errorf("%v after the issue: %q, want %q", c.at, got, c.want)
		}
	}
}

// A token outlives the deletion of its ServiceAccount, or of the Secret
// it is bound to, while a finalizer holds it, by a minute; then it is
// refused, as upstream refuses it.
func TestTokenOutlivesADeletionByAMinute(t *testing.T) {
	f := newTokenFixture(t)
	f.create("serviceaccounts", "ns", `{"metadata":{"name":"held","finalizers":["x.io/hold"]}}`)
	f.create("secrets", "ns", `{"metadata":{"name":"held","finalizers":["x.io/hold"]}}`)
	issue := func(account, spec string) string {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{}}}
		if spec != "" {
			if err := json.Unmarshal([]byte(spec), &obj.Object); err != nil {
				t.Fatal(err)
			}
		}
		defaultTokenRequest(obj)
		out, err := f.res("serviceaccounts").CreateSubreview(f.ctx, "token", "ns", account, obj, registry.WriteOptions{FieldManager: "test"})
		if err != nil {
			t.Fatal(err)
		}
		tok, _, _ := unstructured.NestedString(out.Object, "status", "token")
		return tok
	}
	heldAccount := issue("held", "")
	boundToHeld := issue("robot", `{"spec":{"boundObjectRef":{"kind":"Secret","apiVersion":"v1","name":"held"}}}`)
	for _, r := range []string{"serviceaccounts", "secrets"} {
		if _, _, err := f.res(r).Delete(f.ctx, "v1", "ns", "held", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		after       time.Duration
		account     string
		boundToHeld string
	}{
		{59 * time.Second, "", ""},
		{61 * time.Second, "service account ns/held has been deleted", "service account token has been invalidated"},
	} {
		f.clock = time.Now().Add(c.after)
		if _, _, err := f.tokens.AuthenticateToken(f.ctx, heldAccount, nil); errText(err) != c.account {
			t.Errorf("%v after its account's deletion: %v, want %q", c.after, err, c.account)
		}
		if _, _, err := f.tokens.AuthenticateToken(f.ctx, boundToHeld, nil); errText(err) != c.boundToHeld {
			t.Errorf("%v after its secret's deletion: %v, want %q", c.after, err, c.boundToHeld)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Only tokens kplane signed, unchanged, with ES256 and its key pass; a
// token of another shape or issuer is not a service account token of
// kplane's at all (TokenReview's plain "invalid bearer token").
func TestTokenSignatures(t *testing.T) {
	f := newTokenFixture(t)
	tok := f.token(`{}`)
	if got := f.check(tok); got != "" {
		t.Fatalf("the token as issued: %s", got)
	}
	parts := strings.Split(tok, ".")
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	key := f.tokens.key.Load().signing
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := newJWSKey(other)
	impostor := &jwsKey{priv: other, pub: other.Public(), kid: key.kid, alg: "ES256"} // another key claiming kplane's id
	withClaims := func(k *jwsKey, change func(map[string]any)) string {
		var c map[string]any // a deep copy
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		change(c)
		s, err := k.sign(c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	header := func(h string) string { return enc([]byte(h)) + "." + parts[1] + "." + parts[2] }
	bad := "go-jose/go-jose: error in cryptographic primitive"
	notOurs := ErrNotServiceAccountToken.Error()
	for name, c := range map[string]struct{ token, want string }{
		"another subject, signed by another key": {withClaims(impostor, func(c map[string]any) { c["sub"] = "system:serviceaccount:ns:admin" }), bad},
		"another kplane's token":                 {withClaims(otherKey, func(map[string]any) {}), "invalid signature, no keys found"},
		"the payload changed":                    {parts[0] + "." + enc([]byte(strings.Replace(string(payload), "robot", "robor", 1))) + "." + parts[2], bad},
		"alg none":                               {header(`{"alg":"none","kid":"` + key.kid + `"}`), bad},
		"alg HS256":                              {header(`{"alg":"HS256","kid":"` + key.kid + `"}`), bad},
		"an extension asked for":                 {header(`{"alg":"ES256","crit":["exp"],"kid":"` + key.kid + `"}`), bad},
		"no signature":                           {parts[0] + "." + parts[1] + ".", bad},
		"the header not JSON":                    {header(`alg`), notOurs},
		"another issuer":                         {withClaims(key, func(c map[string]any) { c["iss"] = "https://elsewhere" }), notOurs},
		"two parts":                              {parts[0] + "." + parts[1], notOurs},
		"padding":                                {tok + "=", notOurs},
		"a JSON token":                           {`{"a":1}.b.c`, notOurs},
		"bound to a Pod": {withClaims(key, func(c map[string]any) {
			c["kubernetes.io"].(map[string]any)["pod"] = map[string]any{"name": "p", "uid": "u"}
		}), "service account token has been invalidated"},
		"no kubernetes.io claims": {withClaims(key, func(c map[string]any) { delete(c, "kubernetes.io") }), "service account token claims could not be validated due to unexpected private claim"},
	} {
		if got := f.check(c.token); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	// A token without audiences (as legacy tokens are) is for the API
	// server's.
	if got := f.check(withClaims(key, func(c map[string]any) { delete(c, "aud") })); got != "" {
		t.Errorf("no audiences: %s", got)
	}
	// Whitespace anywhere is dropped, as upstream's JOSE library drops it.
	if got := f.check(" " + parts[0] + ".\n" + parts[1] + "." + parts[2] + "\t"); got != "" {
		t.Errorf("with whitespace: %s", got)
	}
	// Without a key nothing is accepted or issued.
	none := &Tokens{Registry: f.reg}
	if _, _, err := none.AuthenticateToken(f.ctx, tok, nil); err == nil || errors.Is(err, ErrNotServiceAccountToken) {
		t.Errorf("no key: %v", err)
	}
}

// A Secret of type kubernetes.io/service-account-token is filled and kept
// as kube-controller-manager's tokens controller keeps it: a never-
// expiring token valid while the Secret holds it, for the account it
// names; a Secret naming no account is deleted, and so are an account's
// Secrets when the account is.
func TestTokenSecrets(t *testing.T) {
	f := newTokenFixture(t)
	ca := []byte("-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n")
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(f.ctx)
	go func() { done <- (&TokenSecrets{Registry: f.reg, Tokens: f.tokens, RootCA: ca}).Run(ctx) }()
	defer func() { cancel(); <-done }()

	secrets := f.res("secrets")
	f.create("secrets", "ns", `{"metadata":{"name":"robot-token","annotations":{"kubernetes.io/service-account.name":"robot"}},"type":"kubernetes.io/service-account-token"}`)
	f.create("secrets", "ns", `{"metadata":{"name":"orphan-token","annotations":{"kubernetes.io/service-account.name":"nobody"}},"type":"kubernetes.io/service-account-token"}`)
	var held *unstructured.Unstructured
	waitFor(t, "the token secret filled", func() bool {
		s, err := secrets.Get(f.ctx, "v1", "ns", "robot-token", metav1.GetOptions{})
		held = s
		return err == nil && s.Object["data"] != nil && len(s.Object["data"].(map[string]any)) == 3
	})
	data, _, _ := unstructured.NestedStringMap(held.Object, "data")
	decoded := func(k string) string {
		b, err := base64.StdEncoding.DecodeString(data[k])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sa, err := f.res("serviceaccounts").Get(f.ctx, "v1", "ns", "robot", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if decoded("ca.crt") != string(ca) || decoded("namespace") != "ns" || held.GetAnnotations()["kubernetes.io/service-account.uid"] != string(sa.GetUID()) {
		t.Errorf("token secret %v", held.Object)
	}
	token := decoded("token")
	f.clock = f.clock.Add(10 * 365 * 24 * time.Hour) // it never expires
	if got := f.check(token); got != "" {
		t.Fatalf("the secret's token: %s", got)
	}
	if _, _, err := f.tokens.AuthenticateToken(f.ctx, token, []string{"other"}); err == nil || !strings.Contains(err.Error(), "is invalid for the target audiences") {
		t.Errorf("for another audience: %v", err)
	}
	waitFor(t, "the orphan secret deleted", func() bool {
		_, err := secrets.Get(f.ctx, "v1", "ns", "orphan-token", metav1.GetOptions{})
		return err != nil
	})

	// The Secret's token replaced: the old one is refused.
	changed := held.DeepCopy()
	unstructured.SetNestedField(changed.Object, base64.StdEncoding.EncodeToString([]byte("another")), "data", "token")
	if _, err := secrets.Update(f.ctx, "v1", "ns", "robot-token", changed, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.check(token); got != "Token does not match server's copy" {
		t.Errorf("after the secret's token changed: %q", got)
	}
	// Deleting the account deletes its token secrets.
	if _, _, err := f.res("serviceaccounts").Delete(f.ctx, "v1", "ns", "robot", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the account's token secret deleted", func() bool {
		_, err := secrets.Get(f.ctx, "v1", "ns", "robot-token", metav1.GetOptions{})
		return err != nil
	})
	if got := f.check(token); got != "Token has been invalidated" {
		t.Errorf("after the secret's deletion: %q", got)
	}
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Deleting an account deletes the token Secrets that name it, with its
// uid or none, and no others.
func TestTokenSecretsOfADeletedAccount(t *testing.T) {
	f := newTokenFixture(t)
	secret := func(name, account, uid string) {
		ann := `"kubernetes.io/service-account.name":"` + account + `"`
		if uid != "" {
			ann += `,"kubernetes.io/service-account.uid":"` + uid + `"`
		}
		f.create("secrets", "ns", `{"metadata":{"name":"`+name+`","annotations":{`+ann+`}},"type":"kubernetes.io/service-account-token"}`)
	}
	secret("no-uid", "robot", "")
	secret("its-uid", "robot", "u1")
	secret("other-uid", "robot", "u2")
	secret("other-account", "other", "u1")
	f.create("secrets", "ns", `{"metadata":{"name":"opaque","annotations":{"kubernetes.io/service-account.name":"robot"}}}`)
	c := &TokenSecrets{Registry: f.reg, Tokens: f.tokens, Logger: slog.New(slog.DiscardHandler)}
	secrets := f.res("secrets")
	c.deleteTokens(f.ctx, secrets, "ns", "robot", "u1")
	for name, kept := range map[string]bool{"no-uid": false, "its-uid": false, "other-uid": true, "other-account": true, "opaque": true} {
		if _, err := secrets.Get(f.ctx, "v1", "ns", name, metav1.GetOptions{}); (err == nil) != kept {
			t.Errorf("%s: kept %v, want %v", name, err == nil, kept)
		}
	}
}

// Tokens are signed as kube-apiserver signs with each kind of key (RS256
// for RSA, ES256, ES384 and ES512 by curve) and checked with every key
// given, found by key id; /openid/v1/jwks lists each as upstream's JOSE
// library writes it.
func TestTokenKeys(t *testing.T) {
	f := newTokenFixture(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	alg := func(tok string) string {
		var h jws.Header
		raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		json.Unmarshal(raw, &h)
		return h.Alg
	}
	// Signed by the RSA key, checked with it and P-384's.
	if err := f.tokens.SetKeys(rsaKey, []crypto.PublicKey{p384.Public()}); err != nil {
		t.Fatal(err)
	}
	rsaToken := f.token(`{}`)
	if got := f.check(rsaToken); got != "" || alg(rsaToken) != "RS256" {
		t.Errorf("an RSA key's token: %q, %s", got, alg(rsaToken))
	}
	ks := f.tokens.key.Load()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	data, err := f.tokens.JWKS()
	if err != nil || json.Unmarshal(data, &set) != nil || len(set.Keys) != 2 {
		t.Fatalf("JWKS %s: %v", data, err)
	}
	wantE := base64.RawURLEncoding.EncodeToString(big.NewInt(int64(rsaKey.E)).Bytes())
	if k := set.Keys[1]; k["kty"] != "RSA" || k["alg"] != "RS256" || k["use"] != "sig" || k["kid"] != ks.signing.kid ||
		k["n"] != base64.RawURLEncoding.EncodeToString(rsaKey.N.Bytes()) || k["e"] != wantE || len(k) != 6 {
		t.Errorf("the RSA key's JWK: %v", k)
	}
	if k := set.Keys[0]; k["kty"] != "EC" || k["crv"] != "P-384" || k["alg"] != "ES384" || len(k["x"]) != 64 || len(k["y"]) != 64 {
		t.Errorf("the P-384 key's JWK: %v", k)
	}
	// A token of the P-384 key (another server's, say) is accepted; one
	// of a key not given is not.
	for _, c := range []struct {
		key  *ecdsa.PrivateKey
		alg  string
		want string
	}{{p384, "ES384", ""}, {p521, "ES512", "invalid signature, no keys found"}} {
		if err := f.tokens.SetKeys(c.key, nil); err != nil {
			t.Fatal(err)
		}
		tok := f.token(`{}`)
		if alg(tok) != c.alg {
			t.Errorf("a %s key signs with %s", c.key.Curve.Params().Name, alg(tok))
		}
		if err := f.tokens.SetKeys(rsaKey, []crypto.PublicKey{p384.Public()}); err != nil {
			t.Fatal(err)
		}
		if got := f.check(tok); got != c.want {
			t.Errorf("a %s token: %q, want %q", c.alg, got, c.want)
		}
	}
	// Without a key id every key is tried, and each one's error told.
	parts := strings.Split(rsaToken, ".")
	var claims map[string]any
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	unnamed := *ks.signing
	unnamed.kid = ""
	noKid, err := unnamed.sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(noKid, ".")[0])
	if got := f.check(noKid); got != "" || string(header) != `{"alg":"RS256"}` {
		t.Errorf("an RSA token without a key id: %q", got)
	}
	bad := "go-jose/go-jose: error in cryptographic primitive"
	if got := f.check(noKid[:len(noKid)-4] + "AAAA"); got != "["+bad+", "+bad+"]" {
		t.Errorf("a bad signature without a key id: %q", got)
	}
	// An RSA signature under another RSA algorithm does not verify, nor
	// an ECDSA algorithm with the RSA key.
	for _, a := range []string{"PS256", "RS384", "ES256"} {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + a + `","kid":"` + ks.signing.kid + `"}`))
		if got := f.check(h + "." + parts[1] + "." + parts[2]); got != bad {
			t.Errorf("%s over an RS256 signature: %q", a, got)
		}
	}
	// Nor ES256 with the P-384 key, though signed with it over SHA-256.
	p384Key, _ := newJWSKey(p384)
	mismatched := *p384Key
	mismatched.alg = "ES256"
	if tok, err := mismatched.sign(claims); err != nil || f.check(tok) != bad {
		t.Errorf("ES256 with a P-384 key: %v, %q", err, f.check(tok))
	}
	if err := f.tokens.SetKeys(ed25519Signer{}, nil); err == nil {
		t.Error("an Ed25519 key was taken")
	}
}

// ed25519Signer is a signer of a kind of key tokens are not signed with.
type ed25519Signer struct{}

func (ed25519Signer) Public() crypto.PublicKey {
	return ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))
}
func (ed25519Signer) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("no")
}
