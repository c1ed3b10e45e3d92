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
		var buf [16]string
		keys := appendSortedKeys(buf[:0], x)
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

// AppendString appends s as a JSON string: AppendJSON for a string,
// without boxing it in an interface (an allocation for each one).
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// appendString quotes s as encoding/json does (HTML-safe, invalid UTF-8
// as U+FFFD, U+2028 and U+2029 escaped).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	i := plainRun(s)
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				// A run of plain bytes, eight at a time: text has an
				// escape (a newline) every line, not just once.
				i += 1 + plainRun(s[i+1:])
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

// Encoded is an object's JSON as the store wrote it (without a
// resourceVersion), with the place its resourceVersion goes: the answer
// to a write is those bytes with the revision spliced in, not a second
// encode of the object.
type Encoded struct {
	value []byte // without the trailing newline
	at    int    // where `"resourceVersion":"N"` goes; < 0: unknown
	sep   byte
	rev   int64
}

// AppendJSON appends the object's JSON with its resourceVersion: what
// AppendJSON gives for the object handed back with e.
func (e *Encoded) AppendJSON(b []byte) []byte { return spliceRV(b, e.value, e.at, e.sep, e.rev) }

// spliceRV appends v with `"resourceVersion":"rev"` inserted at at, with
// the comma sep says.
func spliceRV(b, v []byte, at int, sep byte, rev int64) []byte {
	b = append(b, v[:at]...)
	if sep == sepBefore {
		b = append(b, ',')
	}
	b = append(b, `"resourceVersion":"`...)
	b = strconv.AppendInt(b, rev, 10)
	b = append(b, '"')
	if sep == sepAfter {
		b = append(b, ',')
	}
	return append(b, v[at:]...)
}

// appendStored is AppendJSON for an object without a resourceVersion, and
// returns where metadata's resourceVersion goes in the result (at < 0 if
// metadata is not an object), as a Record keeps it.
func appendStored(b []byte, obj map[string]any) (out []byte, at int, sep byte, err error) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		b, err = AppendJSON(b, obj)
		return b, -1, 0, err
	}
	var buf, mbuf [16]string
	keys := appendSortedKeys(buf[:0], obj)
	at = -1
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		if k != "metadata" {
			if b, err = AppendJSON(b, obj[k]); err != nil {
				return nil, 0, 0, err
			}
			continue
		}
		mkeys := appendSortedKeys(mbuf[:0], md)
		b = append(b, '{')
		for j, mk := range mkeys {
			if j > 0 {
				b = append(b, ',')
			}
			if at < 0 && mk > "resourceVersion" {
				at, sep = len(b), sepAfter
			}
			b = appendString(b, mk)
			b = append(b, ':')
			if b, err = AppendJSON(b, md[mk]); err != nil {
				return nil, 0, 0, err
			}
		}
		switch {
		case at >= 0:
		case len(mkeys) == 0:
			at, sep = len(b), sepNone
		default:
			at, sep = len(b), sepBefore
		}
		b = append(b, '}')
	}
	return append(b, '}'), at, sep, nil
}

// appendSortedKeys appends m's keys to keys in order, as encoding/json
// writes them. The callers pass a small array on their stack, which holds
// the keys of most maps without an allocation.
func appendSortedKeys(keys []string, m map[string]any) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
