package schema

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// ValidateCRD checks one CRD version's openAPIV3Schema as kube-apiserver
// does for a new apiextensions.k8s.io/v1 CRD
// (pkg/apis/apiextensions/validation/validation.go,
// validateCustomResourceDefinitionValidation), with fldPath the schema's
// path (spec.versions[0].schema.openAPIV3Schema). In upstream's order:
//
//   - nullable at the root;
//   - the structural checks (schema/validation.go ValidateStructural,
//     sorted by message), and only if they pass, the defaults
//     (schema/defaulting/validation.go ValidateDefaults);
//   - the OpenAPI checks (ValidateCustomResourceDefinitionOpenAPISchema):
//     unsupported keywords, additionalProperties with properties,
//     defaults where forbidden, x-kubernetes-* consistency;
//   - errors building the structural schema, only if nothing else failed.
//
// x-kubernetes-validations (CEL) are not checked here. A nil schema is
// accepted: whether one is required is the caller's concern.
func ValidateCRD(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Nullable {
		errs = append(errs, field.Forbidden(fldPath.Child("nullable"), "nullable cannot be true at the root"))
	}
	var initErrs field.ErrorList
	root, err := compile(s)
	if err == nil {
		err = unsupportedFields(s)
	}
	if err != nil {
		initErrs = append(initErrs, field.Invalid(fldPath, "", err.Error()))
	} else if structural := validateStructural(s, fldPath); len(structural) > 0 {
		errs = append(errs, structural...)
	} else {
		r := *root
		r.embedded = true
		errs = append(errs, validateDefaults(fldPath, &r, false)...)
	}
	errs = append(errs, validateOpenAPI(s, fldPath, openAPIRules{allowDefaults: true}, true)...)
	if len(errs) == 0 {
		errs = initErrs
	}
	if len(errs) == 0 {
		if _, err := New(s); err != nil {
			// Upstream reports this at the schema's parent (spec.versions[i].schema).
			errs = append(errs, field.Invalid(fldPath, "", fmt.Sprintf("error building validator: %v", err)))
		}
	}
	return errs
}

// unsupportedFields refuses the keywords upstream's NewStructural refuses
// anywhere in the schema (schema/convert.go validateUnsupportedFields).
func unsupportedFields(s *apiextensionsv1.JSONSchemaProps) error {
	var err error
	walk(s, func(s *apiextensionsv1.JSONSchemaProps) {
		if err != nil {
			return
		}
		switch {
		case s.ID != "":
			err = fmt.Errorf("OpenAPIV3Schema 'id' is not supported")
		case s.Schema != "":
			err = fmt.Errorf("OpenAPIV3Schema 'schema' is not supported")
		case s.Ref != nil:
			err = fmt.Errorf("OpenAPIV3Schema '$ref' is not supported")
		case len(s.PatternProperties) != 0:
			err = fmt.Errorf("OpenAPIV3Schema 'patternProperties' is not supported")
		case s.Dependencies != nil:
			err = fmt.Errorf("OpenAPIV3Schema 'dependencies' is not supported")
		case s.AdditionalItems != nil:
			err = fmt.Errorf("OpenAPIV3Schema 'additionalItems' is not supported")
		case len(s.Definitions) != 0:
			err = fmt.Errorf("OpenAPIV3Schema 'definitions' is not supported")
		case s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields:
			err = fmt.Errorf("internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined")
		}
	})
	return err
}

// walk calls f on s and every schema inside it.
func walk(s *apiextensionsv1.JSONSchemaProps, f func(*apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	f(s)
	if s.Items != nil {
		walk(s.Items.Schema, f)
		for i := range s.Items.JSONSchemas {
			walk(&s.Items.JSONSchemas[i], f)
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k]
		walk(&p, f)
	}
	if s.AdditionalProperties != nil {
		walk(s.AdditionalProperties.Schema, f)
	}
	for _, l := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range l {
			walk(&l[i], f)
		}
	}
	walk(s.Not, f)
}

type level int

const (
	rootLevel level = iota
	itemLevel
	fieldLevel
)

// validateStructural is upstream's ValidateStructural: the invariants of
// a structural schema, then the completeness of value validations (every
// field a value validation names is also specified outside it). The
// errors are sorted by their text, as upstream sorts them.
func validateStructural(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	errs := structuralInvariants(s, rootLevel, fldPath)
	errs = append(errs, completeness(s, s, fldPath, fldPath)...)
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

func structuralInvariants(s *apiextensionsv1.JSONSchemaProps, lvl level, fldPath *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if s.Type == "array" && (s.Items == nil || s.Items.Schema == nil) {
		errs = append(errs, field.Required(fldPath.Child("items"), "must be specified"))
	}
	if s.Items != nil {
		errs = append(errs, structuralInvariants(s.Items.Schema, itemLevel, fldPath.Child("items"))...)
	}
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k]
		errs = append(errs, structuralInvariants(&p, fieldLevel, fldPath.Child("properties").Key(k))...)
	}
	if s.AdditionalProperties != nil {
		if lvl == rootLevel {
			errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must not be used at the root"))
		}
		errs = append(errs, structuralInvariants(s.AdditionalProperties.Schema, fieldLevel, fldPath.Child("additionalProperties"))...)
	}

	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	if s.XIntOrString && preserve {
		errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-preserve-unknown-fields"), true, "must be false if x-kubernetes-int-or-string is true"))
	}
	if s.XIntOrString && s.XEmbeddedResource {
		errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-embedded-resource"), true, "must be false if x-kubernetes-int-or-string is true"))
	}

	skipAnyOf := isIntOrStringAnyOf(s.AnyOf)
	skipFirstAllOfAnyOf := len(s.AllOf) > 0 && isIntOrStringAnyOf(s.AllOf[0].AnyOf)
	errs = append(errs, valueValidation(s, skipAnyOf, skipFirstAllOfAnyOf, fldPath)...)

	checkMetadata := lvl == rootLevel || s.XEmbeddedResource
	if s.XEmbeddedResource && s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(fldPath.Child("type"), "must be object if x-kubernetes-embedded-resource is true"))
		} else {
			errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be object if x-kubernetes-embedded-resource is true"))
		}
	} else if s.Type == "" && !s.XIntOrString && !preserve {
		switch lvl {
		case rootLevel:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty at the root"))
		case itemLevel:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty for specified array items"))
		case fieldLevel:
			errs = append(errs, field.Required(fldPath.Child("type"), "must not be empty for specified object fields"))
		}
	}
	if s.XEmbeddedResource && s.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must not be used if x-kubernetes-embedded-resource is set"))
	}
	if lvl == rootLevel && s.Type != "" && s.Type != "object" {
		errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be object at the root"))
	}
	for _, k := range []string{"kind", "apiVersion"} {
		if p, ok := s.Properties[k]; ok && checkMetadata && p.Type != "string" {
			errs = append(errs, field.Invalid(fldPath.Child("properties").Key(k).Child("type"), p.Type, "must be string"))
		}
	}
	if m, ok := s.Properties["metadata"]; ok {
		errs = append(errs, metadataInvariants(&m, checkMetadata, lvl, fldPath.Child("properties").Key("metadata"))...)
	}
	if s.XEmbeddedResource && !preserve && len(s.Properties) == 0 {
		errs = append(errs, field.Required(fldPath.Child("properties"), "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"))
	}
	return errs
}

// metadataInvariants: metadata is an object wherever it is ObjectMeta;
// at the root it may restrict name and generateName, nothing else
// (upstream's validateStructuralMetadataInvariants).
func metadataInvariants(m *apiextensionsv1.JSONSchemaProps, checkMetadata bool, lvl level, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if checkMetadata && m.Type != "object" {
		errs = append(errs, field.Invalid(fldPath.Child("type"), m.Type, "must be object"))
	}
	if lvl == rootLevel {
		rest := *m
		_, name := rest.Properties["name"]
		_, generateName := rest.Properties["generateName"]
		if (name && generateName && len(rest.Properties) == 2) || ((name || generateName) && len(rest.Properties) == 1) {
			rest.Properties = nil
		}
		rest.Type = ""
		rest.Default = nil // forbidden by the OpenAPI checks
		if !reflect.DeepEqual(rest, apiextensionsv1.JSONSchemaProps{}) {
			errs = append(errs, field.Forbidden(fldPath, "must not specify anything other than name and generateName, but metadata is implicitly specified"))
		}
	}
	return errs
}

func isIntOrStringAnyOf(anyOf []apiextensionsv1.JSONSchemaProps) bool {
	return len(anyOf) == 2 &&
		reflect.DeepEqual(anyOf[0], apiextensionsv1.JSONSchemaProps{Type: "integer"}) &&
		reflect.DeepEqual(anyOf[1], apiextensionsv1.JSONSchemaProps{Type: "string"})
}

// valueValidation checks the logical junctors of s (anyOf, allOf, oneOf,
// not), which may only restrict values, never specify fields.
func valueValidation(s *apiextensionsv1.JSONSchemaProps, skipAnyOf, skipFirstAllOfAnyOf bool, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !skipAnyOf {
		for i := range s.AnyOf {
			errs = append(errs, nestedValueValidation(&s.AnyOf[i], false, fldPath.Child("anyOf").Index(i))...)
		}
	}
	for i := range s.AllOf {
		errs = append(errs, nestedValueValidation(&s.AllOf[i], skipFirstAllOfAnyOf && i == 0, fldPath.Child("allOf").Index(i))...)
	}
	for i := range s.OneOf {
		errs = append(errs, nestedValueValidation(&s.OneOf[i], false, fldPath.Child("oneOf").Index(i))...)
	}
	if s.Not != nil {
		errs = append(errs, nestedValueValidation(s.Not, false, fldPath.Child("not"))...)
	}
	if s.Pattern != "" {
		if _, err := regexp.Compile(s.Pattern); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pattern"), s.Pattern, fmt.Sprintf("must be a valid regular expression, but isn't: %v", err)))
		}
	}
	return errs
}

func nestedValueValidation(v *apiextensionsv1.JSONSchemaProps, skipAnyOf bool, fldPath *field.Path) field.ErrorList {
	errs := valueValidation(v, skipAnyOf, false, fldPath)
	if v.Items != nil && v.Items.Schema != nil {
		errs = append(errs, nestedValueValidation(v.Items.Schema, false, fldPath.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		p := v.Properties[k]
		errs = append(errs, nestedValueValidation(&p, false, fldPath.Child("properties").Key(k))...)
	}
	if v.Type != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("type"), "must be empty to be structural"))
	}
	if v.AdditionalProperties != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "must be undefined to be structural"))
	}
	if v.Default != nil {
		if d, _ := decodeJSON(v.Default); d != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("default"), "must be undefined to be structural"))
		}
	}
	if v.Title != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("title"), "must be empty to be structural"))
	}
	if v.Description != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("description"), "must be empty to be structural"))
	}
	if v.Nullable {
		errs = append(errs, field.Forbidden(fldPath.Child("nullable"), "must be false to be structural"))
	}
	if v.XPreserveUnknownFields != nil && *v.XPreserveUnknownFields {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-preserve-unknown-fields"), "must be false to be structural"))
	}
	if v.XEmbeddedResource {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-embedded-resource"), "must be false to be structural"))
	}
	if v.XIntOrString {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-int-or-string"), "must be false to be structural"))
	}
	if len(v.XListMapKeys) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-list-map-keys"), "must be empty to be structural"))
	}
	if v.XListType != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-list-type"), "must be undefined to be structural"))
	}
	if v.XMapType != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-map-type"), "must be undefined to be structural"))
	}
	if len(v.XValidations) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-validations"), "must be empty to be structural"))
	}
	if _, ok := v.Properties["metadata"]; ok {
		errs = append(errs, field.Forbidden(fldPath.Child("properties").Key("metadata"), "must not be specified in a nested context"))
	}
	return errs
}

// completeness: every property or items a value validation v names must
// be specified in the structural schema s (upstream's
// validateStructuralCompleteness).
func completeness(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v.Not != nil {
		errs = append(errs, nestedCompleteness(v.Not, s, sPath, vPath.Child("not"))...)
	}
	for i := range v.AllOf {
		errs = append(errs, nestedCompleteness(&v.AllOf[i], s, sPath, vPath.Child("allOf").Index(i))...)
	}
	for i := range v.AnyOf {
		errs = append(errs, nestedCompleteness(&v.AnyOf[i], s, sPath, vPath.Child("anyOf").Index(i))...)
	}
	for i := range v.OneOf {
		errs = append(errs, nestedCompleteness(&v.OneOf[i], s, sPath, vPath.Child("oneOf").Index(i))...)
	}
	return errs
}

func nestedCompleteness(v, s *apiextensionsv1.JSONSchemaProps, sPath, vPath *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if s == nil {
		return field.ErrorList{field.Required(sPath, fmt.Sprintf("because it is defined in %s", vPath.String()))}
	}
	errs := completeness(v, s, sPath, vPath)
	if v.Items != nil && v.Items.Schema != nil {
		var si *apiextensionsv1.JSONSchemaProps
		if s.Items != nil {
			si = s.Items.Schema
		}
		errs = append(errs, nestedCompleteness(v.Items.Schema, si, sPath.Child("items"), vPath.Child("items"))...)
	}
	for _, k := range sortedKeys(v.Properties) {
		vp := v.Properties[k]
		sp, ok := s.Properties[k]
		if !ok {
			errs = append(errs, field.Required(sPath.Child("properties").Key(k), fmt.Sprintf("because it is defined in %s", vPath.Child("properties").Key(k))))
			continue
		}
		errs = append(errs, nestedCompleteness(&vp, &sp, sPath.Child("properties").Key(k), vPath.Child("properties").Key(k))...)
	}
	return errs
}

// validateDefaults checks every default as upstream's ValidateDefaults
// (schema/defaulting/validation.go): it must survive pruning unchanged
// ("must not have unknown fields"), an embedded resource default must
// have valid apiVersion, kind and metadata, and it must validate against
// the schema it defaults, errors being reported under <path>.default.
//
// Defaults inside an embedded resource's metadata are checked against
// their own schema only (upstream also checks the metadata they produce).
func validateDefaults(pth *field.Path, s *node, insideMeta bool) field.ErrorList {
	if s == nil {
		return nil
	}
	if s.embedded {
		insideMeta = false
	}
	var errs field.ErrorList
	if s.def != nil {
		errs = append(errs, validateDefault(pth, s, insideMeta)...)
	}
	if s.items != nil {
		errs = append(errs, validateDefaults(pth.Child("items"), s.items, insideMeta)...)
	}
	for _, k := range sortedKeys(s.props) {
		errs = append(errs, validateDefaults(pth.Child("properties").Key(k), s.props[k], insideMeta || (s.embedded && metaFields[k]))...)
	}
	return errs
}

func validateDefault(pth *field.Path, s *node, insideMeta bool) field.ErrorList {
	o, err := toOpenAPI(s.src)
	if err != nil {
		return field.ErrorList{field.Invalid(pth.Child("default"), s.def, err.Error())}
	}
	validator := validate.NewSchemaValidator(o, nil, "", strfmt.Default)
	if insideMeta {
		return resultToFieldErrors(pth.Child("default"), validator.Validate(s.def))
	}
	var errs field.ErrorList
	pruned := runtime.DeepCopyJSONValue(s.def)
	(&pruner{}).prune(pruned, s)
	if !reflect.DeepEqual(pruned, s.def) {
		errs = append(errs, field.Invalid(pth.Child("default"), s.def, "must not have unknown fields"))
	}
	// As upstream's objectmeta.Coerce: an embedded apiVersion or kind that
	// is not a string.
	if e := checkEmbedded(pth.Child("default"), s.def, s, false); e != nil {
		return append(errs, e)
	}
	if e := validateEmbedded(context.Background(), pth.Child("default"), s.def, s); len(e) > 0 {
		return append(errs, e...)
	}
	return append(errs, resultToFieldErrors(pth.Child("default"), validator.Validate(s.def))...)
}
