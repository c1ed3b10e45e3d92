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
	"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus": {
		// Conditions merge by type under server-side apply although the
		// field has no patch strategy.
		"conditions":     {optional: true, listType: listMap, listMapKeys: []string{"type"}},
		"acceptedNames":  {optional: true},
		"storedVersions": {optional: true},
	},
}

// atomicStructs are the definitions upstream marks +structType=atomic:
// server-side apply owns and replaces such a value as a whole (one
// manager owns an owner reference, a role binding's subject, a label
// selector).
var atomicStructs = map[string]bool{
	"io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference": true,
	"io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector":  true,
	"io.k8s.api.core.v1.ObjectReference":                  true,
	"io.k8s.api.core.v1.LocalObjectReference":             true,
	"io.k8s.api.rbac.v1.Subject":                          true,
	"io.k8s.api.rbac.v1.RoleRef":                          true,
}
