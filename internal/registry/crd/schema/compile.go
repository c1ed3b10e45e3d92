package schema

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// node is the structural part of a schema: what pruning, defaulting and
// the list-type and embedded-resource checks need. It mirrors upstream's
// structuralschema.Structural, without the value validations (those are
// checked through the spec.Schema by kube-openapi).
//
// For
//
//	type: object
//	properties:
//	  spec: {type: object, properties: {size: {type: integer, default: 1}}}
//	  labels: {type: object, additionalProperties: {type: string}}
//
// the root node has props spec and labels; spec.props[size].def is
// int64(1); labels has hasAddl set and addl a string node.
type node struct {
	typ      string
	nullable bool
	props    map[string]*node
	items    *node
	hasAddl  bool  // additionalProperties is set (true, false or a schema)
	addl     *node // its schema, nil for a bare true or false
	def      any   // the default; nil when unset or null, as upstream
	preserve bool  // x-kubernetes-preserve-unknown-fields
	embedded bool  // x-kubernetes-embedded-resource
	intOrStr bool  // x-kubernetes-int-or-string
	listType string
	listKeys []string
	src      *apiextensionsv1.JSONSchemaProps // for validating defaults

	// What the node or a node below it has: an embedded resource, a
	// list-type set or map. The checks for those skip subtrees without.
	hasEmbedded, hasSetOrMap bool
	// hasDefaults: a node below this one has a default.
	hasDefaults bool
	propKeys    []string // the keys of props, sorted
}

// decodeJSON decodes a v1.JSON as upstream's conversion to the internal
// type does: null and empty are nil, integral numbers are int64.
func decodeJSON(j *apiextensionsv1.JSON) (any, error) {
	if j == nil || len(j.Raw) == 0 || bytes.Equal(j.Raw, []byte("null")) {
		return nil, nil
	}
	var v any
	if err := utiljson.Unmarshal(j.Raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// compile builds the node tree of s. It fails on what upstream's
// NewStructural refuses (items given as an array).
func compile(s *apiextensionsv1.JSONSchemaProps) (*node, error) {
	if s == nil {
		return nil, nil
	}
	n := &node{
		typ:      s.Type,
		nullable: s.Nullable,
		embedded: s.XEmbeddedResource,
		intOrStr: s.XIntOrString,
		listKeys: s.XListMapKeys,
	}
	if s.XPreserveUnknownFields != nil {
		n.preserve = *s.XPreserveUnknownFields
	}
	if s.XListType != nil {
		n.listType = *s.XListType
	}
	d, err := decodeJSON(s.Default)
	if err != nil {
		return nil, fmt.Errorf("default: %w", err)
	}
	n.def = d
	if s.Items != nil {
		if s.Items.Schema == nil && len(s.Items.JSONSchemas) > 0 {
			return nil, fmt.Errorf("OpenAPIV3Schema 'items' must be a schema, but is an array")
		}
		if n.items, err = compile(s.Items.Schema); err != nil {
			return nil, err
		}
	}
	if len(s.Properties) > 0 {
		n.props = make(map[string]*node, len(s.Properties))
		for _, k := range sortedKeys(s.Properties) {
			p := s.Properties[k]
			c, err := compile(&p)
			if err != nil {
				return nil, err
			}
			n.props[k] = c
			n.propKeys = append(n.propKeys, k)
		}
	}
	if s.AdditionalProperties != nil {
		n.hasAddl = true
		if n.addl, err = compile(s.AdditionalProperties.Schema); err != nil {
			return nil, err
		}
	}
	n.src = s
	n.hasEmbedded = n.embedded
	n.hasSetOrMap = n.listType == "set" || n.listType == "map"
	for _, c := range append([]*node{n.items, n.addl}, slices.Collect(maps.Values(n.props))...) {
		if c != nil {
			n.hasEmbedded = n.hasEmbedded || c.hasEmbedded
			n.hasSetOrMap = n.hasSetOrMap || c.hasSetOrMap
			n.hasDefaults = n.hasDefaults || c.def != nil || c.hasDefaults
		}
	}
	return n, nil
}

// eachField calls fn for every field of x that has a schema of its own
// below n (a property, or any field under an additionalProperties
// schema), in the order of the field names, with the field's node.
func (n *node) eachField(x map[string]any, fn func(k string, v any, c *node, isProp bool)) {
	if n.addl == nil {
		for _, k := range n.propKeys {
			if v, ok := x[k]; ok {
				fn(k, v, n.props[k], true)
			}
		}
		return
	}
	for _, k := range sortedKeys(x) {
		if c, ok := n.props[k]; ok {
			fn(k, x[k], c, true)
		} else {
			fn(k, x[k], n.addl, false)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toOpenAPI converts s to the kube-openapi schema the validator runs, as
// upstream's ConvertJSONSchemaPropsWithPostProcess does with the
// StripUnsupportedFormats post-processor: int-or-string becomes the type
// list [integer, string], and formats the validator must not check are
// dropped.
func toOpenAPI(in *apiextensionsv1.JSONSchemaProps) (*spec.Schema, error) {
	if in == nil {
		return nil, nil
	}
	out := &spec.Schema{}
	out.ID = in.ID
	out.Schema = spec.SchemaURL(in.Schema)
	out.Description = in.Description
	if in.Type != "" {
		out.Type = spec.StringOrArray{in.Type}
	}
	if in.XIntOrString {
		out.AddExtension("x-kubernetes-int-or-string", true)
		out.Type = spec.StringOrArray{"integer", "string"}
	}
	out.Nullable = in.Nullable
	out.Format = in.Format
	out.Title = in.Title
	out.Maximum = in.Maximum
	out.ExclusiveMaximum = in.ExclusiveMaximum
	out.Minimum = in.Minimum
	out.ExclusiveMinimum = in.ExclusiveMinimum
	out.MaxLength = in.MaxLength
	out.MinLength = in.MinLength
	out.Pattern = in.Pattern
	out.MaxItems = in.MaxItems
	out.MinItems = in.MinItems
	out.UniqueItems = in.UniqueItems
	out.MultipleOf = in.MultipleOf
	out.MaxProperties = in.MaxProperties
	out.MinProperties = in.MinProperties
	out.Required = in.Required
	var err error
	if out.Default, err = decodeJSON(in.Default); err != nil {
		return nil, err
	}
	if out.Example, err = decodeJSON(in.Example); err != nil {
		return nil, err
	}
	if in.Enum != nil {
		out.Enum = make([]any, len(in.Enum))
		for i := range in.Enum {
			if out.Enum[i], err = decodeJSON(&in.Enum[i]); err != nil {
				return nil, err
			}
		}
	}
	for _, list := range []struct {
		in  []apiextensionsv1.JSONSchemaProps
		out *[]spec.Schema
	}{{in.AllOf, &out.AllOf}, {in.OneOf, &out.OneOf}, {in.AnyOf, &out.AnyOf}} {
		for i := range list.in {
			c, err := toOpenAPI(&list.in[i])
			if err != nil {
				return nil, err
			}
			*list.out = append(*list.out, *c)
		}
	}
	if in.Not != nil {
		if out.Not, err = toOpenAPI(in.Not); err != nil {
			return nil, err
		}
	}
	if out.Properties, err = toOpenAPIMap(in.Properties); err != nil {
		return nil, err
	}
	if out.PatternProperties, err = toOpenAPIMap(in.PatternProperties); err != nil {
		return nil, err
	}
	if out.Definitions, err = toOpenAPIMap(in.Definitions); err != nil {
		return nil, err
	}
	if in.Ref != nil {
		if out.Ref, err = spec.NewRef(*in.Ref); err != nil {
			return nil, err
		}
	}
	if in.AdditionalProperties != nil {
		out.AdditionalProperties = &spec.SchemaOrBool{Allows: in.AdditionalProperties.Allows}
		if out.AdditionalProperties.Schema, err = toOpenAPI(in.AdditionalProperties.Schema); err != nil {
			return nil, err
		}
	}
	if in.AdditionalItems != nil {
		out.AdditionalItems = &spec.SchemaOrBool{Allows: in.AdditionalItems.Allows}
		if out.AdditionalItems.Schema, err = toOpenAPI(in.AdditionalItems.Schema); err != nil {
			return nil, err
		}
	}
	if in.Items != nil {
		out.Items = &spec.SchemaOrArray{}
		if out.Items.Schema, err = toOpenAPI(in.Items.Schema); err != nil {
			return nil, err
		}
		for i := range in.Items.JSONSchemas {
			c, err := toOpenAPI(&in.Items.JSONSchemas[i])
			if err != nil {
				return nil, err
			}
			out.Items.Schemas = append(out.Items.Schemas, *c)
		}
	}
	if in.ExternalDocs != nil {
		out.ExternalDocs = &spec.ExternalDocumentation{Description: in.ExternalDocs.Description, URL: in.ExternalDocs.URL}
	}
	stripUnsupportedFormat(out)
	if in.XPreserveUnknownFields != nil {
		out.AddExtension("x-kubernetes-preserve-unknown-fields", *in.XPreserveUnknownFields)
	}
	if in.XEmbeddedResource {
		out.AddExtension("x-kubernetes-embedded-resource", true)
	}
	if len(in.XListMapKeys) != 0 {
		keys := make([]any, len(in.XListMapKeys))
		for i, k := range in.XListMapKeys {
			keys[i] = k
		}
		out.AddExtension("x-kubernetes-list-map-keys", keys)
	}
	if in.XListType != nil {
		out.AddExtension("x-kubernetes-list-type", *in.XListType)
	}
	if in.XMapType != nil {
		out.AddExtension("x-kubernetes-map-type", *in.XMapType)
	}
	return out, nil
}

func toOpenAPIMap(in map[string]apiextensionsv1.JSONSchemaProps) (map[string]spec.Schema, error) {
	if in == nil {
		return nil, nil
	}
	out := make(map[string]spec.Schema, len(in))
	for k := range in {
		p := in[k]
		c, err := toOpenAPI(&p)
		if err != nil {
			return nil, err
		}
		out[k] = *c
	}
	return out, nil
}

// stringFormats are the string formats custom resources are validated
// against: upstream's supportedVersionedFormats
// (apiextensions-apiserver pkg/apiserver/validation/formats.go) at the
// current compatibility version, names normalized without dashes as
// go-openapi does. Others are kept in the published schema but not
// checked.
var stringFormats = map[string]bool{
	"bsonobjectid": true, "uri": true, "email": true, "hostname": true,
	"ipv4": true, "ipv6": true, "cidr": true, "mac": true, "uuid": true,
	"uuid3": true, "uuid4": true, "uuid5": true, "isbn": true,
	"isbn10": true, "isbn13": true, "creditcard": true, "ssn": true,
	"hexcolor": true, "rgbcolor": true, "byte": true, "password": true,
	"date": true, "duration": true, "datetime": true,
	"k8sshortname": true, "k8slongname": true,
}

func stripUnsupportedFormat(s *spec.Schema) {
	if s.Format == "" {
		return
	}
	t := ""
	if len(s.Type) == 1 {
		t = s.Type[0]
	}
	switch t {
	case "", "string":
		if !stringFormats[strings.ReplaceAll(s.Format, "-", "")] {
			s.Format = ""
		}
	case "integer":
		if s.Format != "int32" && s.Format != "int64" {
			s.Format = ""
		}
	case "number":
		if s.Format != "float" && s.Format != "double" {
			s.Format = ""
		}
	default:
		s.Format = ""
	}
}
