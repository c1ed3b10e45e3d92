package core

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// The admission webhook configurations of admissionregistration.k8s.io/v1,
// ValidatingWebhookConfiguration and MutatingWebhookConfiguration, as
// kube-apiserver v1.37 serves them: cluster-scoped, in the api-extensions
// category, their webhooks defaulted as the v1 API's SetDefaults_* do and
// checked as ValidateValidatingWebhookConfiguration,
// ValidateMutatingWebhookConfiguration and their Update forms do
// (pkg/apis/admissionregistration/validation), with the strategies'
// generation (1 on create, one more whenever the webhooks change), no
// unconditional update, no create on update, and the printer's columns.
// This file serves the objects only; calling the webhooks they name is
// not its business.
//
// Each error is upstream's: its path, type, value and words, in
// upstream's order. Values upstream shows through an enumerated Go type
// are shown as JSON, as there (enumValue).

// webhookConfigurations returns the two kinds.
func webhookConfigurations() []*registry.Kind {
	kind := func(name string, typed func() runtime.Object, mutating bool) *registry.Kind {
		dflt := func(obj *unstructured.Unstructured) { defaultWebhooks(obj, mutating) }
		return &registry.Kind{
			Group: admissionregistrationv1.GroupName, Versions: []string{"v1"}, Kind: name, ListKind: name + "List",
			Resource: lower(name) + "s", Singular: lower(name), Categories: []string{"api-extensions"},
			Generation:       true,
			Typed:            typed,
			Default:          dflt,
			PrepareForCreate: dflt,
			PrepareForUpdate: func(obj, _ *unstructured.Unstructured) { dflt(obj) },
			Validate: func(obj *unstructured.Unstructured) field.ErrorList {
				errs := validateWebhooks(obj, mutating, createOptions)
				// ManifestBasedAdmissionControlConfig (beta, on): the
				// suffix is kept for configurations read from files.
				return append(errs, staticSuffixErrors(obj.GetName())...)
			},
			ValidateManifest: func(obj *unstructured.Unstructured) field.ErrorList {
				return validateWebhooks(obj, mutating, createOptions)
			},
			ValidateUpdate: func(obj, old *unstructured.Unstructured) field.ErrorList {
				return validateWebhooks(obj, mutating, updateOptions(obj, old))
			},
			Warnings: webhookWarnings,
			Columns:  webhookColumns,
		}
	}
	return []*registry.Kind{
		kind("ValidatingWebhookConfiguration", func() runtime.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} }, false),
		kind("MutatingWebhookConfiguration", func() runtime.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} }, true),
	}
}

var webhookColumns = []registry.Column{
	{Name: "Webhooks", Type: "integer", Description: "Webhooks indicates the number of webhooks registered in this configuration",
		Reads: []string{"webhooks"}, Counts: []string{"webhooks"}, Value: func(o *unstructured.Unstructured) any {
			hooks, _ := o.Object["webhooks"].([]any)
			return int64(len(hooks))
		}},
	registry.AgeColumn,
}

// webhooksOf reads a configuration's webhooks in place.
func webhooksOf(obj *unstructured.Unstructured) []map[string]any {
	list, _ := obj.Object["webhooks"].([]any)
	hooks := make([]map[string]any, 0, len(list))
	for _, h := range list {
		hook, _ := h.(map[string]any)
		hooks = append(hooks, hook)
	}
	return hooks
}

// defaultWebhooks sets what the v1 API defaults in every webhook
// (SetObjectDefaults_ValidatingWebhookConfiguration and the Mutating
// one): the failure and match policies, both selectors (empty: all), the
// timeout, a service's port, every rule's scope, and a mutating webhook's
// reinvocation policy. sideEffects and admissionReviewVersions have no
// default in v1.
func defaultWebhooks(obj *unstructured.Unstructured, mutating bool) {
	set := func(m map[string]any, key string, v any) {
		if m != nil && m[key] == nil {
			m[key] = v
		}
	}
	for _, hook := range webhooksOf(obj) {
		if hook == nil {
			continue
		}
		set(hook, "failurePolicy", string(admissionregistrationv1.Fail))
		set(hook, "matchPolicy", string(admissionregistrationv1.Equivalent))
		set(hook, "namespaceSelector", map[string]any{})
		set(hook, "objectSelector", map[string]any{})
		set(hook, "timeoutSeconds", int64(10))
		if mutating {
			set(hook, "reinvocationPolicy", string(admissionregistrationv1.NeverReinvocationPolicy))
		}
		if cc, _ := hook["clientConfig"].(map[string]any); cc != nil {
			service, _ := cc["service"].(map[string]any)
			set(service, "port", int64(443))
		}
		rules, _ := hook["rules"].([]any)
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			set(rule, "scope", string(admissionregistrationv1.AllScopes))
		}
	}
}

// webhookOptions are what upstream's validationOptions relax on an update
// of a configuration stored by an older API (v1beta1) whose webhooks
// break today's rules: each is kept to what the stored configuration has.
type webhookOptions struct {
	ignoreMatchConditions            bool // unchanged: not compiled again
	requireNoSideEffects             bool
	requireRecognizedReviewVersion   bool
	requireUniqueNames               bool
	allowInvalidLabelValueInSelector bool
}

var createOptions = webhookOptions{requireNoSideEffects: true, requireRecognizedReviewVersion: true, requireUniqueNames: true}

// updateOptions are ValidateValidatingWebhookConfigurationUpdate's (and
// the Mutating one's): the checks the stored webhooks all pass stay on.
func updateOptions(obj, old *unstructured.Unstructured) webhookOptions {
	hooks, oldHooks := webhooksOf(obj), webhooksOf(old)
	opts := webhookOptions{
		ignoreMatchConditions:          len(hooks) == len(oldHooks),
		requireNoSideEffects:           true,
		requireRecognizedReviewVersion: true,
		requireUniqueNames:             true,
	}
	for i, hook := range hooks {
		if opts.ignoreMatchConditions && !reflect.DeepEqual(hook["matchConditions"], oldHooks[i]["matchConditions"]) {
			opts.ignoreMatchConditions = false
		}
	}
	names := map[string]bool{}
	strictSelectors := metav1validation.LabelSelectorValidationOptions{}
	for _, hook := range oldHooks {
		if se, _ := hook["sideEffects"].(string); !slices.Contains(noSideEffectClasses, se) {
			opts.requireNoSideEffects = false
		}
		if versions := strs(hook["admissionReviewVersions"]); len(versions) > 0 && !slices.ContainsFunc(versions, acceptedReviewVersion) {
			opts.requireRecognizedReviewVersion = false
		}
		name, _ := hook["name"].(string)
		if names[name] {
			opts.requireUniqueNames = false
		}
		names[name] = true
		for _, s := range []string{"namespaceSelector", "objectSelector"} {
			if sel := labelSelector(hook[s]); sel != nil && len(metav1validation.ValidateLabelSelector(sel, strictSelectors, nil)) > 0 {
				opts.allowInvalidLabelValueInSelector = true
			}
		}
	}
	return opts
}

// The values upstream accepts, sorted as its sets list them.
var (
	failurePolicies       = []string{"Fail", "Ignore"}
	matchPolicies         = []string{"Equivalent", "Exact"}
	sideEffectClasses     = []string{"None", "NoneOnDryRun", "Some", "Unknown"}
	noSideEffectClasses   = []string{"None", "NoneOnDryRun"}
	reinvocationPolicies  = []string{"IfNeeded", "Never"}
	webhookOperations     = []string{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}
	ruleScopes            = []string{"*", "Cluster", "Namespaced"}
	acceptedReviewVersion = func(v string) bool { return v == "v1" || v == "v1beta1" }
)

// enumValue is a value upstream holds in an enumerated string type, which
// a field error shows as JSON (a plain string is shown quoted by Go).
type enumValue string

// validateWebhooks checks a configuration's webhooks (the registry checks
// its metadata first, as upstream does), in upstream's order: each
// webhook, its admissionReviewVersions, then whether its name is a
// repeat.
func validateWebhooks(obj *unstructured.Unstructured, mutating bool, opts webhookOptions) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, hook := range webhooksOf(obj) {
		path := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(hook, mutating, opts, path)...)
		errs = append(errs, validateReviewVersions(strs(hook["admissionReviewVersions"]), opts.requireRecognizedReviewVersion, path.Child("admissionReviewVersions"))...)
		if name, _ := hook["name"].(string); opts.requireUniqueNames && name != "" {
			if names[name] {
				errs = append(errs, field.Duplicate(path.Child("name"), name))
			}
			names[name] = true
		}
	}
	return errs
}

func validateWebhook(hook map[string]any, mutating bool, opts webhookOptions, path *field.Path) field.ErrorList {
	name, _ := hook["name"].(string)
	errs := validation.IsFullyQualifiedName(path.Child("name"), name)
	rules, _ := hook["rules"].([]any)
	for i, r := range rules {
		rule, _ := r.(map[string]any)
		errs = append(errs, validateWebhookRule(rule, path.Child("rules").Index(i))...)
	}
	errs = append(errs, enumErrors(hook, "failurePolicy", failurePolicies, path)...)
	errs = append(errs, enumErrors(hook, "matchPolicy", matchPolicies, path)...)
	allowed := sideEffectClasses
	if opts.requireNoSideEffects {
		allowed = noSideEffectClasses
	}
	if hook["sideEffects"] == nil {
		errs = append(errs, field.Required(path.Child("sideEffects"), "must specify one of "+strings.Join(allowed, ", ")))
	} else {
		errs = append(errs, enumErrors(hook, "sideEffects", allowed, path)...)
	}
	if t, ok := hook["timeoutSeconds"].(int64); ok && (t > 30 || t < 1) {
		errs = append(errs, field.Invalid(path.Child("timeoutSeconds"), t, "the timeout value must be between 1 and 30 seconds"))
	}
	selectorOpts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.allowInvalidLabelValueInSelector}
	for _, s := range []string{"namespaceSelector", "objectSelector"} {
		if sel := labelSelector(hook[s]); sel != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(sel, selectorOpts, path.Child(s))...)
		}
	}
	if mutating {
		errs = append(errs, enumErrors(hook, "reinvocationPolicy", reinvocationPolicies, path)...)
	}
	cc, _ := hook["clientConfig"].(map[string]any)
	ccPath := path.Child("clientConfig")
	u, hasURL := cc["url"].(string)
	service, hasService := cc["service"].(map[string]any)
	switch {
	case hasURL == hasService:
		errs = append(errs, field.Required(ccPath, "exactly one of url or service is required"))
	case hasURL:
		errs = append(errs, registry.ValidateWebhookURL(ccPath.Child("url"), u)...)
	default:
		errs = append(errs, validateWebhookService(service, ccPath.Child("service"))...)
	}
	if !opts.ignoreMatchConditions {
		conditions, _ := hook["matchConditions"].([]any)
		errs = append(errs, validateMatchConditions(conditions, cel.CheckMatchCondition, path.Child("matchConditions"))...)
	}
	return errs
}

// enumErrors refuses m[key], if set, unless it is one of allowed.
func enumErrors(m map[string]any, key string, allowed []string, path *field.Path) field.ErrorList {
	v, ok := m[key].(string)
	if !ok || slices.Contains(allowed, v) {
		return nil
	}
	return field.ErrorList{field.NotSupported(path.Child(key), enumValue(v), allowed)}
}

// labelSelector reads a selector; nil if there is none.
func labelSelector(v any) *metav1.LabelSelector {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	sel := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, sel); err != nil {
		return nil // the body was decoded through the Go type: not reached
	}
	return sel
}

// validateWebhookRule is upstream's validateRuleWithOperations: the
// operations, then the rule (subresources allowed).
func validateWebhookRule(rule map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	ops := strs(rule["operations"])
	opsPath := path.Child("operations")
	if len(ops) == 0 {
		errs = append(errs, field.Required(opsPath, ""))
	}
	if len(ops) > 1 && slices.Contains(ops, "*") {
		errs = append(errs, field.Invalid(opsPath, ops, "if '*' is present, must not specify other operations"))
	}
	for i, op := range ops {
		if !slices.Contains(webhookOperations, op) {
			errs = append(errs, field.NotSupported(opsPath.Index(i), enumValue(op), webhookOperations))
		}
	}
	groups := strs(rule["apiGroups"])
	if len(groups) == 0 {
		errs = append(errs, field.Required(path.Child("apiGroups"), ""))
	}
	if len(groups) > 1 && slices.Contains(groups, "*") {
		errs = append(errs, field.Invalid(path.Child("apiGroups"), groups, "if '*' is present, must not specify other API groups"))
	}
	versions := strs(rule["apiVersions"])
	if len(versions) == 0 {
		errs = append(errs, field.Required(path.Child("apiVersions"), ""))
	}
	if len(versions) > 1 && slices.Contains(versions, "*") {
		errs = append(errs, field.Invalid(path.Child("apiVersions"), versions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range versions {
		if v == "" {
			errs = append(errs, field.Required(path.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateRuleResources(strs(rule["resources"]), path.Child("resources"))...)
	return append(errs, enumErrors(rule, "scope", ruleScopes, path)...)
}

// validateRuleResources is upstream's validateResources: resources, as
// "resource" or "resource/subresource", where "*" stands for every
// resource or subresource and may not be given beside what it covers.
// Upstream's quirks are kept: a wildcard subresource ("pods/*") refuses
// only the subresources of its resource listed after it, and "*" refuses
// other resources without a subresource only when such a resource is the
// last one of them listed.
func validateRuleResources(resources []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(path, ""))
	}
	anySub := map[string]bool{}      // x/*
	anyResource := map[string]bool{} // */x
	hasDoubleWildcard, hasWildcard, lastIsPlain := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(path.Index(i), ""))
			continue
		}
		hasDoubleWildcard = hasDoubleWildcard || rs == "*/*"
		hasWildcard = hasWildcard || rs == "*"
		res, sub, ok := strings.Cut(rs, "/")
		if !ok {
			lastIsPlain = rs != "*"
			continue
		}
		if anySub[res] {
			errs = append(errs, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if anyResource[sub] {
			errs = append(errs, field.Invalid(path.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			anySub[res] = true
		}
		if res == "*" {
			anyResource[sub] = true
		}
	}
	if len(resources) > 1 && hasDoubleWildcard {
		errs = append(errs, field.Invalid(path, resources, "if '*/*' is present, must not specify other resources"))
	}
	if hasWildcard && lastIsPlain {
		errs = append(errs, field.Invalid(path, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

// validateReviewVersions checks a webhook's admissionReviewVersions: at
// least one, no repeats, each a DNS label, and, unless an update keeps a
// stored webhook that has none, one kube-apiserver speaks.
func validateReviewVersions(versions []string, requireAccepted bool, path *field.Path) field.ErrorList {
	if len(versions) == 0 {
		return field.ErrorList{field.Required(path, "must specify one of v1, v1beta1")}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range versions {
		if seen[v] {
			errs = append(errs, field.Invalid(path.Index(i), v, "duplicate version"))
			continue
		}
		seen[v] = true
		for _, msg := range validation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(path.Index(i), v, msg))
		}
	}
	if requireAccepted && !slices.ContainsFunc(versions, acceptedReviewVersion) {
		errs = append(errs, field.Invalid(path, versions, "must include at least one of v1, v1beta1"))
	}
	return errs
}

// validateWebhookService is upstream's ValidateWebhookService as the
// webhook validation calls it: with the name and namespace swapped, so
// that a missing namespace is reported at service.name and a missing name
// at service.namespace, in that order. The port must be one; a path is
// empty, "/", or "/"-separated DNS subdomains (a trailing "/" allowed).
func validateWebhookService(service map[string]any, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ns, _ := service["namespace"].(string); ns == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if name, _ := service["name"].(string); name == "" {
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	}
	port, _ := service["port"].(int64)
	if msgs := validation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(path.Child("port"), int32(port), "port is not valid: "+strings.Join(msgs, ", ")))
	}
	p, _ := service["path"].(string)
	return append(errs, registry.ValidateWebhookPath(path.Child("path"), p)...)
}

// maxMatchConditions is upstream's limit on a webhook's or a policy's
// matchConditions.
const maxMatchConditions = 64

// validateMatchConditions checks a webhook's or a policy's
// matchConditions: at most 64, each with an expression that compile
// accepts (a bool, in the webhook's or the policy's environment) and a
// qualified name, the names unique.
func validateMatchConditions(conditions []any, compile func(expr string, path *field.Path) *field.Error, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(conditions) > maxMatchConditions {
		errs = append(errs, field.TooMany(path, len(conditions), maxMatchConditions))
	}
	names := map[string]bool{}
	for i, c := range conditions {
		condition, _ := c.(map[string]any)
		p := path.Index(i)
		expr, _ := condition["expression"].(string)
		if expr = strings.TrimSpace(expr); expr == "" {
			errs = append(errs, field.Required(p.Child("expression"), ""))
		} else if err := compile(expr, p.Child("expression")); err != nil {
			errs = append(errs, err)
		}
		name, _ := condition["name"].(string)
		if name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsQualifiedName(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
			if names[name] {
				errs = append(errs, field.Duplicate(p.Child("name"), name))
			}
			names[name] = true
		}
	}
	return errs
}

// staticConfigSuffix ends the names kube-apiserver keeps for the
// configurations it reads from files (ManifestBasedAdmissionControlConfig).
const staticConfigSuffix = ".static.k8s.io"

func staticSuffixErrors(name string) field.ErrorList {
	if !strings.HasSuffix(name, staticConfigSuffix) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, staticSuffixReserved)}
}

var staticSuffixReserved = fmt.Sprintf("names ending with %q are reserved for static manifest-based configurations and cannot be managed via the API", staticConfigSuffix)

// admissionExcluded are the resources admission webhooks are never called
// for (upstream's exclusion.Excluded): the reviews, never stored.
var admissionExcluded = []schema.GroupResource{
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
}

// webhookWarnings are upstream's WarningsOnCreate and WarningsOnUpdate
// with v1.37's gates (ExcludeAdmissionWebhookVirtualResources on): an
// update's name with the reserved suffix, then every excluded resource a
// rule names outright (a rule with a "*" group or resource names none),
// once per rule.
func webhookWarnings(obj, old *unstructured.Unstructured) []string {
	warnings := staticSuffixWarnings(obj, old)
	for i, hook := range webhooksOf(obj) {
		rules, _ := hook["rules"].([]any)
		path := field.NewPath("webhooks").Index(i).Child("rules")
		for j, r := range rules {
			rule, _ := r.(map[string]any)
			groups, resources := strs(rule["apiGroups"]), strs(rule["resources"])
			if slices.Contains(groups, "*") || slices.Contains(resources, "*") {
				continue
			}
			var named []schema.GroupResource
			for _, g := range groups {
				for _, res := range resources {
					gr := schema.GroupResource{Group: g, Resource: res}
					if slices.Contains(admissionExcluded, gr) && !slices.Contains(named, gr) {
						named = append(named, gr)
						warnings = append(warnings, fmt.Sprintf("%s: %s is excluded from admission webhooks; this rule will have no effect", path.Index(j), gr))
					}
				}
			}
		}
	}
	return warnings
}
