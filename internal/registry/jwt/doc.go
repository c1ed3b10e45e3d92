// Package jwt authenticates bearer tokens of external OpenID Connect
// issuers, as kube-apiserver's structured authentication configuration
// (--authentication-config, AuthenticationConfiguration) and its legacy
// --oidc-* flags do.
//
//   - config.go reads the configuration (ParseConfiguration) and checks
//     it with upstream's rules and errors (Validate): the issuers, the
//     claim validation rules, the claim mappings, the user validation
//     rules, the anonymous section.
//   - discovery.go finds an issuer's key set by OpenID discovery,
//     retried until it succeeds; verify.go checks a token's signature
//     with that set (fetched again when a token names a key it lacks)
//     and its registered claims: issuer, audiences, expiry, not-before.
//   - authenticator.go maps a token's claims to a user: username, groups
//     and uid from a claim (with a prefix) or a CEL expression over
//     claims, extra from expressions, the credential id from "jti";
//     then the claim and user validation rules must hold.
//   - metrics.go keeps upstream's jwt_authenticator metrics.
//
// The CEL expressions are compiled by crd/cel (CompileClaimsExpression,
// CompileUserExpression); signatures are checked by jws. The
// configuration's file, its reloads and the anonymous section are app's
// and apiserver's.
package jwt
