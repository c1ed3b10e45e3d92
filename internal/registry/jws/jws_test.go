package jws_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/jws"
)

// Every algorithm Kubernetes accepts signs and verifies with its kind of
// key, and with no other algorithm or key.
func TestSignVerify(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	keys := map[string]crypto.Signer{
		"RS256": rsaKey, "RS384": rsaKey, "RS512": rsaKey, "PS256": rsaKey, "PS384": rsaKey, "PS512": rsaKey,
		"ES256": p256, "ES384": p384, "ES512": p521,
	}
	for alg, key := range keys {
		tok, err := jws.Sign(key, jws.Header{Alg: alg, Kid: "k1"}, []byte(`{"iss":"x"}`))
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		split, err := jws.Split(tok)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if split.Header.Alg != alg || split.Header.Kid != "k1" || string(split.Payload) != `{"iss":"x"}` {
			t.Errorf("%s: split %+v", alg, split)
		}
		if !jws.Verify(key.Public(), alg, split.Signed, split.Signature) {
			t.Errorf("%s does not verify with its key", alg)
		}
		for other, okey := range keys {
			if other == alg {
				continue
			}
			sameKind := okey == key && strings.HasPrefix(alg, "RS") == strings.HasPrefix(other, "RS") && other[2:] == alg[2:]
			if jws.Verify(okey.Public(), other, split.Signed, split.Signature) && !sameKind {
				t.Errorf("%s's signature verifies as %s", alg, other)
			}
		}
		if jws.Verify(otherRSA.Public(), alg, split.Signed, split.Signature) {
			t.Errorf("%s verifies with another RSA key", alg)
		}
		tampered := split.Signed[:len(split.Signed)-1] + "A"
		if jws.Verify(key.Public(), alg, tampered, split.Signature) {
			t.Errorf("%s verifies a changed payload", alg)
		}
	}
	// ES256 signed over SHA-256 with a P-384 key is refused: the curve
	// names the algorithm.
	tok, _ := jws.Sign(p384, jws.Header{Alg: "ES256"}, []byte(`{}`))
	split, _ := jws.Split(tok)
	if jws.Verify(p384.Public(), "ES256", split.Signed, split.Signature) {
		t.Error("ES256 verified with a P-384 key")
	}
	for _, alg := range []string{"none", "HS256", "", "EdDSA"} {
		if jws.Verify(rsaKey.Public(), alg, split.Signed, split.Signature) || jws.Known(alg) {
			t.Errorf("%q is taken", alg)
		}
	}
}

func TestSplitMalformed(t *testing.T) {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256"}`))
	p := base64.RawURLEncoding.EncodeToString([]byte(`{}`))
	for _, tok := range []string{"", "a.b", h + "." + p, h + "." + p + ".s.x", `{"payload":"x"}.a.b`, "!!." + p + ".AA", h + ".%%.AA", h + "." + p + ".A",
		base64.RawURLEncoding.EncodeToString([]byte(`[1]`)) + "." + p + ".AA"} {
		if _, err := jws.Split(tok); err != jws.ErrMalformed {
			t.Errorf("%q: %v", tok, err)
		}
	}
	if s, err := jws.Split(" " + h + ".\n" + p + "\t.AA "); err != nil || s.Header.Alg != "RS256" {
		t.Errorf("whitespace is not dropped: %v", err)
	}
}

func TestParseKeySet(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	enc := base64.RawURLEncoding.EncodeToString
	point, _ := p384.PublicKey.Bytes()
	x, y := enc(point[1:49]), enc(point[49:])
	set := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"r","alg":"RS256","use":"sig","n":%q,"e":"AQAB"},{"kty":"EC","kid":"e","crv":"P-384","x":%q,"y":%q},{"kty":"oct","k":"c2VjcmV0"}]}`,
		enc(rsaKey.N.Bytes()), x, y)
	keys, err := jws.ParseKeySet([]byte(set))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || keys[0].Kid != "r" || keys[0].Alg != "RS256" || keys[0].Use != "sig" || keys[1].Kid != "e" || keys[2].Key != nil {
		t.Fatalf("keys: %+v", keys)
	}
	if !keys[0].Key.(*rsa.PublicKey).Equal(&rsaKey.PublicKey) || !keys[1].Key.(*ecdsa.PublicKey).Equal(&p384.PublicKey) {
		t.Error("the keys read are not the keys written")
	}
	for _, c := range []struct{ set, err string }{
		{`{"keys":[{"kty":"XYZ"}]}`, "square/go-jose: unknown json web key type 'XYZ'"},
		{`{"keys":[{"kty":"RSA","e":"AQAB"}]}`, "square/go-jose: invalid RSA key, missing n/e values"},
		{`{"keys":[{"kty":"EC","crv":"P-192","x":"AA","y":"AA"}]}`, "square/go-jose: unsupported elliptic curve 'P-192'"},
		{`{"keys":[{"kty":"EC","crv":"P-384","x":"` + x + `"}]}`, "square/go-jose: invalid EC key, missing x/y"},
		{`{"keys":[{"kty":"EC","crv":"P-384","x":"` + y + `","y":"` + x + `"}]}`, "square/go-jose: invalid EC key, X/Y are not on declared curve"},
		{`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"Q"}]}`, "square/go-jose: unknown json web key type 'Q'"},
	} {
		if _, err := jws.ParseKeySet([]byte(c.set)); err == nil || err.Error() != c.err {
			t.Errorf("%s: %v, want %s", c.set, err, c.err)
		}
	}
	if _, err := jws.ParseKeySet([]byte(`not json`)); err == nil {
		t.Error("not JSON is a key set")
	}
}
