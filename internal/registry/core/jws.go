package core

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	_ "crypto/sha512" // SHA-384 and SHA-512, for crypto.Hash
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/kplane-dev/kplane/internal/registry/jws"
)

// The service account tokens are JSON Web Tokens in the JWS compact form,
// signed as kube-apiserver signs them: RS256 with an RSA key, ES256,
// ES384 or ES512 with an ECDSA key on P-256, P-384 or P-521. A token is
// checked with the keys its header's key id names (all of them without
// one); each key accepts only its own kind of algorithm (RS*, PS* for
// RSA; the curve's ES* for ECDSA), so a token naming another (among
// them "none") does not verify.

// jwsKey is a key tokens are checked with, and signed with if it has its
// private half, with its key id.
type jwsKey struct {
	priv crypto.Signer    // nil: it only checks
	pub  crypto.PublicKey // *rsa.PublicKey or *ecdsa.PublicKey
	kid  string
	alg  string // what it signs with
}

// newJWSKey wraps key, a private key (*rsa.PrivateKey or an
// *ecdsa.PrivateKey on P-256, P-384 or P-521) or a public one. Its key
// id is the SHA-256 of its public key's DER (PKIX), as kube-apiserver
// derives one, so that the id gives nothing of the key away.
func newJWSKey(key any) (*jwsKey, error) {
	k := &jwsKey{}
	if priv, ok := key.(crypto.Signer); ok {
		k.priv, key = priv, priv.Public()
	}
	switch pub := key.(type) {
	case *rsa.PublicKey:
		k.alg = "RS256"
	case *ecdsa.PublicKey:
		if k.alg = jws.CurveAlg(pub.Curve); k.alg == "" {
			return nil, errors.New("unknown private key curve, must be 256, 384, or 521")
		}
	default:
		return nil, fmt.Errorf("not an RSA or ECDSA key: %T", key)
	}
	k.pub = key
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("failed to serialize public key to DER format: %v", err)
	}
	sum := sha256.Sum256(der)
	k.kid = jws.Encoding.EncodeToString(sum[:])
	return k, nil
}

// jwsKeys are the keys of a server: one signs, all check.
type jwsKeys struct {
	signing  *jwsKey
	checking []*jwsKey
}

// newJWSKeys is signing (a private key) with the public keys of check,
// and signing's own if check does not hold it.
func newJWSKeys(signing crypto.Signer, check []crypto.PublicKey) (*jwsKeys, error) {
	s, err := newJWSKey(signing)
	if err != nil {
		return nil, err
	}
	ks := &jwsKeys{signing: s}
	seen := map[string]bool{}
	for _, pub := range check {
		k, err := newJWSKey(pub)
		if err != nil {
			return nil, err
		}
		if !seen[k.kid] {
			seen[k.kid] = true
			ks.checking = append(ks.checking, k)
		}
	}
	if !seen[s.kid] {
		ks.checking = append(ks.checking, &jwsKey{pub: s.pub, kid: s.kid, alg: s.alg})
	}
	return ks, nil
}

// sign returns claims, signed, as a compact JWS.
func (k *jwsKey) sign(claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	if k.priv == nil {
		return "", errors.New("no private key to sign with")
	}
	return jws.Sign(k.priv, jws.Header{Alg: k.alg, Kid: k.kid}, payload)
}

// errNotJWS is a token that is not a compact JWS: not one of kplane's,
// whatever it is.
var errNotJWS = errors.New("not a JWS")

// splitJWS takes a compact JWS apart, unverified (jws.Split): a token
// of another shape is errNotJWS.
func splitJWS(token string) (*jws.Token, error) {
	t, err := jws.Split(token)
	if err != nil {
		return nil, errNotJWS
	}
	return t, nil
}

// verify checks the signature of a token split by splitJWS, as upstream
// checks one of its issuer's: a key id none of the keys has is "no keys
// found"; a token no key named verifies fails with each key's error.
func (ks *jwsKeys) verify(t *jws.Token) error {
	var errs []error
	for _, k := range ks.checking {
		if t.Header.Kid != "" && t.Header.Kid != k.kid {
			continue
		}
		err := k.verify(t)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	switch len(errs) {
	case 0:
		return errors.New("invalid signature, no keys found")
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New("[" + strings.Join(msgs, ", ") + "]") // upstream's aggregate
}

// verify checks t's signature with k: an extension asked for ("crit":
// kplane knows none), an algorithm not of k's kind or a signature that
// does not verify is errBadSignature.
func (k *jwsKey) verify(t *jws.Token) error {
	if t.Header.Crit != nil || !jws.Verify(k.pub, t.Header.Alg, t.Signed, t.Signature) {
		return errBadSignature
	}
	return nil
}

// errBadSignature is kube-apiserver's answer (its JOSE library's words)
// to a token of its issuer whose signature does not verify.
var errBadSignature = errors.New("go-jose/go-jose: error in cryptographic primitive")

// jwks is the JSON Web Key Set (RFC 7517) of the checking keys, for
// /openid/v1/jwks, each as upstream's JOSE library writes one.
func (ks *jwsKeys) jwks() ([]byte, error) {
	type jwk struct {
		Use string `json:"use"`
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Crv string `json:"crv,omitempty"`
		Alg string `json:"alg"`
		X   string `json:"x,omitempty"`
		Y   string `json:"y,omitempty"`
		N   string `json:"n,omitempty"`
		E   string `json:"e,omitempty"`
	}
	keys := []jwk{}
	for _, k := range ks.checking {
		switch pub := k.pub.(type) {
		case *rsa.PublicKey:
			e := big.NewInt(int64(pub.E)).Bytes()
			keys = append(keys, jwk{Use: "sig", Kty: "RSA", Kid: k.kid, Alg: k.alg,
				N: jws.Encoding.EncodeToString(pub.N.Bytes()), E: jws.Encoding.EncodeToString(e)})
		case *ecdsa.PublicKey:
			point, err := pub.Bytes() // uncompressed: 0x04, x, y
			if err != nil {
				return nil, fmt.Errorf("service account key: %w", err)
			}
			size := (len(point) - 1) / 2
			keys = append(keys, jwk{Use: "sig", Kty: "EC", Kid: k.kid, Crv: pub.Curve.Params().Name, Alg: k.alg,
				X: jws.Encoding.EncodeToString(point[1 : 1+size]), Y: jws.Encoding.EncodeToString(point[1+size:])})
		}
	}
	return json.Marshal(map[string][]jwk{"keys": keys})
}
