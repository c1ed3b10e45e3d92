package core

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// A policy's parameters are read with the server's rights, so writing a
// policy or binding, validating or mutating, needs the right to read
// them, as upstream's strategies check (validatingadmissionpolicy/authz.go,
// mutatingadmissionpolicy/authz.go and their bindings'): a policy with a
// paramKind needs "get" on every object of that kind; a binding with a
// paramRef "get" on the object it names, or "list" for a selector, in
// its namespace. An update is checked only when it changes the paramKind
// (the paramRef or policyName). system:masters, and kplane's own
// controllers (registry.Internal), pass. The refusal is upstream's:
// a 422 with a Forbidden on spec.paramKind (spec.paramRef), asked only of
// an object that is otherwise valid.

// paramsSpec is what the checks read of a policy or binding of either
// kind, whose fields have the same names.
type paramsSpec struct {
	Spec struct {
		ParamKind  *admissionregistrationv1.ParamKind `json:"paramKind,omitempty"`
		ParamRef   *admissionregistrationv1.ParamRef  `json:"paramRef,omitempty"`
		PolicyName string                             `json:"policyName,omitempty"`
	} `json:"spec"`
}

// paramsOf reads obj's paramsSpec; false if its spec is not one (not
// reached: the body was decoded through the kind's Go type).
func paramsOf(obj *unstructured.Unstructured) (*paramsSpec, bool) {
	var p paramsSpec
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p) != nil {
		return nil, false
	}
	return &p, true
}

// admitPolicy checks a write of a policy of kind k.
func (a *RBAC) admitPolicy(k *registry.Kind) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, obj, old *unstructured.Unstructured) error {
		user, _ := registry.UserFrom(ctx)
		if registry.Internal(ctx) || slices.Contains(user.Groups, privilegedGroup) {
			return nil
		}
		p, ok := paramsOf(obj)
		if !ok || p.Spec.ParamKind == nil || !validFor(k, obj, old) {
			return nil
		}
		if old != nil {
			if was, ok := paramsOf(old); ok && was.Spec.ParamKind != nil && *was.Spec.ParamKind == *p.Spec.ParamKind {
				return nil
			}
		}
		pk := p.Spec.ParamKind
		attrs := registry.Attributes{User: user, Verb: "get", ResourceRequest: true, Name: "*", Namespace: "*",
			APIGroup: "*", APIVersion: "*", Resource: "*"}
		if gv, err := schema.ParseGroupVersion(pk.APIVersion); err == nil {
			attrs.APIGroup, attrs.APIVersion = gv.Group, gv.Version
			if res := a.resourceOfKind(gv.WithKind(pk.Kind)); res != "" {
				attrs.Resource = res
			}
		}
		if registry.Allowed(ctx, a.Chain(), attrs) {
			return nil
		}
		return paramForbidden(k, obj, field.NewPath("spec", "paramKind"), fmt.Sprintf(
			`user %v must have "get" permission on all objects of the referenced paramKind (kind=%s, apiVersion=%s)`, &user, pk.Kind, pk.APIVersion))
	}
}

// admitPolicyBinding checks a write of a binding of kind k, which names
// a policy of the resource policies.
func (a *RBAC) admitPolicyBinding(k *registry.Kind, policies string) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) error {
	return func(ctx context.Context, obj, old *unstructured.Unstructured) error {
		user, _ := registry.UserFrom(ctx)
		if registry.Internal(ctx) || slices.Contains(user.Groups, privilegedGroup) {
			return nil
		}
		b, ok := paramsOf(obj)
		if !ok || b.Spec.ParamRef == nil || !validFor(k, obj, old) {
			return nil
		}
		if old != nil {
			if was, ok := paramsOf(old); ok && was.Spec.ParamRef != nil &&
				sameParamRef(was.Spec.ParamRef, b.Spec.ParamRef) && was.Spec.PolicyName == b.Spec.PolicyName {
				return nil
			}
		}
		ref := b.Spec.ParamRef
		verb := "get"
		if ref.Name == "" {
			verb = "list"
		}
		attrs := registry.Attributes{User: user, Verb: verb, ResourceRequest: true, Name: ref.Name, Namespace: ref.Namespace,
			APIGroup: "*", APIVersion: "*", Resource: "*"}
		// What the policy's paramKind resolves to narrows the check; what
		// it does not is said in the refusal (the paramKind printed as
		// upstream's internal type prints).
		var why string
		pk, err := a.paramKindOf(ctx, policies, b.Spec.PolicyName)
		switch {
		case err != nil:
			why = fmt.Sprintf("unable to get policy %s to determine minimum required permissions and ", b.Spec.PolicyName)
		case pk != nil:
			gv, err := schema.ParseGroupVersion(pk.APIVersion)
			if err != nil {
				why = fmt.Sprintf("unable to parse paramKind &{%s %s} to determine minimum required permissions and ", pk.APIVersion, pk.Kind)
				break
			}
			attrs.APIGroup, attrs.APIVersion = gv.Group, gv.Version
			if res := a.resourceOfKind(gv.WithKind(pk.Kind)); res != "" {
				attrs.Resource = res
			} else {
				why = fmt.Sprintf("unable to resolve paramKind &{%s %s} to determine minimum required permissions and ", pk.APIVersion, pk.Kind)
			}
		}
		if registry.Allowed(ctx, a.Chain(), attrs) {
			return nil
		}
		var msg string
		switch {
		case why != "":
			msg = fmt.Sprintf(`%suser %v does not have "%v" permission for all groups, versions and resources`, why, &user, verb)
		case policies == "mutatingadmissionpolicies":
			// Upstream's mutating binding strategy gives the verb and the
			// user in each other's places.
			msg = fmt.Sprintf(`user %v does not have "%v" permission on the object referenced by paramRef`, verb, &user)
		default:
			msg = fmt.Sprintf(`user %v does not have "%v" permission on the object referenced by paramRef`, &user, verb)
		}
		return paramForbidden(k, obj, field.NewPath("spec", "paramRef"), msg)
	}
}

// sameParamRef is upstream's test of an unchanged paramRef: its structs
// compared with ==, where two selectors or two parameterNotFoundActions
// (pointers, decoded apart) are never the same. As every valid paramRef
// has a parameterNotFoundAction, an update keeping one is checked again.
func sameParamRef(a, b *admissionregistrationv1.ParamRef) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace &&
		a.Selector == nil && b.Selector == nil && a.ParameterNotFoundAction == nil && b.ParameterNotFoundAction == nil
}

// validFor reports whether obj passes the checks upstream runs before its
// authorization of the parameters: its metadata's (so that a bad name is
// refused as such) and kind k's own.
func validFor(k *registry.Kind, obj, old *unstructured.Unstructured) bool {
	if len(apivalidation.ValidateObjectMetaAccessor(obj, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))) > 0 {
		return false
	}
	if old == nil {
		return k.Validate == nil || len(k.Validate(obj)) == 0
	}
	return k.ValidateUpdate == nil || len(k.ValidateUpdate(obj, old)) == 0
}

func paramForbidden(k *registry.Kind, obj *unstructured.Unstructured, path *field.Path, msg string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: k.Group, Kind: k.Kind}, obj.GetName(), field.ErrorList{field.Forbidden(path, msg)})
}

// resourceOfKind is the resource serving gvk, "" if none.
func (a *RBAC) resourceOfKind(gvk schema.GroupVersionKind) string {
	if res, ok := a.Registry.ForKind(gvk); ok {
		return res.Kind().Resource
	}
	return ""
}

// paramKindOf reads the paramKind of the policy named name among
// policies (validatingadmissionpolicies or mutatingadmissionpolicies):
// nil if it has none.
func (a *RBAC) paramKindOf(ctx context.Context, policies, name string) (*admissionregistrationv1.ParamKind, error) {
	res, ok := a.Registry.Get(schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: policies})
	if !ok {
		return nil, fmt.Errorf("%s are not served", policies)
	}
	obj, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	p, ok := paramsOf(obj)
	if !ok {
		return nil, fmt.Errorf("policy %s cannot be read", name)
	}
	return p.Spec.ParamKind, nil
}
