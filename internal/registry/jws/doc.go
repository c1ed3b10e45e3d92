// Package jws holds the JSON Web Signature (RFC 7515) primitives that
// both of kplane's JSON Web Token checkers share: core's service account
// tokens, which kplane signs itself, and the jwt package's tokens of
// external OpenID Connect issuers (--authentication-config).
//
//   - Split takes a token in the compact form apart; Sign makes one.
//   - Verify checks a signature with a public key, for the algorithms
//     Kubernetes accepts: RS256/384/512, PS256/384/512 with an RSA key
//     and ES256/384/512 with an ECDSA key on the algorithm's curve.
//   - ParseKeySet reads a JSON Web Key Set (RFC 7517), as an issuer
//     publishes its keys.
//
// It holds no policy: which issuer, which keys, which errors a client
// sees are its callers'.
package jws
