package core

import (
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// The mutating admission policies of admissionregistration.k8s.io/v1,
// MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding (GA in
// 1.36), as kube-apiserver v1.37 serves them: as their validating twins
// (admissionpolicy.go), whose checks they share, but without a status
// (upstream's storage has no /status), with mutations and a
// reinvocationPolicy in place of validations and auditAnnotations, no
// validationActions, and matching only the operations a mutation applies
// to (ValidateMutatingAdmissionPolicy, ValidateMutatingAdmissionPolicyBinding
// and their Update forms, in pkg/apis/admissionregistration/validation).
// Applying the mutations is package webhook's business; who may name
// parameters is checked by RBAC (admissionpolicyauthz.go).

// mutatingAdmissionPolicies returns the two kinds.
func mutatingAdmissionPolicies() []*registry.Kind {
	policy := admissionPolicyKind("MutatingAdmissionPolicy", "mutatingadmissionpolicies")
	policy.Typed = func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} }
	// SetObjectDefaults_MutatingAdmissionPolicy sets what the validating
	// one's does; the reinvocationPolicy has no default.
	policy.Default = defaultPolicy
	policy.PrepareForCreate = defaultPolicy
	policy.PrepareForUpdate = func(obj, _ *unstructured.Unstructured) { defaultPolicy(obj) }
	policy.Validate = func(obj *unstructured.Unstructured) field.ErrorList {
		errs := validateMutatingPolicy(obj, policyChecks{})
		return append(errs, staticSuffixErrors(obj.GetName())...)
	}
	policy.ValidateManifest = func(obj *unstructured.Unstructured) field.ErrorList {
		return validateMutatingPolicy(obj, policyChecks{})
	}
	// ValidateMutatingAdmissionPolicyUpdate: a create's checks but the
	// reserved suffix, the matchConditions compiled only if they or the
	// paramKind changed.
	policy.ValidateUpdate = func(obj, old *unstructured.Unstructured) field.ErrorList {
		return validateMutatingPolicy(obj, policyChecks{keepsMatchConditions: keepsMatchConditions(obj, old)})
	}
	policy.Columns = mutatingPolicyColumns

	binding := policyBindingKind("MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings")
	binding.Typed = func() runtime.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} }
	binding.Validate = func(obj *unstructured.Unstructured) field.ErrorList {
		errs := validateMutatingPolicyBinding(obj)
		return append(errs, staticSuffixErrors(obj.GetName())...)
	}
	// ValidateMutatingAdmissionPolicyBindingUpdate: a create's checks but
	// the reserved suffix.
	binding.ValidateManifest = validateMutatingPolicyBinding
	binding.ValidateUpdate = func(obj, _ *unstructured.Unstructured) field.ErrorList {
		return validateMutatingPolicyBinding(obj)
	}
	binding.Columns = policyBindingColumns
	return []*registry.Kind{policy, binding}
}

// mutatingPolicyColumns are the printer's: the number of mutations, the
// paramKind and the age.
var mutatingPolicyColumns = []registry.Column{
	{Name: "Mutations", Type: "integer", Description: "Mutation indicates the number of mutations rules defined in this configuration",
		Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
			mutations, _, _ := unstructured.NestedSlice(o.Object, "spec", "mutations")
			return int64(len(mutations))
		}},
	paramKindColumn,
	registry.AgeColumn,
}

// The values upstream accepts, in the order its messages list them.
var (
	// mutableOperations are the operations a mutating policy or binding
	// may match: a delete has no object to mutate.
	mutableOperations = []string{"*", "CONNECT", "CREATE", "UPDATE"}
	patchTypes        = []string{"ApplyConfiguration", "JSONPatch"}
)

// validateMutatingPolicy is validateMutatingAdmissionPolicySpec (the
// registry checks the metadata first): the failure policy, the paramKind,
// matchConstraints and the operations they match, matchConditions,
// variables, mutations, then the reinvocationPolicy.
func validateMutatingPolicy(obj *unstructured.Unstructured, checks policyChecks) field.ErrorList {
	spec, _ := obj.Object["spec"].(map[string]any)
	path := field.NewPath("spec")
	checks.mutating = true
	errs, hasParams := validatePolicyMatch(spec, path, checks)
	// Upstream compiles a mutating policy's expressions with `variables`
	// declared whether it has variables or not.
	checker := cel.NewPolicyChecker(hasParams, true)
	variables, _ := spec["variables"].([]any)
	errs = append(errs, validateVariables(checker, variables, path.Child("variables"))...)
	mutations, _ := spec["mutations"].([]any)
	if len(mutations) == 0 {
		errs = append(errs, field.Required(path.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range mutations {
		mutation, _ := m.(map[string]any)
		errs = append(errs, validateMutation(checker, mutation, path.Child("mutations").Index(i))...)
	}
	if policy, _ := spec["reinvocationPolicy"].(string); policy == "" {
		errs = append(errs, field.Required(path.Child("reinvocationPolicy"), ""))
	} else {
		errs = append(errs, enumErrors(spec, "reinvocationPolicy", reinvocationPolicies, path)...)
	}
	return errs
}

// validateMutation checks a mutation: a patchType, and the one patch it
// names (an expression checker compiles), not the other.
func validateMutation(checker *cel.PolicyChecker, m map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	apply, hasApply := m["applyConfiguration"].(map[string]any)
	patch, hasPatch := m["jsonPatch"].(map[string]any)
	applyPath, patchPath := path.Child("applyConfiguration"), path.Child("jsonPatch")
	switch patchType, _ := m["patchType"].(string); patchType {
	case "":
		errs = append(errs, field.Required(path.Child("patchType"), ""))
	case "JSONPatch":
		if !hasPatch {
			errs = append(errs, field.Required(patchPath, "must be specified when patchType is JSONPatch"))
		} else {
			errs = append(errs, validateMutationExpression(patch, checker.JSONPatch, patchPath)...)
		}
		if hasApply {
			errs = append(errs, field.Invalid(applyPath, "{applyConfiguration}", "must not be specified when patchType is JSONPatch"))
		}
	case "ApplyConfiguration":
		if !hasApply {
			errs = append(errs, field.Required(applyPath, "must be specified when patchType is ApplyConfiguration"))
		} else {
			errs = append(errs, validateMutationExpression(apply, checker.ApplyConfiguration, applyPath)...)
		}
		if hasPatch {
			errs = append(errs, field.Invalid(patchPath, "{jsonPatch}", "must not be specified when patchType is ApplyConfiguration"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("patchType"), enumValue(patchType), patchTypes))
	}
	return errs
}

// validateMutationExpression checks the expression of a mutation's
// applyConfiguration or jsonPatch: upstream compiles it trimmed, and
// shows it so in its errors.
func validateMutationExpression(m map[string]any, compile func(string, *field.Path) *field.Error, path *field.Path) field.ErrorList {
	expr, _ := m["expression"].(string)
	if expr = strings.TrimSpace(expr); expr == "" {
		return field.ErrorList{field.Required(path.Child("expression"), "")}
	}
	if err := compile(expr, path.Child("expression")); err != nil {
		return field.ErrorList{err}
	}
	return nil
}

// immutableOperationErrors are upstream's errors for each operation of
// mr's resourceRules a mutation cannot apply to, at one path without the
// rule's or the operation's index (its excludeResourceRules may name
// any).
func immutableOperationErrors(mr map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	rules, _ := mr["resourceRules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		for _, op := range strs(rule["operations"]) {
			if !slices.Contains(mutableOperations, op) {
				errs = append(errs, field.NotSupported(path.Child("resourceRules", "operations"), enumValue(op), mutableOperations))
			}
		}
	}
	return errs
}

// validateMutatingPolicyBinding is validateMutatingAdmissionPolicyBindingSpec
// (the registry checks the metadata first): the policy's name, the
// paramRef, then matchResources and the operations they match. Unlike a
// validating binding's, a missing policyName is reported in its place.
func validateMutatingPolicyBinding(obj *unstructured.Unstructured) field.ErrorList {
	spec, _ := obj.Object["spec"].(map[string]any)
	path := field.NewPath("spec")
	var errs field.ErrorList
	if policy, _ := spec["policyName"].(string); policy == "" {
		errs = append(errs, field.Required(path.Child("policyName"), ""))
	} else {
		errs = append(errs, policyNameErrors(policy, path.Child("policyName"))...)
	}
	if ref, ok := spec["paramRef"].(map[string]any); ok {
		errs = append(errs, validateParamRef(ref, path.Child("paramRef"))...)
	}
	if mr, ok := spec["matchResources"].(map[string]any); ok {
		errs = append(errs, validateMatchResources(mr, path.Child("matchResources"))...)
		errs = append(errs, immutableOperationErrors(mr, path.Child("matchResources"))...)
	}
	return errs
}
