package correlate

import (
	"reflect"
	"testing"
)

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestGetPairsItemsByTheirKeys(t *testing.T) {
	old := []any{
		obj("name", "a", "port", int64(80), "v", "a80"),
		obj("name", "a", "port", int64(443), "v", "a443"),
		obj("name", "b", "port", int64(80), "v", "b80"),
		obj("name", "dup", "port", int64(1), "v", "first"),
		obj("name", "dup", "port", int64(1), "v", "second"),
		obj("name", "f", "port", float64(1), "v", "float"),
		obj("name", "t", "port", true, "v", "bool"),
		obj("name", "nokey", "v", "no port"),
		obj("name", "obj", "port", map[string]any{}, "v", "object key"),
		"not an object",
		nil,
	}
	x := NewIndex([]string{"name", "port"}, old)
	for _, c := range []struct {
		item any
		want any // the old item's "v", or nil
	}{
		{obj("name", "a", "port", int64(80), "v", "changed"), "a80"},
		{obj("name", "a", "port", int64(443)), "a443"},
		{obj("port", int64(80), "name", "b"), "b80"},
		{obj("name", "a", "port", int64(8080)), nil},
		{obj("name", "c", "port", int64(80)), nil},
		{obj("name", "dup", "port", int64(1)), nil},         // two old items have these keys
		{obj("name", "f", "port", int64(1)), nil},           // 1 is not 1.0
		{obj("name", "f", "port", float64(1)), "float"},     // but 1.0 is
		{obj("name", "t", "port", true), "bool"},            // a boolean key
		{obj("name", "t", "port", "true"), nil},             // is not the string
		{obj("name", "nokey"), nil},                         // a missing key pairs with nothing
		{obj("name", "nokey", "port", nil), nil},            // nor does null
		{obj("name", "obj", "port", map[string]any{}), nil}, // nor an object
		{"not an object", nil},
		{nil, nil},
	} {
		got := x.Get(c.item)
		var v any
		if got != nil {
			v = got.(map[string]any)["v"]
		}
		if !reflect.DeepEqual(v, c.want) {
			t.Errorf("Get(%v) = %v, want %v", c.item, v, c.want)
		}
	}
}

func TestKeysDoNotRunTogether(t *testing.T) {
	// Two fields' values must not be read as one: "a" + "b\x00c" is not
	// "a\x00b" + "c".
	x := NewIndex([]string{"k1", "k2"}, []any{obj("k1", "a", "k2", "b\x00c", "v", 1)})
	if got := x.Get(obj("k1", "a\x00b", "k2", "c")); got != nil {
		t.Errorf("keys ran together: %v", got)
	}
	if got := x.Get(obj("k1", "a", "k2", "b\x00c")); got == nil {
		t.Error("the same keys did not pair")
	}
}

func TestEmptyIndexesHoldNothing(t *testing.T) {
	item := obj("name", "a")
	for name, x := range map[string]Index{
		"zero":     {},
		"no keys":  NewIndex(nil, []any{item}),
		"no items": NewIndex([]string{"name"}, nil),
	} {
		if got := x.Get(item); got != nil {
			t.Errorf("%s: Get = %v, want nil", name, got)
		}
	}
}
