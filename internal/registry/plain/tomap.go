package plain

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/kplane-dev/kplane/internal/storage"
)

// Map returns what encoding v, a value of s's struct type, as JSON
// (encoding/json, as the Go type's own MarshalJSON methods write it) and
// decoding that JSON into a map gives, without the JSON, when Plain
// vouches for that map. false: v holds something Plain does not vouch for
// (a quantity, bytes, a null where a value belongs...), and the caller
// takes the long way. A protobuf request body, decoded into its Go type,
// becomes the object's map this way.
func (s *Type) Map(v reflect.Value) (map[string]any, bool) {
	if s.kind != shapeStruct || v.Kind() != reflect.Struct {
		return nil, false
	}
	m, ok := s.toJSON(v)
	if !ok {
		return nil, false
	}
	return m.(map[string]any), true
}

// toJSON is v's value in the map, false where Plain would refuse it.
func (s *Type) toJSON(v reflect.Value) (any, bool) {
	switch s.kind {
	case shapeString:
		return jsonString(v.String()), true
	case shapeBool:
		return v.Bool(), true
	case shapeBytes:
		if v.IsNil() {
			return nil, false // null
		}
		return base64.StdEncoding.EncodeToString(v.Bytes()), true
	case shapeInt:
		if !s.unsigned {
			return v.Int(), true
		}
		u := v.Uint()
		if u > math.MaxInt64 {
			return nil, false // decoded as a float
		}
		return int64(u), true
	case shapePointer:
		if v.IsNil() {
			return nil, false // null
		}
		e, ok := s.elem.toJSON(v.Elem())
		return e, ok && e != nil // a zero time is null too
	case shapeTime:
		t := v.Field(0).Interface().(time.Time) // metav1.Time and MicroTime embed it
		if t.IsZero() {
			return nil, true // written as null
		}
		x := t.UTC().Format(s.layout)
		if p, err := time.Parse(s.layout, x); err != nil || p.IsZero() || p.UTC().Format(s.layout) != x {
			return nil, false
		}
		return x, true
	case shapeFields:
		// encoding/json refuses a MarshalJSON that writes invalid JSON
		// (the long way then fails the request); json.Valid holds the
		// shortcut to that, and the store's decoder to what the long
		// way decodes.
		raw, err := v.Interface().(json.Marshaler).MarshalJSON()
		if err != nil || !json.Valid(raw) {
			return nil, false
		}
		m, ok := storage.DecodeObjectNoDuplicates(raw)
		if !ok || !ObjectTree(m) {
			return nil, false
		}
		return m, true
	case shapeMap:
		if v.IsNil() {
			return nil, false // null
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			e, ok := s.elem.toJSON(it.Value())
			if !ok {
				return nil, false
			}
			k := jsonString(it.Key().String())
			if _, dup := m[k]; dup {
				return nil, false // two keys made one by their invalid UTF-8
			}
			m[k] = e
		}
		return m, true
	case shapeSlice:
		if v.IsNil() {
			return nil, false // null
		}
		l := make([]any, v.Len())
		for i := range l {
			e, ok := s.elem.toJSON(v.Index(i))
			if !ok {
				return nil, false
			}
			l[i] = e
		}
		return l, true
	case shapeStruct:
		// The fields written, counted first: a map made for all of
		// ObjectMeta's fields, most of them empty, costs more than the
		// count.
		n := 0
		for i := range s.order {
			omit, ok := s.order[i].omitted(v.FieldByIndex(s.order[i].index))
			if !ok {
				return nil, false
			}
			if !omit {
				n++
			}
		}
		m := make(map[string]any, n)
		for i := range s.order {
			f := &s.order[i]
			fv := v.FieldByIndex(f.index)
			if omit, _ := f.omitted(fv); omit {
				continue
			}
			e, ok := f.shape.toJSON(fv)
			if !ok {
				return nil, false
			}
			m[f.name] = e
		}
		return m, true
	}
	return nil, false
}

// omitted reports whether encoding/json leaves field f, of value v, out;
// false for an omitzero field whose zero it does not follow.
func (f *goField) omitted(v reflect.Value) (omit, ok bool) {
	if f.omitZero && f.shape.kind == shapeTime {
		// metav1.Time's IsZero, which the omitzero option calls: the
		// instant, whatever the location.
		return v.Field(0).Interface().(time.Time).IsZero(), true
	}
	if f.omitZero && !f.omitEmpty {
		return false, false // a struct's zero, or its IsZero method
	}
	if !f.omitEmpty {
		return false, true
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0, true
	case reflect.Bool:
		return !v.Bool(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0, true
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0, true
	case reflect.Interface, reflect.Pointer:
		return v.IsNil(), true
	}
	return false, true // a struct is never empty
}

// jsonString is s as encoding/json writes it and a decoder reads it back:
// each byte that is not part of valid UTF-8 becomes U+FFFD.
func jsonString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}
