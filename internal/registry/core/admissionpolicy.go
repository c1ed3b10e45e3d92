package core

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// The admission policies of admissionregistration.k8s.io/v1,
// ValidatingAdmissionPolicy (with /status) and
// ValidatingAdmissionPolicyBinding, as kube-apiserver v1.37 serves them:
// cluster-scoped, in the api-extensions category, defaulted as the v1
// API's SetObjectDefaults_* do and checked as
// ValidateValidatingAdmissionPolicy, ValidateValidatingAdmissionPolicyBinding,
// their Update forms and ValidateValidatingAdmissionPolicyStatusUpdate do
// (pkg/apis/admissionregistration/validation), with the strategies'
// generation (1 on create, one more whenever the spec changes), the
// status reset on create and kept by writes to the main resource, no
// unconditional update, no create on update, and the printer's columns.
// This file serves the objects only: evaluating the policies is package
// webhook's business, and the status is written by a type checker that
// kube-apiserver does not run (kube-controller-manager does), so a policy
// created here keeps "status: {}".
//
// Each error is upstream's: its path, type, value and words, in
// upstream's order. Who may name parameters is checked by RBAC
// (admissionpolicyauthz.go).

// admissionPolicies returns the two kinds, then the mutating twins
// (mutatingpolicy.go).
func admissionPolicies() []*registry.Kind {
	policy := admissionPolicyKind("ValidatingAdmissionPolicy", "validatingadmissionpolicies")
	policy.Status = true
	policy.Typed = func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} }
	policy.Default = defaultPolicy
	policy.PrepareForCreate = func(obj *unstructured.Unstructured) {
		defaultPolicy(obj)
		// Upstream's PrepareForCreate resets the status to its zero
		// value, which its encoding writes as {}.
		obj.Object["status"] = map[string]any{}
	}
	policy.PrepareForUpdate = func(obj, _ *unstructured.Unstructured) { defaultPolicy(obj) }
	policy.Validate = func(obj *unstructured.Unstructured) field.ErrorList {
		errs := validatePolicy(obj, policyChecks{})
		return append(errs, staticSuffixErrors(obj.GetName())...)
	}
	policy.ValidateManifest = func(obj *unstructured.Unstructured) field.ErrorList { return validatePolicy(obj, policyChecks{}) }
	policy.ValidateUpdate = validatePolicyUpdate
	policy.Columns = policyColumns

	binding := policyBindingKind("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings")
	binding.Typed = func() runtime.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} }
	binding.Validate = func(obj *unstructured.Unstructured) field.ErrorList {
		errs, required := validatePolicyBinding(obj)
		errs = append(errs, staticSuffixErrors(obj.GetName())...)
		return append(errs, required...)
	}
	binding.ValidateManifest = func(obj *unstructured.Unstructured) field.ErrorList {
		errs, required := validatePolicyBinding(obj)
		return append(errs, required...)
	}
	// ValidateValidatingAdmissionPolicyBindingUpdate: a create's checks
	// but the reserved suffix. (The declarative checks skip a policyName
	// or validationActions the update keeps; a stored binding has both.)
	binding.ValidateUpdate = func(obj, _ *unstructured.Unstructured) field.ErrorList { return binding.ValidateManifest(obj) }
	binding.Columns = policyBindingColumns
	return append([]*registry.Kind{policy, binding}, mutatingAdmissionPolicies()...)
}

// admissionPolicyKind is a kind of admission policy or binding: what
// the four kinds share.
func admissionPolicyKind(name, resource string) *registry.Kind {
	return &registry.Kind{
		Group: admissionregistrationv1.GroupName, Versions: []string{"v1"}, Kind: name, ListKind: name + "List",
		Resource: resource, Singular: lower(name), Categories: []string{"api-extensions"},
		Generation: true,
		Warnings:   staticSuffixWarnings,
	}
}

// policyBindingKind is a kind of policy binding, defaulted as both are.
func policyBindingKind(name, resource string) *registry.Kind {
	k := admissionPolicyKind(name, resource)
	k.Default = defaultPolicyBinding
	k.PrepareForCreate = defaultPolicyBinding
	k.PrepareForUpdate = func(obj, _ *unstructured.Unstructured) { defaultPolicyBinding(obj) }
	return k
}

var (
	policyColumns = []registry.Column{
		{Name: "Validations", Type: "integer", Description: "Validations indicates the number of validation rules defined in this configuration",
			Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
				validations, _, _ := unstructured.NestedSlice(o.Object, "spec", "validations")
				return int64(len(validations))
			}},
		paramKindColumn,
		registry.AgeColumn,
	}
	// paramKindColumn is a policy's paramKind, of either kind.
	paramKindColumn = registry.Column{Name: "ParamKind", Type: "string", Description: "ParamKind specifies the kind of resources used to parameterize this policy",
		Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
			pk, ok, _ := unstructured.NestedMap(o.Object, "spec", "paramKind")
			if !ok {
				return "<unset>"
			}
			apiVersion, _ := pk["apiVersion"].(string)
			kind, _ := pk["kind"].(string)
			return apiVersion + "/" + kind
		}}
	policyBindingColumns = []registry.Column{
		{Name: "PolicyName", Type: "string", Description: "PolicyName indicates the policy definition which the policy binding binded to",
			Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
				name, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
				return name
			}},
		{Name: "ParamRef", Type: "string", Description: "ParamRef indicates the param resource which sets the configuration param",
			Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
				ref, _, _ := unstructured.NestedMap(o.Object, "spec", "paramRef")
				return paramRefCell(ref)
			}},
		registry.AgeColumn,
	}
)

// paramRefCell is the printer's ParamRef: "namespace/name", "*/name"
// without a namespace (the printer cannot tell whether the params are
// cluster-scoped), the selector as its generated String() shows it
// without a name, and "<unset>" without a paramRef.
func paramRefCell(ref map[string]any) string {
	if ref == nil {
		return "<unset>"
	}
	name, _ := ref["name"].(string)
	ns, _ := ref["namespace"].(string)
	switch sel := labelSelector(ref["selector"]); {
	case name != "" && ns != "":
		return ns + "/" + name
	case name != "":
		return "*/" + name
	case sel != nil:
		return sel.String()
	}
	return "<unset>"
}

// defaultPolicy sets what the v1 API defaults in a policy
// (SetObjectDefaults_ValidatingAdmissionPolicy): the failure policy, and
// its matchConstraints' as a binding's matchResources.
func defaultPolicy(obj *unstructured.Unstructured) {
	spec, _ := obj.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj.Object["spec"] = spec
	}
	if spec["failurePolicy"] == nil {
		spec["failurePolicy"] = string(admissionregistrationv1.Fail)
	}
	defaultMatchResources(spec["matchConstraints"])
}

// defaultPolicyBinding sets what the v1 API defaults in a binding
// (SetObjectDefaults_ValidatingAdmissionPolicyBinding): its
// matchResources', if it has them. A paramRef has no defaults.
func defaultPolicyBinding(obj *unstructured.Unstructured) {
	spec, _ := obj.Object["spec"].(map[string]any)
	defaultMatchResources(spec["matchResources"])
}

// defaultMatchResources sets SetDefaults_MatchResources's match policy and
// selectors (empty: all), and every rule's scope.
func defaultMatchResources(v any) {
	mr, _ := v.(map[string]any)
	if mr == nil {
		return
	}
	for key, value := range map[string]any{
		"matchPolicy":       string(admissionregistrationv1.Equivalent),
		"namespaceSelector": map[string]any{},
		"objectSelector":    map[string]any{},
	} {
		if mr[key] == nil {
			mr[key] = value
		}
	}
	for _, key := range []string{"resourceRules", "excludeResourceRules"} {
		rules, _ := mr[key].([]any)
		for _, r := range rules {
			if rule, _ := r.(map[string]any); rule != nil && rule["scope"] == nil {
				rule["scope"] = string(admissionregistrationv1.AllScopes)
			}
		}
	}
}

// Upstream's limits on a policy's auditAnnotations.
const (
	maxAuditAnnotations = 20
	// maxAuditAnnotationValueExpressionLength is in bytes.
	maxAuditAnnotationValueExpressionLength = 5 * 1024
)

// The values upstream accepts, in the order its messages list them.
var (
	validationReasons = []string{"Forbidden", "Invalid", "RequestEntityTooLarge"}
	validationActions = []string{"Audit", "Deny", "Warn"}
	// parameterNotFoundActions are listed as written, not sorted.
	parameterNotFoundActions = []string{"Deny", "Allow"}
)

// validatePolicyUpdate is upstream's two update strategies in one, as the
// registry calls the same hook for both: a write to /status, the only
// one that changes the status, is checked as
// ValidateValidatingAdmissionPolicyStatusUpdate (the status alone); a
// write to the policy as ValidateValidatingAdmissionPolicyUpdate, whose
// matchConditions are not compiled again while they and the paramKind
// are unchanged.
func validatePolicyUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	if !reflect.DeepEqual(obj.Object["status"], old.Object["status"]) {
		return validatePolicyStatus(obj)
	}
	return validatePolicy(obj, policyChecks{keepsMatchConditions: keepsMatchConditions(obj, old)})
}

// keepsMatchConditions reports whether an update of a policy, of either
// kind, changes neither its matchConditions nor its paramKind, which
// they are compiled with: upstream does not compile them again then
// (ignoreValidatingAdmissionPolicyMatchConditions and its mutating twin).
func keepsMatchConditions(obj, old *unstructured.Unstructured) bool {
	spec, _ := obj.Object["spec"].(map[string]any)
	oldSpec, _ := old.Object["spec"].(map[string]any)
	return reflect.DeepEqual(spec["paramKind"], oldSpec["paramKind"]) &&
		sameList(spec["matchConditions"], oldSpec["matchConditions"])
}

// sameList compares two lists as upstream's semantic equality does: an
// empty list is no list.
func sameList(a, b any) bool {
	la, _ := a.([]any)
	lb, _ := b.([]any)
	return (len(la) == 0 && len(lb) == 0) || reflect.DeepEqual(la, lb)
}

// policyChecks are what changes the checks both kinds of policy share,
// as upstream's validationOptions do.
type policyChecks struct {
	// keepsMatchConditions: an update that keeps the matchConditions and
	// the paramKind does not compile the matchConditions again.
	keepsMatchConditions bool
	// mutating: the policy is a MutatingAdmissionPolicy, whose
	// matchConstraints may match only operations it can mutate.
	mutating bool
}

// validatePolicyMatch checks what comes first in a policy's spec, of
// either kind, in upstream's order: the failure policy, the paramKind,
// matchConstraints, then the matchConditions. hasParams reports a
// paramKind, which the policy's expressions are compiled with.
func validatePolicyMatch(spec map[string]any, path *field.Path, checks policyChecks) (errs field.ErrorList, hasParams bool) {
	if spec["failurePolicy"] == nil {
		errs = append(errs, field.Required(path.Child("failurePolicy"), ""))
	} else {
		errs = append(errs, enumErrors(spec, "failurePolicy", failurePolicies, path)...)
	}
	paramKind, hasParams := spec["paramKind"].(map[string]any)
	if hasParams {
		errs = append(errs, validateParamKind(paramKind, path.Child("paramKind"))...)
	}
	if mc, ok := spec["matchConstraints"].(map[string]any); !ok {
		errs = append(errs, field.Required(path.Child("matchConstraints"), ""))
	} else {
		errs = append(errs, validateMatchResources(mc, path.Child("matchConstraints"))...)
		// The resourceRules give the expressions their types.
		if rules, _ := mc["resourceRules"].([]any); len(rules) == 0 {
			errs = append(errs, field.Required(path.Child("matchConstraints", "resourceRules"), ""))
		}
		if checks.mutating {
			errs = append(errs, immutableOperationErrors(mc, path.Child("matchConstraints"))...)
		}
	}
	if !checks.keepsMatchConditions {
		conditions, _ := spec["matchConditions"].([]any)
		errs = append(errs, validateMatchConditions(conditions, func(expr string, p *field.Path) *field.Error {
			return cel.CheckPolicyMatchCondition(expr, hasParams, p)
		}, path.Child("matchConditions"))...)
	}
	return errs, hasParams
}

// validateVariables checks a policy's variables in order, declaring each
// in checker for the expressions after it.
func validateVariables(checker *cel.PolicyChecker, variables []any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, v := range variables {
		variable, _ := v.(map[string]any)
		errs = append(errs, validateVariable(checker, variable, path.Index(i))...)
	}
	return errs
}

// validatePolicy is validateValidatingAdmissionPolicySpec (the registry
// checks the metadata first, as upstream does): the failure policy, the
// paramKind, matchConstraints, matchConditions, variables, validations,
// then auditAnnotations.
func validatePolicy(obj *unstructured.Unstructured, checks policyChecks) field.ErrorList {
	spec, _ := obj.Object["spec"].(map[string]any)
	path := field.NewPath("spec")
	errs, hasParams := validatePolicyMatch(spec, path, checks)
	variables, _ := spec["variables"].([]any)
	// Upstream's validation declares variables only for a policy that
	// has some.
	checker := cel.NewPolicyChecker(hasParams, len(variables) > 0)
	errs = append(errs, validateVariables(checker, variables, path.Child("variables"))...)
	validations, _ := spec["validations"].([]any)
	audits, hasAudits := spec["auditAnnotations"].([]any)
	if len(validations) == 0 && len(audits) == 0 {
		const atLeastOne = "validations or auditAnnotations must contain at least one item"
		return append(errs, field.Required(path.Child("validations"), atLeastOne), field.Required(path.Child("auditAnnotations"), atLeastOne))
	}
	for i, v := range validations {
		validation, _ := v.(map[string]any)
		errs = append(errs, validateValidation(checker, validation, path.Child("validations").Index(i))...)
	}
	if !hasAudits {
		return errs
	}
	if len(audits) > maxAuditAnnotations {
		errs = append(errs, field.Invalid(path.Child("auditAnnotations"), auditAnnotationsValue(audits), fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := map[string]bool{}
	for i, a := range audits {
		audit, _ := a.(map[string]any)
		p := path.Child("auditAnnotations").Index(i)
		errs = append(errs, validateAuditAnnotation(checker, obj.GetName(), audit, p)...)
		key, _ := audit["key"].(string)
		if keys[key] {
			errs = append(errs, field.Duplicate(p.Child("key"), key))
		}
		keys[key] = true
	}
	return errs
}

// auditAnnotationsValue is the value upstream shows for too many
// auditAnnotations: its internal type's, whose fields have no JSON
// names, so {"Key":…,"ValueExpression":…}.
func auditAnnotationsValue(audits []any) any {
	type auditAnnotation struct{ Key, ValueExpression string }
	out := make([]auditAnnotation, 0, len(audits))
	for _, a := range audits {
		audit, _ := a.(map[string]any)
		key, _ := audit["key"].(string)
		expr, _ := audit["valueExpression"].(string)
		out = append(out, auditAnnotation{key, expr})
	}
	return out
}

// validateParamKind checks a paramKind's apiVersion (a group that is a
// DNS subdomain, if any, and a version that is a DNS label) and its kind
// (a DNS label but for its case), as upstream does.
func validateParamKind(pk map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	apiVersion, _ := pk["apiVersion"].(string)
	avPath := path.Child("apiVersion")
	if apiVersion == "" {
		errs = append(errs, field.Required(avPath, ""))
	} else if group, version, err := parseParamGroupVersion(apiVersion); err != nil {
		errs = append(errs, field.Invalid(avPath, apiVersion, err.Error()))
	} else {
		if group != "" {
			if msgs := validation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(avPath, group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(avPath, apiVersion, "version must be specified"))
		} else if msgs := validation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(avPath, version, strings.Join(msgs, ",")))
		}
	}
	kind, _ := pk["kind"].(string)
	if kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), ""))
	} else if msgs := validation.IsDNS1035Label(strings.ToLower(kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("kind"), kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// parseParamGroupVersion is upstream's parseGroupVersion: "version",
// "group/version", or "/" (neither); more slashes are an error.
func parseParamGroupVersion(gv string) (group, version string, err error) {
	if gv == "/" {
		return "", "", nil
	}
	switch strings.Count(gv, "/") {
	case 0:
		return "", gv, nil
	case 1:
		group, version, _ = strings.Cut(gv, "/")
		return group, version, nil
	}
	return "", "", fmt.Errorf("unexpected GroupVersion string: %v", gv)
}

// validateMatchResources checks a policy's matchConstraints or a
// binding's matchResources: the match policy and both selectors, all
// required (the v1 API defaults them) and the selectors checked strictly,
// then each resource rule and each excluded one.
func validateMatchResources(mr map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mr["matchPolicy"] == nil {
		errs = append(errs, field.Required(path.Child("matchPolicy"), ""))
	} else {
		errs = append(errs, enumErrors(mr, "matchPolicy", matchPolicies, path)...)
	}
	for _, s := range []string{"namespaceSelector", "objectSelector"} {
		if sel := labelSelector(mr[s]); sel == nil {
			errs = append(errs, field.Required(path.Child(s), ""))
		} else {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path.Child(s))...)
		}
	}
	for _, key := range []string{"resourceRules", "excludeResourceRules"} {
		rules, _ := mr[key].([]any)
		for i, r := range rules {
			rule, _ := r.(map[string]any)
			errs = append(errs, validateNamedRule(rule, path.Child(key).Index(i))...)
		}
	}
	return errs
}

// validateNamedRule is upstream's validateNamedRuleWithOperations: the
// resourceNames (path segments, no repeats), then the rule as a
// webhook's.
func validateNamedRule(rule map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, name := range strs(rule["resourceNames"]) {
		p := path.Child("resourceNames").Index(i)
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
		if seen[name] {
			errs = append(errs, field.Duplicate(p, name))
		}
		seen[name] = true
	}
	return append(errs, validateWebhookRule(rule, path)...)
}

// celIdentifier is a CEL identifier; celReserved are the words that may
// not be one.
var (
	celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)
	celReserved   = []string{"true", "false", "null", "in", "as", "break", "const", "continue", "else",
		"for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)

// validateVariable checks a variable: a name that is a CEL identifier,
// and an expression, which checker compiles and declares for the
// expressions after it (an empty one is not declared).
func validateVariable(checker *cel.PolicyChecker, v map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	name, _ := v["name"].(string)
	if strings.TrimSpace(name) == "" {
		errs = append(errs, field.Required(path.Child("name"), "name is not specified"))
	} else if !celIdentifier.MatchString(name) || slices.Contains(celReserved, name) {
		errs = append(errs, field.Invalid(path.Child("name"), name, "must be a valid CEL identifier"))
	}
	expr, _ := v["expression"].(string)
	if strings.TrimSpace(expr) == "" {
		return append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	}
	if err := checker.Variable(name, expr, path.Child("expression")); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// newlines are the line breaks of CEL's grammar.
var newlines = regexp.MustCompile(`[\n\r]+`)

// validateValidation checks a validation: its expression (a bool), its
// messageExpression (a string), its message (one line) and its reason.
// Expressions are compiled as written, so that errors show their columns.
func validateValidation(checker *cel.PolicyChecker, v map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	expr, _ := v["expression"].(string)
	if strings.TrimSpace(expr) == "" {
		errs = append(errs, field.Required(path.Child("expression"), "expression is not specified"))
	} else if err := checker.Validation(expr, path.Child("expression")); err != nil {
		errs = append(errs, err)
	}
	msgExpr, _ := v["messageExpression"].(string)
	if msgExpr != "" && strings.TrimSpace(msgExpr) == "" {
		errs = append(errs, field.Invalid(path.Child("messageExpression"), msgExpr, "must be non-empty if specified"))
	} else if msgExpr != "" {
		if err := checker.MessageExpression(msgExpr, path.Child("messageExpression")); err != nil {
			errs = append(errs, err)
		}
	}
	msg, _ := v["message"].(string)
	if trimmed := strings.TrimSpace(msg); msg != "" && trimmed == "" {
		errs = append(errs, field.Invalid(path.Child("message"), msg, "must be non-empty if specified"))
	} else if newlines.MatchString(trimmed) {
		errs = append(errs, field.Invalid(path.Child("message"), msg, "must not contain line breaks"))
	}
	return append(errs, enumErrors(v, "reason", validationReasons, path)...)
}

// validateAuditAnnotation checks an auditAnnotation: its key, qualified
// by the policy's name as the audit annotation is, and its
// valueExpression (a string or null, at most 5 KiB).
func validateAuditAnnotation(checker *cel.PolicyChecker, policy string, a map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	key, _ := a["key"].(string)
	if policy == "" {
		errs = append(errs, field.Invalid(path.Child("key"), key, "requires metadata.name be non-empty"))
	} else {
		qualified := policy + "/" + key
		for _, msg := range validation.IsQualifiedName(qualified) {
			errs = append(errs, field.Invalid(path.Child("key"), qualified, msg))
		}
	}
	expr, _ := a["valueExpression"].(string)
	switch trimmed := strings.TrimSpace(expr); {
	case trimmed == "":
		errs = append(errs, field.Required(path.Child("valueExpression"), "valueExpression is not specified"))
	case len(trimmed) > maxAuditAnnotationValueExpressionLength:
		errs = append(errs, field.Required(path.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
	default:
		if err := checker.AuditAnnotation(expr, path.Child("valueExpression")); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// validatePolicyStatus is ValidateValidatingAdmissionPolicyStatusUpdate:
// the type checker's warnings, each with a warning and a fieldRef that
// parses as JSONPath, then the conditions.
func validatePolicyStatus(obj *unstructured.Unstructured) field.ErrorList {
	path := field.NewPath("status")
	var status admissionregistrationv1.ValidatingAdmissionPolicyStatus
	if m, ok := obj.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &status); err != nil {
			return field.ErrorList{field.InternalError(path, err)} // decoded through the Go type: not reached
		}
	}
	var errs field.ErrorList
	if tc := status.TypeChecking; tc != nil {
		for i, w := range tc.ExpressionWarnings {
			p := path.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				errs = append(errs, field.Required(p.Child("warning"), ""))
			}
			ref := strings.TrimSpace(w.FieldRef)
			if ref == "" {
				errs = append(errs, field.Required(p.Child("fieldRef"), ""))
			} else if err := checkFieldRef(ref); err != nil {
				errs = append(errs, field.Invalid(p.Child("fieldRef"), ref, fmt.Sprintf("invalid JSONPath: %v", err)))
			}
		}
	}
	return append(errs, metav1validation.ValidateConditions(status.Conditions, path.Child("conditions"))...)
}

// validatePolicyBinding is validateValidatingAdmissionPolicyBindingSpec
// (the registry checks the metadata first): the policy's name, the
// paramRef, matchResources, then the validation actions. A missing
// policyName or validationActions is returned apart, in required:
// upstream's declarative validation (beta, on) reports those after every
// other error, the reserved suffix's too, and in its own words.
func validatePolicyBinding(obj *unstructured.Unstructured) (errs, required field.ErrorList) {
	spec, _ := obj.Object["spec"].(map[string]any)
	path := field.NewPath("spec")
	policy, _ := spec["policyName"].(string)
	if policy == "" {
		required = append(required, field.Required(path.Child("policyName"), ""))
	} else {
		errs = append(errs, policyNameErrors(policy, path.Child("policyName"))...)
	}
	if ref, ok := spec["paramRef"].(map[string]any); ok {
		errs = append(errs, validateParamRef(ref, path.Child("paramRef"))...)
	}
	if mr, ok := spec["matchResources"].(map[string]any); ok {
		errs = append(errs, validateMatchResources(mr, path.Child("matchResources"))...)
	}
	actions := strs(spec["validationActions"])
	actionsPath := path.Child("validationActions")
	seen := map[string]bool{}
	for i, a := range actions {
		if !slices.Contains(validationActions, a) {
			errs = append(errs, field.NotSupported(actionsPath.Index(i), enumValue(a), validationActions))
		}
		if seen[a] {
			errs = append(errs, field.Duplicate(actionsPath.Index(i), enumValue(a)))
		}
		seen[a] = true
	}
	if seen["Deny"] && seen["Warn"] {
		errs = append(errs, field.Invalid(actionsPath, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(actions) == 0 {
		required = append(required, field.Required(actionsPath, ""))
	}
	return errs, required
}

// policyNameErrors checks the policy a binding, of either kind, names:
// a DNS subdomain, as the policy's name is.
func policyNameErrors(policy string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(policy, false) {
		errs = append(errs, field.Invalid(path, policy, msg))
	}
	return errs
}

// validateParamRef checks a binding's paramRef: a name (a path segment)
// or a selector (checked strictly), not both, and a
// parameterNotFoundAction.
func validateParamRef(ref map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	const exclusive = "name and selector are mutually exclusive"
	name, _ := ref["name"].(string)
	sel := labelSelector(ref["selector"])
	if name != "" {
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(path.Child("name"), name, msg))
		}
		if sel != nil {
			errs = append(errs, field.Forbidden(path.Child("name"), exclusive))
		}
	}
	if sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
		if name != "" {
			errs = append(errs, field.Forbidden(path.Child("selector"), exclusive))
		}
	}
	if name == "" && sel == nil {
		errs = append(errs, field.Required(path, "one of name or selector must be specified"))
	}
	if action, _ := ref["parameterNotFoundAction"].(string); action == "" {
		errs = append(errs, field.Required(path.Child("parameterNotFoundAction"), ""))
	} else if !slices.Contains(parameterNotFoundActions, action) {
		errs = append(errs, field.NotSupported(path.Child("parameterNotFoundAction"), enumValue(action), parameterNotFoundActions))
	}
	return errs
}

// staticSuffixWarnings are the strategies' WarningsOnUpdate, with
// ManifestBasedAdmissionControlConfig on: an update of an object whose
// name has the reserved suffix (a create of one is refused instead).
func staticSuffixWarnings(obj, old *unstructured.Unstructured) []string {
	if old != nil && strings.HasSuffix(obj.GetName(), staticConfigSuffix) {
		return []string{"metadata.name: " + staticSuffixReserved}
	}
	return nil
}
