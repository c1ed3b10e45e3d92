package storage

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AppendJSON appends the JSON encoding of v, a value of an unstructured
// object (maps, slices, strings, numbers, booleans, nil, as
// k8s.io/apimachinery's JSON decoding produces them), with the bytes
// encoding/json would produce: keys sorted, HTML-safe escaping. It is the
// list and watch hot path, several times faster than encoding/json's
// reflection; anything else falls back to encoding/json.
func AppendJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) || x != math.Trunc(x) || math.Abs(x) >= 1e21 || math.Signbit(x) {
			break // encoding/json's float formatting
		}
		return strconv.AppendInt(b, int64(x), 10), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = AppendJSON(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = AppendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does (HTML-safe, invalid UTF-8
// as U+FFFD, U+2028 and U+2029 escaped).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendList appends a list: its own fields, with the items encoded one by
// one, as UnstructuredList's MarshalJSON lays them out.
func AppendList(b []byte, list *unstructured.UnstructuredList) ([]byte, error) {
	top := make(map[string]any, len(list.Object)+1)
	for k, v := range list.Object {
		top[k] = v
	}
	items := make([]any, len(list.Items))
	for i := range list.Items {
		items[i] = list.Items[i].Object
	}
	top["items"] = items
	return AppendJSON(b, top)
}
