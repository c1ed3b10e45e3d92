package jwt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/jws"
)

// idToken is the registered claims a token's check reads, decoded as
// upstream's OpenID library (go-oidc) decodes them, so that a claim of
// the wrong type fails with its words: "aud" a string or a list, the
// times numbers (or strings holding numbers).
type idToken struct {
	Issuer       string                 `json:"iss"`
	Subject      string                 `json:"sub"`
	Audience     audience               `json:"aud"`
	Expiry       jsonTime               `json:"exp"`
	IssuedAt     jsonTime               `json:"iat"`
	NotBefore    *jsonTime              `json:"nbf"`
	Nonce        string                 `json:"nonce"`
	AtHash       string                 `json:"at_hash"`
	ClaimNames   map[string]string      `json:"_claim_names"`
	ClaimSources map[string]claimSource `json:"_claim_sources"`
}

type claimSource struct {
	Endpoint    string `json:"endpoint"`
	AccessToken string `json:"access_token"`
}

type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*a = audience{s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	*a = l
	return nil
}

// jsonTime is a time claim: seconds since the epoch, an integer or a
// decimal (a string holding one too). null is not one.
type jsonTime struct{ time.Time }

func (j *jsonTime) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	var unix int64
	if i, err := n.Int64(); err == nil {
		unix = i
	} else {
		f, err := n.Float64()
		if err != nil {
			return err
		}
		unix = int64(f)
	}
	j.Time = time.Unix(unix, 0)
	return nil
}

// verify checks token, of issuer, with keys (its signature) and its
// registered claims, as upstream's OpenID library (go-oidc) with
// Kubernetes' audience check, and returns its claims. With remember, a
// signature that verified is remembered (the tokens of requests; not a
// distributed claim's, fetched each time).
func (a *authenticator) verify(ctx context.Context, keys *keySet, issuer, token string, remember bool) ([]byte, *idToken, error) {
	if strings.Count(token, ".") > 2 {
		return nil, nil, errors.New("oidc: malformed jwt")
	}
	t, err := jws.Split(token)
	if err != nil {
		return nil, nil, fmt.Errorf("oidc: malformed jwt: %v", err)
	}
	if !slices.Contains(a.algs, t.Header.Alg) {
		return nil, nil, fmt.Errorf("oidc: id token signed with unsupported algorithm, expected %q got %q", a.algs, t.Header.Alg)
	}
	if !remember || !a.signatureKnown(token, keys) {
		if err := keys.verify(ctx, t); err != nil {
			return nil, nil, fmt.Errorf("failed to verify signature: %v", err)
		}
		if remember {
			a.rememberSignature(token, keys)
		}
	}
	c := &idToken{}
	if err := json.Unmarshal(t.Payload, c); err != nil {
		return nil, nil, fmt.Errorf("oidc: failed to unmarshal claims: %v", err)
	}
	for _, src := range c.ClaimNames {
		if src == "" {
			return nil, nil, errors.New("oidc: failed to obtain source from claim name")
		}
		if _, ok := c.ClaimSources[src]; !ok {
			return nil, nil, errors.New("oidc: source does not exist")
		}
	}
	if c.Issuer != issuer && !(issuer == "https://accounts.google.com" && c.Issuer == "accounts.google.com") {
		return nil, nil, fmt.Errorf("oidc: id token issued by a different provider, expected %q got %q", issuer, c.Issuer)
	}
	auds := a.cfg.Issuer.Audiences
	if len(auds) == 1 && !slices.Contains(c.Audience, auds[0]) {
		return nil, nil, fmt.Errorf("oidc: expected audience %q got %q", auds[0], []string(c.Audience))
	}
	now := a.opts.Now()
	if c.Expiry.Before(now) {
		return nil, nil, fmt.Errorf("oidc: token is expired (Token Expiry: %v)", c.Expiry.Time)
	}
	if c.NotBefore != nil && now.Add(time.Minute).Before(c.NotBefore.Time) {
		return nil, nil, fmt.Errorf("oidc: current time %v before the nbf (not before) time: %v", now, c.NotBefore.Time)
	}
	if !slices.ContainsFunc(c.Audience, func(x string) bool { return slices.Contains(auds, x) }) {
		sorted := slices.Clone(auds)
		slices.Sort(sorted)
		return nil, nil, fmt.Errorf("oidc: expected audience in %q got %q", sorted, []string(c.Audience))
	}
	return t.Payload, c, nil
}

// maxVerified bounds the tokens whose signatures an authenticator
// remembers: when full, it starts over.
const maxVerified = 4096

// signatureKnown reports whether token's signature was checked with
// keys before. A client sends the same token with every request, and
// checking its signature costs as much as the rest of the request;
// everything else (the times, the audiences, the mappings and rules) is
// checked every time. A key the issuer stops publishing is still
// trusted for the tokens it signed that were seen, as upstream's
// library keeps trusting a key until a token fails to verify.
func (a *authenticator) signatureKnown(token string, keys *keySet) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.verified[token] == keys
}

func (a *authenticator) rememberSignature(token string, keys *keySet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		a.verified = make(map[string]*keySet)
	}
	a.verified[token] = keys
}

// knownUser is the user a token authenticated as, until it expires.
type knownUser struct {
	keys   *keySet
	user   registry.User
	expiry time.Time
}

// known returns the user token authenticated as before with keys, if it
// has not expired since. The mappings and rules are functions of the
// token's claims alone, so they give the same user again; the expiry
// is checked every time (an expired token is checked anew, for the
// error). A token whose groups came from a distributed source is not
// kept: the source is asked every time. Bounded as the signatures are.
func (a *authenticator) known(token string, keys *keySet) (registry.User, bool) {
	a.mu.Lock()
	k, ok := a.users[token]
	a.mu.Unlock()
	if !ok || k.keys != keys || k.expiry.Before(a.opts.Now()) {
		return registry.User{}, false
	}
	return cloneUser(k.user), true
}

// cloneUser is a copy of u sharing nothing with it.
func cloneUser(u registry.User) registry.User {
	u.Groups = slices.Clone(u.Groups)
	if u.Extra != nil {
		extra := make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = slices.Clone(v)
		}
		u.Extra = extra
	}
	return u
}

func (a *authenticator) remember(token string, keys *keySet, u registry.User, expiry time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.users == nil || len(a.users) >= maxVerified {
		a.users = make(map[string]knownUser)
	}
	a.users[token] = knownUser{keys: keys, user: cloneUser(u), expiry: expiry}
}

// keysFresh is how long before a key set's expiry it is fetched again
// when a token does not verify with it (go-oidc's keysExpiryDelta).
const keysFresh = 30 * time.Second

// keySet is an issuer's keys, fetched from its jwks_uri when a token
// does not verify with those held and they are not fresh, as upstream's
// OpenID library keeps them: a set is fresh until its Cache-Control
// max-age (or Expires) less 30 s, so without one every token that does
// not verify fetches the set again (one fetch at a time).
type keySet struct {
	url    string
	client *http.Client
	ctx    context.Context // the authenticator's: fetches outlive a request
	now    func() time.Time
	// fetched observes each fetch: its body if it decoded, its failure.
	fetched func(body []byte, err error)

	mu       sync.Mutex
	keys     []jws.JWK
	expiry   time.Time
	inflight *inflight
}

type inflight struct {
	done chan struct{}
	keys []jws.JWK
	err  error
}

// verify checks t's signature with a key of the set: one with its key
// id, or any if it names none.
func (s *keySet) verify(ctx context.Context, t *jws.Token) error {
	try := func(keys []jws.JWK) bool {
		for _, k := range keys {
			if (t.Header.Kid == "" || k.Kid == t.Header.Kid) && k.Key != nil && t.Header.Crit == nil &&
				jws.Verify(k.Key, t.Header.Alg, t.Signed, t.Signature) {
				return true
			}
		}
		return false
	}
	s.mu.Lock()
	keys, expiry := s.keys, s.expiry
	s.mu.Unlock()
	if try(keys) {
		return nil
	}
	if !s.now().Add(keysFresh).After(expiry) {
		return errors.New("failed to verify id token signature")
	}
	keys, err := s.fetch(ctx)
	if err != nil {
		return fmt.Errorf("fetching keys %v", err)
	}
	if try(keys) {
		return nil
	}
	return errors.New("failed to verify id token signature")
}

// fetch gets the set, or waits for the fetch under way.
func (s *keySet) fetch(ctx context.Context) ([]jws.JWK, error) {
	s.mu.Lock()
	f := s.inflight
	if f == nil {
		f = &inflight{done: make(chan struct{})}
		s.inflight = f
		go func() {
			keys, expiry, err := s.get()
			f.keys, f.err = keys, err
			s.mu.Lock()
			if err == nil {
				s.keys, s.expiry = keys, expiry
			}
			s.inflight = nil
			s.mu.Unlock()
			close(f.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-f.done:
		return f.keys, f.err
	}
}

// get fetches the set, with go-oidc's errors.
func (s *keySet) get() ([]jws.JWK, time.Time, error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("oidc: can't create request: %v", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.observe(nil, err)
		return nil, time.Time{}, fmt.Errorf("oidc: get keys failed %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		s.observe(nil, err)
		return nil, time.Time{}, fmt.Errorf("unable to read response body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("oidc: get keys failed: %s %s", resp.Status, body)
		s.observe(nil, err)
		return nil, time.Time{}, err
	}
	keys, err := jws.ParseKeySet(body)
	if err != nil {
		err = fmt.Errorf("oidc: failed to decode keys: %v %s", contentTypeError(resp, err), body)
		s.observe(nil, err)
		return nil, time.Time{}, err
	}
	s.observe(body, nil)
	expiry := s.now()
	if e, ok := cacheExpiry(resp, expiry); ok && e.After(expiry) {
		expiry = e
	}
	return keys, expiry, nil
}

func (s *keySet) observe(body []byte, err error) {
	if s.fetched != nil {
		s.fetched(body, err)
	}
}

// maxDocument bounds a discovery document or key set read.
const maxDocument = 1 << 20

// contentTypeError is go-oidc's error for a body that does not decode:
// it names the Content-Type.
func contentTypeError(resp *http.Response, err error) error {
	ct := resp.Header.Get("Content-Type")
	if mt, _, perr := mime.ParseMediaType(ct); perr == nil && mt == "application/json" {
		return fmt.Errorf("got Content-Type = application/json, but could not unmarshal as JSON: %w", err)
	}
	return fmt.Errorf("expected Content-Type = application/json, got %q: %w", ct, err)
}

// cacheExpiry is when resp says it may be kept until: its Cache-Control
// max-age (none with no-store or no-cache), or its Expires.
func cacheExpiry(resp *http.Response, now time.Time) (time.Time, bool) {
	cc := resp.Header.Get("Cache-Control")
	for _, d := range strings.Split(cc, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(strings.ToLower(d)), "=")
		switch name {
		case "no-store", "no-cache":
			return time.Time{}, false
		case "max-age":
			if n, err := strconv.Atoi(strings.Trim(value, `"`)); err == nil && n >= 0 {
				return now.Add(time.Duration(n) * time.Second), true
			}
		}
	}
	if e := resp.Header.Get("Expires"); e != "" {
		if t, err := http.ParseTime(e); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
