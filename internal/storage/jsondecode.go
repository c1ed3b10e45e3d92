package storage

import (
	"bytes"
	"slices"
	"strconv"

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
	m, _, ok := decodeTop(jsonDecoder{scanner: scanner{data: data}})
	return m, ok
}

// DecodeObjectNoDuplicates is decodeObject for a request body: false
// also when an object in data has a member name twice, which a strict
// decode reports.
func DecodeObjectNoDuplicates(data []byte) (map[string]any, bool) {
	m, dup, ok := decodeTop(jsonDecoder{scanner: scanner{data: data}})
	return m, ok && !dup
}

// decodeObjectWithout is decodeObject leaving out the top-level member
// drop, which it skips without building its value.
func decodeObjectWithout(data []byte, drop string) (map[string]any, bool) {
	m, _, ok := decodeTop(jsonDecoder{scanner: scanner{data: data}, drop: drop})
	return m, ok
}

// decodeTop decodes d's data, which must be one object, and reports
// whether a member name was given twice in it.
func decodeTop(d jsonDecoder) (m map[string]any, dup, ok bool) {
	if d.peek() != '{' {
		return nil, false, false
	}
	m, err := d.object()
	if d.peek(); err != nil || d.pos != len(d.data) {
		return nil, false, false
	}
	return m, d.dup, true
}

// jsonDecoder builds values on the scanner Record.scan reads with.
type jsonDecoder struct {
	scanner
	depth int
	dup   bool     // an object had a member name twice
	drop  string   // a top-level member left out (decodeObjectWithout)
	keep  []string // if not nil, the only top-level members kept (Record.DecodeMembers)
	// jump is a top-level member's value, known to be valid, that is
	// passed over at once when not kept.
	jump span
}

// maxDecodeDepth bounds the recursion; deeper documents go the library's
// way (encoding/json allows 10,000 levels).
const maxDecodeDepth = 512

func (d *jsonDecoder) value() (any, error) {
	switch c := d.peek(); {
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
	return nil, errSyntax
}

func (d *jsonDecoder) literal(s string) error {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(s)) {
		return errSyntax
	}
	d.pos += len(s)
	return nil
}

func (d *jsonDecoder) object() (map[string]any, error) {
	if d.depth++; d.depth > maxDecodeDepth {
		return nil, errSyntax
	}
	defer func() { d.depth-- }()
	m := map[string]any{}
	top := d.depth == 1 && (d.drop != "" || d.keep != nil)
	err := d.scanner.object(func(key string) error {
		if top && (key == d.drop || d.keep != nil && !slices.Contains(d.keep, key)) {
			if d.ws(); d.jump.end != 0 && d.pos == int(d.jump.start) {
				d.pos = int(d.jump.end)
				return nil
			}
			return d.skip()
		}
		v, err := d.value()
		n := len(m)
		if m[key] = v; len(m) == n {
			d.dup = true
		}
		return err
	})
	return m, err
}

func (d *jsonDecoder) array() ([]any, error) {
	if d.depth++; d.depth > maxDecodeDepth {
		return nil, errSyntax
	}
	defer func() { d.depth-- }()
	d.pos++ // [
	a := make([]any, 0)
	if d.peek() == ']' {
		d.pos++
		return a, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, nil
		default:
			return nil, errSyntax
		}
	}
}

// number reads a JSON number: an int64 when it has no '.' and fits, as
// the library's decoder (which tries strconv.ParseInt unless the literal
// holds a '.'), else a float64.
func (d *jsonDecoder) number() (any, error) {
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
		return nil, errSyntax
	}
	dot := false
	if i < n && d.data[i] == '.' {
		dot = true
		i++
		if i == n || d.data[i] < '0' || d.data[i] > '9' {
			return nil, errSyntax
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
			return nil, errSyntax
		}
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	s := string(d.data[start:i])
	if !dot {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v, nil
		}
	}
	return strconv.ParseFloat(s, 64)
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
