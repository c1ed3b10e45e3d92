package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/jwt"
)

// OIDCFlags are kube-apiserver's legacy --oidc-* flags: one JWT
// authenticator, without expressions, not reloaded.
type OIDCFlags struct {
	IssuerURL      string
	ClientID       string
	CAFile         string
	UsernameClaim  string // default "sub"
	UsernamePrefix string // "": the issuer URL and "#" unless the claim is email; "-": none
	GroupsClaim    string
	GroupsPrefix   string
	SigningAlgs    []string // default RS256
	RequiredClaims map[string]string
	// Set: one of the flags was given.
	Set bool
}

// configuration is the JWT authenticator the flags describe, as
// upstream builds it from them.
func (o *OIDCFlags) configuration() (*jwt.Configuration, error) {
	claim := o.UsernameClaim
	if claim == "" {
		claim = "sub"
	}
	prefix := o.UsernamePrefix
	switch {
	case prefix == "-":
		prefix = ""
	case prefix == "" && claim != "email":
		prefix = o.IssuerURL + "#"
	}
	a := jwt.Authenticator{
		Issuer:        jwt.Issuer{URL: o.IssuerURL, Audiences: []string{o.ClientID}},
		ClaimMappings: jwt.ClaimMappings{Username: jwt.PrefixedClaimOrExpression{Claim: claim, Prefix: &prefix}},
	}
	if o.GroupsClaim != "" {
		gp := o.GroupsPrefix
		a.ClaimMappings.Groups = jwt.PrefixedClaimOrExpression{Claim: o.GroupsClaim, Prefix: &gp}
	}
	if o.CAFile != "" {
		ca, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, err
		}
		a.Issuer.CertificateAuthority = string(ca)
	}
	claims := make([]string, 0, len(o.RequiredClaims))
	for c := range o.RequiredClaims {
		claims = append(claims, c)
	}
	slices.Sort(claims)
	for _, c := range claims {
		a.ClaimValidationRules = append(a.ClaimValidationRules, jwt.ClaimValidationRule{Claim: c, RequiredValue: o.RequiredClaims[c]})
	}
	return &jwt.Configuration{JWT: []jwt.Authenticator{a}}, nil
}

// configAuthenticator is the JWT authenticators of --authentication-config
// (or the --oidc-* flags), made again when the file changes, as
// kube-apiserver's: the file is read again on every change it is told of
// and every minute; a new configuration takes over once every issuer's
// discovery has succeeded (within updateTimeout), and one that fails is
// logged and counted, leaving the one in force. The anonymous section may
// not change.
type configAuthenticator struct {
	path       string
	disallowed []string
	opts       jwt.Options
	log        *slog.Logger
	ctx        context.Context
	anonymous  *jwt.Anonymous

	// updateTimeout bounds how long a new configuration's issuers have
	// to be found; healthPoll is how often that is checked.
	updateTimeout, healthPoll time.Duration
	// interval is how often the file is read without being told of a
	// change (0: a minute).
	interval time.Duration

	current atomic.Pointer[jwt.Authenticators]

	mu       sync.Mutex // held by the one reading the file
	lastData []byte
	reloads  reloadMetrics
}

// newConfigAuthenticator reads the configuration at path (or, path
// empty, oidc's) and starts its authenticators. Errors are upstream's.
//
// anonymousFlag is whether --anonymous-auth was given: a file with an
// anonymous section may not be used with it.
func newConfigAuthenticator(ctx context.Context, path string, oidc *OIDCFlags, anonymousFlag bool, disallowed []string, metrics *jwt.Metrics, log *slog.Logger) (*configAuthenticator, error) {
	c := &configAuthenticator{
		path: path, disallowed: disallowed, log: log, ctx: ctx,
		opts:          jwt.Options{Metrics: metrics, Logger: log},
		updateTimeout: time.Minute, healthPoll: 250 * time.Millisecond,
	}
	var cfg *jwt.Configuration
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("failed to load authentication configuration from file %q: %w", path, err)
		}
		if cfg, err = loadAuthenticationConfig(data); err != nil {
			return nil, fmt.Errorf("failed to load authentication configuration from file %q: %w", path, err)
		}
		c.lastData = data
		c.reloads.hash = configHash(data)
	} else {
		var err error
		if cfg, err = oidc.configuration(); err != nil {
			return nil, err
		}
		c.opts.SigningAlgs = oidc.SigningAlgs
		if len(c.opts.SigningAlgs) == 0 {
			c.opts.SigningAlgs = []string{"RS256"}
		}
	}
	if cfg.Anonymous != nil && anonymousFlag {
		return nil, field.Forbidden(field.NewPath("anonymous"), "--anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file")
	}
	// Checked first without the service account issuers, and then each
	// authenticator with them as it is made: upstream's order, which
	// reports an overlap only in a configuration otherwise valid.
	if err := cfg.Validate(nil).ToAggregate(); err != nil {
		return nil, fmt.Errorf("invalid authentication configuration: %w", err)
	}
	as, err := jwt.New(ctx, cfg, disallowed, c.opts)
	if err != nil {
		return nil, err
	}
	c.current.Store(as)
	c.anonymous = cfg.Anonymous
	return c, nil
}

// loadAuthenticationConfig reads a file's bytes: empty is an error.
func loadAuthenticationConfig(data []byte) (*jwt.Configuration, error) {
	if len(data) == 0 {
		return nil, errors.New("empty config data")
	}
	return jwt.ParseConfiguration(data)
}

// AuthenticateToken authenticates token for the audiences asked
// (wanted), which must include one of the API server's (implicit), as
// upstream's audience-agnostic wrapper: the user is valid for those.
func (c *configAuthenticator) AuthenticateToken(ctx context.Context, token string, wanted, implicit []string) (registry.User, []string, bool, error) {
	auds := registry.AgnosticAudiences(wanted, implicit)
	if len(auds) == 0 {
		return registry.User{}, nil, false, nil
	}
	u, ok, err := c.current.Load().AuthenticateToken(ctx, token)
	if !ok || err != nil {
		return registry.User{}, nil, false, err
	}
	return u, auds, true, nil
}

// watch reads the file again when it changes and every interval, until
// ctx ends.
func (c *configAuthenticator) watch(ctx context.Context) {
	if c.path == "" {
		return
	}
	interval := c.interval
	if interval <= 0 {
		interval = time.Minute
	}
	watchFile(ctx, interval, c.path, c.reload, func(err error) {
		c.log.Error("watching authentication config file", "err", err)
	})
}

// reload reads the file and, if it changed, makes and swaps in its
// authenticators.
func (c *configAuthenticator) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, err := os.ReadFile(c.path)
	if err != nil {
		c.log.Error("failed to read authentication config file", "err", err)
		c.reloads.count("failure")
		return // the file may come back: not remembered
	}
	if bytes.Equal(data, c.lastData) {
		return
	}
	cfg, err := loadAuthenticationConfig(data)
	if err != nil {
		c.log.Error("failed to load authentication config", "err", err)
		c.reloads.count("failure")
		c.lastData = data // it will not decode until it changes
		return
	}
	errs := cfg.Validate(c.disallowed)
	if !reflect.DeepEqual(c.anonymous, cfg.Anonymous) {
		errs = append(errs, field.Forbidden(field.NewPath("anonymous"), "changed from initial configuration file"))
	}
	if err := errs.ToAggregate(); err != nil {
		c.log.Error("failed to validate authentication config", "err", err)
		c.reloads.count("failure")
		c.lastData = data
		return
	}
	as, err := jwt.New(c.ctx, cfg, c.disallowed, c.opts)
	if err != nil {
		c.log.Error("failed to update authentication config", "err", err)
		c.reloads.count("failure")
		return
	}
	if err := c.waitHealthy(as); err != nil {
		as.Stop()
		c.log.Error("failed to update authentication config", "err", err)
		c.reloads.count("failure")
		return // the issuers may come up: tried again at the next reading
	}
	old := c.current.Swap(as)
	removed := slices.DeleteFunc(old.Issuers(), func(iss string) bool { return slices.Contains(as.Issuers(), iss) })
	// The old authenticators' work (a key fetch under way) ends a minute
	// later, as upstream's.
	time.AfterFunc(time.Minute, func() {
		old.Stop()
		c.opts.Metrics.Forget(removed)
	})
	c.lastData = data
	c.reloads.mu.Lock()
	c.reloads.hash = configHash(data)
	c.reloads.mu.Unlock()
	c.reloads.count("success")
	c.log.Info("reloaded authentication config")
}

// waitHealthy waits until every issuer of as has been found, or
// updateTimeout passes (the last health error).
func (c *configAuthenticator) waitHealthy(as *jwt.Authenticators) error {
	deadline := time.Now().Add(c.updateTimeout)
	for {
		err := as.Healthy()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			return err
		}
		select {
		case <-c.ctx.Done():
		case <-time.After(c.healthPoll):
		}
	}
}

// authenticationConfigMetrics are upstream's metrics of the
// authentication configuration's reloads, and the JWT authenticators'.
func authenticationConfigMetrics(c *configAuthenticator, metrics *jwt.Metrics, idHash string) []apiserver.Metric {
	if c == nil {
		return nil
	}
	ms := reloadConfigMetrics("apiserver_authentication_config_controller_", "--authentication-config", c.path != "", &c.reloads, idHash)
	const prefix = "apiserver_authentication_jwt_authenticator_"
	return append(ms,
		apiserver.Metric{
			Name: prefix + "latency_seconds", Type: "histogram",
			Help: "Duration of checking a token of a JWT authenticator's issuer in seconds, by the issuer's hash and the result.",
			Read: func() []apiserver.Sample { return jwtSamples(metrics.Figures(idHash).Latency) },
		},
		apiserver.Metric{
			Name: prefix + "jwks_fetch_last_timestamp_seconds", Type: "gauge",
			Help: "When an issuer's key set was last fetched, by result (Unix seconds), apiserver identity and the issuer's hash.",
			Read: func() []apiserver.Sample { return jwtSamples(metrics.Figures(idHash).FetchTimes) },
		},
		apiserver.Metric{
			Name: prefix + "jwks_fetch_last_key_set_info", Type: "gauge",
			Help: "The key set last fetched from each issuer: 1, with its SHA-256, by apiserver identity and the issuer's hash.",
			Read: func() []apiserver.Sample { return jwtSamples(metrics.Figures(idHash).KeySets) },
		},
	)
}

func jwtSamples(ss []jwt.Series) []apiserver.Sample {
	out := make([]apiserver.Sample, 0, len(ss))
	for _, s := range ss {
		if s.Bounds != nil {
			out = append(out, apiserver.Sample{Labels: s.Labels, Histogram: &apiserver.Histogram{Bounds: s.Bounds, Counts: s.Counts, Sum: s.Sum}})
			continue
		}
		out = append(out, apiserver.Sample{Labels: s.Labels, Value: s.Value})
	}
	return out
}
