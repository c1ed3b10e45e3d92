// Package openapi builds the OpenAPI schemas of the built-in kinds kplane
// serves, at run time, by reflection over their Go types (k8s.io/api,
// k8s.io/apimachinery, k8s.io/apiextensions-apiserver). The schemas feed
// server-side apply (managedfields.NewTypeConverter turns them into
// structured-merge-diff types) and the /openapi/v2 and /openapi/v3
// documents kubectl reads for explain and client-side validation.
//
// Definitions is the whole API. It aims at the definitions kube-apiserver
// publishes for the same types (api/openapi-spec in kubernetes/kubernetes,
// written by kube-openapi's openapi-gen from the type's comments), and two
// tests hold it there: one compares every definition it shares with the
// OpenAPI definitions apiextensions-apiserver ships (the CRD types and the
// metav1 types), field by field, description by description; the other
// reads the +markers in the Go sources of the module versions in use.
//
// # Names
//
// A definition is named after its Go type: the name the type returns from
// OpenAPIModelName, or else the package path with its domain reversed and
// "/" turned into ".", then the type name (k8s.io/api/core/v1.ConfigMap is
// io.k8s.api.core.v1.ConfigMap). $refs are refPrefix+name, so the
// last path segment of a $ref is the key schemaconv looks up.
//
// # Types
//
// Named structs become definitions and are referred to by $ref, as are
// types that declare OpenAPISchemaType/OpenAPISchemaFormat (metav1.Time
// and MicroTime are string/date-time, Duration and Quantity string,
// IntOrString string/int-or-string, apiextensions JSON and
// JSONSchemaPropsOr* have no type: any value). Other named types are
// inlined as their underlying type. string, bool, integers (int32 and
// int64 formats, as openapi-gen maps Go kinds), float64 (number/double),
// []byte (string/byte), map[string]T (object with additionalProperties)
// and slices (array) follow encoding/json. Fields come from json tags;
// json:"-" is skipped and an embedded struct without a JSON name is
// flattened (TypeMeta). A struct with no JSON fields (FieldsV1,
// runtime.RawExtension) is a free-form object, as upstream publishes it.
// Recursive types (JSONSchemaProps) end in a $ref to their own definition.
//
// A field is required unless its JSON tag has omitempty, which is
// openapi-gen's rule when the comment has neither +optional nor +required
// (omitzero counts as omitempty here; openapi-gen ignores it, and no
// served type has omitzero alone). Where the comment disagrees with the tag the table in
// markers.go says so (Event.reportingComponent, Role.rules,
// RoleRef.apiGroup, CustomResourceDefinitionStatus's fields).
//
// Defaults follow what openapi-gen enforces: {} for a struct-typed field,
// the zero value for a scalar field its tag does not omit, nothing for
// pointers, lists, maps and types that decode themselves (Time, Quantity),
// plus +default markers from the table (LocalObjectReference.name "").
//
// # Lists, maps and structs
//
// A patchStrategy struct tag becomes x-kubernetes-patch-strategy (and
// patchMergeKey x-kubernetes-patch-merge-key). The list type is the
// +listType marker from the table if there is one; otherwise a list merged
// by key is x-kubernetes-list-type map keyed by the merge key
// (metadata.ownerReferences by uid, ServiceAccount.secrets by name,
// Namespace status.conditions by type), a merged list of scalars is a set
// (metadata.finalizers), and every other list is atomic
// (metadata.managedFields, RBAC rules and subjects). The table adds the
// lists keyed without a patch strategy (CustomResourceDefinition
// status.conditions) and the structs marked +structType=atomic, which
// server-side apply owns whole: OwnerReference, LabelSelector,
// ObjectReference, LocalObjectReference, rbac Subject and RoleRef.
//
// # Descriptions
//
// Type and field descriptions come from the SwaggerDoc methods k8s.io/api
// and apimachinery generate. Types without one (the apiextensions.k8s.io
// types, metav1.Time, MicroTime, FieldsV1, runtime.RawExtension) take them
// from the definitions k8s.io/apiextensions-apiserver/pkg/generated/openapi
// publishes; a type in neither has none. Where SwaggerDoc's generator
// read a comment otherwise than openapi-gen (it stops at a line of "---"
// and drops backslashes: a CSR's status.certificate, a policy binding's
// validationActions), the table mends the text. DefinitionsWithoutDocs builds the
// same definitions with no description, for type converters, which do not
// read them: it never builds that index of the generated definitions.
//
// # Deviations from upstream
//
//   - A list with a merge patch strategy and no +listType gets the list
//     type schemaconv would infer from the strategy. (A list with no
//     marker at all, the items of the List kinds, is left unmarked, as
//     upstream publishes it; schemaconv reads it as atomic.)
//   - Markers other than those in the table are not seen: enum values
//     (+enum, with the "Possible enum values" text openapi-gen appends to
//     descriptions) only where the table lists them (a namespace's phase,
//     a quota's scopes, a CSR's usages, a CRD rule's reason, an admission
//     webhook's policies and its rules' scope and operations: every enum
//     of the served kinds), unions
//     (+union, published as x-kubernetes-unions) only where the table
//     lists them (a FlowSchema's subject, a priority level's spec and
//     limit response: every union of the served kinds), no validation
//     markers (+k8s:..., x-kubernetes-validations).
//   - A $ref property carries its description and default beside the
//     $ref, the v2 form. kube-apiserver's v3 documents wrap such refs in
//     allOf; a v3 publisher does the same with kube-openapi's
//     builder3/util.WrapRefs.
//   - IntOrString and Quantity are published in their v2 form
//     (string/int-or-string, string), without the v3 oneOf. Like upstream,
//     built-in schemas do not carry x-kubernetes-int-or-string; that
//     extension belongs to CRD structural schemas. No served kind uses
//     either type today.
//   - The markers are those of k8s.io/api v0.37: RoleRef.apiGroup is
//     +optional there, while swagger.json of older releases lists it as
//     required.
//
// The package does not validate objects, publish documents or serve HTTP,
// and builds nothing for custom resources (their schemas come from their
// CRDs).
package openapi
