package schema

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// openAPIRules is the context of one schema in the OpenAPI checks:
// upstream's specStandardValidatorV3 with the options of a new v1 CRD
// (defaults allowed, valid property types, atomic set items and map-list
// key rules required).
type openAPIRules struct {
	allowDefaults      bool
	disallowReason     string
	insideResourceMeta bool
}

func (r openAPIRules) forbidDefaults(reason string) openAPIRules {
	r.allowDefaults = false
	r.disallowReason = reason
	return r
}

// openAPITypes are the types a schema may name.
var openAPITypes = []string{"array", "boolean", "integer", "number", "object", "string"}

// validateOpenAPI is upstream's ValidateCustomResourceDefinitionOpenAPISchema
// (pkg/apis/apiextensions/validation/validation.go) without the CEL
// checks: the keywords CRDs do not support, and the consistency of the
// x-kubernetes-* extensions, on s and every schema inside it.
func validateOpenAPI(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path, r openAPIRules, isRoot bool) field.ErrorList {
	if s == nil {
		return nil
	}
	errs := r.keywords(s, fldPath)
	if s.UniqueItems {
		errs = append(errs, field.Forbidden(fldPath.Child("uniqueItems"), "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
	}
	if s.AdditionalProperties != nil {
		// properties are for structs, additionalProperties for maps: an
		// object may not be both (a bare additionalProperties: true is
		// tolerated).
		if len(s.Properties) != 0 && (!s.AdditionalProperties.Allows || s.AdditionalProperties.Schema != nil) {
			errs = append(errs, field.Forbidden(fldPath.Child("additionalProperties"), "additionalProperties and properties are mutual exclusive"))
		}
		sub := r
		if r.insideResourceMeta {
			sub = r.forbidDefaults("inside additionalProperties applying to object metadata")
		}
		errs = append(errs, validateOpenAPI(s.AdditionalProperties.Schema, fldPath.Child("additionalProperties"), sub, false)...)
	}
	for _, k := range sortedKeys(s.Properties) {
		p := s.Properties[k]
		sub := r
		if (isRoot || s.XEmbeddedResource) && metaFields[k] {
			sub.insideResourceMeta = true
			if isRoot {
				sub = sub.forbidDefaults(fmt.Sprintf("in top-level %s", k))
			}
		}
		errs = append(errs, validateOpenAPI(&p, fldPath.Child("properties").Key(k), sub, false)...)
	}
	errs = append(errs, validateOpenAPI(s.Not, fldPath.Child("not"), r, false)...)
	for i := range s.AllOf {
		errs = append(errs, validateOpenAPI(&s.AllOf[i], fldPath.Child("allOf").Index(i), r, false)...)
	}
	for i := range s.OneOf {
		errs = append(errs, validateOpenAPI(&s.OneOf[i], fldPath.Child("oneOf").Index(i), r, false)...)
	}
	for i := range s.AnyOf {
		errs = append(errs, validateOpenAPI(&s.AnyOf[i], fldPath.Child("anyOf").Index(i), r, false)...)
	}
	for _, k := range sortedKeys(s.Definitions) {
		d := s.Definitions[k]
		errs = append(errs, validateOpenAPI(&d, fldPath.Child("definitions").Key(k), r, false)...)
	}
	if s.Items != nil {
		errs = append(errs, validateOpenAPI(s.Items.Schema, fldPath.Child("items"), r, false)...)
		for i := range s.Items.JSONSchemas {
			errs = append(errs, validateOpenAPI(&s.Items.JSONSchemas[i], fldPath.Child("items").Index(i), r, false)...)
		}
	}
	for _, k := range sortedKeys(s.Dependencies) {
		errs = append(errs, validateOpenAPI(s.Dependencies[k].Schema, fldPath.Child("dependencies").Key(k), r, false)...)
	}
	errs = append(errs, extensions(s, fldPath)...)
	errs = append(errs, mapListKeysMapSet(s, fldPath)...)
	return errs
}

// keywords is upstream's specStandardValidatorV3.validate.
func (r openAPIRules) keywords(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Type != "" && !contains(openAPITypes, s.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), s.Type, openAPITypes))
	}
	if s.Default != nil && !r.allowDefaults {
		detail := "must not be set"
		if r.disallowReason != "" {
			detail += " " + r.disallowReason
		}
		errs = append(errs, field.Forbidden(fldPath.Child("default"), detail))
	}
	if s.ID != "" {
		errs = append(errs, field.Forbidden(fldPath.Child("id"), "id is not supported"))
	}
	if s.AdditionalItems != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("additionalItems"), "additionalItems is not supported"))
	}
	if len(s.PatternProperties) != 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("patternProperties"), "patternProperties is not supported"))
	}
	if len(s.Definitions) != 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("definitions"), "definitions is not supported"))
	}
	if s.Dependencies != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("dependencies"), "dependencies is not supported"))
	}
	if s.Ref != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("$ref"), "$ref is not supported"))
	}
	if s.Type == "null" {
		errs = append(errs, field.Forbidden(fldPath.Child("type"), "type cannot be set to null, use nullable as an alternative"))
	}
	if s.Items != nil && len(s.Items.JSONSchemas) != 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("items"), "items must be a schema object and not an array"))
	}
	if r.insideResourceMeta && s.XEmbeddedResource {
		errs = append(errs, field.Forbidden(fldPath.Child("x-kubernetes-embedded-resource"), "must not be used inside of resource meta"))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// extensions checks x-kubernetes-preserve-unknown-fields, -map-type,
// -list-type and -list-map-keys against the schema they annotate.
func extensions(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.XPreserveUnknownFields != nil && !*s.XPreserveUnknownFields {
		errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-preserve-unknown-fields"), false, "must be true or undefined"))
	}
	if s.XMapType != nil && s.Type != "object" {
		if s.Type == "" {
			errs = append(errs, field.Required(fldPath.Child("type"), "must be object if x-kubernetes-map-type is specified"))
		} else {
			errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be object if x-kubernetes-map-type is specified"))
		}
	}
	if s.XMapType != nil && *s.XMapType != "atomic" && *s.XMapType != "granular" {
		errs = append(errs, field.NotSupported(fldPath.Child("x-kubernetes-map-type"), *s.XMapType, []string{"atomic", "granular"}))
	}
	if s.XListType != nil && s.Type != "array" {
		if s.Type == "" {
			errs = append(errs, field.Required(fldPath.Child("type"), "must be array if x-kubernetes-list-type is specified"))
		} else {
			errs = append(errs, field.Invalid(fldPath.Child("type"), s.Type, "must be array if x-kubernetes-list-type is specified"))
		}
	} else if s.XListType != nil && *s.XListType == "set" && s.Items != nil && s.Items.Schema != nil {
		// A set's items must be atomic: their identity is their whole value.
		is := s.Items.Schema
		switch is.Type {
		case "array":
			if is.XListType != nil && *is.XListType != "atomic" {
				errs = append(errs, field.Invalid(fldPath.Child("items").Child("x-kubernetes-list-type"), is.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		case "object":
			if is.XMapType == nil || *is.XMapType != "atomic" {
				errs = append(errs, field.Invalid(fldPath.Child("items").Child("x-kubernetes-map-type"), is.XListType, "must be atomic as item of a list with x-kubernetes-list-type=set"))
			}
		}
	}
	if s.XListType != nil && *s.XListType != "atomic" && *s.XListType != "set" && *s.XListType != "map" {
		errs = append(errs, field.NotSupported(fldPath.Child("x-kubernetes-list-type"), *s.XListType, []string{"atomic", "set", "map"}))
	}
	if len(s.XListMapKeys) > 0 {
		if s.XListType == nil {
			errs = append(errs, field.Required(fldPath.Child("x-kubernetes-list-type"), "must be map if x-kubernetes-list-map-keys is non-empty"))
		} else if *s.XListType != "map" {
			errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-list-type"), *s.XListType, "must be map if x-kubernetes-list-map-keys is non-empty"))
		}
	}
	if s.XListType != nil && *s.XListType == "map" {
		if len(s.XListMapKeys) == 0 {
			errs = append(errs, field.Required(fldPath.Child("x-kubernetes-list-map-keys"), "must not be empty if x-kubernetes-list-type is map"))
		}
		if s.Items == nil {
			errs = append(errs, field.Required(fldPath.Child("items"), "must have a schema if x-kubernetes-list-type is map"))
		}
		if s.Items != nil && s.Items.Schema == nil {
			errs = append(errs, field.Invalid(fldPath.Child("items"), s.Items, "must only have a single schema if x-kubernetes-list-type is map"))
		}
		if s.Items != nil && s.Items.Schema != nil && s.Items.Schema.Type != "object" {
			errs = append(errs, field.Invalid(fldPath.Child("items").Child("type"), s.Items.Schema.Type, "must be object if parent array's x-kubernetes-list-type is map"))
		}
		if s.Items != nil && s.Items.Schema != nil && s.Items.Schema.Type == "object" {
			seen := map[string]bool{}
			for _, k := range s.XListMapKeys {
				if p, ok := s.Items.Schema.Properties[k]; ok {
					if p.Type == "array" || p.Type == "object" {
						// upstream reports the items' type as the value
						errs = append(errs, field.Invalid(fldPath.Child("items").Child("properties").Key(k).Child("type"), s.Items.Schema.Type, "must be a scalar type if parent array's x-kubernetes-list-type is map"))
					}
				} else {
					errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "entries must all be names of item properties"))
				}
				if seen[k] {
					errs = append(errs, field.Invalid(fldPath.Child("x-kubernetes-list-map-keys"), s.XListMapKeys, "must not contain duplicate entries"))
				}
				seen[k] = true
			}
		}
	}
	return errs
}

// mapListKeysMapSet: items of a set or map list may not be nullable, and
// a map list's keys must be required or defaulted, and not nullable
// (upstream's validateMapListKeysMapSet).
func mapListKeysMapSet(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) field.ErrorList {
	if s.Items == nil || s.Items.Schema == nil || s.XListType == nil {
		return nil
	}
	if *s.XListType != "set" && *s.XListType != "map" {
		return nil
	}
	var errs field.ErrorList
	is := s.Items.Schema
	if is.Nullable {
		errs = append(errs, field.Forbidden(fldPath.Child("items").Child("nullable"), "cannot be nullable when x-kubernetes-list-type is "+*s.XListType))
	}
	if *s.XListType == "map" {
		for _, k := range s.XListMapKeys {
			p, ok := is.Properties[k]
			if !ok {
				continue
			}
			if !contains(is.Required, k) && p.Default == nil {
				errs = append(errs, field.Required(fldPath.Child("items").Child("properties").Key(k).Child("default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"))
			}
			if p.Nullable {
				errs = append(errs, field.Forbidden(fldPath.Child("items").Child("properties").Key(k).Child("nullable"), "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
			}
		}
	}
	return errs
}
