package jws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// JWK is one key of a JSON Web Key Set.
type JWK struct {
	Kid string
	Alg string
	Use string
	// Key is the public key: *rsa.PublicKey or *ecdsa.PublicKey; nil for
	// the kinds no token algorithm Kubernetes accepts uses (oct, OKP),
	// which are read and never match.
	Key crypto.PublicKey
}

// ParseKeySet reads a JSON Web Key Set: {"keys": [...]}. As the JOSE
// library Kubernetes uses, one key that is not valid (an unknown key
// type, a missing or malformed parameter, a point not on its curve)
// makes the whole set not valid, with the library's words.
func ParseKeySet(data []byte) ([]JWK, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, err
	}
	keys := make([]JWK, 0, len(set.Keys))
	for _, raw := range set.Keys {
		k, err := parseKey(raw)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// rawKey is a JWK's members, those kplane reads.
type rawKey struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
	K   string `json:"k"`
}

func parseKey(data []byte) (JWK, error) {
	var r rawKey
	if err := json.Unmarshal(data, &r); err != nil {
		return JWK{}, err
	}
	k := JWK{Kid: r.Kid, Alg: r.Alg, Use: r.Use}
	switch r.Kty {
	case "RSA":
		n, e := number(r.N), number(r.E)
		if n == nil || e == nil {
			return JWK{}, errors.New("square/go-jose: invalid RSA key, missing n/e values")
		}
		if !e.IsInt64() || e.Int64() > 1<<31-1 {
			return JWK{}, errors.New("square/go-jose: invalid RSA key, exponent too large")
		}
		k.Key = &rsa.PublicKey{N: n, E: int(e.Int64())}
	case "EC":
		var curve elliptic.Curve
		switch r.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return JWK{}, fmt.Errorf("square/go-jose: unsupported elliptic curve '%s'", r.Crv)
		}
		x, y := number(r.X), number(r.Y)
		if x == nil || y == nil {
			return JWK{}, errors.New("square/go-jose: invalid EC key, missing x/y")
		}
		size := (curve.Params().BitSize + 7) / 8
		point := make([]byte, 1+2*size)
		point[0] = 4 // uncompressed
		if len(x.Bytes()) > size || len(y.Bytes()) > size {
			return JWK{}, errors.New("square/go-jose: invalid EC key, X/Y are not on declared curve")
		}
		x.FillBytes(point[1 : 1+size])
		y.FillBytes(point[1+size:])
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return JWK{}, errors.New("square/go-jose: invalid EC key, X/Y are not on declared curve")
		}
		k.Key = pub
	case "oct", "OKP":
		// Read, never used: no token algorithm Kubernetes accepts
		// signs with one.
	default:
		return JWK{}, fmt.Errorf("square/go-jose: unknown json web key type '%s'", r.Kty)
	}
	return k, nil
}

// number is a JWK's base64url big-endian integer; nil if it is missing
// or does not decode.
func number(s string) *big.Int {
	if s == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) == 0 {
		return nil
	}
	return new(big.Int).SetBytes(b)
}
