package core

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	_ "crypto/sha512" // SHA-384 and SHA-512, for crypto.Hash
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
// signed as kube-apiserver signs them: RS256 with an RSA key, ES256,
// ES384 or ES512 with an ECDSA key on P-256, P-384 or P-521. A token is
// checked with the keys its header's key id names (all of them without
// one); each key accepts only its own kind of algorithm (RS*, PS* for
// RSA; the curve's ES* for ECDSA), so a token naming another (among
// them "none") does not verify.

// b64 is base64url without padding, as JWS encodes each part. Strict: a
// part with stray bits set in its last character is refused, so that a
// token has one encoding.
var b64 = base64.RawURLEncoding.Strict()

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
		switch pub.Curve {
		case elliptic.P256():
			k.alg = "ES256"
		case elliptic.P384():
			k.alg = "ES384"
		case elliptic.P521():
			k.alg = "ES512"
		default:
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
	k.kid = b64.EncodeToString(sum[:])
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

// jwsHeader is a token's protected header.
type jwsHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid,omitempty"`
	Crit json.RawMessage `json:"crit,omitempty"`
}

// sign returns claims, signed, as a compact JWS.
func (k *jwsKey) sign(claims any) (string, error) {
	header, err := json.Marshal(jwsHeader{Alg: k.alg, Kid: k.kid})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	var sig []byte
	switch priv := k.priv.(type) {
	case *rsa.PrivateKey:
		sum := sha256.Sum256([]byte(signed))
		if sig, err = rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, sum[:]); err != nil {
			return "", err
		}
	case *ecdsa.PrivateKey:
		h := jwsHashes[k.alg]
		d := h.New()
		d.Write([]byte(signed))
		r, s, err := ecdsa.Sign(rand.Reader, priv, d.Sum(nil))
		if err != nil {
			return "", err
		}
		// The signature is r and s, each the curve's size big-endian
		// (RFC 7518 3.4).
		size := (priv.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	default:
		return "", errors.New("no private key to sign with")
	}
	return signed + "." + b64.EncodeToString(sig), nil
}

// jwsHashes are the hashes of the algorithms a key may check.
var jwsHashes = map[string]crypto.Hash{
	"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
	"PS256": crypto.SHA256, "PS384": crypto.SHA384, "PS512": crypto.SHA512,
	"ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512,
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
// is errNotJWS; a key id none of the keys has is "no keys found"; a
// token no key named verifies fails with each key's error.
func (ks *jwsKeys) verify(parts []string) error {
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
	var errs []error
	for _, k := range ks.checking {
		if h.Kid != "" && h.Kid != k.kid {
			continue
		}
		err := k.verify(&h, parts[0]+"."+parts[1], sig)
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

// verify checks sig, the signature of signed under header h, with k:
// an extension asked for ("crit": kplane knows none), an algorithm not
// of k's kind or a signature that does not verify is errBadSignature.
func (k *jwsKey) verify(h *jwsHeader, signed string, sig []byte) error {
	hash, ok := jwsHashes[h.Alg]
	if !ok || h.Crit != nil {
		return errBadSignature
	}
	d := hash.New()
	d.Write([]byte(signed))
	sum := d.Sum(nil)
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		switch h.Alg[:2] {
		case "RS":
			if rsa.VerifyPKCS1v15(pub, hash, sum, sig) == nil {
				return nil
			}
		case "PS":
			if rsa.VerifyPSS(pub, hash, sum, sig, nil) == nil {
				return nil
			}
		}
	case *ecdsa.PublicKey:
		size := (pub.Curve.Params().BitSize + 7) / 8
		if h.Alg == k.alg && len(sig) == 2*size &&
			ecdsa.Verify(pub, sum, new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])) {
			return nil
		}
	}
	return errBadSignature
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
				N: b64.EncodeToString(pub.N.Bytes()), E: b64.EncodeToString(e)})
		case *ecdsa.PublicKey:
			point, err := pub.Bytes() // uncompressed: 0x04, x, y
			if err != nil {
				return nil, fmt.Errorf("service account key: %w", err)
			}
			size := (len(point) - 1) / 2
			keys = append(keys, jwk{Use: "sig", Kty: "EC", Kid: k.kid, Crv: pub.Curve.Params().Name, Alg: k.alg,
				X: b64.EncodeToString(point[1 : 1+size]), Y: b64.EncodeToString(point[1+size:])})
		}
	}
	return json.Marshal(map[string][]jwk{"keys": keys})
}
