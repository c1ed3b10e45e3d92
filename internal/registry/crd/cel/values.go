package cel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// toVal converts an unstructured value (as decoded from JSON: map[string]any,
// []any, string, bool, int64, float64, nil) to the CEL value its schema node
// declares. Values that do not fit the schema become CEL errors, which fail
// the rules that read them, as kube-apiserver's UnstructuredToVal does.
//
// Objects become maps keyed by the escaped property name, holding only the
// properties the schema declares. Lists with x-kubernetes-list-type set or
// map compare equal regardless of order.
func toVal(v any, t *declType) ref.Val {
	if v == nil {
		if t.schema != nil && t.schema.Nullable {
			return types.NullValue
		}
		return types.NewErr("invalid data, got null for schema with nullable=false")
	}
	switch t.kind {
	case kindDyn:
		switch x := v.(type) {
		case string:
			return types.String(x)
		default:
			if i, ok := asInt(v); ok {
				return types.Int(i)
			}
		}
		return types.NewErr("invalid data, expected XIntOrString value to be either a string or integer")
	case kindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return types.NewErr("invalid data, expected a map for the provided schema with type=object")
		}
		out := make(map[ref.Val]ref.Val, len(t.fields))
		for esc, f := range t.fields {
			fv, ok := m[f.name]
			if !ok {
				continue
			}
			out[types.String(esc)] = toVal(fv, f.typ)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, out)
	case kindMap:
		m, ok := v.(map[string]any)
		if !ok {
			return types.NewErr("invalid data, expected a map for the provided schema with type=object")
		}
		out := make(map[ref.Val]ref.Val, len(m))
		for k, e := range m {
			out[types.String(k)] = toVal(e, t.elem)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, out)
	case kindList:
		l, ok := v.([]any)
		if !ok {
			return types.NewErr("invalid data, expected an array for the provided schema with type=array")
		}
		out := make([]ref.Val, len(l))
		for i, e := range l {
			out[i] = toVal(e, t.elem)
		}
		list := types.NewRefValList(types.DefaultTypeAdapter, out)
		if t.schema.XListType != nil {
			switch *t.schema.XListType {
			case "set":
				return unorderedList{Lister: list}
			case "map":
				return unorderedList{Lister: list, keys: mapListKeys(t)}
			}
		}
		return list
	}
	switch t.cel {
	case types.StringType:
		if s, ok := v.(string); ok {
			return types.String(s)
		}
		return types.NewErr("invalid data, expected string, got %T", v)
	case types.BytesType:
		s, ok := v.(string)
		if !ok {
			return types.NewErr("invalid data, expected string, got %T", v)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return types.NewErr("Invalid byte formatted string %s: %v", s, err)
		}
		return types.Bytes(b)
	case types.DurationType:
		s, ok := v.(string)
		if !ok {
			return types.NewErr("invalid data, expected string, got %T", v)
		}
		// kube-openapi's parser, as upstream (and the OpenAPI format
		// check) uses: it also takes "1d", "2w" and "3 days".
		d, err := strfmt.ParseDuration(s)
		if err != nil {
			return types.NewErr("Invalid duration %s: %v", s, err)
		}
		return types.Duration{Duration: d}
	case types.TimestampType:
		s, ok := v.(string)
		if !ok {
			return types.NewErr("invalid data, expected string, got %T", v)
		}
		if t.schema.Format == "date" {
			ts, err := time.Parse(strfmt.RFC3339FullDate, s)
			if err != nil {
				return types.NewErr("Invalid date formatted string %s: %v", s, err)
			}
			return types.Timestamp{Time: ts}
		}
		// kube-openapi's date-time parser, as upstream: RFC 3339 and the
		// variants the OpenAPI format check accepts.
		ts, err := strfmt.ParseDateTime(s)
		if err != nil {
			return types.NewErr("Invalid date-time formatted string %s: %v", s, err)
		}
		return types.Timestamp{Time: time.Time(ts)}
	case types.BoolType:
		if b, ok := v.(bool); ok {
			return types.Bool(b)
		}
		return types.NewErr("invalid data, expected bool, got %T", v)
	case types.IntType:
		if i, ok := asInt(v); ok {
			return types.Int(i)
		}
		return types.NewErr("invalid data, expected int, got %T", v)
	case types.DoubleType:
		switch x := v.(type) {
		case float64:
			return types.Double(x)
		case float32:
			return types.Double(x)
		}
		if i, ok := asInt(v); ok {
			return types.Double(i)
		}
		return types.NewErr("invalid data, expected float, got %T", v)
	}
	return types.NewErr("invalid type %s", t.schema.Type)
}

// asInt accepts the integer forms JSON decoders produce, including a float64
// that holds a whole number (encoding/json without UseNumber).
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), true
		}
	case json.Number:
		i, err := x.Int64()
		return i, err == nil
	}
	return 0, false
}

func mapListKeys(t *declType) []string {
	keys := make([]string, 0, len(t.schema.XListMapKeys))
	for _, k := range t.schema.XListMapKeys {
		if esc, ok := escapeName(k); ok {
			keys = append(keys, esc)
		}
	}
	return keys
}

// unorderedList is a list whose order carries no meaning: an
// x-kubernetes-list-type set, or map (keys non-nil). Two such lists are equal
// when they hold the same elements (for map lists: the same keys with equal
// items), which is how kube-apiserver compares them in `self == oldSelf`.
type unorderedList struct {
	traits.Lister
	keys []string
}

func (l unorderedList) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	if l.Size() != o.Size() {
		return types.False
	}
	n := int(l.Size().(types.Int))
	used := make([]bool, n)
	for it := o.Iterator(); it.HasNext() == types.True; {
		ov := it.Next()
		found := false
		for i := 0; i < n; i++ {
			if used[i] {
				continue
			}
			lv := l.Get(types.Int(i))
			if l.keys != nil && !sameKeys(lv, ov, l.keys) {
				continue
			}
			eq := lv.Equal(ov)
			if types.IsError(eq) {
				return eq
			}
			if eq == types.True {
				used[i], found = true, true
				break
			}
			if l.keys != nil {
				// Same key, different item.
				return types.False
			}
		}
		if !found {
			return types.False
		}
	}
	return types.True
}

func sameKeys(a, b ref.Val, keys []string) bool {
	am, ok1 := a.(traits.Mapper)
	bm, ok2 := b.(traits.Mapper)
	if !ok1 || !ok2 {
		return false
	}
	for _, k := range keys {
		av, aok := am.Find(types.String(k))
		bv, bok := bm.Find(types.String(k))
		if aok != bok || (aok && av.Equal(bv) != types.True) {
			return false
		}
	}
	return true
}

func (l unorderedList) ConvertToNative(t reflect.Type) (any, error) {
	return l.Lister.ConvertToNative(t)
}

func (l unorderedList) String() string { return fmt.Sprint(l.Lister) }
