package storage

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// unmarshalObject is Unstructured.UnmarshalJSON, by decodeObject when it
// takes the data and the object has a kind; else by the library, for its
// result or its error.
func unmarshalObject(data []byte) (*unstructured.Unstructured, error) {
	if m, ok := decodeObject(data); ok {
		if k, _ := m["kind"].(string); k != "" {
			return &unstructured.Unstructured{Object: m}, nil
		}
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// UnmarshalMap is k8s.io/apimachinery/pkg/util/json.Unmarshal(data, v)
// for a nil map *v, by decodeObject when it takes the data.
func UnmarshalMap(data []byte, v *map[string]any) error {
	if m, ok := decodeObject(data); ok {
		*v = m
		return nil
	}
	return utiljson.Unmarshal(data, v)
}

// decodeObject decodes a JSON object into the map that
// k8s.io/apimachinery/pkg/util/json.Unmarshal gives (the decoder behind
// Unstructured.UnmarshalJSON): objects as map[string]any, arrays as
// []any, integers that fit as int64, other numbers as float64, strings
// unescaped as encoding/json does. It is a single pass without
// reflection, for the objects the store reads back: they are valid JSON
// the store wrote. false means the data is something this decoder does
// not take (invalid JSON, not an object, a number out of range, deep
// nesting): the caller decodes it the library's way, which gives the
// library's result or error. A fuzz test holds the two equal.
func decodeObject(data []byte) (map[string]any, bool) {
	d := jsonDecoder{data: data}
	if d.skipSpace() != '{' {
		return nil, false
	}
	m, ok := d.object()
	if d.skipSpace(); !ok || d.pos != len(d.data) {
		return nil, false
	}
	return m, true
}

type jsonDecoder struct {
	data  []byte
	pos   int
	depth int
}

// maxDecodeDepth bounds the recursion; deeper documents go the library's
// way (encoding/json allows 10,000 levels).
const maxDecodeDepth = 512

// skipSpace moves past white space and returns the byte there, 0 at the
// end (or at a NUL, which no case takes).
func (d *jsonDecoder) skipSpace() byte {
	for d.pos < len(d.data) {
		switch c := d.data[d.pos]; c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c
		}
	}
	return 0
}

func (d *jsonDecoder) value() (any, bool) {
	switch c := d.skipSpace(); {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *jsonDecoder) literal(s string) bool {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(s)) {
		return false
	}
	d.pos += len(s)
	return true
}

func (d *jsonDecoder) object() (map[string]any, bool) {
	if d.depth++; d.depth > maxDecodeDepth {
		return nil, false
	}
	defer func() { d.depth-- }()
	d.pos++ // {
	m := map[string]any{}
	if d.skipSpace() == '}' {
		d.pos++
		return m, true
	}
	for {
		if d.skipSpace() != '"' {
			return nil, false
		}
		k, ok := d.key()
		if !ok || d.skipSpace() != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		m[k] = v
		switch d.skipSpace() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDecoder) array() ([]any, bool) {
	if d.depth++; d.depth > maxDecodeDepth {
		return nil, false
	}
	defer func() { d.depth-- }()
	d.pos++ // [
	a := make([]any, 0)
	if d.skipSpace() == ']' {
		d.pos++
		return a, true
	}
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		a = append(a, v)
		switch d.skipSpace() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, true
		default:
			return nil, false
		}
	}
}

// key is str for an object's member name: the names every object has
// come from one set of constants instead of an allocation each.
func (d *jsonDecoder) key() (string, bool) {
	start := d.pos
	if end := bytes.IndexByte(d.data[start+1:], '"'); end >= 0 {
		if k, ok := commonKey(d.data[start+1 : start+1+end]); ok {
			d.pos = start + end + 2
			return k, true
		}
	}
	return d.str()
}

// commonKey returns the constant for the member names of object metadata
// and managedFields entries (no escapes in any of them).
func commonKey(b []byte) (string, bool) {
	switch string(b) {
	case "apiVersion":
		return "apiVersion", true
	case "kind":
		return "kind", true
	case "metadata":
		return "metadata", true
	case "name":
		return "name", true
	case "namespace":
		return "namespace", true
	case "uid":
		return "uid", true
	case "resourceVersion":
		return "resourceVersion", true
	case "generation":
		return "generation", true
	case "creationTimestamp":
		return "creationTimestamp", true
	case "deletionTimestamp":
		return "deletionTimestamp", true
	case "labels":
		return "labels", true
	case "annotations":
		return "annotations", true
	case "ownerReferences":
		return "ownerReferences", true
	case "finalizers":
		return "finalizers", true
	case "managedFields":
		return "managedFields", true
	case "manager":
		return "manager", true
	case "operation":
		return "operation", true
	case "time":
		return "time", true
	case "fieldsType":
		return "fieldsType", true
	case "fieldsV1":
		return "fieldsV1", true
	case "subresource":
		return "subresource", true
	case ".":
		return ".", true
	case "f:metadata":
		return "f:metadata", true
	case "f:labels":
		return "f:labels", true
	case "f:annotations":
		return "f:annotations", true
	case "f:data":
		return "f:data", true
	case "f:spec":
		return "f:spec", true
	case "f:status":
		return "f:status", true
	case "data":
		return "data", true
	case "spec":
		return "spec", true
	case "status":
		return "status", true
	}
	return "", false
}

// str reads the string at d.pos (its opening quote). Escapes and bytes
// that are not UTF-8 are left to encoding/json, whose unquoting
// (replacement runes included) the library's decoder shares.
func (d *jsonDecoder) str() (string, bool) {
	start := d.pos
	plain := true
	for i := start + 1; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.pos = i + 1
			s := d.data[start+1 : i]
			if plain && utf8.Valid(s) {
				return string(s), true
			}
			var out string
			if err := json.Unmarshal(d.data[start:i+1], &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			plain = false
			i++
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// number reads a JSON number: an int64 when it has no '.' and fits, as
// the library's decoder (which tries strconv.ParseInt unless the literal
// holds a '.'), else a float64.
func (d *jsonDecoder) number() (any, bool) {
	start := d.pos
	i := start
	n := len(d.data)
	if i < n && d.data[i] == '-' {
		i++
	}
	switch {
	case i < n && d.data[i] == '0':
		i++
	case i < n && d.data[i] >= '1' && d.data[i] <= '9':
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	dot := false
	if i < n && d.data[i] == '.' {
		dot = true
		i++
		if i == n || d.data[i] < '0' || d.data[i] > '9' {
			return nil, false
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	if i < n && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		if i < n && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if i == n || d.data[i] < '0' || d.data[i] > '9' {
			return nil, false
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	s := string(d.data[start:i])
	if !dot {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return f, true
}
