package registry

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Attributes are what a request asks to do, as an authorizer sees it
// (upstream's authorizer.Attributes): a verb on a resource (get, list,
// watch, create, update, patch, delete, deletecollection, or one a
// review names, such as bind or escalate), or on a non-resource path
// (the HTTP method, lowercased).
type Attributes struct {
	User            User
	Verb            string
	ResourceRequest bool
	// Of a resource request.
	Namespace, APIGroup, APIVersion, Resource, Subresource, Name string
	// The selectors of a list, watch or deletecollection, as the
	// authorization API writes them: only the requirements it can say
	// (a selector narrows, so one left out asks for more, never less).
	FieldSelector []metav1.FieldSelectorRequirement
	LabelSelector []metav1.LabelSelectorRequirement
	// Of a non-resource request.
	Path string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// NoOpinion leaves the request to the next authorizer; if none
	// allows it, it is refused.
	NoOpinion Decision = iota
	// Allow lets the request through; the next authorizers are not asked.
	Allow
	// Deny refuses the request; the next authorizers are not asked.
	Deny
)

// Authorizer decides whether a request may do what it asks. reason says
// why, in upstream's words; it may be empty. An error says the
// authorizer could not decide (a webhook it could not call): the
// decision is then what the authorizer does on failure.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (d Decision, reason string, err error)
}

// Allowed reports whether authz allows a: the checks that ask on a
// request's behalf (bind, escalate, impersonate, an admission policy's
// parameters) pass only on Allow.
func Allowed(ctx context.Context, authz Authorizer, a Attributes) bool {
	d, _, _ := authz.Authorize(ctx, a)
	return d == Allow
}

// RuleResolver lists what an authorizer lets a user do in a namespace,
// for SelfSubjectRulesReviews: incomplete says the list may miss some of
// it, and err why (rules that could not be read, an authorizer that
// cannot list them).
type RuleResolver interface {
	RulesFor(ctx context.Context, u User, namespace string) (rules []rbacv1.PolicyRule, incomplete bool, err error)
}

// Named is an authorizer with its name in a Union: upstream's names are
// the lowercased mode (rbac, alwaysdeny) and "default" for the webhook of
// --authorization-webhook-config-file.
type Named struct {
	Name string
	Authorizer
}

// Union asks its authorizers in order, as kube-apiserver's chain of
// --authorization-mode: the first to allow or deny decides, with its
// reason. If none does, the request is refused with every reason given,
// each after its authorizer's name, one per line, and with their errors.
type Union []Named

// Authorize is the first decision of u's authorizers.
func (u Union) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	var errs []error
	var reasons []string
	for _, n := range u {
		d, reason, err := n.Authorize(ctx, a)
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, n.Name+": "+reason)
		}
		if d != NoOpinion {
			return d, reason, err
		}
	}
	return NoOpinion, strings.Join(reasons, "\n"), utilerrors.NewAggregate(errs)
}

// RulesFor is the rules of every authorizer of u that can list them.
func (u Union) RulesFor(ctx context.Context, user User, namespace string) ([]rbacv1.PolicyRule, bool, error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	incomplete := false
	for _, n := range u {
		r, ok := n.Authorizer.(RuleResolver)
		if !ok {
			continue
		}
		more, inc, err := r.RulesFor(ctx, user, namespace)
		rules = append(rules, more...)
		incomplete = incomplete || inc
		if err != nil {
			errs = append(errs, err)
		}
	}
	return rules, incomplete, utilerrors.NewAggregate(errs)
}

// Explaining is u with each authorizer that can say why it allows (an
// Explainer) saying so: the access reviews and the admission policies'
// authorizer checks show it.
func (u Union) Explaining() Authorizer {
	explaining := make(Union, len(u))
	for i, n := range u {
		if e, ok := n.Authorizer.(Explainer); ok {
			n.Authorizer = e.Explaining()
		}
		explaining[i] = n
	}
	return explaining
}

// Explainer is an authorizer whose allowances may say why, which
// upstream's do everywhere but in its request filter.
type Explainer interface {
	Explaining() Authorizer
}

// PrivilegedGroup's members may do everything: kube-apiserver asks its
// authorizer first, whatever --authorization-mode says.
const PrivilegedGroup = "system:masters"

// Privileged allows the users of PrivilegedGroup, and has no opinion on
// others.
var Privileged = Named{Name: "kubernetes.io/system-privileged-group", Authorizer: privileged{}}

type privileged struct{}

func (privileged) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if slices.Contains(a.User.Groups, PrivilegedGroup) {
		return Allow, "", nil
	}
	return NoOpinion, "", nil
}

// AlwaysAllow allows every request of an authenticated user, as
// kube-apiserver's --authorization-mode=AlwaysAllow, but a request
// without credentials only to read a PublicPath: kplane never opens
// itself to anonymous users because this mode is named (it has no
// opinion on their other requests).
type AlwaysAllow struct{}

func (AlwaysAllow) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	if Anonymous(a.User) && (a.ResourceRequest || a.Verb != "get" || !PublicPath(a.Path)) {
		return NoOpinion, "", nil
	}
	return Allow, "", nil
}

// PublicPath reports whether path is one kplane lets anyone read when
// it authorizes nobody (AlwaysAllow): /version and the three health
// checks (not their single checks).
func PublicPath(path string) bool {
	switch path {
	case "/version", "/livez", "/readyz", "/healthz":
		return true
	}
	return false
}

// RulesFor is everything, for an authenticated user.
func (AlwaysAllow) RulesFor(_ context.Context, u User, _ string) ([]rbacv1.PolicyRule, bool, error) {
	if Anonymous(u) {
		return nil, false, nil
	}
	all := []string{"*"}
	return []rbacv1.PolicyRule{{Verbs: all, APIGroups: all, Resources: all}, {Verbs: all, NonResourceURLs: all}}, false, nil
}

// AlwaysDeny refuses every request, as --authorization-mode=AlwaysDeny:
// it has no opinion, with a reason, so an authorizer after it may still
// allow.
type AlwaysDeny struct{}

func (AlwaysDeny) Authorize(context.Context, Attributes) (Decision, string, error) {
	return NoOpinion, "Everything is forbidden.", nil
}

// RulesFor is nothing.
func (AlwaysDeny) RulesFor(context.Context, User, string) ([]rbacv1.PolicyRule, bool, error) {
	return nil, false, nil
}

// Anonymous reports whether u is a request without credentials:
// system:anonymous or the group system:unauthenticated.
func Anonymous(u User) bool {
	return u.Name == "system:anonymous" || slices.Contains(u.Groups, "system:unauthenticated")
}

// String is d's name.
func (d Decision) String() string {
	switch d {
	case Allow:
		return "Allow"
	case Deny:
		return "Deny"
	case NoOpinion:
		return "NoOpinion"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// SelectorAttributes are the selectors of a list, watch or
// deletecollection as an authorizer is told of them: the requirements
// the authorization API can say (In, NotIn, Exists, DoesNotExist), the
// others left out (asking for more, never less). A selector that does
// not parse is left out whole.
func SelectorAttributes(fieldSelector, labelSelector string) ([]metav1.FieldSelectorRequirement, []metav1.LabelSelectorRequirement) {
	var fieldReqs []metav1.FieldSelectorRequirement
	var labelReqs []metav1.LabelSelectorRequirement
	if fieldSelector != "" {
		fieldReqs, _ = ParseFieldSelector(fieldSelector)
	}
	if labelSelector != "" {
		labelReqs, _ = ParseLabelSelector(labelSelector)
	}
	return fieldReqs, labelReqs
}

// ParseFieldSelector parses a field selector into the authorization
// API's requirements (fieldRequirements).
func ParseFieldSelector(selector string) ([]metav1.FieldSelectorRequirement, error) {
	sel, err := fields.ParseSelector(selector)
	if err != nil {
		return nil, err
	}
	return fieldRequirements(sel.Requirements()), nil
}

// ParseLabelSelector parses a label selector into the authorization
// API's requirements (LabelRequirements).
func ParseLabelSelector(selector string) ([]metav1.LabelSelectorRequirement, error) {
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	reqs, _ := sel.Requirements()
	return LabelRequirements(reqs), nil
}

// fieldRequirements is reqs in the authorization API's words.
func fieldRequirements(reqs fields.Requirements) []metav1.FieldSelectorRequirement {
	var out []metav1.FieldSelectorRequirement
	for _, r := range reqs {
		var op metav1.FieldSelectorOperator
		switch r.Operator {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.FieldSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.FieldSelectorOpNotIn
		default:
			continue
		}
		out = append(out, metav1.FieldSelectorRequirement{Key: r.Field, Operator: op, Values: []string{r.Value}})
	}
	return out
}

// LabelRequirements is reqs in the authorization API's words.
func LabelRequirements(reqs labels.Requirements) []metav1.LabelSelectorRequirement {
	var out []metav1.LabelSelectorRequirement
	for _, r := range reqs {
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			op = metav1.LabelSelectorOpIn
		case selection.NotEquals, selection.NotIn:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op = metav1.LabelSelectorOpExists
		case selection.DoesNotExist:
			op = metav1.LabelSelectorOpDoesNotExist
		default:
			continue
		}
		req := metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op}
		if values := r.ValuesUnsorted(); len(values) > 0 {
			req.Values = values
		}
		out = append(out, req)
	}
	return out
}
