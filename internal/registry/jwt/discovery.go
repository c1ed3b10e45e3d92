package jwt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// discover finds the issuer's key set by OpenID discovery, as upstream's
// authenticator does at its start: the discovery document at the
// issuer's /.well-known/openid-configuration (or discoveryURL) must name
// the issuer itself and a jwks_uri. A failure is logged and kept as the
// authenticator's health, and discovery is tried again every
// RetryInterval until it succeeds or ctx ends.
func (a *authenticator) discover(ctx context.Context) {
	for {
		jwksURI, err := a.discovery(ctx, a.cfg.Issuer.URL)
		if err == nil {
			ks := &keySet{url: jwksURI, client: a.client, ctx: ctx, now: a.opts.Now}
			ks.fetched = func(body []byte, err error) { a.opts.Metrics.fetched(a.issuerHash, body, err) }
			a.keys.Store(ks)
			a.setHealth(nil)
			return
		}
		if ctx.Err() != nil {
			return
		}
		a.opts.Logger.Error("oidc authenticator: initializing plugin", "issuer", a.cfg.Issuer.URL, "err", err)
		a.setHealth(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.opts.RetryInterval):
		}
	}
}

// discovery reads the discovery document of issuer and returns its
// jwks_uri, with go-oidc's errors. The configured issuer's is read from
// discoveryURL, if set.
func (a *authenticator) discovery(ctx context.Context, issuer string) (string, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	if d := a.cfg.Issuer.DiscoveryURL; d != nil && *d != "" && issuer == a.cfg.Issuer.URL {
		u = *d
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument))
	if err != nil {
		return "", fmt.Errorf("unable to read response body: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("oidc: failed to decode provider discovery object: %v", contentTypeError(resp, err))
	}
	if doc.Issuer != issuer {
		return "", fmt.Errorf("oidc: issuer did not match the issuer returned by provider, expected %q got %q", issuer, doc.Issuer)
	}
	if doc.JWKSURI == "" {
		return "", errors.New("provider did not return JWKS URL")
	}
	return doc.JWKSURI, nil
}
