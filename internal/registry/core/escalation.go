package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// RBAC's writes cannot grant more than the writer holds, as upstream's
// escalation checks refuse it: a user may create or change a role only
// with every permission it grants (or the escalate verb on it), and bind
// a role only with every permission of the role (or the bind verb on
// it). system:masters, and kplane's own controllers (registry.Internal),
// may do both.

// admitRole checks a write of a Role or ClusterRole (resource i of
// rbacResources).
func (a *RBAC) admitRole(i int) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) error {
	resource := rbacResources[i]
	return func(ctx context.Context, obj, old *unstructured.Unstructured) error {
		user, _ := registry.UserFrom(ctx)
		if registry.Internal(ctx) || slices.Contains(user.Groups, privilegedGroup) || (old != nil && onlyCollectorFields(obj, old)) {
			return nil
		}
		// Asked about the request's own name, as upstream asks: none on a
		// create by a POST to the collection.
		name := obj.GetName()
		if old == nil && !registry.CreatedByName(ctx) {
			name = ""
		}
		if registry.Allowed(ctx, a.Chain(), registry.Attributes{User: user, Verb: "escalate", ResourceRequest: true,
			APIGroup: rbacv1.GroupName, APIVersion: "*", Resource: resource, Namespace: obj.GetNamespace(), Name: name}) {
			return nil
		}
		var role rbacv1.ClusterRole // a Role's rules read the same
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		return a.confirmNoEscalation(ctx, user, resource, obj, role.Rules)
	}
}

// admitBinding checks a write of a RoleBinding or ClusterRoleBinding
// (resource i of rbacResources).
func (a *RBAC) admitBinding(i int) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) error {
	resource := rbacResources[i]
	return func(ctx context.Context, obj, old *unstructured.Unstructured) error {
		user, _ := registry.UserFrom(ctx)
		if registry.Internal(ctx) || slices.Contains(user.Groups, privilegedGroup) || (old != nil && onlyCollectorFields(obj, old)) {
			return nil
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding's roleRef reads the same
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		ns := obj.GetNamespace()
		roles := "clusterroles"
		if b.RoleRef.Kind == "Role" {
			roles = "roles"
		}
		if registry.Allowed(ctx, a.Chain(), registry.Attributes{User: user, Verb: "bind", ResourceRequest: true,
			APIGroup: rbacv1.GroupName, APIVersion: "*", Resource: roles, Namespace: ns, Name: b.RoleRef.Name}) {
			return nil
		}
		a.mu.RLock()
		rules, err := a.state.roleRules(b.RoleRef, ns)
		a.mu.RUnlock()
		if err != nil {
			if apierrors.IsNotFound(err) {
				return asWritten(err, resource)
			}
			return apierrors.NewForbidden(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, obj.GetName(), err)
		}
		return a.confirmNoEscalation(ctx, user, resource, obj, rules)
	}
}

// confirmNoEscalation refuses the write of obj (of resource) if the
// rules it grants are not all covered by user's own, where obj applies
// (its namespace, and cluster-wide). The refusal lists what is missing,
// as upstream's does.
func (a *RBAC) confirmNoEscalation(_ context.Context, user registry.User, resource string, obj *unstructured.Unstructured, rules []rbacv1.PolicyRule) error {
	owned, errs := a.boundRules(user, obj.GetNamespace())
	missing := uncovered(owned, rules)
	if len(missing) == 0 {
		return nil
	}
	var lines []string
	for _, r := range compactRules(missing) {
		if s := compactString(r); !slices.Contains(lines, s) {
			lines = append(lines, s)
		}
	}
	slices.Sort(lines)
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", user.Name, user.Groups, strings.Join(lines, "\n"))
	if len(errs) > 0 {
		for i, err := range errs {
			errs[i] = asWritten(err, resource)
		}
		msg += fmt.Sprintf("; resolution errors: [%s]", evaluationError(errs))
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, obj.GetName(), fmt.Errorf("%s", msg))
}

// asWritten is a missing role's error as upstream's escalation checks
// give it: they read roles through the storage of the resource written,
// whose errors name that resource (a binding of a missing role is
// `rolebindings.rbac.authorization.k8s.io "<role>" not found`, a 404).
func asWritten(err error, resource string) error {
	if st, ok := err.(apierrors.APIStatus); ok && apierrors.IsNotFound(err) && st.Status().Details != nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, st.Status().Details.Name)
	}
	return err
}

// onlyCollectorFields reports whether obj differs from old only where the
// garbage collector writes (owner references, finalizers) or the server
// does: such a write grants nothing new and is never refused.
func onlyCollectorFields(obj, old *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := runtime.DeepCopyJSON(u.Object)
		meta, _ := c["metadata"].(map[string]any)
		for _, f := range []string{"ownerReferences", "finalizers", "managedFields", "resourceVersion", "generation",
			"creationTimestamp", "uid", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
			delete(meta, f)
		}
		delete(c, "apiVersion")
		delete(c, "kind")
		return c
	}
	return apiequality.Semantic.DeepEqual(strip(obj), strip(old))
}

// uncovered returns the single permissions of rules (one group,
// resource, verb and name each, or one URL and verb) that no rule of
// owned covers, in rules' order.
func uncovered(owned, rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var missing []rbacv1.PolicyRule
	for _, r := range rules {
		for _, sub := range breakdown(r) {
			if !slices.ContainsFunc(owned, func(o rbacv1.PolicyRule) bool { return covers(&o, &sub) }) {
				missing = append(missing, sub)
			}
		}
	}
	return missing
}

// breakdown splits a rule into single permissions.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var subs []rbacv1.PolicyRule
	one := func(s string) []string { return []string{s} }
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: one(g), Resources: one(res), Verbs: one(v)})
				}
				for _, n := range r.ResourceNames {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: one(g), Resources: one(res), Verbs: one(v), ResourceNames: one(n)})
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			subs = append(subs, rbacv1.PolicyRule{NonResourceURLs: one(u), Verbs: one(v)})
		}
	}
	return subs
}

// covers reports whether owner grants the single permission sub. A "*"
// of sub's is covered only by a "*" (or, for a resource "x/y", by
// "*/y"): holding every verb known is not holding "*".
func covers(owner, sub *rbacv1.PolicyRule) bool {
	if !hasAllOrStar(owner.Verbs, sub.Verbs) || !hasAllOrStar(owner.APIGroups, sub.APIGroups) {
		return false
	}
	if !slices.Contains(owner.Resources, rbacv1.ResourceAll) {
		for _, res := range sub.Resources {
			if slices.Contains(owner.Resources, res) {
				continue
			}
			_, subresource, ok := strings.Cut(res, "/")
			if !ok || !slices.Contains(owner.Resources, "*/"+subresource) {
				return false
			}
		}
	}
	for _, u := range sub.NonResourceURLs {
		if !slices.ContainsFunc(owner.NonResourceURLs, func(o string) bool {
			return o == u || (strings.HasSuffix(o, "*") && strings.HasPrefix(u, strings.TrimRight(o, "*")))
		}) {
			return false
		}
	}
	if len(sub.ResourceNames) == 0 {
		return len(owner.ResourceNames) == 0
	}
	return len(owner.ResourceNames) == 0 || hasAll(owner.ResourceNames, sub.ResourceNames)
}

func hasAllOrStar(set, want []string) bool { return slices.Contains(set, "*") || hasAll(set, want) }

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// compactRules merges the single permissions on one resource (and name)
// into one rule with their verbs, as upstream lists what is missing.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct {
		group, resource, name string
		named                 bool
	}
	var out []rbacv1.PolicyRule
	merged := map[simple]int{} // index in out
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 || len(r.ResourceNames) > 1 {
			out = append(out, r)
			continue
		}
		key := simple{group: r.APIGroups[0], resource: r.Resources[0]}
		if len(r.ResourceNames) == 1 {
			key.name, key.named = r.ResourceNames[0], true
		}
		if i, ok := merged[key]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		merged[key] = len(out)
		r.Verbs = slices.Clone(r.Verbs)
		out = append(out, r)
	}
	return out
}

// compactString prints a rule as upstream's refusals do:
// {APIGroups:["x"], Resources:["y"], ResourceNames:["n"], Verbs:["get"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}
