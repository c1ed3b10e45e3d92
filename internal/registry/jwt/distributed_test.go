package jwt_test

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// A groups claim held only by a distributed source is fetched from its
// endpoint, with its access token, and taken from the JWT it answers
// once that is checked as a token of its issuer for the same audiences,
// as upstream does; an inline claim wins; the errors are upstream's.
func TestDistributedClaims(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(claimMappings), jwt.Options{})
	sources := `"_claim_names":{"groups":"src1"},"_claim_sources":{"src1":{"endpoint":"` + is.srv.URL + `/claims","access_token":"secret-at"}}`
	for _, c := range []struct{ name, served, claims, want string }{
		{"fetched", is.token("ec", `{"sub":"claimsrv","groups":["dist-a","dist-b"]}`), `{"sub":"dave",` + sources + `}`,
			`{"Name":"oidc:dave","UID":"dave","Groups":["g:dist-a","g:dist-b","system:authenticated"]}`},
		{"inline wins", is.token("ec", `{"groups":["dist"]}`), `{"sub":"dave","groups":["inline"],` + sources + `}`,
			`{"Name":"oidc:dave","UID":"dave","Groups":["g:inline","system:authenticated"]}`},
		{"no claim in the answer", is.token("ec", `{"sub":"claimsrv"}`), `{"sub":"dave",` + sources + `}`,
			`error: oidc: could not expand distributed claims: jwt returned by distributed claim endpoint "` + is.srv.URL + `/claims" did not contain claim: groups`},
		{"the answer for another audience", is.token("ec", `{"groups":["x"],"aud":"other"}`), `{"sub":"dave",` + sources + `}`,
			`error: oidc: could not expand distributed claims: verify distributed claim token: oidc: expected audience "kplane" got ["other"]`},
		{"no answer", "", `{"sub":"dave",` + sources + `}`,
			`error: oidc: could not expand distributed claims: while getting distributed claim "groups": error while getting distributed claim JWT: 404 Not Found`},
		{"no sources", "", `{"sub":"dave","_claim_names":{"groups":"src1"}}`,
			`error: oidc: verify token: oidc: source does not exist`},
		{"a source not named", "", `{"sub":"dave","_claim_names":{"other":"src1"},"_claim_sources":{"src1":{"endpoint":"https://x"}}}`,
			`{"Name":"oidc:dave","UID":"dave","Groups":["system:authenticated"]}`},
	} {
		is.mu.Lock()
		is.claims, is.claimsAuth = c.served, ""
		is.mu.Unlock()
		if got := check(as, is.token("rsa", c.claims)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	// The source is asked on every request: a token's groups from it are
	// not kept.
	tok := is.token("rsa", `{"sub":"dave",`+sources+`}`)
	for _, groups := range []string{"first", "second"} {
		served := is.token("ec", `{"groups":["`+groups+`"]}`)
		is.mu.Lock()
		is.claims = served
		is.mu.Unlock()
		if got, want := check(as, tok), `{"Name":"oidc:dave","UID":"dave","Groups":["g:`+groups+`","system:authenticated"]}`; got != want {
			t.Errorf("the source's answer changed:\n got %s\nwant %s", got, want)
		}
	}
	// Signed by another issuer, found by its discovery (httptest's
	// servers share a certificate, so the configured authority trusts
	// both).
	other := newIssuer(t)
	is.mu.Lock()
	is.claims = other.token("rsa", `{"groups":["from-other"]}`)
	is.mu.Unlock()
	if got, want := check(as, is.token("rsa", `{"sub":"dave",`+sources+`}`)), `{"Name":"oidc:dave","UID":"dave","Groups":["g:from-other","system:authenticated"]}`; got != want {
		t.Errorf("another issuer's claims:\n got %s\nwant %s", got, want)
	}
	if other.discoveries.Load() != 1 || other.fetches.Load() != 1 {
		t.Errorf("the other issuer: %d discoveries, %d key fetches", other.discoveries.Load(), other.fetches.Load())
	}
	served := is.token("ec", `{"groups":["a"]}`)
	is.mu.Lock()
	is.claims = served
	is.mu.Unlock()
	check(as, is.token("rsa", `{"sub":"dave",`+sources+`}`))
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.claimsAuth != "Bearer secret-at" {
		t.Errorf("the endpoint was asked with %q", is.claimsAuth)
	}
}
