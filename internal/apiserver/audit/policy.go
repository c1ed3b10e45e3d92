package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Level is how much of a request an audit event records.
type Level string

// The levels, from least to most recorded.
const (
	// LevelNone records nothing: no event is written.
	LevelNone Level = "None"
	// LevelMetadata records who asked for what, and the answer's status,
	// without the bodies.
	LevelMetadata Level = "Metadata"
	// LevelRequest adds the request's body.
	LevelRequest Level = "Request"
	// LevelRequestResponse adds the response's body too.
	LevelRequestResponse Level = "RequestResponse"
)

// rank places l in the order None < Metadata < Request < RequestResponse;
// an unknown level ranks with None.
func (l Level) rank() int {
	switch l {
	case LevelMetadata:
		return 1
	case LevelRequest:
		return 2
	case LevelRequestResponse:
		return 3
	}
	return 0
}

// Less reports whether l records less than o.
func (l Level) Less(o Level) bool { return l.rank() < o.rank() }

// Stage is the point in a request's handling at which an event is written.
type Stage string

// The stages, in the order a request passes them.
const (
	// StageRequestReceived is as soon as the request is read, before it is
	// handled.
	StageRequestReceived Stage = "RequestReceived"
	// StageResponseStarted is once the response headers are sent, for
	// long-running requests (watches) only.
	StageResponseStarted Stage = "ResponseStarted"
	// StageResponseComplete is once the response is fully sent.
	StageResponseComplete Stage = "ResponseComplete"
	// StagePanic is when handling the request panicked.
	StagePanic Stage = "Panic"
)

// stages lists every Stage in order.
var stages = []Stage{StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic}

// levels lists every Level in order.
var levels = []Level{LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse}

// Attributes are what a policy rule looks at in a request.
type Attributes struct {
	User   string   // the user's name
	Groups []string // the user's groups
	Verb   string   // the API verb (get, list, create, ...) or, for a non-resource request, the lower-case HTTP method

	// ResourceRequest is true for a request to an API resource, false for
	// one to a non-resource URL (/healthz, /version, /apis, ...).
	ResourceRequest bool

	APIGroup    string // the resource's API group, "" for the core group
	Resource    string // the resource, such as "pods"
	Subresource string // the subresource, such as "log" or "status", if any
	Namespace   string // the namespace, "" for a cluster-scoped resource
	Name        string // the object's name, if the request names one

	Path string // the URL path of a non-resource request
}

// Policy is an audit.k8s.io/v1 Policy: an ordered list of rules that
// decide the Level each request is logged at. Build one with ReadPolicy.
type Policy struct {
	rules []rule

	// What a request no rule matches gets, besides LevelNone.
	omitStages        []Stage
	omitManagedFields bool
}

// rule is a PolicyRule as Decide applies it: its omitted stages already
// include the policy's, and its omitManagedFields already falls back on
// the policy's.
type rule struct {
	level                Level
	users, groups, verbs []string
	namespaces           []string
	resources            []groupResources
	nonResourceURLs      []string
	omitStages           []Stage
	omitManagedFields    bool
	forResources         bool // resources or namespaces given
	forURLs              bool // nonResourceURLs given (and neither of those)
}

// Decide returns what policy p says of the request a: the level to log it
// at, the stages not to write events for, and whether to leave
// managedFields out of the bodies logged. The first rule that matches a
// decides; if none does, the level is LevelNone (with the policy-wide
// omitStages and omitManagedFields). A nil Policy logs nothing. The
// stages returned are shared: callers must not modify them.
func (p *Policy) Decide(a Attributes) (level Level, omitStages []Stage, omitManagedFields bool) {
	if p == nil {
		return LevelNone, nil, false
	}
	for i := range p.rules {
		r := &p.rules[i]
		if r.matches(&a) {
			return r.level, r.omitStages, r.omitManagedFields
		}
	}
	return LevelNone, p.omitStages, p.omitManagedFields
}

// matches reports whether r applies to the request a. Every list r gives
// must match; a list left empty matches anything. A rule that gives
// resources or namespaces applies only to resource requests, one that
// gives nonResourceURLs only to non-resource requests, one that gives
// neither to both.
func (r *rule) matches(a *Attributes) bool {
	if len(r.users) > 0 && !slices.Contains(r.users, a.User) {
		return false
	}
	if len(r.groups) > 0 && !slices.ContainsFunc(a.Groups, func(g string) bool { return slices.Contains(r.groups, g) }) {
		return false
	}
	if len(r.verbs) > 0 && !slices.Contains(r.verbs, a.Verb) {
		return false
	}
	switch {
	case r.forResources:
		return a.ResourceRequest && r.matchesResource(a)
	case r.forURLs:
		return !a.ResourceRequest && slices.ContainsFunc(r.nonResourceURLs, func(u string) bool { return urlMatches(u, a.Path) })
	}
	return true
}

// matchesResource reports whether the namespaces and resources of r
// match the resource request a.
func (r *rule) matchesResource(a *Attributes) bool {
	if len(r.namespaces) > 0 && !slices.Contains(r.namespaces, a.Namespace) {
		return false
	}
	if len(r.resources) == 0 {
		return true
	}
	for _, gr := range r.resources {
		if gr.matches(a) {
			return true
		}
	}
	return false
}

// matches reports whether gr names the resource (and object) a asks
// for. A resources entry "pods" matches only the pods themselves,
// "pods/log" only that subresource, "*" every resource and subresource,
// "pods/*" pods and all their subresources, and "*/scale" the scale
// subresource of any resource.
func (gr *groupResources) matches(a *Attributes) bool {
	if gr.Group != a.APIGroup && gr.Group != "*" {
		return false
	}
	if len(gr.Resources) == 0 {
		return true
	}
	if len(gr.ResourceNames) > 0 && !slices.Contains(gr.ResourceNames, a.Name) {
		return false
	}
	full := a.Resource
	if a.Subresource != "" {
		full += "/" + a.Subresource
	}
	for _, res := range gr.Resources {
		switch {
		case res == "*" || res == full:
			return true
		case a.Subresource != "" && strings.HasPrefix(res, "*/") && res[len("*/"):] == a.Subresource:
			return true
		case strings.HasSuffix(res, "/*") && res[:len(res)-len("/*")] == a.Resource:
			return true
		}
	}
	return false
}

// urlMatches reports whether the nonResourceURLs entry spec matches path:
// a spec ending in '*' matches every path that starts with the rest of it
// (so "*" matches every path), any other spec only itself.
func urlMatches(spec, path string) bool {
	if prefix, wild := strings.CutSuffix(spec, "*"); wild {
		return strings.HasPrefix(path, prefix)
	}
	return spec == path
}

// The audit.k8s.io/v1 Policy as it is written in a file.
type (
	policyFile struct {
		APIVersion        string         `json:"apiVersion"`
		Kind              string         `json:"kind"`
		Metadata          map[string]any `json:"metadata"` // accepted, unused
		Rules             []policyRule   `json:"rules"`
		OmitStages        []Stage        `json:"omitStages"`
		OmitManagedFields bool           `json:"omitManagedFields"`
	}
	policyRule struct {
		Level             Level            `json:"level"`
		Users             []string         `json:"users"`
		UserGroups        []string         `json:"userGroups"`
		Verbs             []string         `json:"verbs"`
		Resources         []groupResources `json:"resources"`
		Namespaces        []string         `json:"namespaces"`
		NonResourceURLs   []string         `json:"nonResourceURLs"`
		OmitStages        []Stage          `json:"omitStages"`
		OmitManagedFields *bool            `json:"omitManagedFields"`
	}
	groupResources struct {
		Group         string   `json:"group"`
		Resources     []string `json:"resources"`
		ResourceNames []string `json:"resourceNames"`
	}
)

// The only group version and kind a policy file may have.
const (
	policyAPIVersion = "audit.k8s.io/v1"
	policyKind       = "Policy"
)

// ReadPolicy reads the audit.k8s.io/v1 Policy in the YAML or JSON file
// at path, as kube-apiserver's --audit-policy-file. It refuses a file
// with fields a Policy does not have, another apiVersion or kind (a
// missing kind is taken for Policy, as kube-apiserver does), a policy
// that kube-apiserver's validation refuses, and a policy with no rules;
// the error then says so as kube-apiserver's does, followed by the file.
func ReadPolicy(path string) (*Policy, error) {
	if path == "" {
		return nil, errors.New("file path not specified")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read file path %q: %w", path, err)
	}
	p, err := parsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%w: from file %s", err, path)
	}
	return p, nil
}

// parsePolicy decodes, validates and compiles the policy in data.
func parsePolicy(data []byte) (*Policy, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("failed decoding: %w", err)
	}
	// Case-sensitive and strict, as Kubernetes' decoder: a field of
	// another case is an unknown one.
	var f policyFile
	strict, err := sigsjson.UnmarshalStrict(js, &f)
	if err != nil {
		return nil, fmt.Errorf("failed decoding: %w", err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("failed decoding: strict decoding error: %w", errors.Join(strict...))
	}
	switch {
	case f.APIVersion == "":
		return nil, fmt.Errorf("policy has no apiVersion: want %s", policyAPIVersion)
	case f.APIVersion != policyAPIVersion:
		return nil, fmt.Errorf("unknown group version %q in policy: want %s", f.APIVersion, policyAPIVersion)
	case f.Kind != "" && f.Kind != policyKind: // kube-apiserver reads a missing kind as Policy
		return nil, fmt.Errorf("unknown kind %q in policy: want %s", f.Kind, policyKind)
	}
	if errs := f.validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if len(f.Rules) == 0 {
		return nil, errors.New("loaded illegal policy with 0 rules")
	}
	return f.compile(), nil
}

// compile turns the validated policy f into the form Decide applies.
func (f *policyFile) compile() *Policy {
	p := &Policy{
		rules:             make([]rule, len(f.Rules)),
		omitStages:        unionStages(f.OmitStages, nil),
		omitManagedFields: f.OmitManagedFields,
	}
	for i, fr := range f.Rules {
		r := rule{
			level:             fr.Level,
			users:             fr.Users,
			groups:            fr.UserGroups,
			verbs:             fr.Verbs,
			namespaces:        fr.Namespaces,
			resources:         fr.Resources,
			nonResourceURLs:   fr.NonResourceURLs,
			omitStages:        unionStages(f.OmitStages, fr.OmitStages),
			omitManagedFields: f.OmitManagedFields,
			forResources:      len(fr.Resources) > 0 || len(fr.Namespaces) > 0,
			forURLs:           len(fr.NonResourceURLs) > 0,
		}
		if fr.OmitManagedFields != nil {
			r.omitManagedFields = *fr.OmitManagedFields
		}
		p.rules[i] = r
	}
	return p
}

// unionStages returns the stages in either a or b, each once, in the
// order a request passes them; nil if there are none.
func unionStages(a, b []Stage) []Stage {
	var out []Stage
	for _, s := range stages {
		if slices.Contains(a, s) || slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// validate checks f as kube-apiserver's audit policy validation does,
// with the same field paths and messages.
func (f *policyFile) validate() field.ErrorList {
	errs := validateOmitStages(f.OmitStages, field.NewPath("omitStages"))
	rules := field.NewPath("rules")
	for i := range f.Rules {
		errs = append(errs, f.Rules[i].validate(rules.Index(i))...)
	}
	return errs
}

// validate checks the rule r found at path.
func (r *policyRule) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case r.Level == "":
		errs = append(errs, field.Required(path.Child("level"), ""))
	case !slices.Contains(levels, r.Level):
		errs = append(errs, field.NotSupported(path.Child("level"), r.Level, levels))
	}

	urls := path.Child("nonResourceURLs")
	for i, u := range r.NonResourceURLs {
		if u == "*" {
			continue
		}
		if !strings.HasPrefix(u, "/") {
			errs = append(errs, field.Invalid(urls.Index(i), u, "non-resource URL rules must begin with a '/' character"))
		}
		if u != "" && strings.Contains(u[:len(u)-1], "*") {
			errs = append(errs, field.Invalid(urls.Index(i), u, "non-resource URL wildcards '*' must be the final character of the rule"))
		}
	}

	// kube-apiserver names these fields without the entry's index.
	resources := path.Child("resources")
	for _, gr := range r.Resources {
		if gr.Group != "" && gr.Group != "*" {
			if msgs := validation.IsDNS1123Subdomain(gr.Group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(resources.Child("group"), gr.Group, strings.Join(msgs, ",")))
			}
		}
		if len(gr.ResourceNames) > 0 && len(gr.Resources) == 0 {
			errs = append(errs, field.Invalid(resources.Child("resourceNames"), gr.ResourceNames, "using resourceNames requires at least one resource"))
		}
	}

	errs = append(errs, validateOmitStages(r.OmitStages, path.Child("omitStages"))...)

	if len(r.NonResourceURLs) > 0 && (len(r.Resources) > 0 || len(r.Namespaces) > 0) {
		errs = append(errs, field.Invalid(urls, r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
	}
	return errs
}

// validateOmitStages checks the omitStages list found at path.
func validateOmitStages(omit []Stage, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range omit {
		if !slices.Contains(stages, s) {
			errs = append(errs, field.Invalid(path.Index(i), string(s), "allowed stages are "+joinStages()))
		}
	}
	return errs
}

// joinStages lists the stages as kube-apiserver's validation names them.
func joinStages() string {
	names := make([]string, len(stages))
	for i, s := range stages {
		names[i] = string(s)
	}
	return strings.Join(names, ",")
}
