package core

import (
	"context"
	"errors"
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

// reviews are the questions a client asks about itself, which kubectl
// auth (can-i, can-i --list, whoami) and dashboards (k9s, Headlamp) ask
// before they show what a user may do. They are never stored. kplane
// authorizes every authenticated request (it has no authorizer yet), so
// every access review is allowed and every rules review lists everything;
// an identity review tells who the client certificate names.
func reviews() []*registry.Kind {
	review := func(group, kind, resource string, typed func() runtime.Object, answer func(context.Context, *unstructured.Unstructured) (*unstructured.Unstructured, error)) *registry.Kind {
		return &registry.Kind{
			Group: group, Versions: []string{"v1"}, Kind: kind, Resource: resource, Singular: lower(kind),
			Typed: typed, Review: answer,
		}
	}
	return []*registry.Kind{
		review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} }, selfSubjectAccessReview),
		review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
			func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} }, selfSubjectRulesReview),
		review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews",
			func() runtime.Object { return &authenticationv1.SelfSubjectReview{} }, selfSubjectReview),
	}
}

// selfSubjectAccessReview answers "may I?": yes, once the question names
// exactly one of a resource and a non-resource URL. The answer is the
// question with its status, as upstream's.
func selfSubjectAccessReview(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var errs field.ErrorList
	spec, _ := obj.Object["spec"].(map[string]any)
	res, nonRes := spec["resourceAttributes"], spec["nonResourceAttributes"]
	if (res == nil) == (nonRes == nil) {
		// Shown as upstream's internal type's JSON.
		var shown any
		if m, ok := nonRes.(map[string]any); ok {
			path, _ := m["path"].(string)
			verb, _ := m["verb"].(string)
			shown = struct{ Path, Verb string }{path, verb}
		}
		errs = append(errs, field.Invalid(field.NewPath("spec"), shown, "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	// The metadata must be empty but for the managedFields the field
	// manager wrote; it is shown whole.
	var meta metav1.ObjectMeta
	if m, ok := obj.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &meta); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	bare := meta
	bare.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, bare) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), meta, "must be empty"))
	}
	if len(errs) > 0 {
		// Upstream's message names no kind.
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
	}
	obj.Object["status"] = map[string]any{"allowed": true}
	return obj, nil
}

// selfSubjectRulesReview answers "what may I do in this namespace?":
// everything.
func selfSubjectRulesReview(_ context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
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
func selfSubjectReview(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u, ok := registry.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewInternalError(errors.New("the request carries no user"))
	}
	info := map[string]any{"username": u.Name}
	if len(u.Groups) > 0 {
		groups := make([]any, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = g
		}
		info["groups"] = groups
	}
	if len(u.Extra) > 0 {
		extra := map[string]any{}
		for k, vs := range u.Extra {
			values := make([]any, len(vs))
			for i, v := range vs {
				values[i] = v
			}
			extra[k] = values
		}
		info["extra"] = extra
	}
	created := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(), "kind": obj.GetKind(),
		"metadata": map[string]any{"creationTimestamp": created},
		"status":   map[string]any{"userInfo": info},
	}}, nil
}
