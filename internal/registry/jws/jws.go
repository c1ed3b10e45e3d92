package jws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha256" // SHA-256, for crypto.Hash
	_ "crypto/sha512" // SHA-384 and SHA-512, for crypto.Hash
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"unicode"
)

// Encoding is base64url without padding, as JWS encodes each part.
// Strict: a part with stray bits set in its last character is refused,
// so that a token has one encoding.
var Encoding = base64.RawURLEncoding.Strict()

// Header is a token's protected header, the fields kplane reads.
type Header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid,omitempty"`
	// Crit lists extensions the signer requires the checker to know:
	// kplane knows none, so a token with one does not verify.
	Crit json.RawMessage `json:"crit,omitempty"`
}

// ErrMalformed is a token that is not a compact JWS.
var ErrMalformed = errors.New("not a JWS")

// Token is a compact JWS taken apart, not yet verified.
type Token struct {
	Header  Header
	Payload []byte
	// Signed is the signing input, the first two parts with their dot.
	Signed    string
	Signature []byte
}

// Split takes token apart. Whitespace anywhere is dropped first, as the
// JOSE library Kubernetes uses drops it. A token of another shape (not
// three parts, the JSON serialization, a part that does not decode, a
// header that is not a JSON object) is ErrMalformed.
func Split(token string) (*Token, error) {
	token = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, token)
	parts := strings.Split(token, ".")
	if len(parts) != 3 || strings.HasPrefix(token, "{") {
		return nil, ErrMalformed
	}
	t := &Token{Signed: parts[0] + "." + parts[1]}
	raw, err := Encoding.DecodeString(parts[0])
	if err != nil {
		return nil, ErrMalformed
	}
	if err := json.Unmarshal(raw, &t.Header); err != nil {
		return nil, ErrMalformed
	}
	if t.Payload, err = Encoding.DecodeString(parts[1]); err != nil {
		return nil, ErrMalformed
	}
	if t.Signature, err = Encoding.DecodeString(parts[2]); err != nil {
		return nil, ErrMalformed
	}
	return t, nil
}

// hashes are the hashes of the algorithms Verify knows.
var hashes = map[string]crypto.Hash{
	"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
	"PS256": crypto.SHA256, "PS384": crypto.SHA384, "PS512": crypto.SHA512,
	"ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512,
}

// Known reports whether Verify knows the algorithm alg.
func Known(alg string) bool {
	_, ok := hashes[alg]
	return ok
}

// CurveAlg is the one algorithm an ECDSA key on curve signs with, or ""
// for a curve JWS has none for.
func CurveAlg(curve elliptic.Curve) string {
	switch curve {
	case elliptic.P256():
		return "ES256"
	case elliptic.P384():
		return "ES384"
	case elliptic.P521():
		return "ES512"
	}
	return ""
}

// Verify reports whether sig is a signature of signed under alg by the
// key pub (*rsa.PublicKey or *ecdsa.PublicKey). An algorithm not of the
// key's kind (among them "none" and the HMACs) never verifies.
func Verify(pub crypto.PublicKey, alg, signed string, sig []byte) bool {
	hash, ok := hashes[alg]
	if !ok {
		return false
	}
	d := hash.New()
	d.Write([]byte(signed))
	sum := d.Sum(nil)
	switch pub := pub.(type) {
	case *rsa.PublicKey:
		switch alg[:2] {
		case "RS":
			return rsa.VerifyPKCS1v15(pub, hash, sum, sig) == nil
		case "PS":
			return rsa.VerifyPSS(pub, hash, sum, sig, nil) == nil
		}
	case *ecdsa.PublicKey:
		// The signature is r and s, each the curve's size big-endian
		// (RFC 7518 3.4).
		size := (pub.Curve.Params().BitSize + 7) / 8
		return alg == CurveAlg(pub.Curve) && len(sig) == 2*size &&
			ecdsa.Verify(pub, sum, new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:]))
	}
	return false
}

// Sign returns payload signed by priv (an *rsa.PrivateKey for the RS and
// PS algorithms, an *ecdsa.PrivateKey for the ES ones) under header, as
// a compact JWS. It signs as told: an ECDSA key on another curve than
// header.Alg's makes a token Verify refuses, which tests need.
func Sign(priv crypto.Signer, header Header, payload []byte) (string, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	signed := Encoding.EncodeToString(h) + "." + Encoding.EncodeToString(payload)
	hash, ok := hashes[header.Alg]
	if !ok {
		return "", errors.New("jws: unknown algorithm " + header.Alg)
	}
	d := hash.New()
	d.Write([]byte(signed))
	sum := d.Sum(nil)
	var sig []byte
	switch priv := priv.(type) {
	case *rsa.PrivateKey:
		switch header.Alg[:2] {
		case "RS":
			sig, err = rsa.SignPKCS1v15(rand.Reader, priv, hash, sum)
		case "PS":
			sig, err = rsa.SignPSS(rand.Reader, priv, hash, sum, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		default:
			err = errors.New("jws: an RSA key cannot sign " + header.Alg)
		}
	case *ecdsa.PrivateKey:
		var r, s *big.Int
		if r, s, err = ecdsa.Sign(rand.Reader, priv, sum); err == nil {
			size := (priv.Curve.Params().BitSize + 7) / 8
			sig = make([]byte, 2*size)
			r.FillBytes(sig[:size])
			s.FillBytes(sig[size:])
		}
	default:
		err = errors.New("jws: not an RSA or ECDSA private key")
	}
	if err != nil {
		return "", err
	}
	return signed + "." + Encoding.EncodeToString(sig), nil
}
