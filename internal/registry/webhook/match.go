package webhook

import (
	"context"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// invocation is a webhook to call for a request, with the resource and
// kind it is shown: the request's, or an equivalent one its rules name.
type invocation struct {
	hook     *hook
	resource schema.GroupVersionResource
	kind     schema.GroupVersionKind
	// equivalent is the kind whose version the webhook is shown, when
	// not the request's.
	equivalent *registry.Kind
}

// match returns the invocation of h for a, nil if h does not apply, or
// the error upstream returns for it (a selector that does not parse, a
// namespace that cannot be read).
func (w *Webhooks) match(ctx context.Context, h *hook, a *registry.AdmissionAttributes) (*invocation, error) {
	inv, err := w.matchCriteria(ctx, &h.match, a)
	if inv == nil || err != nil {
		return nil, err
	}
	inv.hook = h
	if len(h.conditions) > 0 || h.conditionsErr != nil {
		ok, err := w.conditionsMatch(ctx, inv, a)
		if err != nil {
			// Upstream fails closed under failurePolicy Fail.
			if h.failurePolicy == admissionregistrationv1.Ignore {
				return nil, nil
			}
			return nil, apierrors.NewForbidden(a.Kind.GroupResource(), a.Name, err)
		}
		if !ok {
			return nil, nil
		}
	}
	return inv, nil
}

// criteria are a policy's matchConstraints, a binding's matchResources,
// or a webhook's rules, matchPolicy and selectors, parsed; a selector that
// does not parse is kept as its error, which upstream returns on every
// request the rules match.
type criteria struct {
	rules, excludes []admissionregistrationv1.NamedRuleWithOperations
	// allWithoutRules: no rules match every request (a policy's or a
	// binding's); a webhook's match none without rules.
	allWithoutRules         bool
	matchPolicy             admissionregistrationv1.MatchPolicyType
	nsSelector, objSelector labels.Selector
	nsErr, objErr           error
}

func parseCriteria(m *admissionregistrationv1.MatchResources) criteria {
	c := criteria{rules: m.ResourceRules, excludes: m.ExcludeResourceRules, matchPolicy: admissionregistrationv1.Equivalent, allWithoutRules: true}
	if m.MatchPolicy != nil {
		c.matchPolicy = *m.MatchPolicy
	}
	c.nsSelector, c.nsErr = selector(m.NamespaceSelector)
	c.objSelector, c.objErr = selector(m.ObjectSelector)
	return c
}

// matchCriteria is upstream's matcher of webhooks, matchConstraints and
// matchResources: the namespace and object selectors, the excluded
// rules, then the rules (the request's resource, or with matchPolicy
// Equivalent another version of it), each with its resourceNames. It
// returns how the request is shown (nil: no match); a selector's error
// counts only for a request the rules match.
func (w *Webhooks) matchCriteria(ctx context.Context, c *criteria, a *registry.AdmissionAttributes) (*invocation, error) {
	nsMatch, nsErr := w.namespaceMatches(ctx, c.nsSelector, c.nsErr, a)
	if !nsMatch && nsErr == nil {
		return nil, nil
	}
	objMatch, objErr := objectMatches(c.objSelector, c.objErr, a)
	if !objMatch && objErr == nil {
		return nil, nil
	}
	if len(c.excludes) > 0 && w.matchNamedRules(c.excludes, c.matchPolicy, a) != nil {
		return nil, nil
	}
	var inv *invocation
	if len(c.rules) == 0 {
		if !c.allWithoutRules {
			return nil, nil
		}
		inv = &invocation{resource: a.GroupVersionResource(), kind: a.GroupVersionKind()}
	} else if inv = w.matchNamedRules(c.rules, c.matchPolicy, a); inv == nil {
		return nil, nil
	}
	if nsErr != nil {
		return nil, nsErr
	}
	if objErr != nil {
		return nil, objErr
	}
	return inv, nil
}

// matchNamedRules finds the first rule that matches a, by its resource
// or, with matchPolicy Equivalent, an equivalent one, and its names.
func (w *Webhooks) matchNamedRules(rules []admissionregistrationv1.NamedRuleWithOperations, matchPolicy admissionregistrationv1.MatchPolicyType, a *registry.AdmissionAttributes) *invocation {
	named := func(r admissionregistrationv1.NamedRuleWithOperations) bool {
		if len(r.ResourceNames) == 0 {
			return true
		}
		name := a.Name
		for _, n := range r.ResourceNames {
			if n == name {
				return true
			}
		}
		return false
	}
	gvr := a.GroupVersionResource()
	for _, r := range rules {
		if ruleMatches(r.RuleWithOperations, a, gvr) && named(r) {
			return &invocation{resource: gvr, kind: a.GroupVersionKind()}
		}
	}
	if matchPolicy != admissionregistrationv1.Equivalent {
		return nil
	}
	for _, r := range rules {
		for _, eq := range w.equivalents(a) {
			if eq.gvr == gvr || !ruleMatches(r.RuleWithOperations, a, eq.gvr) {
				continue
			}
			inv := &invocation{resource: eq.gvr, kind: eq.kind.GroupVersionKind(eq.gvr.Version), equivalent: eq.kind}
			if !a.ObjectKind.Empty() {
				inv.kind, inv.equivalent = a.ObjectKind, nil
			}
			if named(r) {
				return inv
			}
		}
	}
	return nil
}

// conditionsMatch evaluates inv's matchConditions over a, as upstream:
// any false one skips the webhook, whatever the others did; otherwise
// the errors, if any, are the answer.
func (w *Webhooks) conditionsMatch(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (bool, error) {
	h := inv.hook
	if h.conditionsErr != nil {
		return false, h.conditionsErr
	}
	obj, old, err := w.shownBoth(ctx, inv, a)
	if err != nil {
		return false, err
	}
	request, err := requestMap(ctx, inv, a)
	if err != nil {
		return false, err
	}
	typ := "validating"
	if h.mutating {
		typ = "admit"
	}
	start := time.Now()
	var errs []string
	for _, c := range h.conditions {
		ok, err := c.Eval(ctx, objectMap(obj), objectMap(old), request)
		switch {
		case err != nil:
			errs = append(errs, err.Error())
		case !ok:
			w.conditionMetrics.observe(h.name, "webhook", typ, a.Operation, false, len(errs), time.Since(start))
			return false, nil
		}
	}
	if len(errs) > 0 {
		w.conditionMetrics.observe(h.name, "webhook", typ, a.Operation, false, len(errs), time.Since(start))
		return false, cel.ConditionErrors(errs)
	}
	return true, nil
}

// requestMap is the request CEL expressions see for inv: the
// AdmissionRequest's fields as JSON gives them (numbers as int64, as
// upstream's), without uid, object and oldObject. It is built directly:
// a JSON round trip of the request would cost a third of a create
// through a policy. A test holds the two equal.
func requestMap(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (map[string]any, error) {
	var options any // "options": null when there are none, as JSON gives
	if a.Options != nil {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.Options)
		if err != nil {
			return nil, err
		}
		options = m
	}
	u, _ := registry.UserFrom(ctx)
	user := map[string]any{}
	if u.Name != "" {
		user["username"] = u.Name
	}
	if u.UID != "" {
		user["uid"] = u.UID
	}
	if len(u.Groups) > 0 {
		user["groups"] = stringList(u.Groups)
	}
	if len(u.Extra) > 0 {
		extra := make(map[string]any, len(u.Extra))
		for k, v := range u.Extra {
			if v == nil {
				extra[k] = nil
			} else {
				extra[k] = stringList(v)
			}
		}
		user["extra"] = extra
	}
	kind := func(k schema.GroupVersionKind) map[string]any {
		return map[string]any{"group": k.Group, "version": k.Version, "kind": k.Kind}
	}
	resource := func(r schema.GroupVersionResource) map[string]any {
		return map[string]any{"group": r.Group, "version": r.Version, "resource": r.Resource}
	}
	request := map[string]any{
		"kind":            kind(inv.kind),
		"resource":        resource(inv.resource),
		"requestKind":     kind(a.GroupVersionKind()),
		"requestResource": resource(a.GroupVersionResource()),
		"operation":       string(a.Operation),
		"userInfo":        user,
		"dryRun":          a.DryRun,
		"options":         options,
	}
	for k, v := range map[string]string{"subResource": a.Subresource, "requestSubResource": a.Subresource,
		"name": a.Name, "namespace": requestNamespace(a)} {
		if v != "" {
			request[k] = v
		}
	}
	return request, nil
}

// stringList is ss as JSON decodes a list of strings.
func stringList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func objectMap(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	return obj.Object
}

type equivalent struct {
	gvr  schema.GroupVersionResource
	kind *registry.Kind
}

// equivalents are the resources that serve a's objects: every version
// of its kind, and of the kind that shares its objects (Cohabit).
func (w *Webhooks) equivalents(a *registry.AdmissionAttributes) []equivalent {
	var out []equivalent
	add := func(k *registry.Kind) {
		for _, v := range k.Versions {
			out = append(out, equivalent{k.GroupResource().WithVersion(v), k})
		}
	}
	add(a.Kind)
	if c := a.Kind.Cohabit; c != nil {
		other := c.Host
		if other == a.Kind {
			other = c.Guest
		}
		// The kind as served now (a CRD's may have changed).
		if res, ok := w.Registry.Get(other.GroupResource()); ok {
			other = res.Kind()
		}
		add(other)
	}
	return out
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// ruleMatches is upstream's rule matcher for a at resource gvr.
func ruleMatches(r admissionregistrationv1.RuleWithOperations, a *registry.AdmissionAttributes, gvr schema.GroupVersionResource) bool {
	if r.Scope != nil && *r.Scope != admissionregistrationv1.AllScopes {
		clusterScoped := gvr == namespaces || a.Namespace == metav1.NamespaceNone
		switch *r.Scope {
		case admissionregistrationv1.NamespacedScope:
			if clusterScoped {
				return false
			}
		case admissionregistrationv1.ClusterScope:
			if !clusterScoped {
				return false
			}
		default:
			return false
		}
	}
	opMatch := false
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll || string(op) == string(a.Operation) {
			opMatch = true
			break
		}
	}
	if !opMatch || !exactOrAll(r.APIGroups, gvr.Group) || !exactOrAll(r.APIVersions, gvr.Version) {
		return false
	}
	for _, res := range r.Resources {
		name, sub, _ := strings.Cut(res, "/")
		if (name == "*" || name == gvr.Resource) && (sub == "*" || sub == a.Subresource) {
			return true
		}
	}
	return false
}

func exactOrAll(items []string, v string) bool {
	for _, item := range items {
		if item == "*" || item == v {
			return true
		}
	}
	return false
}

// namespaceMatches applies a namespaceSelector (sel, or the error it did
// not parse with): to the labels of a's namespace, or of a Namespace
// being created or updated; cluster-scoped objects other than Namespaces
// always match.
func (w *Webhooks) namespaceMatches(ctx context.Context, sel labels.Selector, selErr error, a *registry.AdmissionAttributes) (bool, error) {
	isNamespace := a.Kind.Group == "" && a.Kind.Resource == "namespaces"
	if a.Namespace == "" && !isNamespace {
		return true, nil
	}
	if selErr != nil {
		return false, apierrors.NewInternalError(selErr)
	}
	if sel.Empty() {
		return true, nil
	}
	if isNamespace && a.Subresource == "" && (a.Operation == registry.OpCreate || a.Operation == registry.OpUpdate) {
		return sel.Matches(labels.Set(a.Object.GetLabels())), nil
	}
	name := a.Namespace
	if isNamespace {
		name = a.Name
	}
	res, ok := w.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	if !ok {
		return false, apierrors.NewInternalError(errNoNamespaces)
	}
	ns, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		// Not yet in the cache, perhaps: a consistent read decides.
		ns, err = res.Get(ctx, "v1", "", name, metav1.GetOptions{})
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, err
		}
		return false, apierrors.NewInternalError(err)
	}
	return sel.Matches(labels.Set(ns.GetLabels())), nil
}

// objectMatches applies an objectSelector (sel, or the error it did not
// parse with) to the object or the old one.
func objectMatches(sel labels.Selector, selErr error, a *registry.AdmissionAttributes) (bool, error) {
	if selErr != nil {
		return false, apierrors.NewInternalError(selErr)
	}
	if sel.Empty() {
		return true, nil
	}
	return labelsMatch(sel, a.Object) || labelsMatch(sel, a.OldObject), nil
}

func labelsMatch(s labels.Selector, obj *unstructured.Unstructured) bool {
	return obj != nil && s.Matches(labels.Set(obj.GetLabels()))
}
