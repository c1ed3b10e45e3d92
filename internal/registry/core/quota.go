package core

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// ResourceQuotas is core/v1's ResourceQuota as kube-apiserver serves it:
// a namespace's limits (spec.hard) and what is used of them (status,
// written by the quota controller and by quota admission, package quota).
// Its strategy and validation are upstream's: the status is dropped on
// create and kept by writes of the spec; scopes are immutable; a status
// update must name the resourceVersion it replaces.
func ResourceQuotas() *registry.Kind {
	return &registry.Kind{
		Versions: []string{"v1"}, Kind: "ResourceQuota", ListKind: "ResourceQuotaList", Resource: "resourcequotas", Singular: "resourcequota",
		ShortNames: []string{"quota"}, Namespaced: true, Status: true, UnconditionalUpdate: true, QualifiedFinalizers: true,
		Typed: func() runtime.Object { return &corev1.ResourceQuota{} },
		// The Go type writes an empty status as {}.
		PrepareForCreate: func(obj *unstructured.Unstructured) { obj.Object["status"] = map[string]any{} },
		Validate:         func(obj *unstructured.Unstructured) field.ErrorList { return validateQuota(obj, nil, "") },
		ValidateSubresourceUpdate: func(sub string, obj, old *unstructured.Unstructured) field.ErrorList {
			return validateQuota(obj, old, sub)
		},
		Warnings: quotaWarnings,
		Columns:  quotaColumns,
	}
}

// quotaResourceList reads a ResourceList (spec.hard, status.used) of a
// ResourceQuota: the names and quantities that parse (a body of the Go
// type has no others).
func quotaResourceList(obj *unstructured.Unstructured, fields ...string) corev1.ResourceList {
	m, _, _ := unstructured.NestedMap(obj.Object, fields...)
	out := make(corev1.ResourceList, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if q, err := resource.ParseQuantity(s); err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}

// validateQuota is upstream's ValidateResourceQuota (old nil), ...Update
// (sub "") and ...StatusUpdate (sub "status").
func validateQuota(obj, old *unstructured.Unstructured, sub string) field.ErrorList {
	var errs field.ErrorList
	var q, was corev1.ResourceQuota
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &q); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
	}
	if sub == "status" {
		if obj.GetResourceVersion() == "" {
			errs = append(errs, field.Required(field.NewPath("resourceVersion"), ""))
		}
		return append(errs, validateQuotaStatus(field.NewPath("status"), q.Status)...)
	}
	errs = append(errs, validateQuotaSpec(field.NewPath("spec"), q.Spec)...)
	if old == nil {
		return append(errs, validateQuotaStatus(field.NewPath("status"), q.Status)...)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(old.Object, &was); err != nil {
		return append(errs, field.Invalid(field.NewPath(""), "", err.Error()))
	}
	scopes := func(s []corev1.ResourceQuotaScope) []corev1.ResourceQuotaScope {
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	if !slices.Equal(scopes(q.Spec.Scopes), scopes(was.Spec.Scopes)) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, "field is immutable"))
	}
	return errs
}

func validateQuotaStatus(p *field.Path, s corev1.ResourceQuotaStatus) field.ErrorList {
	errs := validateQuotaList(p.Child("hard"), s.Hard)
	return append(errs, validateQuotaList(p.Child("used"), s.Used)...)
}

// validateQuotaList checks each name and quantity of a ResourceList, in
// the names' order (upstream walks a Go map: any order).
func validateQuotaList(p *field.Path, l corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedNames(l) {
		rp := p.Key(string(name))
		errs = append(errs, validateQuotaResourceName(rp, name)...)
		v := l[name]
		if v.Sign() < 0 {
			errs = append(errs, field.Invalid(rp, v.String(), apivalidation.IsNegativeErrorMsg))
		}
		if isIntegerResource(name) && v.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(rp, v, "must be an integer"))
		}
	}
	return errs
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func validateQuotaSpec(p *field.Path, s corev1.ResourceQuotaSpec) field.ErrorList {
	errs := validateQuotaList(p.Child("hard"), s.Hard)
	hard := sortedNames(s.Hard)
	conflicting := func(scopes []corev1.ResourceQuotaScope) bool {
		return (slices.Contains(scopes, corev1.ResourceQuotaScopeBestEffort) && slices.Contains(scopes, corev1.ResourceQuotaScopeNotBestEffort)) ||
			(slices.Contains(scopes, corev1.ResourceQuotaScopeTerminating) && slices.Contains(scopes, corev1.ResourceQuotaScopeNotTerminating))
	}
	if len(s.Scopes) > 0 {
		sp := p.Child("scopes")
		for _, scope := range s.Scopes {
			if !standardQuotaScopes[scope] {
				errs = append(errs, field.Invalid(sp, s.Scopes, "unsupported scope"))
			}
			for _, name := range hard {
				if standardQuotaResource(name) && !scopeAppliesTo(scope, name) {
					errs = append(errs, field.Invalid(sp, s.Scopes, "unsupported scope applied to resource"))
				}
			}
		}
		if conflicting(s.Scopes) {
			errs = append(errs, field.Invalid(sp, s.Scopes, "conflicting scopes"))
		}
	}
	if s.ScopeSelector == nil {
		return errs
	}
	mp := p.Child("scopeSelector", "matchExpressions")
	var names []corev1.ResourceQuotaScope
	for _, req := range s.ScopeSelector.MatchExpressions {
		if !standardQuotaScopes[req.ScopeName] {
			errs = append(errs, field.Invalid(mp.Child("scopeName"), req.ScopeName, "unsupported scope"))
		}
		for _, name := range hard {
			if standardQuotaResource(name) && !scopeAppliesTo(req.ScopeName, name) {
				errs = append(errs, field.Invalid(mp, internalSelector(s.ScopeSelector), "unsupported scope applied to resource"))
			}
		}
		switch req.ScopeName {
		case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating,
			corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
			if req.Operator != corev1.ScopeSelectorOpExists {
				errs = append(errs, field.Invalid(mp.Child("operator"), req.Operator,
					"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
			}
		}
		switch req.Operator {
		case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(mp.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
			}
		case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
			if len(req.Values) != 0 {
				errs = append(errs, field.Invalid(mp.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
			}
		default:
			errs = append(errs, field.Invalid(mp.Child("operator"), req.Operator, "not a valid selector operator"))
		}
		names = append(names, req.ScopeName)
	}
	if conflicting(names) {
		// Upstream names the scopes here, not the selector.
		errs = append(errs, field.Invalid(mp, s.Scopes, "conflicting scopes"))
	}
	return errs
}

// scopeSelector and scopeRequirement are how upstream's validation shows
// a scope selector: as its internal Go type, whose JSON has the Go field
// names.
type (
	scopeSelector    struct{ MatchExpressions []scopeRequirement }
	scopeRequirement struct {
		ScopeName corev1.ResourceQuotaScope
		Operator  corev1.ScopeSelectorOperator
		Values    []string
	}
)

func internalSelector(s *corev1.ScopeSelector) *scopeSelector {
	out := &scopeSelector{}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, scopeRequirement(r))
	}
	return out
}

var standardQuotaScopes = map[corev1.ResourceQuotaScope]bool{
	corev1.ResourceQuotaScopeTerminating: true, corev1.ResourceQuotaScopeNotTerminating: true,
	corev1.ResourceQuotaScopeBestEffort: true, corev1.ResourceQuotaScopeNotBestEffort: true,
	corev1.ResourceQuotaScopePriorityClass: true, corev1.ResourceQuotaScopeVolumeAttributesClass: true,
	corev1.ResourceQuotaScopeCrossNamespacePodAffinity: true,
}

// scopeAppliesTo is upstream's IsResourceQuotaScopeValidForResource.
func scopeAppliesTo(scope corev1.ResourceQuotaScope, name corev1.ResourceName) bool {
	pods := name == corev1.ResourcePods
	compute := slices.Contains([]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceLimitsCPU,
		corev1.ResourceLimitsMemory, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory}, name)
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return pods || compute
	case corev1.ResourceQuotaScopeBestEffort:
		return pods
	case corev1.ResourceQuotaScopeVolumeAttributesClass:
		return name == corev1.ResourcePersistentVolumeClaims || name == corev1.ResourceRequestsStorage
	}
	return true
}

// The resource names upstream's quota knows without a domain
// (standardQuotaResources), beside hugepages-* and requests.hugepages-*;
// storage is a standard resource name that quota does not take.
var standardQuotaResources = map[corev1.ResourceName]bool{
	corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
	corev1.ResourceRequestsCPU: true, corev1.ResourceRequestsMemory: true, corev1.ResourceRequestsStorage: true,
	corev1.ResourceRequestsEphemeralStorage: true, corev1.ResourceLimitsCPU: true, corev1.ResourceLimitsMemory: true,
	corev1.ResourceLimitsEphemeralStorage: true, corev1.ResourcePods: true, corev1.ResourceQuotas: true,
	corev1.ResourceServices: true, corev1.ResourceReplicationControllers: true, corev1.ResourceSecrets: true,
	corev1.ResourcePersistentVolumeClaims: true, corev1.ResourceConfigMaps: true, corev1.ResourceServicesNodePorts: true,
	corev1.ResourceServicesLoadBalancers: true,
}

func hugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) || strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

func standardQuotaResource(name corev1.ResourceName) bool {
	return standardQuotaResources[name] || hugePages(name)
}

// validateQuotaResourceName is upstream's ValidateResourceQuotaResourceName:
// a qualified name; without a domain, one quota knows.
func validateQuotaResourceName(p *field.Path, name corev1.ResourceName) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if strings.Contains(string(name), "/") {
		return errs
	}
	if len(errs) == 0 && !standardQuotaResource(name) && name != corev1.ResourceStorage {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource type or fully qualified"))
	}
	if !standardQuotaResource(name) {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource for quota"))
	}
	return errs
}

// isIntegerResource is upstream's IsIntegerResourceName: object counts
// and extended resources (a domain other than kubernetes.io, not
// requests.*, that is a qualified name as requests.<name>).
func isIntegerResource(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
		corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
		corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers:
		return true
	}
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// quotaWarnings are upstream's WarningsOnCreate: a request above its
// limit.
func quotaWarnings(obj, old *unstructured.Unstructured) []string {
	if old != nil {
		return nil
	}
	hard := quotaResourceList(obj, "spec", "hard")
	var out []string
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceStorage, corev1.ResourceEphemeralStorage} {
		reqName := "requests." + r
		req, ok := hard[reqName]
		if !ok && (r == corev1.ResourceCPU || r == corev1.ResourceMemory) {
			if req, ok = hard[r]; ok {
				reqName = r
			}
		}
		limName := "limits." + r
		if lim, limOK := hard[limName]; ok && limOK && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("ResourceQuota %s (%s) should be less than %s (%s)", reqName, req.String(), limName, lim.String()))
		}
	}
	return out
}

// quotaColumns are upstream's printer's: each resource of status.hard as
// "name: used/hard", limits.* under Limit, the others under Request.
var quotaColumns = []registry.Column{
	{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume.",
		Value: func(obj *unstructured.Unstructured) any { return quotaCell(obj, false) }, Reads: []string{"status"}},
	{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
		Value: func(obj *unstructured.Unstructured) any { return quotaCell(obj, true) }, Reads: []string{"status"}},
	registry.AgeColumn,
}

func quotaCell(obj *unstructured.Unstructured, limits bool) string {
	hard := quotaResourceList(obj, "status", "hard")
	used := quotaResourceList(obj, "status", "used")
	var parts []string
	for _, name := range sortedNames(hard) {
		first, _, dotted := strings.Cut(string(name), ".")
		if (dotted && first == "limits") != limits {
			continue
		}
		u, h := used[name], hard[name]
		parts = append(parts, fmt.Sprintf("%s: %s/%s", name, u.String(), h.String()))
	}
	return strings.Join(parts, ", ")
}
