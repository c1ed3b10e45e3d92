package jwt_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An issuer that cannot be reached at the start is tried again until it
// answers; meanwhile its tokens are refused as not initialized, and the
// health says why.
func TestDiscoveryRetried(t *testing.T) {
	is := newIssuer(t)
	is.mu.Lock()
	is.down = true
	is.mu.Unlock()
	c, _ := jwt.ParseConfiguration([]byte(is.config(claimMappings)))
	as, err := jwt.New(context.Background(), c, nil, jwt.Options{RetryInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer as.Stop()
	tok := is.token("rsa", `{"sub":"a"}`)
	if got := check(as, tok); got != "error: oidc: authenticator not initialized" {
		t.Errorf("before discovery: %s", got)
	}
	waitFor(t, "a failed discovery", func() bool { return strings.Contains(errString(as.Healthy()), "503") })
	if got, want := errString(as.Healthy()), `oidc: authenticator for issuer "`+is.url+`" is not healthy: 503 Service Unavailable: down`; got != want+"\n" && got != want {
		t.Errorf("health:\n got %q\nwant %q", got, want)
	}
	is.mu.Lock()
	is.down = false
	is.mu.Unlock()
	waitFor(t, "discovery", func() bool { return as.Healthy() == nil })
	if got := check(as, tok); got != `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}` {
		t.Errorf("after discovery: %s", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A discovery document naming another issuer is refused; a
// discoveryURL is read instead of the issuer's own document, and must
// still name the issuer.
func TestDiscoveryIssuer(t *testing.T) {
	is := newIssuer(t)
	is.docIssuer = "https://impostor.example"
	c, _ := jwt.ParseConfiguration([]byte(is.config(claimMappings)))
	as, err := jwt.New(context.Background(), c, nil, jwt.Options{RetryInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer as.Stop()
	want := `oidc: authenticator for issuer "` + is.url + `" is not healthy: oidc: issuer did not match the issuer returned by provider, expected "` + is.url + `" got "https://impostor.example"`
	waitFor(t, "the mismatch", func() bool { return errString(as.Healthy()) == want })

	is.mu.Lock()
	is.docIssuer = ""
	is.mu.Unlock()
	config := strings.Replace(is.config(claimMappings), "    audiences:", "    discoveryURL: "+is.srv.URL+"/elsewhere/discovery\n    audiences:", 1)
	before := is.discoveries.Load()
	as2 := authenticators(t, config, jwt.Options{})
	if is.discoveries.Load() != before+1 {
		t.Errorf("discoveries: %d, then %d", before, is.discoveries.Load())
	}
	if got := check(as2, is.token("ec", `{"sub":"a"}`)); got != `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}` {
		t.Errorf("through discoveryURL: %s", got)
	}
}

// A token signed by a key the set held did not hold is checked against
// the set fetched again, as upstream's library does for a key rotation;
// a set the issuer says may be kept is not fetched again while fresh.
func TestKeyRotation(t *testing.T) {
	is := newIssuer(t)
	as := authenticators(t, is.config(claimMappings), jwt.Options{})
	ok := `{"Name":"oidc:a","UID":"a","Groups":["system:authenticated"]}`
	if got := check(as, is.token("rsa", `{"sub":"a"}`)); got != ok {
		t.Fatalf("first token: %s", got)
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("fetches after the first token: %d", n)
	}
	for range 3 {
		check(as, is.token("rsa", `{"sub":"a"}`))
	}
	if n := is.fetches.Load(); n != 1 {
		t.Errorf("fetches after tokens the set verified: %d", n)
	}
	// A new key, not yet published: fetched, refused.
	newKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	is.mu.Lock()
	is.unlisted["new"] = newKey
	is.mu.Unlock()
	fresh := is.token("new", `{"sub":"a"}`)
	if got := check(as, fresh); got != "error: oidc: verify token: failed to verify signature: failed to verify id token signature" {
		t.Errorf("unpublished key: %s", got)
	}
	if n := is.fetches.Load(); n != 2 {
		t.Errorf("fetches after an unknown key: %d", n)
	}
	// Published: the next check fetches the set and takes it.
	is.mu.Lock()
	is.keys["new"] = newKey
	is.cacheControl = "public, max-age=3600"
	is.mu.Unlock()
	if got := check(as, fresh); got != ok {
		t.Errorf("published key: %s", got)
	}
	// The set may now be kept an hour: an unknown key is refused
	// without a fetch.
	is.mu.Lock()
	is.unlisted["later"] = newKey
	is.mu.Unlock()
	n := is.fetches.Load()
	if got := check(as, is.token("later", `{"sub":"a"}`)); got != "error: oidc: verify token: failed to verify signature: failed to verify id token signature" {
		t.Errorf("unknown key, fresh set: %s", got)
	}
	if is.fetches.Load() != n {
		t.Errorf("a fresh set was fetched again")
	}
}
