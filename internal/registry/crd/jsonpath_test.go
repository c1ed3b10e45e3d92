package crd

import (
	"reflect"
	"testing"
)

// Paths the Table test against kube-apiserver does not reach: the braces
// and $ kubectl allows, slices with a stride or negative bounds, filters
// comparing numbers, and what kplane does not read (unions, quoted keys,
// unterminated brackets), which find nothing.
func TestJSONPathEdges(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"items": []any{
			map[string]any{"name": "a", "n": int64(1), "w": 0.5},
			map[string]any{"name": "b", "n": int64(2), "w": 1.5},
			map[string]any{"name": "c", "n": int64(3), "w": 2.5},
			map[string]any{"name": "d", "n": int64(4)},
		},
		"a.b": "dotted",
	}}
	for _, c := range []struct {
		path string
		want any // nil: nothing found
	}{
		{"{.spec.items[0].name}", "a"},
		{"$.spec.items[1].name", "b"},
		{".spec.items[-2].name", "c"},
		{".spec.items[1::2].name", "b"},
		{".spec.items[-3:-1].name", "b"},
		{".spec.items[2:2].name", nil},
		{".spec.items[4].name", nil},
		{".spec.items[?(@.n>=3)].name", "c"},
		{".spec.items[?(@.w<1.0)].name", "a"},
		{".spec.items[?(@.n<2.5)].name", nil}, // an integer does not compare with a float
		{".spec.items[?(@.w)].name", "a"},
		{".spec.items[?(@.name!='a')].n", int64(2)},
		{".spec.a\\.b", "dotted"},
		{".spec.items[0,1].name", nil},
		{".spec['a.b']", nil},
		{".spec.items[0", nil},
		{".spec.name[0]", nil},
		{".spec.items.name", nil},
	} {
		p, err := parseJSONPath(c.path)
		got, ok := p.first(obj)
		if (err == nil && ok) != (c.want != nil) || !reflect.DeepEqual(got, c.want) && c.want != nil {
			t.Errorf("%s: %#v (found %v, parse error %v), want %#v", c.path, got, ok, err, c.want)
		}
	}
}
