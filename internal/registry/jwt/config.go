package jwt

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// Configuration is an AuthenticationConfiguration
// (apiserver.config.k8s.io v1, v1beta1 or v1alpha1), as
// --authentication-config names one: the JWT authenticators, in order,
// and who may be anonymous.
type Configuration struct {
	JWT       []Authenticator `json:"jwt"`
	Anonymous *Anonymous      `json:"anonymous,omitempty"`
}

// Anonymous is the configuration's anonymous section: whether requests
// without credentials are let in, and, with conditions, only to those
// paths.
type Anonymous struct {
	Enabled    bool `json:"enabled"`
	Conditions []struct {
		Path string `json:"path"`
	} `json:"conditions,omitempty"`
}

// Paths are the paths of the conditions.
func (a *Anonymous) Paths() []string {
	var ps []string
	for _, c := range a.Conditions {
		ps = append(ps, c.Path)
	}
	return ps
}

// Authenticator is one JWT authenticator: the issuer whose tokens it
// takes, the rules a token's claims must meet, how they make a user, and
// the rules the user must meet.
type Authenticator struct {
	Issuer               Issuer                `json:"issuer"`
	ClaimValidationRules []ClaimValidationRule `json:"claimValidationRules,omitempty"`
	ClaimMappings        ClaimMappings         `json:"claimMappings"`
	UserValidationRules  []UserValidationRule  `json:"userValidationRules,omitempty"`
}

// Issuer is where the tokens come from and whom they are for.
type Issuer struct {
	// URL is the issuer ("iss") of the tokens, an https URL; its OpenID
	// discovery document is at URL/.well-known/openid-configuration, or
	// at DiscoveryURL if set.
	URL          string  `json:"url"`
	DiscoveryURL *string `json:"discoveryURL,omitempty"`
	// CertificateAuthority is the PEM bundle the issuer's certificate is
	// checked with; empty, the system's roots.
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	// Audiences: a token must be for one of them ("aud").
	Audiences           []string `json:"audiences"`
	AudienceMatchPolicy string   `json:"audienceMatchPolicy,omitempty"`
	// EgressSelectorType is refused: kplane has no egress selector.
	EgressSelectorType string `json:"egressSelectorType,omitempty"`
}

// ClaimValidationRule is a claim that must hold a value, or an
// expression over the claims that must be true.
type ClaimValidationRule struct {
	Claim         string `json:"claim,omitempty"`
	RequiredValue string `json:"requiredValue,omitempty"`
	Expression    string `json:"expression,omitempty"`
	Message       string `json:"message,omitempty"`
}

// ClaimMappings make the user of a token.
type ClaimMappings struct {
	Username PrefixedClaimOrExpression `json:"username"`
	Groups   PrefixedClaimOrExpression `json:"groups,omitempty"`
	UID      ClaimOrExpression         `json:"uid"`
	Extra    []ExtraMapping            `json:"extra,omitempty"`
}

// PrefixedClaimOrExpression is a claim, prefixed, or an expression.
type PrefixedClaimOrExpression struct {
	Claim      string  `json:"claim,omitempty"`
	Prefix     *string `json:"prefix,omitempty"`
	Expression string  `json:"expression,omitempty"`
}

// ClaimOrExpression is a claim or an expression.
type ClaimOrExpression struct {
	Claim      string `json:"claim,omitempty"`
	Expression string `json:"expression,omitempty"`
}

// ExtraMapping is one key of the user's extra, and the expression that
// gives its values.
type ExtraMapping struct {
	Key             string `json:"key"`
	ValueExpression string `json:"valueExpression"`
}

// UserValidationRule is an expression over the user that must be true.
type UserValidationRule struct {
	Expression string `json:"expression"`
	Message    string `json:"message,omitempty"`
}

// ParseConfiguration reads an AuthenticationConfiguration, strictly, as
// kube-apiserver v1.37 reads its --authentication-config's, with its
// errors. It is not checked: see Validate.
func ParseConfiguration(data []byte) (*Configuration, error) {
	var typ struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &typ); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	switch {
	case typ.Kind == "":
		//lint:ignore ST1005 upstream's words
		return nil, fmt.Errorf("Object 'Kind' is missing in '%s'", data)
	case typ.APIVersion == "":
		//lint:ignore ST1005 upstream's words
		return nil, fmt.Errorf("Object 'apiVersion' is missing in '%s'", data)
	case !slices.Contains([]string{"apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"}, typ.APIVersion),
		typ.Kind != "AuthenticationConfiguration" && !slices.Contains(otherKinds, typ.Kind):
		return nil, fmt.Errorf("no kind %q is registered for version %q in scheme \"pkg/runtime/scheme.go:111\"", typ.Kind, typ.APIVersion)
	case typ.Kind != "AuthenticationConfiguration":
		return nil, fmt.Errorf("expected AuthenticationConfiguration, got *apiserver.%s", typ.Kind)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	var doc struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		JWT        []Authenticator `json:"jwt"`
		Anonymous  *Anonymous      `json:"anonymous,omitempty"`
	}
	strict, err := sigsjson.UnmarshalStrict(j, &doc)
	if err != nil {
		return nil, err
	}
	// Keys repeated in the YAML, which its conversion to JSON hid.
	var dup map[string]any
	if yerr := yaml.UnmarshalStrict(data, &dup); yerr != nil && strings.Contains(yerr.Error(), "already set in map") {
		msg := strings.TrimPrefix(yerr.Error(), "error unmarshaling JSON: while decoding JSON: ")
		msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
		strict = append([]error{errors.New(msg)}, strict...)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, errors.New("strict decoding error: " + strings.Join(msgs, ", "))
	}
	return &Configuration{JWT: doc.JWT, Anonymous: doc.Anonymous}, nil
}

// otherKinds are the other kinds of apiserver.config.k8s.io, which
// upstream's decoder knows and then finds not to be this one.
var otherKinds = []string{"AdmissionConfiguration", "AuthorizationConfiguration", "EgressSelectorConfiguration", "EncryptionConfiguration", "TracingConfiguration"}

// Validate checks c as kube-apiserver does, with its errors at their
// fields: no issuer may be one of disallowed (the service account token
// issuers), and each authenticator's expressions must compile.
func (c *Configuration) Validate(disallowed []string) field.ErrorList {
	root := field.NewPath("jwt")
	if len(c.JWT) > 64 {
		return field.ErrorList{field.TooMany(root, len(c.JWT), 64)}
	}
	var errs field.ErrorList
	issuers, discoveries := map[string]bool{}, map[string]bool{}
	for i := range c.JWT {
		a := &c.JWT[i]
		p := root.Index(i)
		_, aerrs := compile(a, p, disallowed)
		errs = append(errs, aerrs...)
		if issuers[a.Issuer.URL] {
			errs = append(errs, field.Duplicate(p.Child("issuer", "url"), a.Issuer.URL))
		}
		issuers[a.Issuer.URL] = true
		if d := a.Issuer.DiscoveryURL; d != nil && *d != "" {
			if discoveries[*d] {
				errs = append(errs, field.Duplicate(p.Child("issuer", "discoveryURL"), *d))
			}
			discoveries[*d] = true
		}
	}
	if c.Anonymous != nil && !c.Anonymous.Enabled && len(c.Anonymous.Conditions) > 0 {
		// Shown as upstream's internal type shows.
		shown := make([]struct{ Path string }, len(c.Anonymous.Conditions))
		for i, cond := range c.Anonymous.Conditions {
			shown[i].Path = cond.Path
		}
		errs = append(errs, field.Invalid(field.NewPath("anonymous", "conditions"), shown, "enabled should be set to true when conditions are defined"))
	}
	return errs
}

// programs are an authenticator's compiled expressions.
type programs struct {
	username, groups, uid *cel.AuthenticationExpression
	extra                 []extraProgram
	claimRules            []claimRule
	userRules             []userRule
}

type extraProgram struct {
	key  string
	prog *cel.AuthenticationExpression
}

type claimRule struct {
	prog    *cel.AuthenticationExpression
	message string
}

type userRule = claimRule

// compile checks a and compiles its expressions, as upstream's
// validateJWTAuthenticator, in its order.
func compile(a *Authenticator, p *field.Path, disallowed []string) (*programs, field.ErrorList) {
	var errs field.ErrorList
	ps := &programs{}
	ip := p.Child("issuer")
	errs = append(errs, validateIssuer(&a.Issuer, ip, disallowed)...)

	// Claim validation rules.
	usesEmailVerified := false
	rp := p.Child("claimValidationRules")
	seenClaims, seenExprs := map[string]bool{}, map[string]bool{}
	for i, r := range a.ClaimValidationRules {
		fp := rp.Index(i)
		switch {
		case r.Claim != "" && r.Expression != "":
			errs = append(errs, field.Invalid(fp, r.Claim, "claim and expression can't both be set"))
		case r.Claim == "" && r.Expression == "":
			errs = append(errs, field.Required(fp, "claim or expression is required"))
		case r.Claim != "":
			if r.Message != "" {
				errs = append(errs, field.Invalid(fp.Child("message"), r.Message, "may not be specified when claim is set"))
			}
			if seenClaims[r.Claim] {
				errs = append(errs, field.Duplicate(fp.Child("claim"), r.Claim))
			}
			seenClaims[r.Claim] = true
		default:
			if r.RequiredValue != "" {
				errs = append(errs, field.Invalid(fp.Child("requiredValue"), r.RequiredValue, "may not be specified when expression is set"))
			}
			if seenExprs[r.Expression] {
				errs = append(errs, field.Duplicate(fp.Child("expression"), r.Expression))
				continue
			}
			seenExprs[r.Expression] = true
			prog, err := compileAt(fp.Child("expression"), r.Expression, cel.CompileClaimsExpression, true)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ps.claimRules = append(ps.claimRules, claimRule{prog: prog, message: r.Message})
			usesEmailVerified = usesEmailVerified || prog.Selects("email_verified")
		}
	}

	// Claim mappings.
	mp := p.Child("claimMappings")
	m := &a.ClaimMappings
	usesEmail := false
	prog, perrs := prefixedClaimOrExpression(m.Username, mp.Child("username"), true)
	errs = append(errs, perrs...)
	if len(perrs) == 0 && prog != nil {
		ps.username = prog
		usesEmail = prog.Selects("email")
		usesEmailVerified = usesEmailVerified || prog.Selects("email_verified")
	}
	prog, perrs = prefixedClaimOrExpression(m.Groups, mp.Child("groups"), false)
	errs = append(errs, perrs...)
	if len(perrs) == 0 {
		ps.groups = prog
	}
	switch {
	case m.UID.Claim != "" && m.UID.Expression != "":
		errs = append(errs, field.Invalid(mp.Child("uid"), "", "claim and expression can't both be set"))
	case m.UID.Expression != "":
		prog, err := compileAt(mp.Child("uid", "expression"), m.UID.Expression, cel.CompileClaimsExpression, false)
		if err != nil {
			errs = append(errs, err)
		} else {
			ps.uid = prog
		}
	}
	seenKeys := map[string]bool{}
	for i, x := range m.Extra {
		fp := mp.Child("extra").Index(i)
		errs = append(errs, validation.IsDomainPrefixedPath(fp.Child("key"), x.Key)...)
		if x.Key != strings.ToLower(x.Key) {
			errs = append(errs, field.Invalid(fp.Child("key"), x.Key, "must be lowercase"))
		}
		if reservedDomain(x.Key) {
			errs = append(errs, field.Invalid(fp.Child("key"), x.Key, "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"))
		}
		if seenKeys[x.Key] {
			errs = append(errs, field.Duplicate(fp.Child("key"), x.Key))
			continue
		}
		seenKeys[x.Key] = true
		if x.ValueExpression == "" {
			errs = append(errs, field.Required(fp.Child("valueExpression"), ""))
			continue
		}
		prog, err := compileAt(fp.Child("valueExpression"), x.ValueExpression, cel.CompileClaimsExpression, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps.extra = append(ps.extra, extraProgram{key: x.Key, prog: prog})
		usesEmailVerified = usesEmailVerified || prog.Selects("email_verified")
	}
	if usesEmail && !usesEmailVerified {
		errs = append(errs, field.Invalid(mp.Child("username", "expression"), m.Username.Expression,
			"claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression"))
	}

	// User validation rules.
	up := p.Child("userValidationRules")
	seenExprs = map[string]bool{}
	for i, r := range a.UserValidationRules {
		fp := up.Index(i)
		switch {
		case r.Expression == "":
			errs = append(errs, field.Required(fp.Child("expression"), ""))
			continue
		case seenExprs[r.Expression]:
			errs = append(errs, field.Duplicate(fp.Child("expression"), r.Expression))
			continue
		}
		seenExprs[r.Expression] = true
		prog, err := compileAt(fp.Child("expression"), r.Expression, func(e string, _ bool) (*cel.AuthenticationExpression, error) {
			return cel.CompileUserExpression(e)
		}, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ps.userRules = append(ps.userRules, userRule{prog: prog, message: r.Message})
	}
	return ps, errs
}

// compileAt compiles expression with compileFn, its error at p as
// upstream puts a CEL error.
func compileAt(p *field.Path, expression string, compileFn func(string, bool) (*cel.AuthenticationExpression, error), mustBool bool) (*cel.AuthenticationExpression, *field.Error) {
	prog, err := compileFn(expression, mustBool)
	if err != nil {
		return nil, field.Invalid(p, expression, err.Error())
	}
	return prog, nil
}

// prefixedClaimOrExpression checks a username or groups mapping and
// compiles its expression, if it has one.
func prefixedClaimOrExpression(m PrefixedClaimOrExpression, p *field.Path, required bool) (*cel.AuthenticationExpression, field.ErrorList) {
	switch {
	case m.Expression != "" && m.Claim != "":
		return nil, field.ErrorList{field.Invalid(p, "", "claim and expression can't both be set")}
	case m.Expression == "" && m.Claim == "" && required:
		return nil, field.ErrorList{field.Required(p, "claim or expression is required")}
	case m.Expression != "":
		var errs field.ErrorList
		if m.Prefix != nil {
			errs = append(errs, field.Invalid(p.Child("prefix"), *m.Prefix, "may not be specified when expression is set"))
		}
		prog, err := compileAt(p.Child("expression"), m.Expression, cel.CompileClaimsExpression, false)
		if err != nil {
			return nil, append(errs, err)
		}
		return prog, errs
	case m.Claim != "" && m.Prefix == nil:
		return nil, field.ErrorList{field.Required(p.Child("prefix"), "prefix is required when claim is set. It can be set to an empty string to disable prefixing")}
	}
	return nil, nil
}

// reservedDomain reports whether an extra key's domain is Kubernetes'.
func reservedDomain(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// validateIssuer checks an issuer, as upstream's validateIssuer.
func validateIssuer(is *Issuer, p *field.Path, disallowed []string) field.ErrorList {
	var errs field.ErrorList
	if is.URL == "" {
		errs = append(errs, field.Required(p.Child("url"), ""))
	} else {
		errs = append(errs, validateURL(is.URL, disallowed, p.Child("url"))...)
	}
	if d := is.DiscoveryURL; d != nil && *d != "" {
		if is.URL != "" && strings.TrimRight(is.URL, "/") == strings.TrimRight(*d, "/") {
			errs = append(errs, field.Invalid(p.Child("discoveryURL"), *d, "discoveryURL must be different from URL"))
		}
		errs = append(errs, validateURL(*d, nil, p.Child("discoveryURL"))...)
	}
	ap, pp := p.Child("audiences"), p.Child("audienceMatchPolicy")
	if len(is.Audiences) == 0 {
		errs = append(errs, field.Required(ap, fmt.Sprintf("at least one %s is required", ap)))
	} else {
		seen := map[string]bool{}
		for i, a := range is.Audiences {
			if a == "" {
				errs = append(errs, field.Required(ap.Index(i), ""))
			}
			if seen[a] {
				errs = append(errs, field.Duplicate(ap.Index(i), a))
			}
			seen[a] = true
		}
		switch {
		case len(is.Audiences) > 1 && is.AudienceMatchPolicy != "MatchAny":
			errs = append(errs, field.Invalid(pp, is.AudienceMatchPolicy, "audienceMatchPolicy must be MatchAny for multiple audiences"))
		case len(is.Audiences) == 1 && is.AudienceMatchPolicy != "" && is.AudienceMatchPolicy != "MatchAny":
			errs = append(errs, field.Invalid(pp, is.AudienceMatchPolicy, "audienceMatchPolicy must be empty or MatchAny for single audience"))
		}
	}
	if is.CertificateAuthority != "" {
		if _, err := caPool(is.CertificateAuthority); err != nil {
			errs = append(errs, field.Invalid(p.Child("certificateAuthority"), "<omitted>", err.Error()))
		}
	}
	switch t := is.EgressSelectorType; t {
	case "", "controlplane", "cluster":
		// The two types pass, and New refuses them as upstream does
		// without an egress selector configuration, which kplane has
		// not: it dials issuers directly.
	default:
		errs = append(errs, field.Invalid(p.Child("egressSelectorType"), t, "egress selector must be either controlplane or cluster"))
	}
	return errs
}

// validateURL checks an issuer's or a discovery URL.
func validateURL(raw string, disallowed []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if slices.Contains(disallowed, raw) {
		shown := slices.Clone(disallowed)
		slices.Sort(shown)
		shown = slices.Compact(shown)
		errs = append(errs, field.Invalid(p, raw, fmt.Sprintf("URL must not overlap with disallowed issuers: %s", shown)))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return append(errs, field.Invalid(p, raw, err.Error()))
	}
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, raw, "URL scheme must be https"))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a username or password"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a query"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, raw, "URL must not contain a fragment"))
	}
	return errs
}

// caPool reads a PEM bundle of certificates, as client-go's
// cert.NewPoolFromBytes, with its errors.
func caPool(bundle string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	rest := []byte(bundle)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("data does not contain any valid RSA or ECDSA certificates")
	}
	return pool, nil
}
