package jwt_test

import (
	"context"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// BenchmarkAuthenticateToken is the cost of a request's bearer token
// of an external issuer: the signature (RS256 with a 2048-bit key, or
// ES256), the registered claims, and the claims mapped by claim or by
// CEL expressions.
func BenchmarkAuthenticateToken(b *testing.B) {
	is := newIssuer(b)
	claims := `{"sub":"alice","email":"alice@acme.io","email_verified":true,"groups":["dev","ops"],"tenant":"acme"}`
	for _, c := range []struct{ name, kid, config string }{
		{"rs256/claims", "rsa", claimMappings},
		{"es256/claims", "ec", claimMappings},
		{"rs256/cel", "rsa", `  claimValidationRules:
  - expression: 'claims.email_verified == true'
  claimMappings:
    username: {expression: '"acme:" + claims.email'}
    groups: {expression: 'claims.groups.map(g, "acme:" + g)'}
    uid: {claim: sub}
    extra:
    - key: acme.io/tenant
      valueExpression: claims.tenant
  userValidationRules:
  - expression: '!user.username.startsWith("system:")'
`},
	} {
		b.Run(c.name, func(b *testing.B) {
			as := authenticators(b, is.config(c.config), jwt.Options{})
			tok := is.token(c.kid, claims)
			ctx := context.Background()
			if _, ok, err := as.AuthenticateToken(ctx, tok); !ok || err != nil {
				b.Fatal(ok, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, ok, err := as.AuthenticateToken(ctx, tok); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
