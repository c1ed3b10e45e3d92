package openapi

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Ref prefixes of the two document formats: Definitions names its $refs
// refPrefix+name, and a document resolves them against its own table.
const (
	V2RefPrefix = "#/definitions/"
	V3RefPrefix = "#/components/schemas/"
)

// ErrUnsupportedType is returned (wrapped, with the path to the field) by
// Definitions when a kind holds a Go type that has no OpenAPI form: a
// channel, a function, a complex number, a map with non-string keys.
var ErrUnsupportedType = errors.New("openapi: unsupported Go type")

// ErrNameClash is returned (wrapped) by Definitions when two different Go
// types map to the same definition name.
var ErrNameClash = errors.New("openapi: two Go types share a definition name")

// Definitions returns the schema of every given kind and of every type
// they reference, keyed by OpenAPI definition name
// ("io.k8s.api.core.v1.ConfigMap",
// "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), with $refs of the
// form refPrefix+name (V2RefPrefix or V3RefPrefix).
//
// kinds maps each served kind to a value of its Go type (a pointer to the
// struct, as runtime.Object values are). The definition of each such type
// carries x-kubernetes-group-version-kind with every GVK that maps to it,
// sorted; several GVKs may share one Go type. A nil value is an error.
//
// The result is the table managedfields.NewTypeConverter takes. A
// property that is a $ref carries its description (and default) beside
// the $ref, as OpenAPI v2 allows; an OpenAPI v3 document wraps such refs
// in allOf (kube-openapi's builder3/util.WrapRefs) before publishing.
func Definitions(kinds map[schema.GroupVersionKind]runtime.Object, refPrefix string) (map[string]*spec.Schema, error) {
	return build(kinds, refPrefix, true)
}

// DefinitionsWithoutDocs returns the definitions Definitions returns,
// without any description: the types, defaults and list and map semantics
// a type converter (managedfields.NewTypeConverter) reads, which ignores
// descriptions. It skips the SwaggerDoc tables and the generated
// apiextensions-apiserver definitions that Definitions reads the
// descriptions from, so the first write of a server (its initial
// namespaces) does not build the documents' descriptions.
func DefinitionsWithoutDocs(kinds map[schema.GroupVersionKind]runtime.Object, refPrefix string) (map[string]*spec.Schema, error) {
	return build(kinds, refPrefix, false)
}

func build(kinds map[schema.GroupVersionKind]runtime.Object, refPrefix string, withDocs bool) (map[string]*spec.Schema, error) {
	b := &builder{
		prefix:   refPrefix,
		defs:     make(map[string]*spec.Schema),
		types:    make(map[string]reflect.Type),
		withDocs: withDocs,
	}
	gvks := make(map[string][]schema.GroupVersionKind)
	for gvk, obj := range kinds {
		if obj == nil {
			return nil, fmt.Errorf("openapi: no Go value for %v", gvk)
		}
		t := reflect.TypeOf(obj)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.Name() == "" {
			return nil, fmt.Errorf("%w: %v is served by %v, not a named struct", ErrUnsupportedType, gvk, t)
		}
		name, err := b.define(t)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", gvk, err)
		}
		gvks[name] = append(gvks[name], gvk)
	}
	for name, list := range gvks {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
		ext := make([]any, 0, len(list))
		for _, gvk := range list {
			ext = append(ext, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
		b.defs[name].AddExtension(extGVK, ext)
	}
	return b.defs, nil
}

// Extension names, as kube-openapi publishes them.
const (
	extGVK           = "x-kubernetes-group-version-kind"
	extListType      = "x-kubernetes-list-type"
	extListMapKeys   = "x-kubernetes-list-map-keys"
	extMapType       = "x-kubernetes-map-type"
	extPatchStrategy = "x-kubernetes-patch-strategy"
	extPatchMergeKey = "x-kubernetes-patch-merge-key"
	extUnions        = "x-kubernetes-unions"

	listAtomic = "atomic" // also the map type of an atomic struct
	// listUnmarked, as a marker's list type: no x-kubernetes-list-type.
	listUnmarked = "-"
	listSet      = "set"
	listMap      = "map"
)

// builder accumulates definitions. Each named struct type (and each type
// with its own OpenAPI type) becomes one definition, entered into defs
// before its fields are walked, so recursive types (JSONSchemaProps)
// end in a $ref to a definition already under way.
type builder struct {
	prefix   string
	defs     map[string]*spec.Schema
	types    map[string]reflect.Type // the Go type behind each definition
	withDocs bool                    // descriptions wanted
}

// docsOf is t's descriptions if the builder wants them, none otherwise.
func (b *builder) docsOf(t reflect.Type, name string) docs {
	if !b.withDocs {
		return docs{}
	}
	return docsOf(t, name)
}

// define makes sure t, a named type, has a definition, and returns its
// name.
func (b *builder) define(t reflect.Type) (string, error) {
	name := modelName(t)
	if prev, ok := b.types[name]; ok {
		if prev != t {
			return "", fmt.Errorf("%w: %v and %v are both %s", ErrNameClash, prev, t, name)
		}
		return name, nil
	}
	b.types[name] = t
	s := &spec.Schema{}
	b.defs[name] = s
	doc := b.docsOf(t, name)
	s.Description = doc.typ
	if typ, format, ok := ownSchema(t); ok {
		s.Type = typ
		s.Format = format
		if oneOf := v3OneOf(t); oneOf != nil && b.prefix == V3RefPrefix {
			// OpenAPI v3 lists what the value may be (a Quantity is a
			// string or a number), as openapi-gen writes it.
			s.Type = nil
			for _, typ := range oneOf {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}}})
			}
		}
		return name, nil
	}
	s.Type = spec.StringOrArray{"object"}
	if err := b.fields(s, t, doc, name); err != nil {
		return "", err
	}
	if atomicStructs[name] {
		s.AddExtension(extMapType, listAtomic)
	}
	if disc, ok := unionDiscriminators[name]; ok {
		s.AddExtension(extUnions, unionOf(t, disc))
	}
	return name, nil
}

// unionOf is the x-kubernetes-unions openapi-gen writes for struct t,
// marked +union, whose field disc (a JSON name) is the discriminator:
// every other field is a member, which the discriminator names by its Go
// field name.
func unionOf(t reflect.Type, disc string) []any {
	members := map[string]any{}
	for i := range t.NumField() {
		f := t.Field(i)
		if jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ","); jsonName != "" && jsonName != "-" && jsonName != disc {
			members[jsonName] = f.Name
		}
	}
	return []any{map[string]any{"discriminator": disc, "fields-to-discriminateBy": members}}
}

// fields adds the JSON fields of struct t to s. Embedded structs without a
// JSON name are flattened, as encoding/json does (TypeMeta, ListMeta).
// def names the definition whose markers apply; doc holds t's
// descriptions.
func (b *builder) fields(s *spec.Schema, t reflect.Type, doc docs, def string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				// Flattened fields keep the markers and descriptions of
				// the type that declares them.
				inner := def
				if et.Name() != "" {
					inner = modelName(et)
				}
				if err := b.fields(s, et, b.docsOf(et, inner), inner); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := hasOpt(opts, "omitempty") || hasOpt(opts, "omitzero")
		m := fieldMarkers[def][name]
		if name == "items" && isListKind(t) {
			// A List kind's items carry no marker upstream, and are
			// published unmarked (schemaconv reads them as atomic).
			m.listType = listUnmarked
		}
		prop, err := b.property(f, doc.fields[name], omit, m)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		if s.Properties == nil {
			s.Properties = make(map[string]spec.Schema)
		}
		s.Properties[name] = prop
		// kube-openapi's rule: a field is optional if its JSON tag omits
		// empty values or its comment says +optional; +required wins.
		if m.required || (!omit && !m.optional) {
			s.Required = append(s.Required, name)
		}
	}
	return nil
}

// property is the schema of struct field f: its type's schema, with the
// field's description, default and list or map semantics.
func (b *builder) property(f reflect.StructField, desc string, omit bool, m marker) (spec.Schema, error) {
	s, err := b.schemaOf(f.Type)
	if err != nil {
		return s, err
	}
	s.Description = desc
	if m.docFix[0] != "" {
		s.Description = strings.Replace(desc, m.docFix[0], m.docFix[1], 1)
	}
	if len(m.enum) > 0 {
		s.Enum = m.enum
		if desc != "" {
			s.Description += m.enumDoc
		}
	}
	if len(m.itemEnum) > 0 && s.Items != nil && s.Items.Schema != nil {
		item := *s.Items.Schema
		item.Enum = m.itemEnum
		s.Items = &spec.SchemaOrArray{Schema: &item}
	}
	if m.hasDefault {
		s.Default = m.def
	} else if d, ok := zeroDefault(f.Type, omit); ok {
		s.Default = d
	}
	switch {
	case s.Type.Contains("array"):
		listSemantics(&s, f, m)
	case m.mapType != "":
		s.AddExtension(extMapType, m.mapType)
	}
	return s, nil
}

// listSemantics marks list field f for strategic merge patch and
// server-side apply. Struct tags give the patch strategy; a list merged by
// key is a list-type map keyed by the merge key, a merged list of scalars
// is a set (which is also how kube-openapi's schemaconv reads a patch
// strategy without a list type). Markers upstream keeps in comments
// override; every other list is atomic.
func listSemantics(s *spec.Schema, f reflect.StructField, m marker) {
	strategy := f.Tag.Get("patchStrategy")
	key := f.Tag.Get("patchMergeKey")
	if strategy != "" {
		s.AddExtension(extPatchStrategy, strategy)
	}
	if key != "" {
		s.AddExtension(extPatchMergeKey, key)
	}
	listType, keys := m.listType, m.listMapKeys
	if listType == listUnmarked {
		return
	}
	if listType == "" {
		switch {
		case hasOpt(strategy, "merge") && key != "":
			listType, keys = listMap, []string{key}
		case hasOpt(strategy, "merge"):
			listType = listSet
		default:
			listType = listAtomic
		}
	}
	s.AddExtension(extListType, listType)
	if listType == listMap {
		k := make([]any, len(keys))
		for i, key := range keys {
			k[i] = key
		}
		s.AddExtension(extListMapKeys, k)
	}
}

// schemaOf is the schema of a value of type t: a $ref for named structs
// and for types with their own OpenAPI type, an inline schema otherwise.
func (b *builder) schemaOf(t reflect.Type) (spec.Schema, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if _, _, own := ownSchema(t); own || (t.Kind() == reflect.Struct && t.Name() != "") {
		name, err := b.define(t)
		if err != nil {
			return spec.Schema{}, err
		}
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(b.prefix + name)}}, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		s := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
		return s, b.fields(&s, t, docs{}, "")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return scalar("string", "byte"), nil // base64, as encoding/json writes []byte
		}
		item, err := b.schemaOf(t.Elem())
		if err != nil {
			return item, err
		}
		return spec.Schema{SchemaProps: spec.SchemaProps{
			Type:  spec.StringOrArray{"array"},
			Items: &spec.SchemaOrArray{Schema: &item},
		}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return spec.Schema{}, fmt.Errorf("%w: map key %v", ErrUnsupportedType, t.Key())
		}
		value, err := b.schemaOf(t.Elem())
		if err != nil {
			return value, err
		}
		return spec.Schema{SchemaProps: spec.SchemaProps{
			Type:                 spec.StringOrArray{"object"},
			AdditionalProperties: &spec.SchemaOrBool{Allows: true, Schema: &value},
		}}, nil
	case reflect.Interface:
		return scalar("object", ""), nil
	}
	if typ, format, ok := scalarType(t.Kind()); ok {
		return scalar(typ, format), nil
	}
	return spec.Schema{}, fmt.Errorf("%w: %v", ErrUnsupportedType, t)
}

func scalar(typ, format string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{typ}, Format: format}}
}

// scalarType maps Go kinds to OpenAPI types and formats the way
// kube-openapi's generator does.
func scalarType(k reflect.Kind) (typ, format string, ok bool) {
	switch k {
	case reflect.String:
		return "string", "", true
	case reflect.Bool:
		return "boolean", "", true
	case reflect.Int8, reflect.Uint8:
		return "integer", "byte", true
	case reflect.Int, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint16:
		return "integer", "int32", true
	case reflect.Int64, reflect.Uint32, reflect.Uint64:
		return "integer", "int64", true
	case reflect.Float32:
		return "number", "float", true
	case reflect.Float64:
		return "number", "double", true
	}
	return "", "", false
}

// zeroDefault is the default kube-openapi's generator enforces for a
// field of type t (mustEnforceDefault): {} for a struct, the zero value
// for a scalar whose JSON tag does not omit it, nothing for pointers,
// lists, maps and types that decode themselves (Time, Quantity), whose
// zero value is null.
func zeroDefault(t reflect.Type, omit bool) (any, bool) {
	if customDecoding(t) {
		return nil, false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return nil, false
	case reflect.Struct:
		if t.NumField() == 1 && t.Field(0).Anonymous {
			return zeroDefault(t.Field(0).Type, omit)
		}
		return map[string]any{}, true
	case reflect.String:
		return "", !omit
	case reflect.Bool:
		return false, !omit
	}
	if _, _, ok := scalarType(t.Kind()); ok {
		return 0, !omit
	}
	return nil, false
}

func hasOpt(opts, want string) bool {
	for opt := range strings.SplitSeq(opts, ",") {
		if opt == want {
			return true
		}
	}
	return false
}

// isListKind reports whether t is a List kind: a struct with ListMeta.
func isListKind(t reflect.Type) bool {
	for i := range t.NumField() {
		if t.Field(i).Type == reflect.TypeFor[metav1.ListMeta]() {
			return true
		}
	}
	return false
}
