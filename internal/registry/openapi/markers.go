package openapi

// marker holds what upstream declares about a field in +marker comments,
// which reflection cannot see, where it differs from what the Go type and
// struct tags imply. The zero marker changes nothing.
type marker struct {
	listType    string   // +listType: "atomic", "set" or "map"
	listMapKeys []string // +listMapKey, for listType "map"
	mapType     string   // +mapType: "atomic" or "granular"
	optional    bool     // +optional on a field whose JSON tag does not omit empty values
	required    bool     // +required on a field whose JSON tag omits empty values
	hasDefault  bool     // +default
	def         any
	// enum: the values of an +enum type, published as the field's enum;
	// enumDoc is the "Possible enum values" text openapi-gen appends to
	// its description (the values' own documentation), if the type's
	// description does not have it.
	enum    []any
	enumDoc string
	// itemEnum: the values of the +enum type of a list's items, published
	// as the items' enum (without a "Possible enum values" text).
	itemEnum []any
	// docFix mends a description where the SwaggerDoc method's generator
	// and openapi-gen read the comment apart: the first stops a comment at
	// a line of "---" and drops backslashes, the second does neither. The
	// first string of the description becomes the second.
	docFix [2]string
}

// fieldMarkers are the markers of the kinds kplane serves that their Go
// types do not show, by definition name and JSON field name, as upstream
// declares them in k8s.io/api v0.37 (TestMatchesSourceMarkers reads the
// sources and fails when this table is incomplete or stale).
var fieldMarkers = map[string]map[string]marker{
	"io.k8s.api.core.v1.Event": {
		"reportingComponent": {optional: true},
		"reportingInstance":  {optional: true},
	},
	"io.k8s.api.events.v1.Event": {
		"metadata": {optional: true},
	},
	"io.k8s.api.authentication.v1.TokenRequest": {
		"spec": {optional: true},
	},
	"io.k8s.api.authentication.v1.TokenRequestSpec": {
		"audiences":         {optional: true},
		"expirationSeconds": {optional: true},
		"boundObjectRef":    {optional: true},
	},
	"io.k8s.api.authentication.v1.TokenRequestStatus": {
		"token":               {optional: true},
		"expirationTimestamp": {optional: true},
	},
	"io.k8s.api.authentication.v1.TokenReviewSpec": {
		"token": {required: true},
	},
	"io.k8s.api.core.v1.ResourceQuotaSpec": {
		"scopes": {itemEnum: quotaScopes},
	},
	"io.k8s.api.core.v1.ScopedResourceSelectorRequirement": {
		"scopeName": {enum: quotaScopes, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"BestEffort\"` Match all pod objects that have best effort quality of service\n" +
			" - `\"CrossNamespacePodAffinity\"` Match all pod objects that have cross-namespace pod (anti)affinity mentioned.\n" +
			" - `\"NotBestEffort\"` Match all pod objects that do not have best effort quality of service\n" +
			" - `\"NotTerminating\"` Match all pod objects where spec.activeDeadlineSeconds is nil\n" +
			" - `\"PriorityClass\"` Match all pod objects that have priority class mentioned\n" +
			" - `\"Terminating\"` Match all pod objects where spec.activeDeadlineSeconds >=0\n" +
			" - `\"VolumeAttributesClass\"` Match all pvc objects that have volume attributes class mentioned."},
		"operator": {enum: []any{"DoesNotExist", "Exists", "In", "NotIn"}, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"DoesNotExist\"`\n - `\"Exists\"`\n - `\"In\"`\n - `\"NotIn\"`"},
	},
	"io.k8s.api.core.v1.NamespaceStatus": {
		"phase": {optional: true, enum: []any{"Active", "Terminating"}, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"Active\"` means the namespace is available for use in the system\n" +
			" - `\"Terminating\"` means the namespace is undergoing graceful termination"},
	},
	"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ValidationRule": {
		"reason": {optional: true, enum: []any{"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"}},
	},
	"io.k8s.api.core.v1.LocalObjectReference": {
		"name": {hasDefault: true, def: ""},
	},
	"io.k8s.api.rbac.v1.Role": {
		"rules": {optional: true},
	},
	"io.k8s.api.rbac.v1.ClusterRole": {
		"rules": {optional: true},
	},
	"io.k8s.api.rbac.v1.RoleRef": {
		"apiGroup": {optional: true},
	},
	"io.k8s.api.admissionregistration.v1.ValidatingWebhook": webhookMarkers(false),
	"io.k8s.api.admissionregistration.v1.MutatingWebhook":   webhookMarkers(true),
	"io.k8s.api.admissionregistration.v1.RuleWithOperations": {
		"operations": {itemEnum: []any{"*", "CONNECT", "CREATE", "DELETE", "UPDATE"}},
	},
	"io.k8s.api.admissionregistration.v1.Rule": {
		"scope": {enum: []any{"*", "Cluster", "Namespaced"}, enumDoc: "\n\n\nPossible enum values:\n" +
			" - `\"*\"` means that all scopes are included.\n" +
			" - `\"Cluster\"` means that scope is limited to cluster-scoped objects. Namespace objects are cluster-scoped.\n" +
			" - `\"Namespaced\"` means that scope is limited to namespaced objects."},
	},
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec": {
		"failurePolicy": failurePolicyMarker,
	},
	"io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicySpec": {
		"failurePolicy":      failurePolicyMarker,
		"reinvocationPolicy": reinvocationPolicyMarker,
	},
	"io.k8s.api.admissionregistration.v1.Mutation": {
		"patchType": {enum: []any{"ApplyConfiguration", "JSONPatch"}, enumDoc: "\n\n\nPossible enum values:\n" +
			" - `\"ApplyConfiguration\"` ApplyConfiguration indicates that the mutation is using apply configuration to mutate the object.\n" +
			" - `\"JSONPatch\"` JSONPatch indicates that the object is mutated through JSON Patch."},
	},
	"io.k8s.api.admissionregistration.v1.MatchResources": {
		"matchPolicy": {enum: []any{"Equivalent", "Exact"}, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"Equivalent\"` means requests should be sent to the webhook if they modify a resource listed in rules via another API group or version.\n" +
			" - `\"Exact\"` means requests should only be sent to the webhook if they exactly match a given rule."},
	},
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus": {
		"conditions": {listType: listMap, listMapKeys: []string{"type"}},
	},
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding": {
		"spec": {required: true},
	},
	"io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec": {
		"policyName": {required: true},
		"validationActions": {required: true, listType: listSet, itemEnum: []any{"Audit", "Deny", "Warn"}, docFix: [2]string{
			`"[{"message": "Invalid value", {"policy": "policy.example.com", {"binding": "policybinding.example.com", {"expressionIndex": "1", {"validationActions": ["Audit"]}]"`,
			`"[{\"message\": \"Invalid value\", {\"policy\": \"policy.example.com\", {\"binding\": \"policybinding.example.com\", {\"expressionIndex\": \"1\", {\"validationActions\": [\"Audit\"]}]"`}},
	},
	"io.k8s.api.flowcontrol.v1.FlowSchema":                 {"spec": {required: true}},
	"io.k8s.api.flowcontrol.v1.FlowSchemaSpec":             {"matchingPrecedence": {optional: true}},
	"io.k8s.api.flowcontrol.v1.FlowSchemaCondition":        {"type": {required: true}},
	"io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration": {"spec": {required: true}},
	"io.k8s.api.flowcontrol.v1.ResourcePolicyRule": {
		"verbs":      {listType: listSet},
		"apiGroups":  {listType: listSet},
		"resources":  {listType: listSet},
		"namespaces": {optional: true, listType: listSet},
	},
	"io.k8s.api.flowcontrol.v1.NonResourcePolicyRule": {
		"verbs":           {listType: listSet},
		"nonResourceURLs": {listType: listSet},
	},
	"io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration": {
		"nominalConcurrencyShares": {optional: true},
		"limitResponse":            {required: true},
	},
	"io.k8s.api.flowcontrol.v1.QueuingConfiguration": {
		"queues":           {optional: true},
		"handSize":         {optional: true},
		"queueLengthLimit": {optional: true},
	},
	"io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationCondition": {"type": {required: true}},
	"io.k8s.api.certificates.v1.CertificateSigningRequestSpec": {
		"usages": {itemEnum: []any{"any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment",
			"decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel", "ipsec user",
			"key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", "server auth", "signing", "timestamping"}},
	},
	"io.k8s.api.certificates.v1.CertificateSigningRequestStatus": {
		"conditions":  {optional: true, listType: listMap, listMapKeys: []string{"type"}},
		"certificate": {docFix: [2]string{"base64(", "base64(\n    -----BEGIN CERTIFICATE-----\n    ...\n    -----END CERTIFICATE-----\n    )"}},
	},
	"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus": {
		// Conditions merge by type under server-side apply although the
		// field has no patch strategy.
		"conditions":     {optional: true, listType: listMap, listMapKeys: []string{"type"}},
		"acceptedNames":  {optional: true},
		"storedVersions": {optional: true},
	},
}

// quotaScopes are the values of a ResourceQuotaScope.
var quotaScopes = []any{"BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass", "Terminating", "VolumeAttributesClass"}

// The enums admission webhooks and policies share (FailurePolicyType,
// ReinvocationPolicyType), with upstream's texts.
var (
	failurePolicyMarker = marker{enum: []any{"Fail", "Ignore"}, enumDoc: "\n\nPossible enum values:\n" +
		" - `\"Fail\"` means that an error calling the webhook causes the admission to fail.\n" +
		" - `\"Ignore\"` means that an error calling the webhook is ignored."}
	reinvocationPolicyMarker = marker{enum: []any{"IfNeeded", "Never"}, enumDoc: "\n\nPossible enum values:\n" +
		" - `\"IfNeeded\"` indicates that the mutation may be called at least one additional time as part of the admission evaluation if the object being admitted is modified by other admission plugins after the initial mutation call.\n" +
		" - `\"Never\"` indicates that the mutation must not be called more than once in a single admission evaluation."}
)

// webhookMarkers are the enums of an admission webhook's fields (a
// mutating one's also has reinvocationPolicy), with upstream's texts.
func webhookMarkers(mutating bool) map[string]marker {
	m := map[string]marker{
		"failurePolicy": failurePolicyMarker,
		"matchPolicy": {enum: []any{"Equivalent", "Exact"}, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"Equivalent\"` means requests should be sent to the webhook if they modify a resource listed in rules via another API group or version.\n" +
			" - `\"Exact\"` means requests should only be sent to the webhook if they exactly match a given rule."},
		"sideEffects": {enum: []any{"None", "NoneOnDryRun", "Some", "Unknown"}, enumDoc: "\n\nPossible enum values:\n" +
			" - `\"None\"` means that calling the webhook will have no side effects.\n" +
			" - `\"NoneOnDryRun\"` means that calling the webhook will possibly have side effects, but if the request being reviewed has the dry-run attribute, the side effects will be suppressed.\n" +
			" - `\"Some\"` means that calling the webhook will possibly have side effects. If a request with the dry-run attribute would trigger a call to this webhook, the request will instead fail.\n" +
			" - `\"Unknown\"` means that no information is known about the side effects of calling the webhook. If a request with the dry-run attribute would trigger a call to this webhook, the request will instead fail."},
	}
	if mutating {
		m["reinvocationPolicy"] = reinvocationPolicyMarker
	}
	return m
}

// unionDiscriminators are the definitions upstream marks +union, each
// with its field marked +unionDiscriminator (a JSON name): openapi-gen
// publishes them with x-kubernetes-unions.
var unionDiscriminators = map[string]string{
	"io.k8s.api.flowcontrol.v1.Subject":                        "kind",
	"io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec": "type",
	"io.k8s.api.flowcontrol.v1.LimitResponse":                  "type",
}

// atomicStructs are the definitions upstream marks +structType=atomic:
// server-side apply owns and replaces such a value as a whole (one
// manager owns an owner reference, a role binding's subject, a label
// selector).
var atomicStructs = map[string]bool{
	"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference":         true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector":          true,
	"io.k8s.api.core.v1.ObjectReference":                          true,
	"io.k8s.api.core.v1.LocalObjectReference":                     true,
	"io.k8s.api.core.v1.ScopeSelector":                            true,
	"io.k8s.api.rbac.v1.Subject":                                  true,
	"io.k8s.api.rbac.v1.RoleRef":                                  true,
	"io.k8s.api.admissionregistration.v1.ParamKind":               true,
	"io.k8s.api.admissionregistration.v1.ParamRef":                true,
	"io.k8s.api.admissionregistration.v1.Variable":                true,
	"io.k8s.api.admissionregistration.v1.MatchResources":          true,
	"io.k8s.api.admissionregistration.v1.NamedRuleWithOperations": true,
}
