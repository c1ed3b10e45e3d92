package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// reviews are the questions clients ask about what a user may do and who
// they are: kubectl auth (can-i, can-i --list, whoami) and dashboards
// (k9s, Headlamp) ask about themselves before they show what a user may
// do; a metrics endpoint's auth filter (controller-runtime's,
// kube-rbac-proxy) asks whether the client it authenticated may scrape.
// They are never stored. Without an authorizer kplane lets every
// authenticated request in, so every access review about an
// authenticated user is allowed and every rules review lists everything;
// an identity review tells who the request's credential names.
func reviews() []*registry.Kind { return reviewKinds(nil) }

// InstallAuthorizer makes the access and rules reviews of kinds answer
// by authz, kplane's authorizer: an access review by its decision (the
// reasons of an allowance too, if authz is an Explainer), a rules review
// by its rules (if authz is a RuleResolver; none otherwise, and
// incomplete).
func InstallAuthorizer(kinds []*registry.Kind, authz registry.Authorizer) []*registry.Kind {
	answers := map[string]*registry.Kind{}
	for _, k := range reviewKinds(authz) {
		answers[k.Resource] = k
	}
	for _, k := range kinds {
		if r, ok := answers[k.Resource]; ok && k.Group == r.Group && k.Review != nil {
			k.Review = r.Review
		}
		if k.Group == csrResource.Group && k.Resource == csrResource.Resource {
			k.AdmitUpdate = csrAdmitUpdate(authz)
		}
		if k.Group == ctbResource.Group && k.Resource == ctbResource.Resource {
			// Upstream's ClusterTrustBundleAttest: validating admission,
			// after validation.
			if attest := admitTrustBundle(authz); attest != nil {
				k.AdmitCreate = func(ctx context.Context, obj *unstructured.Unstructured) error { return attest(ctx, obj, nil) }
				k.AdmitUpdate = func(ctx context.Context, _ string, obj, old *unstructured.Unstructured) error {
					return attest(ctx, obj, old)
				}
			}
		}
	}
	return kinds
}

// reviewKinds returns the reviews; the access and rules reviews answer
// by authz, or as kplane without an authorizer if nil.
func reviewKinds(authz registry.Authorizer) []*registry.Kind {
	review := func(group, kind, resource string, typed func() runtime.Object, answer func(context.Context, string, *unstructured.Unstructured, func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error)) *registry.Kind {
		return &registry.Kind{
			Group: group, Versions: []string{"v1"}, Kind: kind, Resource: resource, Singular: lower(kind),
			Typed: typed, Review: answer,
		}
	}
	local := review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews",
		func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, accessReview(authz, true, true))
	local.Namespaced = true
	return []*registry.Kind{
		local,
		review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, accessReview(authz, false, false)),
		review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, selfSubjectRulesReview(authz)),
		review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews",
			func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, accessReview(authz, true, false)),
		review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews",
			func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, selfSubjectReview),
	}
}

// accessReview answers "may I?" (a SelfSubjectAccessReview) or, with
// subject, "may this user?" (a SubjectAccessReview; with local, a
// LocalSubjectAccessReview, about its namespace). The question must be
// well formed (accessReviewErrors). The answer is the question with its
// status: authz's decision, reason and error or, without authz, allowed
// unless the user asked about is anonymous, whom kplane then refuses.
func accessReview(authz registry.Authorizer, subject, local bool) func(context.Context, string, *unstructured.Unstructured, func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	if e, ok := authz.(registry.Explainer); ok {
		authz = e.Explaining()
	}
	return func(ctx context.Context, _ string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
		errs, err := accessReviewErrors(obj, subject, local)
		if err != nil {
			return nil, err
		}
		if len(errs) > 0 {
			// Upstream's message names no kind.
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
		}
		if local && obj.GetNamespace() == "" { // the request's namespace: /namespaces//...
			return nil, apierrors.NewBadRequest("namespace is required on this type: ")
		}
		if err := admit(obj); err != nil {
			return nil, err
		}
		var spec authorizationv1.SubjectAccessReviewSpec
		if m, ok := obj.Object["spec"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
		}
		user := registry.User{Name: spec.User, UID: spec.UID, Groups: spec.Groups}
		if len(spec.Extra) > 0 {
			user.Extra = map[string][]string{}
			for k, v := range spec.Extra {
				user.Extra[k] = v
			}
		}
		if !subject {
			u, ok := registry.UserFrom(ctx)
			if !ok {
				return nil, apierrors.NewInternalError(errors.New("the request carries no user"))
			}
			user = u
		}
		status := map[string]any{}
		switch {
		case authz != nil:
			attrs, ignored := reviewAttributes(user, &spec)
			d, reason, err := authz.Authorize(ctx, attrs)
			status["allowed"] = d == registry.Allow
			if d == registry.Deny {
				status["denied"] = true
			}
			if reason != "" {
				status["reason"] = reason
			}
			if err != nil {
				ignored = append([]string{err.Error()}, ignored...)
			}
			if len(ignored) > 0 {
				status["evaluationError"] = strings.Join(ignored, "; ")
			}
		default:
			status["allowed"] = !subject || (user.Name != "system:anonymous" && !slices.Contains(user.Groups, "system:unauthenticated"))
		}
		obj.Object["status"] = status
		return obj, nil
	}
}

// reviewAttributes is what an access review asks about user: an empty
// version is every version. A selector's requirements are taken from its
// rawSelector or, if it has them, its requirements (those that are not
// valid left out); ignored says, in upstream's words, which selectors
// were left out in part or whole.
func reviewAttributes(user registry.User, spec *authorizationv1.SubjectAccessReviewSpec) (a registry.Attributes, ignored []string) {
	a = registry.Attributes{User: user}
	if r := spec.ResourceAttributes; r != nil {
		a.ResourceRequest = true
		a.Verb, a.Namespace, a.APIGroup, a.APIVersion = r.Verb, r.Namespace, r.Group, r.Version
		a.Resource, a.Subresource, a.Name = r.Resource, r.Subresource, r.Name
		if a.APIVersion == "" {
			a.APIVersion = "*"
		}
		var fieldErr, labelErr error
		if sel := r.FieldSelector; sel != nil {
			if sel.RawSelector != "" {
				a.FieldSelector, fieldErr = registry.ParseFieldSelector(sel.RawSelector)
			}
			if len(sel.Requirements) > 0 {
				a.FieldSelector, fieldErr = validFieldRequirements(sel.Requirements)
			}
		}
		if sel := r.LabelSelector; sel != nil {
			if sel.RawSelector != "" {
				a.LabelSelector, labelErr = registry.ParseLabelSelector(sel.RawSelector)
			}
			if len(sel.Requirements) > 0 {
				a.LabelSelector, labelErr = validLabelRequirements(sel.Requirements)
			}
		}
		for _, s := range []struct {
			name string
			kept int
			err  error
		}{{"fieldSelector", len(a.FieldSelector), fieldErr}, {"labelSelector", len(a.LabelSelector), labelErr}} {
			switch {
			case s.err == nil:
			case s.kept > 0:
				ignored = append(ignored, "spec.resourceAttributes."+s.name+" partially ignored due to parse error")
			default:
				ignored = append(ignored, "spec.resourceAttributes."+s.name+" ignored due to parse error")
			}
		}
	} else if n := spec.NonResourceAttributes; n != nil {
		a.Verb, a.Path = n.Verb, n.Path
	}
	return a, ignored
}

// validFieldRequirements is reqs without those a field selector cannot
// hold (one value, In or NotIn), and why they were left out.
func validFieldRequirements(reqs []metav1.FieldSelectorRequirement) ([]metav1.FieldSelectorRequirement, error) {
	var kept []metav1.FieldSelectorRequirement
	var errs []error
	for _, r := range reqs {
		switch {
		case len(r.Values) > 1:
			errs = append(errs, errors.New("fieldSelectors do not yet support multiple values"))
		case r.Operator == metav1.FieldSelectorOpIn && len(r.Values) != 1:
			errs = append(errs, errors.New("fieldSelectors in must have one value"))
		case r.Operator == metav1.FieldSelectorOpNotIn && len(r.Values) != 1:
			errs = append(errs, errors.New("fieldSelectors not in must have one value"))
		case r.Operator == metav1.FieldSelectorOpIn || r.Operator == metav1.FieldSelectorOpNotIn:
			kept = append(kept, metav1.FieldSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: []string{r.Values[0]}})
		case r.Operator == metav1.FieldSelectorOpExists || r.Operator == metav1.FieldSelectorOpDoesNotExist:
			errs = append(errs, fmt.Errorf("fieldSelectors do not yet support %v", r.Operator))
		default:
			errs = append(errs, fmt.Errorf("%q is not a valid field selector operator", r.Operator))
		}
	}
	return kept, utilerrors.NewAggregate(errs)
}

// validLabelRequirements is reqs without those that are not a label
// selector's, and why they were left out.
func validLabelRequirements(reqs []metav1.LabelSelectorRequirement) ([]metav1.LabelSelectorRequirement, error) {
	ops := map[metav1.LabelSelectorOperator]selection.Operator{
		metav1.LabelSelectorOpIn: selection.In, metav1.LabelSelectorOpNotIn: selection.NotIn,
		metav1.LabelSelectorOpExists: selection.Exists, metav1.LabelSelectorOpDoesNotExist: selection.DoesNotExist,
	}
	var kept labels.Requirements
	var errs []error
	for _, r := range reqs {
		op, ok := ops[r.Operator]
		if !ok {
			errs = append(errs, fmt.Errorf("%q is not a valid label selector operator", r.Operator))
			continue
		}
		values := r.Values
		if len(values) == 0 {
			values = nil
		}
		req, err := labels.NewRequirement(r.Key, op, values)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		kept = append(kept, *req)
	}
	return registry.LabelRequirements(kept), utilerrors.NewAggregate(errs)
}

// accessReviewErrors checks an access review as upstream does, in its
// order: it names exactly one of a resource and a non-resource URL; a
// review about a subject names a user or a group; the metadata is empty
// but for the managedFields the field manager wrote (and a local review's
// namespace), shown whole; a local review asks about a resource in its
// own namespace.
func accessReviewErrors(obj *unstructured.Unstructured, subject, local bool) (field.ErrorList, error) {
	var errs field.ErrorList
	spec, _ := obj.Object["spec"].(map[string]any)
	res, nonRes := spec["resourceAttributes"], spec["nonResourceAttributes"]
	// A non-resource URL is shown as upstream's internal type's JSON.
	var shownNonRes any
	if m, ok := nonRes.(map[string]any); ok {
		path, _ := m["path"].(string)
		verb, _ := m["verb"].(string)
		shownNonRes = struct{ Path, Verb string }{path, verb}
	}
	if (res == nil) == (nonRes == nil) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), shownNonRes, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if subject {
		user, _ := spec["user"].(string)
		if groups, _ := spec["groups"].([]any); user == "" && len(groups) == 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "user"), user, "at least one of user or group must be specified"))
		}
	}
	var meta metav1.ObjectMeta
	if m, ok := obj.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &meta); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	bare := meta
	bare.ManagedFields = nil
	emptyMeta := "must be empty"
	if local {
		bare.Namespace = ""
		emptyMeta = "must be empty except for namespace"
	}
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, bare) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), meta, emptyMeta))
	}
	if local {
		if m, ok := res.(map[string]any); ok {
			if ns, _ := m["namespace"].(string); ns != meta.Namespace {
				errs = append(errs, field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), ns, "must match metadata.namespace"))
			}
		}
		if nonRes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nonResourceAttributes"), shownNonRes, "disallowed on this kind of request"))
		}
	}
	return errs, nil
}

// selfSubjectRulesReview answers "what may I do in this namespace?":
// the rules authz gives the user there or, without authz, everything.
func selfSubjectRulesReview(authz registry.Authorizer) func(context.Context, string, *unstructured.Unstructured, func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	return func(ctx context.Context, _ string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
		ns, _, _ := unstructured.NestedString(obj.Object, "spec", "namespace")
		if ns == "" {
			return nil, apierrors.NewBadRequest("no namespace on request")
		}
		if err := admit(obj); err != nil {
			return nil, err
		}
		all := []string{"*"}
		rules := []rbacv1.PolicyRule{{Verbs: all, APIGroups: all, Resources: all}, {Verbs: all, NonResourceURLs: all}}
		incomplete := false
		var err error
		if authz != nil {
			u, ok := registry.UserFrom(ctx)
			if !ok {
				return nil, apierrors.NewInternalError(errors.New("the request carries no user"))
			}
			rules, incomplete = nil, true
			if r, ok := authz.(registry.RuleResolver); ok {
				rules, incomplete, err = r.RulesFor(ctx, u, ns)
			}
		}
		resourceRules, nonResourceRules := []any{}, []any{}
		for _, r := range rules {
			if len(r.Resources) > 0 {
				rule := map[string]any{"verbs": anyStrings(r.Verbs), "apiGroups": anyStrings(r.APIGroups), "resources": anyStrings(r.Resources)}
				if len(r.ResourceNames) > 0 {
					rule["resourceNames"] = anyStrings(r.ResourceNames)
				}
				resourceRules = append(resourceRules, rule)
			}
			if len(r.NonResourceURLs) > 0 {
				nonResourceRules = append(nonResourceRules, map[string]any{"verbs": anyStrings(r.Verbs), "nonResourceURLs": anyStrings(r.NonResourceURLs)})
			}
		}
		status := map[string]any{"resourceRules": resourceRules, "nonResourceRules": nonResourceRules, "incomplete": incomplete}
		if err != nil {
			status["evaluationError"] = err.Error()
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
			"metadata": map[string]any{}, "spec": map[string]any{},
			"status": status,
		}}, nil
	}
}

// selfSubjectReview answers "who am I?": the user the request was
// authenticated as.
func selfSubjectReview(ctx context.Context, _ string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	if err := admit(obj); err != nil {
		return nil, err
	}
	u, ok := registry.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewInternalError(errors.New("the request carries no user"))
	}
	created := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"creationTimestamp": created},
		"status":   map[string]any{"userInfo": userInfo(u)},
	}}, nil
}
