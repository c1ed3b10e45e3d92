package core

import (
	"context"
	"errors"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// reviews are the questions clients ask about what a user may do and who
// they are: kubectl auth (can-i, can-i --list, whoami) and dashboards
// (k9s, Headlamp) ask about themselves before they show what a user may
// do; a metrics endpoint's auth filter (controller-runtime's,
// kube-rbac-proxy) asks whether the client it authenticated may scrape.
// They are never stored. kplane authorizes every authenticated request
// (it has no authorizer yet), so every access review about an
// authenticated user is allowed and every rules review lists everything;
// an identity review tells who the request's credential names.
func reviews() []*registry.Kind {
	review := func(group, kind, resource string, typed func() runtime.Object, answer func(context.Context, string, *unstructured.Unstructured) (*unstructured.Unstructured, error)) *registry.Kind {
		return &registry.Kind{
			Group: group, Versions: []string{"v1"}, Kind: kind, Resource: resource, Singular: lower(kind),
			Typed: typed, Review: answer,
		}
	}
	local := review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews",
		func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} }, accessReview(true, true))
	local.Namespaced = true
	return []*registry.Kind{
		local,
		review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, accessReview(false, false)),
		review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, selfSubjectRulesReview),
		review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews",
			func() runtime.Object { return &authorizationv1.SubjectAccessReview{} }, accessReview(true, false)),
		review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews",
			func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, selfSubjectReview),
	}
}

// accessReview answers "may I?" (a SelfSubjectAccessReview) or, with
// subject, "may this user?" (a SubjectAccessReview; with local, a
// LocalSubjectAccessReview, about its namespace). The question must be
// well formed (accessReviewErrors). The answer is the question with its
// status: allowed, unless the user asked about is anonymous, whom kplane
// refuses.
func accessReview(subject, local bool) func(context.Context, string, *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return func(_ context.Context, _ string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		errs, err := accessReviewErrors(obj, subject, local)
		if err != nil {
			return nil, err
		}
		if len(errs) > 0 {
			// Upstream's message names no kind.
			return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
		}
		allowed := true
		if subject {
			user, _, _ := unstructured.NestedString(obj.Object, "spec", "user")
			groups, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "groups")
			allowed = user != "system:anonymous" && !slices.Contains(groups, "system:unauthenticated")
		}
		obj.Object["status"] = map[string]any{"allowed": allowed}
		return obj, nil
	}
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
// everything.
func selfSubjectRulesReview(_ context.Context, _ string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if ns, _, _ := unstructured.NestedString(obj.Object, "spec", "namespace"); ns == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	all := []any{"*"}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{}, "spec": map[string]any{},
		"status": map[string]any{
			"resourceRules":    []any{map[string]any{"verbs": all, "apiGroups": all, "resources": all}},
			"nonResourceRules": []any{map[string]any{"verbs": all, "nonResourceURLs": all}},
			"incomplete":       false,
		},
	}}, nil
}

// selfSubjectReview answers "who am I?": the user the request was
// authenticated as.
func selfSubjectReview(ctx context.Context, _ string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
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
