package registry

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// thingSchema has every relationship the field manager's comparison
// tells apart: granular and atomic maps, objects nested in objects, a
// map-type list, a set, an atomic list, and a subtree of unknown fields.
const thingSchema = `{
  "type": "object",
  "x-kubernetes-group-version-kind": [{"group": "x.io", "version": "v1", "kind": "Thing"}],
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object", "properties": {
      "name": {"type": "string"}, "namespace": {"type": "string"}, "uid": {"type": "string"},
      "resourceVersion": {"type": "string"}, "generation": {"type": "integer"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
      "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
      "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
      "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
    "spec": {"type": "object", "properties": {
      "replicas": {"type": "integer"},
      "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}},
      "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
      "args": {"type": "array", "items": {"type": "string"}},
      "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
      "nested": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "string"}, "c": {"type": "integer"}}},
        "d": {"type": "string"},
        "e": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"f": {"type": "string"}, "g": {"type": "string"}}}}},
      "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
    "status": {"type": "object", "properties": {
      "phase": {"type": "string"},
      "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
      "conditions": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}, "message": {"type": "string"}}}}}}
  }
}`

// An update's comparison of only the members that differ gives the field
// manager's full comparison's managedFields: random histories of writes
// that change, add and remove members at every depth of every kind of
// schema node, and leave the rest alone, by several managers through the
// main resource and /status, over fields a server-side apply owns.
func TestUpdateManagedComparesOnlyDifferences(t *testing.T) {
	var s spec.Schema
	if err := json.Unmarshal([]byte(thingSchema), &s); err != nil {
		t.Fatal(err)
	}
	tc, err := managedfields.NewTypeConverter(map[string]*spec.Schema{"io.x.v1.Thing": &s}, false)
	if err != nil {
		t.Fatal(err)
	}
	things := &Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Thing", Status: true, TypeConverter: tc}
	rng := rand.New(rand.NewPCG(21, 22))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	// at returns the object at path in obj, made if missing.
	at := func(obj map[string]any, path ...string) map[string]any {
		for _, k := range path {
			next, ok := obj[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[k] = next
			}
			obj = next
		}
		return obj
	}
	// setOrDelete sets key in m to v, or deletes it one time in four.
	setOrDelete := func(m map[string]any, key string, v any) {
		if rng.IntN(4) == 0 {
			delete(m, key)
		} else {
			m[key] = v
		}
	}
	mutate := func(obj map[string]any) {
		for range 1 + rng.IntN(3) {
			switch rng.IntN(12) {
			case 0:
				setOrDelete(at(obj, "metadata", "labels"), pick("a", "b", "c"), pick("1", "2"))
			case 1:
				setOrDelete(at(obj, "metadata", "annotations"), pick("x", "y"), pick("1", "2"))
			case 2:
				setOrDelete(at(obj, "spec"), "replicas", int64(rng.IntN(3)))
			case 3:
				sel := at(obj, "spec", "selector")
				setOrDelete(sel, pick("app", "tier"), pick("a", "b"))
			case 4:
				ports := []any{map[string]any{"name": "http", "port": int64(80)}}
				if rng.IntN(2) == 0 {
					ports = append(ports, map[string]any{"name": "dns", "port": int64(53), "protocol": pick("UDP", "TCP")})
				}
				if rng.IntN(3) == 0 {
					ports[0].(map[string]any)["port"] = int64(8080)
				}
				setOrDelete(at(obj, "spec"), "ports", ports)
			case 5:
				setOrDelete(at(obj, "spec"), pick("args", "tags"), []any{pick("x", "y"), "z"})
			case 6:
				if a := at(obj, "spec", "nested", "a"); rng.IntN(2) == 0 {
					setOrDelete(a, "b", pick("1", "2"))
				} else {
					setOrDelete(a, "c", int64(rng.IntN(2)))
				}
			case 7:
				setOrDelete(at(obj, "spec", "nested", "e"), pick("f", "g"), pick("1", "2"))
			case 8:
				setOrDelete(at(obj, "spec", "nested"), "d", pick("1", "2"))
			case 9:
				c := at(obj, "spec", "template", "containers", pick("main", "side"))
				setOrDelete(c, pick("image", "cmd"), pick("1", "2"))
				setOrDelete(at(c, "env"), pick("A", "B"), pick("1", "2"))
			case 10:
				st := at(obj, "status")
				setOrDelete(st, "phase", pick("Running", "Pending"))
				setOrDelete(at(st, "counts"), pick("ok", "bad"), int64(rng.IntN(3)))
			case 11:
				conds := []any{map[string]any{"type": "Ready", "status": pick("True", "False")}}
				if rng.IntN(2) == 0 {
					conds = append(conds, map[string]any{"type": "Synced", "status": "True", "message": pick("m1", "m2")})
				}
				setOrDelete(at(obj, "status"), "conditions", conds)
			}
		}
	}
	writes, shared := 0, 0
	for h := range 120 {
		empty, _ := creater{}.New(things.GroupVersionKind("v1"))
		fm, err := (&Resource{}).fieldManager(things, "v1", "")
		if err != nil {
			t.Fatal(err)
		}
		initial := parseObject(t, `{"apiVersion":"x.io/v1","kind":"Thing","metadata":{"name":"t","namespace":"n","uid":"u","resourceVersion":"1","labels":{"a":"1"}},`+
			`"spec":{"replicas":1,"selector":{"app":"a"},"ports":[{"name":"http","port":80}],"args":["x"],"tags":["x"],"nested":{"a":{"b":"1","c":1},"d":"1","e":{"f":"1"}},`+
			`"template":{"containers":{"main":{"image":"1","env":{"A":"1"}}}}}}`)
		cur := fm.UpdateNoErrors(empty, initial, "creator").(*unstructured.Unstructured)
		if h%2 == 0 {
			applied := parseObject(t, `{"apiVersion":"x.io/v1","kind":"Thing","metadata":{"name":"t","namespace":"n","labels":{"b":"1"}},"spec":{"replicas":1,"ports":[{"name":"http","port":80}],"nested":{"a":{"c":1}}}}`)
			out, err := fm.Apply(cur.DeepCopy(), applied, "applier", true)
			if err != nil {
				t.Fatal(err)
			}
			cur = out.(*unstructured.Unstructured)
		}
		for range 8 {
			sub := ""
			if rng.IntN(3) == 0 {
				sub = "status"
			}
			fm, err := (&Resource{}).fieldManager(things, "v1", sub)
			if err != nil {
				t.Fatal(err)
			}
			body := cur.DeepCopy()
			mutate(body.Object)
			if rng.IntN(4) == 0 {
				unstructured.RemoveNestedField(body.Object, "metadata", "managedFields")
			}
			manager := pick("alpha", "beta", "gamma")
			want := updateMatchesLibrary(t, fmt.Sprintf("write %d", writes), things, sub, fm, cur, body, manager)
			writes++
			cur = want
			if len(want.GetManagedFields()) >= 3 {
				shared++
			}
		}
	}
	t.Logf("%d writes, %d of them leaving three owners or more", writes, shared)
	if shared < writes/3 {
		t.Errorf("only %d of %d writes leave three owners or more: the histories should build them up", shared, writes)
	}
}

// differing keeps what differs, shares what it keeps, and never takes
// two values of different Go types, or a nil map and an empty one, for
// equal.
func TestDiffering(t *testing.T) {
	big := map[string]any{"x": "1"}
	a := map[string]any{
		"apiVersion": "v1", "kind": "K", "same": "s", "n": int64(1), "f": float64(1), "list": []any{"a", int64(1)},
		"deep":   map[string]any{"same": map[string]any{"x": true}, "diff": map[string]any{"x": "1", "y": "1"}},
		"nilmap": map[string]any(nil), "onlyA": big, "null": nil,
	}
	b := map[string]any{
		"apiVersion": "v1", "kind": "K", "same": "s", "n": float64(1), "f": float64(1), "list": []any{"a", int64(1)},
		"deep":   map[string]any{"same": map[string]any{"x": true}, "diff": map[string]any{"x": "1", "y": "2"}},
		"nilmap": map[string]any{}, "onlyB": "b", "null": nil,
	}
	da, db := differing(a, b, true)
	wantA := map[string]any{"apiVersion": "v1", "kind": "K", "n": int64(1), "deep": map[string]any{"diff": map[string]any{"y": "1"}}, "nilmap": map[string]any(nil), "onlyA": big}
	wantB := map[string]any{"apiVersion": "v1", "kind": "K", "n": float64(1), "deep": map[string]any{"diff": map[string]any{"y": "2"}}, "nilmap": map[string]any{}, "onlyB": "b"}
	if fmt.Sprintf("%#v", da) != fmt.Sprintf("%#v", wantA) {
		t.Errorf("a side: %#v\nwant %#v", da, wantA)
	}
	if fmt.Sprintf("%#v", db) != fmt.Sprintf("%#v", wantB) {
		t.Errorf("b side: %#v\nwant %#v", db, wantB)
	}
	if fmt.Sprintf("%p", da["onlyA"]) != fmt.Sprintf("%p", big) {
		t.Errorf("a member only a has was copied")
	}
	for _, c := range []struct {
		a, b any
		eq   bool
	}{
		{[]any{"a"}, []any{"a"}, true}, {[]any{"a"}, []any{"b"}, false}, {[]any{}, []any(nil), false},
		{map[string]any{"k": []any{int64(1)}}, map[string]any{"k": []any{int64(1)}}, true},
		{map[string]any{"k": nil}, map[string]any{"j": nil}, false},
		{int64(1), float64(1), false}, {1, 1, false}, {true, true, true}, {nil, nil, true}, {nil, "", false},
	} {
		if got := jsonEqual(c.a, c.b); got != c.eq {
			t.Errorf("jsonEqual(%#v, %#v) = %v, want %v", c.a, c.b, got, c.eq)
		}
	}
}
