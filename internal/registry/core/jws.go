package core

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"unicode"
)

// The service account tokens are JSON Web Tokens in the JWS compact form,
// signed with ES256 (ECDSA P-256 with SHA-256, RFC 7518 3.4): the same
// form kube-apiserver signs with an ECDSA key. Only that algorithm is
// accepted: a token naming another (among them "none") does not verify.

// b64 is base64url without padding, as JWS encodes each part. Strict: a
// part with stray bits set in its last character is refused, so that a
// token has one encoding.
var b64 = base64.RawURLEncoding.Strict()

// jwsKey is a signing key and its key id.
type jwsKey struct {
	priv *ecdsa.PrivateKey
	kid  string
}

// newJWSKey wraps priv, a P-256 key. Its key id is the SHA-256 of its
// public key's DER (PKIX), as kube-apiserver derives one, so that the id
// gives nothing of the key away.
func newJWSKey(priv *ecdsa.PrivateKey) (*jwsKey, error) {
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return &jwsKey{priv: priv, kid: b64.EncodeToString(sum[:])}, nil
}

// jwsHeader is a token's protected header.
type jwsHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid,omitempty"`
	Crit json.RawMessage `json:"crit,omitempty"`
}

// sign returns claims, signed, as a compact JWS.
func (k *jwsKey) sign(claims any) (string, error) {
	header, err := json.Marshal(jwsHeader{Alg: "ES256", Kid: k.kid})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, sum[:])
	if err != nil {
		return "", err
	}
	// The signature is r and s, each 32 bytes big-endian (RFC 7518 3.4).
	var sig [64]byte
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + b64.EncodeToString(sig[:]), nil
}

// errNotJWS is a token that is not a compact JWS: not one of kplane's,
// whatever it is.
var errNotJWS = errors.New("not a JWS")

// splitJWS returns the payload of a compact JWS, unverified, and the
// token's three parts. Whitespace anywhere is dropped first, as
// upstream's JOSE library drops it. A token of another shape is
// errNotJWS.
func splitJWS(token string) (payload []byte, parts []string, err error) {
	token = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, token)
	parts = strings.Split(token, ".")
	if len(parts) != 3 || strings.HasPrefix(token, "{") {
		return nil, nil, errNotJWS
	}
	if payload, err = b64.DecodeString(parts[1]); err != nil {
		return nil, nil, errNotJWS
	}
	return payload, parts, nil
}

// verify checks the signature of a token split by splitJWS, as upstream
// checks one of its issuer's: a header or signature that does not decode
// is errNotJWS; another key's id is "no keys found"; any other algorithm
// than ES256, an extension asked for ("crit": kplane knows none), or a
// signature that does not verify is errBadSignature.
func (k *jwsKey) verify(parts []string) error {
	raw, err := b64.DecodeString(parts[0])
	if err != nil {
		return errNotJWS
	}
	var h jwsHeader
	if err := json.Unmarshal(raw, &h); err != nil {
		return errNotJWS
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return errNotJWS
	}
	if h.Kid != "" && h.Kid != k.kid {
		return errors.New("invalid signature, no keys found")
	}
	if h.Alg != "ES256" || h.Crit != nil || len(sig) != 64 {
		return errBadSignature
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(&k.priv.PublicKey, sum[:], r, s) {
		return errBadSignature
	}
	return nil
}

// errBadSignature is kube-apiserver's answer (its JOSE library's words)
// to a token of its issuer whose signature does not verify.
var errBadSignature = errors.New("go-jose/go-jose: error in cryptographic primitive")

// jwks is the JSON Web Key Set (RFC 7517) of the public key, for
// /openid/v1/jwks.
func (k *jwsKey) jwks() ([]byte, error) {
	point, err := k.priv.PublicKey.Bytes() // uncompressed: 0x04, x, y
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	type jwk struct {
		Use string `json:"use"`
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Crv string `json:"crv"`
		Alg string `json:"alg"`
		X   string `json:"x"`
		Y   string `json:"y"`
	}
	return json.Marshal(map[string][]jwk{"keys": {{
		Use: "sig", Kty: "EC", Kid: k.kid, Crv: "P-256", Alg: "ES256",
		X: b64.EncodeToString(point[1:33]), Y: b64.EncodeToString(point[33:65]),
	}}})
}
