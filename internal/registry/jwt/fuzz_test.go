package jwt_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/jws"
	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// The claims of a token come from its holder: whatever they are, signed
// by the issuer, the checks and mappings answer a user or an error,
// never panic, and a user always has a name.
func FuzzAuthenticateClaims(f *testing.F) {
	is := newIssuer(f)
	as := authenticators(f, is.config(`  claimValidationRules:
  - claim: hd
    requiredValue: acme.io
  - expression: 'claims.?role.orValue("") != "banned"'
  claimMappings:
    username: {expression: 'claims.?preferred_username.orValue(claims.sub)'}
    groups: {claim: groups, prefix: "g:"}
    uid: {expression: 'string(claims.?oid.orValue(""))'}
    extra:
    - key: acme.io/tenant
      valueExpression: 'claims.?tenant.orValue(null)'
  userValidationRules:
  - expression: 'user.groups.all(g, g != "g:root")'
`), jwt.Options{})
	key := is.keys["rsa"]
	for _, seed := range []string{
		`"sub":"a","hd":"acme.io"`,
		`"sub":"a","hd":"acme.io","groups":["x",1],"tenant":["t",""],"oid":5`,
		`"sub":1,"hd":["acme.io"],"exp":"x","nbf":null`,
		`"_claim_names":{"groups":"s"},"_claim_sources":{"s":{"endpoint":"https://127.0.0.1:1/x"}},"sub":"a","hd":"acme.io"`,
		`"sub":"a","hd":"acme.io","preferred_username":{"a":[1,2,{"b":null}]}`,
	} {
		f.Add(seed)
	}
	exp := time.Now().Add(24 * time.Hour).Unix()
	f.Fuzz(func(t *testing.T, claims string) {
		payload := fmt.Sprintf(`{"iss":%q,"aud":"kplane","exp":%d,%s}`, is.url, exp, claims)
		tok, err := jws.Sign(key, jws.Header{Alg: "RS256", Kid: "rsa"}, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		u, ok, err := as.AuthenticateToken(ctx, tok)
		if ok && (err != nil || u.Name == "") {
			t.Errorf("%s: user %+v, error %v", payload, u, err)
		}
	})
}
