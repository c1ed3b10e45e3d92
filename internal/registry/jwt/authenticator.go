package jwt

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kplane-dev/kplane/internal/registry"
)

// AllSigningAlgs are the algorithms a token may be signed with, sorted:
// those Kubernetes accepts, which --authentication-config's
// authenticators all take.
var AllSigningAlgs = []string{"ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512"}

// Options are what the authenticators need besides their configuration.
type Options struct {
	// SigningAlgs are the algorithms taken (nil: AllSigningAlgs), as
	// --oidc-signing-algs narrows them for the legacy flags.
	SigningAlgs []string
	// Client, if set, is the HTTP client for the issuers, instead of one
	// trusting each issuer's certificateAuthority (tests).
	Client *http.Client
	// RetryInterval is how long an issuer's discovery waits before it is
	// tried again after it failed (0: 10 s, upstream's).
	RetryInterval time.Duration
	// Metrics receive the figures; nil keeps none.
	Metrics *Metrics
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

// Authenticators are a configuration's JWT authenticators, as
// kube-apiserver runs them: a token goes to the authenticator of the
// issuer it names ("iss", unverified), whose answer is final; a token
// naming none of them is not theirs.
type Authenticators struct {
	list   []*authenticator
	cancel context.CancelFunc
}

// New makes the authenticators of c, which Validate found valid, and
// starts finding their issuers' keys (OpenID discovery, then the key
// set), in the background until ctx ends or Stop: until an issuer's
// discovery succeeds, its tokens are refused as not initialized.
func New(ctx context.Context, c *Configuration, disallowed []string, opts Options) (*Authenticators, error) {
	algs := opts.SigningAlgs
	if len(algs) == 0 {
		algs = AllSigningAlgs
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	as := &Authenticators{cancel: cancel}
	for i := range c.JWT {
		cfg := c.JWT[i]
		progs, errs := compile(&cfg, nil, disallowed)
		if err := errs.ToAggregate(); err != nil {
			cancel()
			return nil, err
		}
		for _, a := range algs {
			if !slices.Contains(AllSigningAlgs, a) {
				cancel()
				return nil, fmt.Errorf("oidc: unsupported signing alg: %q", a)
			}
		}
		if t := cfg.Issuer.EgressSelectorType; t != "" {
			cancel()
			return nil, fmt.Errorf("oidc: egress lookup required with egress selector type %q", t)
		}
		client := opts.Client
		if client == nil {
			tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
			if cfg.Issuer.CertificateAuthority != "" {
				pool, err := caPool(cfg.Issuer.CertificateAuthority)
				if err != nil {
					cancel()
					return nil, err
				}
				tlsConfig.RootCAs = pool
			}
			client = &http.Client{
				Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig, ForceAttemptHTTP2: true,
					TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 90 * time.Second, MaxIdleConnsPerHost: 25},
				Timeout: 30 * time.Second,
			}
		}
		a := &authenticator{
			cfg: cfg, progs: progs, algs: algs, client: client, opts: opts, ctx: ctx,
			issuerHash: hashOf(cfg.Issuer.URL),
		}
		for _, r := range cfg.ClaimValidationRules {
			if r.Claim != "" {
				a.required = append(a.required, r)
			}
		}
		a.setHealth(fmt.Errorf("oidc: authenticator for issuer %q is not initialized", cfg.Issuer.URL))
		as.list = append(as.list, a)
		go a.discover(ctx)
	}
	return as, nil
}

// Stop stops the authenticators' background work.
func (as *Authenticators) Stop() { as.cancel() }

// Healthy is nil once every issuer's discovery has succeeded; otherwise
// each failing one's error, as upstream's health check of a reloaded
// configuration.
func (as *Authenticators) Healthy() error {
	var errs []error
	for _, a := range as.list {
		if err := *a.health.Load(); err != nil {
			errs = append(errs, fmt.Errorf("oidc: authenticator for issuer %q is not healthy: %w", a.cfg.Issuer.URL, err))
		}
	}
	return utilerrors.NewAggregate(errs)
}

// Issuers are the issuers' URLs, in order.
func (as *Authenticators) Issuers() []string {
	var out []string
	for _, a := range as.list {
		out = append(out, a.cfg.Issuer.URL)
	}
	return out
}

// AuthenticateToken returns the user of token if it is a token of one of
// the issuers: ok is false with no error for a token that names none of
// them. The user has system:authenticated among its groups
// (registry.Authenticated), as upstream's authenticated users. The errors are kube-apiserver's.
func (as *Authenticators) AuthenticateToken(ctx context.Context, token string) (u registry.User, ok bool, err error) {
	iss, err := untrustedIssuer(token) // read once for all of them
	if err != nil {
		return registry.User{}, false, nil
	}
	for _, a := range as.list {
		if iss != a.cfg.Issuer.URL {
			continue
		}
		start := time.Now()
		u, err := a.authenticate(ctx, token)
		a.opts.Metrics.observe(a.issuerHash, err == nil, time.Since(start))
		if err != nil {
			return registry.User{}, false, err
		}
		return registry.Authenticated(u), true, nil
	}
	return registry.User{}, false, nil
}

// authenticator is one issuer's.
type authenticator struct {
	cfg        Authenticator
	progs      *programs
	required   []ClaimValidationRule // the rules with a claim
	algs       []string
	client     *http.Client
	opts       Options
	issuerHash string

	keys   atomic.Pointer[keySet] // nil until discovery succeeds
	health atomic.Pointer[error]

	ctx context.Context // the authenticators' lifetime

	mu       sync.Mutex
	verified map[string]*keySet   // tokens whose signature checked out, with the set that checked it
	users    map[string]knownUser // tokens that authenticated, with their users
	others   map[string]*keySet   // other issuers' key sets, for distributed claims
}

func (a *authenticator) setHealth(err error) { a.health.Store(&err) }

// untrustedIssuer is the issuer a token names, unchecked ("iss" of its
// payload; accounts.google.com is Google's URL), with upstream's errors.
func untrustedIssuer(token string) (string, error) {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return "", errors.New("token is not compact JWT")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("malformed token")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", fmt.Errorf("error decoding token: %v", err)
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", fmt.Errorf("while unmarshaling token: %v", err)
	}
	if c.Issuer == "accounts.google.com" {
		return "https://accounts.google.com", nil
	}
	return c.Issuer, nil
}

// authenticate checks token and maps its claims to a user, as upstream's
// JWT authenticator, in its order and with its errors.
func (a *authenticator) authenticate(ctx context.Context, token string) (registry.User, error) {
	keys := a.keys.Load()
	if keys == nil {
		return registry.User{}, errors.New("oidc: authenticator not initialized")
	}
	if u, ok := a.known(token, keys); ok {
		return u, nil
	}
	payload, tok, err := a.verify(ctx, keys, a.cfg.Issuer.URL, token, true)
	if err != nil {
		return registry.User{}, fmt.Errorf("oidc: verify token: %v", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return registry.User{}, fmt.Errorf("oidc: parse claims: %v", err)
	}
	expanded := false
	if claim := a.cfg.ClaimMappings.Groups.Claim; claim != "" {
		_, had := raw[claim]
		if err := a.expand(ctx, raw, claim); err != nil {
			return registry.User{}, fmt.Errorf("oidc: could not expand distributed claims: %v", err)
		}
		_, has := raw[claim]
		expanded = has && !had
	}
	var claims map[string]any // as CEL sees them, decoded once
	if a.progs.username != nil || a.progs.groups != nil || a.progs.uid != nil || a.progs.extra != nil || a.progs.claimRules != nil {
		if expanded {
			payload, _ = json.Marshal(raw)
		}
		if err := json.Unmarshal(payload, &claims); err != nil {
			return registry.User{}, fmt.Errorf("oidc: parse claims: %v", err)
		}
	}
	u := registry.User{}
	if u.Name, err = a.username(ctx, raw, claims); err != nil {
		return registry.User{}, err
	}
	if u.Groups, err = a.groups(ctx, raw, claims); err != nil {
		return registry.User{}, err
	}
	if u.UID, err = a.uid(ctx, raw, claims); err != nil {
		return registry.User{}, err
	}
	if u.Extra, err = a.extra(ctx, raw, claims); err != nil {
		return registry.User{}, err
	}
	for _, r := range a.required {
		v, ok := raw[r.Claim]
		if !ok {
			return registry.User{}, fmt.Errorf("oidc: required claim %s not present in ID token", r.Claim)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return registry.User{}, fmt.Errorf("oidc: parse claim %s: %w", r.Claim, err)
		}
		if s != r.RequiredValue {
			return registry.User{}, fmt.Errorf("oidc: required claim %s value does not match. Got = %s, want = %s", r.Claim, s, r.RequiredValue)
		}
	}
	for _, r := range a.progs.claimRules {
		if err := checkRule(r, func() (ref.Val, error) { return r.prog.EvalClaims(ctx, claims) }); err != nil {
			return registry.User{}, fmt.Errorf("oidc: error evaluating claim validation expression: %w", err)
		}
	}
	for _, r := range a.progs.userRules {
		if err := checkRule(r, func() (ref.Val, error) { return r.prog.EvalUser(ctx, u.Name, u.UID, u.Groups, u.Extra) }); err != nil {
			return registry.User{}, fmt.Errorf("oidc: error evaluating user info validation rule: %w", err)
		}
	}
	if !expanded {
		a.remember(token, keys, u, tok.Expiry.Time)
	}
	return u, nil
}

// checkRule evaluates a validation rule: an error, a result that is not a
// bool, or false (with the rule's message) fails it.
func checkRule(r claimRule, eval func() (ref.Val, error)) error {
	v, err := eval()
	if err != nil {
		return err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return errors.New("validation expression must return a boolean")
	}
	if !b {
		return fmt.Errorf("validation expression '%s' failed: %s", r.prog.Expression, r.message)
	}
	return nil
}

func (a *authenticator) username(ctx context.Context, raw map[string]json.RawMessage, claims map[string]any) (string, error) {
	if p := a.progs.username; p != nil {
		v, err := p.EvalClaims(ctx, claims)
		if err != nil {
			return "", fmt.Errorf("oidc: error evaluating username claim expression: %w", err)
		}
		s, ok := v.(types.String)
		if !ok {
			return "", errors.New("oidc: error evaluating username claim expression: username claim expression must return a string")
		}
		if s == "" {
			return "", errors.New("oidc: empty username via CEL expression is not allowed")
		}
		return string(s), nil
	}
	claim := a.cfg.ClaimMappings.Username.Claim
	var name string
	if err := unmarshalClaim(raw, claim, &name); err != nil {
		return "", fmt.Errorf("oidc: parse username claims %q: %v", claim, err)
	}
	if claim == "email" {
		if v, ok := raw["email_verified"]; ok {
			var verified bool
			if err := json.Unmarshal(v, &verified); err != nil {
				return "", fmt.Errorf("oidc: parse 'email_verified' claim: %v", err)
			}
			if !verified {
				return "", errors.New("oidc: email not verified")
			}
		}
	}
	if p := a.cfg.ClaimMappings.Username.Prefix; p != nil {
		name = *p + name
	}
	return name, nil
}

func (a *authenticator) groups(ctx context.Context, raw map[string]json.RawMessage, claims map[string]any) ([]string, error) {
	if claim := a.cfg.ClaimMappings.Groups.Claim; claim != "" {
		v, ok := raw[claim]
		if !ok {
			return nil, nil
		}
		var groups []string
		if err := json.Unmarshal(v, &groups); err != nil {
			var one string
			if err := json.Unmarshal(v, &one); err != nil {
				return nil, fmt.Errorf("oidc: parse groups claim %q: %w", claim, err)
			}
			groups = []string{one}
		}
		if p := a.cfg.ClaimMappings.Groups.Prefix; p != nil && *p != "" {
			for i := range groups {
				groups[i] = *p + groups[i]
			}
		}
		return groups, nil
	}
	p := a.progs.groups
	if p == nil {
		return nil, nil
	}
	v, err := p.EvalClaims(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("oidc: error evaluating group claim expression: %w", err)
	}
	groups, err := stringList(v)
	if err != nil {
		return nil, fmt.Errorf("oidc: error evaluating group claim expression: %w", err)
	}
	return groups, nil
}

func (a *authenticator) uid(ctx context.Context, raw map[string]json.RawMessage, claims map[string]any) (string, error) {
	if claim := a.cfg.ClaimMappings.UID.Claim; claim != "" {
		var uid string
		if err := unmarshalClaim(raw, claim, &uid); err != nil {
			return "", fmt.Errorf("oidc: parse uid claim %q: %w", claim, err)
		}
		return uid, nil
	}
	p := a.progs.uid
	if p == nil {
		return "", nil
	}
	v, err := p.EvalClaims(ctx, claims)
	if err != nil {
		return "", fmt.Errorf("oidc: error evaluating uid claim expression: %w", err)
	}
	s, ok := v.(types.String)
	if !ok {
		return "", errors.New("oidc: error evaluating uid claim expression: uid claim expression must return a string")
	}
	return string(s), nil
}

func (a *authenticator) extra(ctx context.Context, raw map[string]json.RawMessage, claims map[string]any) (map[string][]string, error) {
	extra := map[string][]string{}
	var jti string
	if unmarshalClaim(raw, "jti", &jti) == nil && jti != "" {
		extra["authentication.kubernetes.io/credential-id"] = []string{"JTI=" + jti}
	}
	for _, x := range a.progs.extra {
		v, err := x.prog.EvalClaims(ctx, claims)
		if err != nil {
			return nil, err
		}
		values, err := stringList(v)
		if err != nil {
			return nil, fmt.Errorf("oidc: error evaluating extra claim expression: %s: %w", x.prog.Expression, err)
		}
		if len(values) > 0 {
			extra[x.key] = values
		}
	}
	if len(extra) == 0 {
		return nil, nil
	}
	return extra, nil
}

// stringList is an expression's result as a list of strings, as upstream
// reads a groups or extra mapping's: a string is one (none if empty), a
// list of strings is its non-empty ones, null is none.
func stringList(v ref.Val) ([]string, error) {
	errNotStrings := errors.New("expression must return a string or a list of strings")
	switch v.Type().TypeName() {
	case celgo.StringType.TypeName():
		if s := v.Value().(string); s != "" {
			return []string{s}, nil
		}
		return nil, nil
	case celgo.NullType.TypeName():
		return nil, nil
	case celgo.ListType(nil).TypeName():
		var out []string
		add := func(x any) error {
			if r, ok := x.(ref.Val); ok {
				x = r.Value()
			}
			s, ok := x.(string)
			if !ok {
				return errNotStrings
			}
			if s != "" {
				out = append(out, s)
			}
			return nil
		}
		switch items := v.Value().(type) {
		case []any:
			for _, x := range items {
				if err := add(x); err != nil {
					return nil, err
				}
			}
		case []ref.Val:
			for _, x := range items {
				if err := add(x); err != nil {
					return nil, err
				}
			}
		case []string:
			for _, x := range items {
				if err := add(x); err != nil {
					return nil, err
				}
			}
		default:
			return nil, errNotStrings
		}
		return out, nil
	}
	return nil, errNotStrings
}

// unmarshalClaim decodes the claim name into v: "claim not present" if
// the token has none.
func unmarshalClaim(raw map[string]json.RawMessage, name string, v any) error {
	c, ok := raw[name]
	if !ok {
		return errors.New("claim not present")
	}
	return json.Unmarshal(c, v)
}

// hashOf is upstream's hash of an issuer or identity in metric labels.
func hashOf(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s)))
}
