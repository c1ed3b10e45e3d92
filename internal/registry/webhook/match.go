package webhook

import (
	"context"
	"encoding/json"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

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
	nsMatch, nsErr := w.namespaceMatches(ctx, h.nsSelector, h.nsErr, a)
	if !nsMatch && nsErr == nil {
		return nil, nil
	}
	objMatch, objErr := objectMatches(h.objSelector, h.objErr, a)
	if !objMatch && objErr == nil {
		return nil, nil
	}
	gvr := a.GroupVersionResource()
	var inv *invocation
	for _, r := range h.rules {
		if ruleMatches(r, a, gvr) {
			inv = &invocation{hook: h, resource: gvr, kind: a.GroupVersionKind()}
			break
		}
	}
	if inv == nil && h.matchPolicy == admissionregistrationv1.Equivalent {
	rules:
		for _, r := range h.rules {
			for _, eq := range w.equivalents(a) {
				if eq.gvr == gvr {
					continue
				}
				if ruleMatches(r, a, eq.gvr) {
					inv = &invocation{hook: h, resource: eq.gvr, kind: eq.kind.GroupVersionKind(eq.gvr.Version), equivalent: eq.kind}
					if !a.ObjectKind.Empty() {
						// A subresource's objects (a Scale) are the same
						// in every version of the resource.
						inv.kind, inv.equivalent = a.ObjectKind, nil
					}
					break rules
				}
			}
		}
	}
	if inv == nil {
		return nil, nil
	}
	if nsErr != nil {
		return nil, nsErr
	}
	if objErr != nil {
		return nil, objErr
	}
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
	var errs []string
	for _, c := range h.conditions {
		ok, err := c.Eval(ctx, objectMap(obj), objectMap(old), request)
		switch {
		case err != nil:
			errs = append(errs, err.Error())
		case !ok:
			return false, nil
		}
	}
	if len(errs) > 0 {
		return false, cel.ConditionErrors(errs)
	}
	return true, nil
}

// requestMap is the request CEL expressions see for inv: the
// AdmissionRequest's fields as JSON gives them (numbers as int64, as
// upstream's), without uid, object and oldObject.
func requestMap(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (map[string]any, error) {
	req, err := admissionRequest(ctx, inv, a, nil, nil)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var request map[string]any
	if err := utiljson.Unmarshal(data, &request); err != nil {
		return nil, err
	}
	for _, k := range []string{"uid", "object", "oldObject"} {
		delete(request, k)
	}
	return request, nil
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
