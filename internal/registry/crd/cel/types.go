package cel

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Size constants used to bound values in cost estimation. They are the ones
// kube-apiserver uses (k8s.io/apiserver/pkg/cel/limits.go and
// k8s.io/apiserver/pkg/apis/cel/config.go); changing them changes which CRDs
// are accepted.
const (
	maxRequestSizeBytes = int64(3 * 1024 * 1024)
	maxDurationSizeJSON = 32 // longest RFC 3339 duration, quoted
	maxDatetimeSizeJSON = 32 // 9999-12-31T23:59:59.999999999Z, quoted
	minDurationSizeJSON = 3  // "0"
	jsonDateSize        = 12 // "YYYY-MM-DD"
	minDatetimeSizeJSON = 21 // "YYYY-MM-DDTHH:MM:SSZ"
	minStringSize       = 2  // ""
	minBoolSize         = 4  // true
	minNumberSize       = 1  // 0
)

// declType is the CEL view of one schema node: its CEL type, and the bounds
// that cost estimation uses.
//
// maxElements is the largest size() the value can have: characters (bytes,
// times 4 for maxLength in runes) for strings, items for lists, entries for
// maps; 0 for objects and other scalars. minSize is the smallest JSON
// serialization of a value, used to bound how many can fit in a request.
type declType struct {
	cel         *types.Type
	schema      *apiextensionsv1.JSONSchemaProps
	kind        declKind
	fields      map[string]*declField // objects, by escaped CEL name
	elem        *declType             // list items, map values
	maxElements int64
	minSize     int64
	// embedded marks the root of a resource: the custom resource itself or an
	// x-kubernetes-embedded-resource object.
	embedded bool
}

type declKind int

const (
	kindScalar declKind = iota
	kindDyn             // x-kubernetes-int-or-string
	kindObject
	kindMap
	kindList
)

type declField struct {
	name string // the property name in the schema
	typ  *declType
}

// typeBuilder turns a schema into declTypes, naming object types after their
// path below a root name, as kube-apiserver's DeclType.MaybeAssignTypeName
// does ("<root>.spec", "<root>.spec.items.@idx", "<root>.labels.@elem").
type typeBuilder struct {
	objects map[string]*declType
}

// build returns the declType for s, or nil if s cannot be seen from CEL (no
// type and not int-or-string, or a list or map of such). isRoot is true for
// the root of a resource.
func (b *typeBuilder) build(s *apiextensionsv1.JSONSchemaProps, name string, isRoot bool) *declType {
	if s == nil {
		return nil
	}
	if s.XIntOrString {
		t := &declType{cel: types.DynType, schema: s, kind: kindDyn, minSize: 1}
		if s.MaxLength != nil {
			t.maxElements = nonNegative(*s.MaxLength) * 4
		} else {
			t.maxElements = maxRequestSizeBytes - 2
		}
		return t
	}
	if isRoot {
		s = withTypeAndObjectMeta(s)
	}
	switch s.Type {
	case "array":
		if s.Items == nil || s.Items.Schema == nil {
			return nil
		}
		it := b.build(s.Items.Schema, name+".@idx", s.Items.Schema.XEmbeddedResource)
		if it == nil {
			return nil
		}
		t := &declType{cel: types.NewListType(it.cel), schema: s, kind: kindList, elem: it, minSize: 2}
		if s.MaxItems != nil {
			t.maxElements = nonNegative(*s.MaxItems)
		} else {
			// '[' and ']', and a comma after each item.
			t.maxElements = (maxRequestSizeBytes - 2) / (it.minSize + 1)
		}
		return t
	case "object":
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			vt := b.build(s.AdditionalProperties.Schema, name+".@elem", s.AdditionalProperties.Schema.XEmbeddedResource)
			if vt == nil {
				return nil
			}
			t := &declType{cel: types.NewMapType(types.StringType, vt.cel), schema: s, kind: kindMap, elem: vt, minSize: 2}
			if s.MaxProperties != nil {
				t.maxElements = nonNegative(*s.MaxProperties)
			} else {
				// A one-character key is `"k":` plus a comma: 5 bytes, and 1 more for luck as upstream does.
				t.maxElements = (maxRequestSizeBytes - 2) / (vt.minSize + 6)
			}
			return t
		}
		t := &declType{cel: types.NewObjectType(name), schema: s, kind: kindObject, fields: map[string]*declField{}, minSize: 2, embedded: isRoot}
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		for _, pn := range sortedKeys(s.Properties) {
			p := s.Properties[pn]
			esc, ok := escapeName(pn)
			if !ok {
				continue
			}
			ft := b.build(&p, name+"."+esc, p.XEmbeddedResource)
			if ft == nil {
				continue
			}
			t.fields[esc] = &declField{name: pn, typ: ft}
			// Required properties without a default are always serialized.
			if required[pn] && p.Default == nil {
				t.minSize += int64(len(pn)) + ft.minSize + 4
			}
		}
		b.objects[name] = t
		return t
	case "string":
		t := &declType{cel: types.StringType, schema: s, kind: kindScalar, minSize: minStringSize}
		switch s.Format {
		case "byte":
			t.cel = types.BytesType
			if s.MaxLength != nil {
				t.maxElements = nonNegative(*s.MaxLength)
			} else {
				t.maxElements = maxRequestSizeBytes - 2
			}
			return t
		case "duration":
			t.cel, t.minSize, t.maxElements = types.DurationType, minDurationSizeJSON, maxDurationSizeJSON
			return t
		case "date":
			t.cel, t.minSize, t.maxElements = types.TimestampType, jsonDateSize, jsonDateSize
			return t
		case "date-time":
			t.cel, t.minSize, t.maxElements = types.TimestampType, minDatetimeSizeJSON, maxDatetimeSizeJSON
			return t
		}
		switch {
		case s.MaxLength != nil:
			// maxLength counts runes; a rune is up to 4 bytes.
			t.maxElements = nonNegative(*s.MaxLength) * 4
		case len(s.Enum) > 0:
			for _, e := range s.Enum {
				var v string
				if err := jsonUnmarshal(e.Raw, &v); err == nil && int64(len(v)) > t.maxElements {
					t.maxElements = int64(len(v))
				}
			}
		default:
			t.maxElements = maxRequestSizeBytes - 2
		}
		return t
	case "boolean":
		return &declType{cel: types.BoolType, schema: s, kind: kindScalar, minSize: minBoolSize}
	case "number":
		return &declType{cel: types.DoubleType, schema: s, kind: kindScalar, minSize: minNumberSize}
	case "integer":
		return &declType{cel: types.IntType, schema: s, kind: kindScalar, minSize: minNumberSize}
	}
	return nil
}

// withTypeAndObjectMeta makes apiVersion, kind, metadata.name and
// metadata.generateName visible at the root of a resource even when the
// schema does not declare them, as kube-apiserver's WithTypeAndObjectMeta
// does.
func withTypeAndObjectMeta(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	meta, hasMeta := s.Properties["metadata"]
	if s.Properties != nil && s.Properties["kind"].Type == "string" && s.Properties["apiVersion"].Type == "string" &&
		hasMeta && meta.Type == "object" && meta.Properties["name"].Type == "string" && meta.Properties["generateName"].Type == "string" {
		return s
	}
	c := *s
	c.Type = "object"
	c.Properties = make(map[string]apiextensionsv1.JSONSchemaProps, len(s.Properties)+3)
	for k, v := range s.Properties {
		c.Properties[k] = v
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	c.Properties["kind"] = str
	c.Properties["apiVersion"] = str
	c.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{
		Type:       "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "generateName": str},
	}
	return &c
}

// provider resolves the object types of one CRD for the CEL checker. Other
// names go to the base provider.
type provider struct {
	types.Provider
	adapter types.Adapter
	objects map[string]*declType
	// patchTypes: Object and JSONPatch are declared (patchtypes.go).
	patchTypes bool
}

func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if t, ok := p.objects[name]; ok {
		return types.NewTypeTypeWithParam(t.cel), true
	}
	if t, ok := p.patchType(name); ok {
		return types.NewTypeTypeWithParam(t), true
	}
	return p.Provider.FindStructType(name)
}

func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if t, ok := p.objects[name]; ok {
		return sortedKeys(t.fields), true
	}
	if _, ok := p.patchType(name); ok {
		return patchFieldNames(name), true
	}
	return p.Provider.FindStructFieldNames(name)
}

func (p *provider) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if t, ok := p.objects[name]; ok {
		f, ok := t.fields[field]
		if !ok {
			return nil, false
		}
		return &types.FieldType{Type: f.typ.cel}, true
	}
	if _, ok := p.patchType(name); ok {
		return patchFieldType(name, field), true
	}
	return p.Provider.FindStructFieldType(name, field)
}

func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if t, ok := p.patchType(name); ok {
		return newPatchValue(t, fields)
	}
	return p.Provider.NewValue(name, fields)
}

func (p *provider) patchType(name string) (*types.Type, bool) {
	if !p.patchTypes {
		return nil, false
	}
	return patchType(name)
}

func (p *provider) NativeToValue(v any) ref.Val { return p.adapter.NativeToValue(v) }

// celReserved are the identifiers of the CEL grammar that a property name is
// escaped away from (k8s.io/apiserver/pkg/cel/escaping.go).
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true,
	"as": true, "break": true, "const": true, "continue": true, "else": true,
	"for": true, "function": true, "if": true, "import": true, "let": true,
	"loop": true, "package": true, "namespace": true, "return": true,
	"var": true, "void": true, "while": true,
}

// escapeName maps a property name to the CEL identifier rules use for it, as
// Kubernetes documents for x-kubernetes-validations: reserved words become
// __word__, and "__", ".", "-", "/" become __underscores__, __dot__, __dash__,
// __slash__. Names with other characters, or starting with a digit, are not
// accessible (false).
func escapeName(name string) (string, bool) {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return "", false
	}
	if celReserved[name] {
		return "__" + name + "__", true
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' && i+1 < len(name) && name[i+1] == '_':
			b.WriteString("__underscores__")
			i++
		case c == '.':
			b.WriteString("__dot__")
		case c == '-':
			b.WriteString("__dash__")
		case c == '/':
			b.WriteString("__slash__")
		case c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'):
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), true
}

func nonNegative(v int64) int64 {
	if v < 0 {
		return 0
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// typeName returns a fresh root name for the object types of one Compile. As
// upstream's generateUniqueSelfTypeName, it changes between compilations so
// that rules cannot depend on it.
func typeName(seq uint64) string { return fmt.Sprintf("selfType%d", seq) }
