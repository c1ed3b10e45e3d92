package plain

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Type is what the package knows of a Go type: its JSON members and
// their values' kinds.
type Type struct {
	kind     shapeKind
	bits     int  // of an integer
	unsigned bool // an unsigned integer
	elem     *Type
	fields   map[string]goField // of a struct, by JSON name
	order    []goField          // of a struct, in the Go type's order
	required int                // fields of a struct that are written when empty
	layout   string             // of a time
}

type goField struct {
	name      string // in JSON
	index     []int  // in the Go struct, through embedded structs
	shape     *Type
	omitEmpty bool
	omitZero  bool
	required  bool // written back when absent
}

type shapeKind int

const (
	shapeOther shapeKind = iota // nothing plainDecode vouches for
	shapeString
	shapeBool
	shapeInt
	shapeStruct
	shapeMap
	shapeSlice
	shapePointer
	shapeTime   // metav1.Time, metav1.MicroTime
	shapeFields // metav1.FieldsV1: JSON kept as it is
	shapeBytes  // []byte: standard base64
)

var types sync.Map // reflect.Type → *Type

// Of returns the description of Go type t, built once.
func Of(t reflect.Type) *Type {
	if s, ok := types.Load(t); ok {
		return s.(*Type)
	}
	s := buildShape(t, map[reflect.Type]*Type{})
	types.Store(t, s)
	return s
}

var (
	timeType          = reflect.TypeFor[metav1.Time]()
	microTimeType     = reflect.TypeFor[metav1.MicroTime]()
	fieldsV1Type      = reflect.TypeFor[metav1.FieldsV1]()
	jsonUnmarshaler   = reflect.TypeFor[json.Unmarshaler]()
	jsonMarshaler     = reflect.TypeFor[json.Marshaler]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	unstructuredWrite = reflect.TypeFor[runtime.Unstructured]()
	toUnstructured    = reflect.TypeFor[interface{ ToUnstructured() any }]()
)

// custom: values of t decode or encode their own way.
func custom(t reflect.Type) bool {
	for _, i := range []reflect.Type{jsonUnmarshaler, jsonMarshaler, textUnmarshaler, unstructuredWrite, toUnstructured} {
		if t.Implements(i) || reflect.PointerTo(t).Implements(i) {
			return true
		}
	}
	return false
}

func buildShape(t reflect.Type, seen map[reflect.Type]*Type) *Type {
	if s, ok := seen[t]; ok {
		return s // a recursive type: filled in below
	}
	s := &Type{}
	seen[t] = s
	switch t {
	case timeType:
		s.kind, s.layout = shapeTime, time.RFC3339
		return s
	case microTimeType:
		s.kind, s.layout = shapeTime, metav1.RFC3339Micro
		return s
	case fieldsV1Type:
		s.kind = shapeFields
		return s
	}
	if t.Kind() == reflect.Pointer {
		// What a pointer holds decides, custom or not (a *Time is a
		// json.Unmarshaler through Time's methods).
		s.kind, s.elem = shapePointer, buildShape(t.Elem(), seen)
		return s
	}
	if custom(t) {
		return s
	}
	switch t.Kind() {
	case reflect.String:
		s.kind = shapeString
	case reflect.Bool:
		s.kind = shapeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.kind, s.bits = shapeInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s.kind, s.bits, s.unsigned = shapeInt, t.Bits(), true
	case reflect.Map:
		if t.Key().Kind() == reflect.String && !custom(t.Key()) {
			s.kind, s.elem = shapeMap, buildShape(t.Elem(), seen)
		}
	case reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 {
			s.kind, s.elem = shapeSlice, buildShape(t.Elem(), seen)
		} else if t.Elem() == reflect.TypeFor[byte]() {
			s.kind = shapeBytes // base64
		}
	case reflect.Struct:
		s.kind = shapeStruct
		s.fields = map[string]goField{}
		if !addFields(s, t, nil, seen) {
			*s = Type{}
		}
	}
	return s
}

// addFields adds t's JSON fields to s, those of embedded structs too, as
// encoding/json names them; false for anything it doesn't follow (tags
// with ",string", embedded pointers, names that clash).
func addFields(s *Type, t reflect.Type, index []int, seen map[reflect.Type]*Type) bool {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			return false
		}
		if f.Anonymous && name == "" {
			if f.Type.Kind() != reflect.Struct || custom(f.Type) {
				return false
			}
			if !addFields(s, f.Type, slices.Concat(index, []int{i}), seen) {
				return false
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := s.fields[name]; dup {
			return false
		}
		gf := goField{
			name:      name,
			index:     slices.Concat(index, []int{i}),
			shape:     buildShape(f.Type, seen),
			omitEmpty: strings.Contains(","+opts+",", ",omitempty,"),
			omitZero:  strings.Contains(","+opts+",", ",omitzero,"),
		}
		switch {
		case gf.omitZero && gf.shape.kind == shapeTime:
			// The zero time is omitted: null is taken out below.
		case gf.omitZero && gf.shape.kind != shapeString && gf.shape.kind != shapeBool && gf.shape.kind != shapeInt:
			gf.shape = &Type{} // when is a struct zero? the full decode knows
		case gf.omitZero:
			gf.omitEmpty = true // a scalar's zero is its empty value
		case !gf.omitEmpty || f.Type.Kind() == reflect.Struct:
			// Written back when absent (a struct even when empty).
			gf.required = true
			s.required++
		}
		s.fields[name] = gf
		s.order = append(s.order, gf)
	}
	return true
}

// Plain reports whether m, an object as JSON decoding makes it (maps,
// slices, strings, int64s, float64s, booleans, nils), is what decoding its
// JSON into t, a struct type, and converting that back to a map (the
// unstructured converter) gives. It takes out of m the members that the
// round trip drops and it can account for (a metav1.Time member that is
// null and omitzero, as clients send creationTimestamp), so that m then
// is that map. false: anything else, in which case m may have lost such
// members already.
func (s *Type) Plain(m map[string]any) bool {
	if s.kind != shapeStruct {
		return false
	}
	return s.value(m, false)
}

// value reports whether v is what decoding it into s's type and writing
// that back gives, omitEmpty saying whether the field is omitted when
// empty.
func (s *Type) value(v any, omitEmpty bool) bool {
	switch s.kind {
	case shapeString:
		x, ok := v.(string)
		return ok && !(omitEmpty && x == "")
	case shapeBool:
		x, ok := v.(bool)
		return ok && !(omitEmpty && !x)
	case shapeBytes:
		// Written back as it came only in its one standard encoding.
		x, ok := v.(string)
		if !ok || omitEmpty && x == "" {
			return false
		}
		b, err := base64.StdEncoding.DecodeString(x)
		return err == nil && base64.StdEncoding.EncodeToString(b) == x
	case shapeInt:
		x, ok := v.(int64)
		if !ok || omitEmpty && x == 0 {
			return false
		}
		if s.unsigned {
			return x >= 0 && (s.bits == 64 || x < 1<<s.bits)
		}
		return s.bits == 64 || x >= -1<<(s.bits-1) && x < 1<<(s.bits-1)
	case shapePointer:
		return v != nil && s.elem.value(v, false)
	case shapeTime:
		// null is the zero time, which writes back as null; a time is
		// written back in UTC, to the second or the microsecond.
		if v == nil {
			return true
		}
		x, ok := v.(string)
		if !ok {
			return false
		}
		t, err := time.Parse(s.layout, x)
		// (The zero time is written back as null.)
		return err == nil && !t.IsZero() && t.UTC().Format(s.layout) == x
	case shapeFields:
		// A managedFields entry's fieldsV1 keeps its JSON as it is, and
		// the converter decodes that back: a tree of objects, which is
		// all a field set is, comes back the same. (Other values do too,
		// but through number conversions not worth following here.)
		return ObjectTree(v)
	case shapeMap:
		x, ok := v.(map[string]any)
		return ok && !(omitEmpty && len(x) == 0) && s.elem.all(maps.Values(x))
	case shapeSlice:
		x, ok := v.([]any)
		return ok && !(omitEmpty && len(x) == 0) && s.elem.all(slices.Values(x))
	case shapeStruct:
		x, ok := v.(map[string]any)
		if !ok {
			return false
		}
		required := 0
		for k, e := range x {
			f, ok := s.fields[k]
			if !ok {
				return false
			}
			if f.omitZero && f.shape.kind == shapeTime {
				// The zero time, omitted when written back: clients
				// send "creationTimestamp":null.
				if e == nil {
					delete(x, k)
					continue
				}
				if t, ok := e.(string); !ok || t == "0001-01-01T00:00:00Z" {
					return false
				}
			}
			if !f.shape.value(e, f.omitEmpty) {
				return false
			}
			if f.required {
				required++
			}
		}
		return required == s.required
	}
	return false
}

// ObjectTree reports whether v is an object whose members are all
// objects, at every depth: the form of a managedFields entry's fieldsV1.
func ObjectTree(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, e := range m {
		if !ObjectTree(e) {
			return false
		}
	}
	return true
}

// all reports whether every element is what its round trip gives.
func (s *Type) all(elems iter.Seq[any]) bool {
	for e := range elems {
		if !s.value(e, false) {
			return false
		}
	}
	return true
}

var objectMeta = reflect.TypeFor[metav1.ObjectMeta]()

// ObjectMeta returns metadata md as its round trip through
// metav1.ObjectMeta gives it (a copy: md is not changed), and false when
// md is not plain ObjectMeta.
func ObjectMeta(md map[string]any) (map[string]any, bool) {
	cp := maps.Clone(md)
	if !Of(objectMeta).Plain(cp) {
		return nil, false
	}
	return cp, true
}
