package jwt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// expand resolves the claim from its distributed source, if the token
// holds it only there (OpenID Connect Core 5.6.2: "_claim_names" names
// its source in "_claim_sources", an endpoint serving a JWT), as
// upstream does for the groups claim: the endpoint is called with the
// source's access token, and the JWT it answers must be valid for the
// same audiences, signed by its own issuer (found by discovery), and
// hold the claim, which is put into raw. The errors are upstream's.
func (a *authenticator) expand(ctx context.Context, raw map[string]json.RawMessage, claim string) error {
	if _, ok := raw[claim]; ok {
		return nil
	}
	names, ok := raw["_claim_names"]
	if !ok {
		return nil
	}
	var sourceOf map[string]string
	if err := json.Unmarshal(names, &sourceOf); err != nil {
		return fmt.Errorf("oidc: error parsing distributed claim names: %v", err)
	}
	rawSources, ok := raw["_claim_sources"]
	if !ok {
		return errors.New("oidc: no claim sources")
	}
	var sources map[string]struct {
		URL         string `json:"endpoint,omitempty"`
		AccessToken string `json:"access_token,omitempty"`
	}
	if err := json.Unmarshal(rawSources, &sources); err != nil {
		return fmt.Errorf("oidc: could not parse claim sources: %v", err)
	}
	src, ok := sourceOf[claim]
	if !ok {
		return nil
	}
	ep, ok := sources[src]
	if !ok {
		return fmt.Errorf("id token _claim_names contained a source %s missing in _claims_sources", src)
	}
	if ep.URL == "" {
		return nil // aggregated claims (a JWT inline) are not read, as upstream's
	}
	token, err := a.claimJWT(ctx, ep.URL, ep.AccessToken)
	if err != nil {
		return fmt.Errorf("while getting distributed claim %q: %v", claim, err)
	}
	iss, err := untrustedIssuer(token)
	if err != nil {
		return fmt.Errorf("getting untrusted issuer from endpoint %v failed for claim %q: %v", ep.URL, claim, err)
	}
	keys, err := a.keysOf(ctx, iss)
	if err != nil {
		return fmt.Errorf("verifying untrusted issuer %v failed: %v", iss, err)
	}
	payload, _, err := a.verify(ctx, keys, iss, token, false)
	if err != nil {
		return fmt.Errorf("verify distributed claim token: %v", err)
	}
	var distributed map[string]json.RawMessage
	if err := json.Unmarshal(payload, &distributed); err != nil {
		return fmt.Errorf("could not parse distributed claims for claim %v: %v", claim, err)
	}
	value, ok := distributed[claim]
	if !ok {
		return fmt.Errorf("jwt returned by distributed claim endpoint %q did not contain claim: %v", ep.URL, claim)
	}
	raw[claim] = value
	return nil
}

// claimJWT fetches a distributed claim's JWT.
func (a *authenticator) claimJWT(ctx context.Context, url, accessToken string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("while calling %v: %v", url, err)
	}
	if accessToken != "" {
		req.Header.Set("Authorization", "Bearer "+accessToken)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusIMUsed {
		return "", fmt.Errorf("error while getting distributed claim JWT: %v", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return "", errors.New("could not decode distributed claim response")
	}
	return string(body), nil
}

// keysOf is the key set of issuer iss: the authenticator's own for its
// issuer, another found by discovery (once it succeeds, kept) for
// another. Upstream finds another issuer's in the background and fails
// the requests until it has; kplane finds it before it answers.
func (a *authenticator) keysOf(ctx context.Context, iss string) (*keySet, error) {
	if iss == a.cfg.Issuer.URL {
		if k := a.keys.Load(); k != nil {
			return k, nil
		}
	}
	a.mu.Lock()
	k := a.others[iss]
	a.mu.Unlock()
	if k != nil {
		return k, nil
	}
	jwksURI, err := a.discovery(ctx, iss)
	if err != nil {
		return nil, err
	}
	k = &keySet{url: jwksURI, client: a.client, ctx: a.ctx, now: a.opts.Now}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.others == nil {
		a.others = map[string]*keySet{}
	}
	if prev := a.others[iss]; prev != nil {
		return prev, nil
	}
	a.others[iss] = k
	return k, nil
}
