package correlate

import (
	"strconv"
	"strings"
)

// Index is one version of a list-type=map list, its items by their keys.
// The zero Index holds nothing.
type Index struct {
	keys  []string
	items map[string][]any // by composite key; more than one: a duplicate
}

// NewIndex indexes items, the list's items, by the key fields keys (the
// schema's x-kubernetes-list-map-keys). With no keys it holds nothing.
func NewIndex(keys []string, items []any) Index {
	if len(keys) == 0 || len(items) == 0 {
		return Index{}
	}
	x := Index{keys: keys, items: make(map[string][]any, len(items))}
	var b strings.Builder
	for _, e := range items {
		if k, ok := x.key(&b, e); ok {
			x.items[k] = append(x.items[k], e)
		}
	}
	return x
}

// Get returns the item the index holds whose keys are item's, or nil: if
// item has no keys of its own, if no item has them, or if several do.
func (x Index) Get(item any) any {
	if x.items == nil {
		return nil
	}
	var b strings.Builder
	k, ok := x.key(&b, item)
	if !ok {
		return nil
	}
	if m := x.items[k]; len(m) == 1 {
		return m[0]
	}
	return nil
}

// key builds e's composite key in b: each key field's JSON type and
// value, in the order of keys. False if e is not an object, or a key field
// is missing or not a scalar.
func (x Index) key(b *strings.Builder, e any) (string, bool) {
	m, ok := e.(map[string]any)
	if !ok {
		return "", false
	}
	b.Reset()
	for _, k := range x.keys {
		switch v := m[k].(type) {
		case string:
			b.WriteByte('s')
			b.WriteString(strconv.Quote(v))
		case int64:
			b.WriteByte('i')
			b.WriteString(strconv.FormatInt(v, 10))
		case float64:
			b.WriteByte('f')
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		case bool:
			b.WriteByte('b')
			b.WriteString(strconv.FormatBool(v))
		default: // missing (nil), null, an object, a list
			return "", false
		}
		b.WriteByte(0)
	}
	return b.String(), true
}
