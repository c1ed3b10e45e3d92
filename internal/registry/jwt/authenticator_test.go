package jwt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/jws"
	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// check authenticates token: the user as JSON, "not ours" for a token of
// no configured issuer, or the error.
func check(as *jwt.Authenticators, token string) string {
	u, ok, err := as.AuthenticateToken(context.Background(), token)
	switch {
	case err != nil:
		return "error: " + err.Error()
	case !ok:
		return "not ours"
	}
	b, _ := json.Marshal(struct {
		Name   string
		UID    string              `json:",omitempty"`
		Groups []string            `json:",omitempty"`
		Extra  map[string][]string `json:",omitempty"`
	}{u.Name, u.UID, u.Groups, u.Extra})
	return string(b)
}

const claimMappings = `  claimMappings:
    username: {claim: sub, prefix: "oidc:"}
    groups: {claim: groups, prefix: "g:"}
    uid: {claim: sub}
`

// Claims mapped by claim and prefix, as upstream maps them: groups a
// list or one string; a claim of the wrong type or missing is an error
// for the username and the uid, not for the groups; "jti" is the
// credential id.
func TestClaimMappings(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(claimMappings), jwt.Options{})
	for _, c := range []struct{ claims, want string }{
		{`{"sub":"alice","groups":["dev","ops"]}`, `{"Name":"oidc:alice","UID":"alice","Groups":["g:dev","g:ops","system:authenticated"]}`},
		{`{"sub":"alice","groups":"dev","jti":"abc"}`, `{"Name":"oidc:alice","UID":"alice","Groups":["g:dev","system:authenticated"],"Extra":{"authentication.kubernetes.io/credential-id":["JTI=abc"]}}`},
		{`{"sub":"alice"}`, `{"Name":"oidc:alice","UID":"alice","Groups":["system:authenticated"]}`},
		{`{"sub":"alice","groups":5}`, `error: oidc: parse groups claim "groups": json: cannot unmarshal number into Go value of type string`},
		{`{"groups":["dev"]}`, `error: oidc: parse username claims "sub": claim not present`},
		{`{"sub":7}`, `error: oidc: verify token: oidc: failed to unmarshal claims: json: cannot unmarshal number into Go struct field idToken.sub of type string`},
		{`{"sub":"alice","jti":""}`, `{"Name":"oidc:alice","UID":"alice","Groups":["system:authenticated"]}`},
		{`{"sub":"alice","jti":5}`, `{"Name":"oidc:alice","UID":"alice","Groups":["system:authenticated"]}`},
		{`{"sub":""}`, `{"Name":"oidc:","Groups":["system:authenticated"]}`},
	} {
		for _, kid := range []string{"rsa", "ec"} {
			if got := check(as, is.token(kid, c.claims)); got != c.want {
				t.Errorf("%s (%s):\n got %s\nwant %s", c.claims, kid, got, c.want)
			}
		}
	}
}

// A token's signature, issuer, audience and times are checked as
// upstream's OpenID library checks them, with its errors.
func TestVerify(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(claimMappings), jwt.Options{})
	now := time.Now()
	good := is.token("rsa", `{"sub":"a"}`)
	parts := strings.Split(good, ".")
	for _, c := range []struct{ name, token, want string }{
		{"another issuer", is.token("rsa", `{"sub":"a","iss":"https://other.example"}`), "not ours"},
		{"not a JWT", "abc", "not ours"},
		{"expired", is.token("rsa", fmt.Sprintf(`{"sub":"a","exp":%d}`, now.Add(-10*time.Second).Unix())),
			fmt.Sprintf("error: oidc: verify token: oidc: token is expired (Token Expiry: %v)", time.Unix(now.Add(-10*time.Second).Unix(), 0))},
		{"no expiry", is.token("rsa", `{"sub":"a","exp":null}`), "error: oidc: verify token: oidc: token is expired (Token Expiry: 0001-01-01 00:00:00 +0000 UTC)"},
		{"not before, within a minute", is.token("rsa", fmt.Sprintf(`{"sub":"a","nbf":%d}`, now.Add(30*time.Second).Unix())), `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{"another audience", is.token("rsa", `{"sub":"a","aud":["other"]}`), `error: oidc: verify token: oidc: expected audience "kplane" got ["other"]`},
		{"audiences, one ours", is.token("rsa", `{"sub":"a","aud":["other","kplane"]}`), `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{"signature", parts[0] + "." + parts[1] + "." + strings.Split(is.token("ec", `{}`), ".")[2], "error: oidc: verify token: failed to verify signature: failed to verify id token signature"},
		{"none", hdr(`{"alg":"none"}`) + "." + parts[1] + ".", `error: oidc: verify token: oidc: id token signed with unsupported algorithm, expected ["ES256" "ES384" "ES512" "PS256" "PS384" "PS512" "RS256" "RS384" "RS512"] got "none"`},
		{"HS256", hdr(`{"alg":"HS256"}`) + "." + parts[1] + "." + parts[2], `error: oidc: verify token: oidc: id token signed with unsupported algorithm, expected ["ES256" "ES384" "ES512" "PS256" "PS384" "PS512" "RS256" "RS384" "RS512"] got "HS256"`},
		{"exp null", is.token("rsa", `{"sub":"a","exp":"NULL"}`), `error: oidc: verify token: oidc: failed to unmarshal claims: strconv.ParseFloat: parsing "": invalid syntax`},
		{"exp a number in a string", is.token("rsa", fmt.Sprintf(`{"sub":"a","exp":"%d"}`, now.Add(time.Hour).Unix())), `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{"iat not checked", is.token("rsa", fmt.Sprintf(`{"sub":"a","iat":%d}`, now.Add(time.Hour).Unix())), `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{"exp a string", is.token("rsa", `{"sub":"a","exp":"soon"}`), `error: oidc: verify token: oidc: failed to unmarshal claims: json: invalid number literal, trying to unmarshal "\"soon\"" into Number`},
	} {
		if got := check(as, c.token); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// Not before by more than the minute's leeway. The time printed is
	// the server's clock, so only the start is compared.
	if got := check(as, is.token("rsa", fmt.Sprintf(`{"sub":"a","nbf":%d}`, now.Add(2*time.Minute).Unix()))); !strings.HasPrefix(got, "error: oidc: verify token: oidc: current time ") || !strings.Contains(got, " before the nbf (not before) time: ") {
		t.Errorf("not before: %s", got)
	}
}

// hdr is a protected header, encoded.
func hdr(h string) string { return jws.Encoding.EncodeToString([]byte(h)) }

// Two audiences need MatchAny; a token for neither gets upstream's
// other audience error, with the audiences sorted.
func TestAudiences(t *testing.T) {
	is := newIssuer(t)
	config := strings.Replace(is.config(claimMappings), "audiences: [kplane]", "audiences: [kplane, beta]\n    audienceMatchPolicy: MatchAny", 1)
	as := authenticators(t, config, jwt.Options{})
	for _, c := range []struct{ aud, want string }{
		{`"beta"`, `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{`["x","kplane"]`, `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`},
		{`["x"]`, `error: oidc: verify token: oidc: expected audience in ["beta" "kplane"] got ["x"]`},
	} {
		if got := check(as, is.token("rsa", `{"sub":"a","aud":`+c.aud+`}`)); got != c.want {
			t.Errorf("aud %s:\n got %s\nwant %s", c.aud, got, c.want)
		}
	}
}

// Expressions make the user; the validation rules refuse, with their
// messages and upstream's errors.
func TestExpressions(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(`  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: 'claims.?role.orValue("") != "banned"'
    message: banned users may not log in
  claimMappings:
    username:
      expression: 'claims.sub + "@" + claims.hd'
    groups:
      expression: 'has(claims.teams) ? claims.teams.map(t, "team:" + t) : claims.?team.orValue("")'
    uid:
      expression: 'claims.?oid.orValue("")'
    extra:
    - key: example.com/tenant
      valueExpression: 'claims.?tenant.orValue(null)'
    - key: example.com/dashed
      valueExpression: 'claims.?x__dash__y.orValue("")'
  userValidationRules:
  - expression: '!user.username.startsWith("root@")'
    message: root may not log in
`), jwt.Options{})
	for _, c := range []struct{ claims, want string }{
		{`{"sub":"a","hd":"example.com","teams":["x","y"],"oid":"u1","tenant":["t1",""],"x-y":"d"}`,
			`{"Name":"a@example.com","UID":"u1","Groups":["team:x","team:y","system:authenticated"],"Extra":{"example.com/dashed":["d"],"example.com/tenant":["t1"]}}`},
		{`{"sub":"a","hd":"example.com","team":"solo"}`, `{"Name":"a@example.com","Groups":["solo","system:authenticated"]}`},
		{`{"sub":"a","hd":"example.com","team":""}`, `{"Name":"a@example.com","Groups":["system:authenticated"]}`},
		{`{"sub":"a","hd":"other.com"}`, `error: oidc: required claim hd value does not match. Got = other.com, want = example.com`},
		{`{"sub":"a"}`, `error: oidc: error evaluating username claim expression: expression 'claims.sub + "@" + claims.hd' resulted in error: no such key: hd`},
		{`{"sub":"a","hd":"example.com","role":"banned"}`, `error: oidc: error evaluating claim validation expression: validation expression 'claims.?role.orValue("") != "banned"' failed: banned users may not log in`},
		{`{"sub":"root","hd":"example.com"}`, `error: oidc: error evaluating user info validation rule: validation expression '!user.username.startsWith("root@")' failed: root may not log in`},
		{`{"sub":"a","hd":"example.com","tenant":5}`, `error: oidc: error evaluating extra claim expression: claims.?tenant.orValue(null): expression must return a string or a list of strings`},
		{`{"sub":"a","hd":"example.com","teams":[1]}`, `error: oidc: error evaluating group claim expression: expression 'has(claims.teams) ? claims.teams.map(t, "team:" + t) : claims.?team.orValue("")' resulted in error: no such overload`},
		{`{"sub":"a","hd":"example.com","oid":5}`, `error: oidc: error evaluating uid claim expression: uid claim expression must return a string`},
	} {
		if got := check(as, is.token("rsa", c.claims)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.claims, got, c.want)
		}
	}
}

// The email claim as username is taken only if not said to be
// unverified.
func TestEmailVerified(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(`  claimMappings:
    username: {claim: email, prefix: ""}
`), jwt.Options{})
	for _, c := range []struct{ claims, want string }{
		{`{"email":"a@x.io","email_verified":true}`, `{"Name":"a@x.io","Groups":["system:authenticated"]}`},
		{`{"email":"a@x.io"}`, `{"Name":"a@x.io","Groups":["system:authenticated"]}`},
		{`{"email":"a@x.io","email_verified":false}`, `error: oidc: email not verified`},
		{`{"email":"a@x.io","email_verified":"true"}`, `error: oidc: parse 'email_verified' claim: json: cannot unmarshal string into Go value of type bool`},
	} {
		if got := check(as, is.token("rsa", c.claims)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.claims, got, c.want)
		}
	}
}

// A token whose signature was checked before is not checked again, but
// its times and claims are, every time.
func TestVerifiedTokenExpires(t *testing.T) {
	is := newIssuer(t)
	now := time.Now()
	clock := func() time.Time { return now }
	as := authenticators(t, is.config(claimMappings), jwt.Options{Now: clock})
	exp := now.Add(time.Minute).Unix()
	tok := is.token("rsa", fmt.Sprintf(`{"sub":"a","exp":%d}`, exp))
	for range 2 {
		if got := check(as, tok); got != `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}` {
			t.Fatalf("before expiry: %s", got)
		}
	}
	now = now.Add(2 * time.Minute)
	if got, want := check(as, tok), fmt.Sprintf("error: oidc: verify token: oidc: token is expired (Token Expiry: %v)", time.Unix(exp, 0)); got != want {
		t.Errorf("after expiry:\n got %s\nwant %s", got, want)
	}
	// A token of the same claims with another signature is still checked.
	parts := strings.Split(tok, ".")
	now = now.Add(-2 * time.Minute)
	forged := parts[0] + "." + parts[1] + "." + strings.Split(is.token("ec", `{}`), ".")[2]
	if got := check(as, forged); got != "error: oidc: verify token: failed to verify signature: failed to verify id token signature" {
		t.Errorf("another signature: %s", got)
	}
}
