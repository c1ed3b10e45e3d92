package schema

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// Expected answers: kubernetes/kubernetes staging/src/k8s.io/
// apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go
// (missing or non-nullable null fields get their default, top-down, in
// properties, items and additionalProperties) and the docs
// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#defaulting-and-nullable
// ("null values for fields that either don't specify the nullable flag,
// or give it a false value, will be pruned before defaulting happens";
// nullable fields keep null).
func TestDefault(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"top level and nested object defaulted",
			`{spec: {image: abc, schedule: {}}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: hello, owner: nobody, schedule: {window: {days: 7}}}}`},
		{"set values kept",
			`{spec: {image: abc, replicas: 5, tier: cache, note: hi, owner: me, schedule: {window: {days: 1}}}}`,
			`{spec: {image: abc, replicas: 5, tier: cache, note: hi, owner: me, schedule: {window: {days: 1}}}}`},
		{"array items defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, ports: [{name: a, port: 1}, {name: b, port: 2, protocol: UDP}]}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, ports: [{name: a, port: 1, protocol: TCP}, {name: b, port: 2, protocol: UDP}]}}`},
		{"additionalProperties values defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, limits: {cpu: {min: 1}, mem: {max: 5}}}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, limits: {cpu: {min: 1, max: 100}, mem: {max: 5}}}}`},
		{"nullable null kept, non-nullable null defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: null, owner: null}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: null, owner: nobody}}`},
		{"missing spec not created",
			`{status: {phase: Running}}`,
			`{status: {phase: Running}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := parse(t, c.in)
			widget(t).Default(obj)
			if want := parse(t, c.want); !reflect.DeepEqual(obj, want) {
				t.Errorf("defaulted to\n%v\nwant\n%v", obj, want)
			}
		})
	}
}

func TestDefaultCopiesValues(t *testing.T) {
	s := widget(t)
	a, b := parse(t, `{spec: {image: abc, schedule: {}}}`), parse(t, `{spec: {image: abc, schedule: {}}}`)
	s.Default(a)
	s.Default(b)
	a["spec"].(map[string]any)["schedule"].(map[string]any)["window"].(map[string]any)["days"] = int64(1)
	if got := b["spec"].(map[string]any)["schedule"].(map[string]any)["window"].(map[string]any)["days"]; got != int64(7) {
		t.Fatalf("defaults share memory: %v", got)
	}
}

// TestNeedsDefaults: NeedsDefaults is true exactly when Default changes
// the object, on random variations of a Widget (fields removed, set to
// null, list items and map values emptied or nulled) under a schema with
// defaults at every kind of place (properties, nested objects, list
// items, additionalProperties values, a nullable field).
func TestNeedsDefaults(t *testing.T) {
	lists, err := New(schemaFromYAML(t, `{type: object, properties: {spec: {type: object, properties: {
m: {type: object, additionalProperties: {type: string, default: d}},
l: {type: array, items: {type: string, default: e}},
o: {type: array, items: {type: object, properties: {a: {type: integer, default: 1}}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    *Schema
		base map[string]any
	}{
		{"widget", widget(t), parse(t, validWidget)},
		{"items and values", lists, parse(t, `{spec: {m: {k1: v, k2: w}, l: [a, b, c], o: [{a: 2}, {a: 3}]}}`)},
	} {
		t.Run(c.name, func(t *testing.T) { checkNeedsDefaults(t, c.s, c.base) })
	}
}

func checkNeedsDefaults(t *testing.T, s *Schema, base map[string]any) {
	s.Default(base)
	if s.NeedsDefaults(base) {
		t.Fatal("a defaulted object needs defaults")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	// mutate removes, nulls or empties a random value below x.
	var mutate func(x any) any
	mutate = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			if len(x) == 0 {
				return x
			}
			keys := slices.Sorted(maps.Keys(x))
			k := keys[rng.IntN(len(keys))]
			switch rng.IntN(7) {
			case 0:
				delete(x, k)
			case 1:
				x[k] = nil
			case 2:
				x[k] = map[string]any{}
			default:
				x[k] = mutate(x[k])
			}
		case []any:
			if len(x) == 0 {
				return x
			}
			i := rng.IntN(len(x))
			switch rng.IntN(3) {
			case 0:
				x[i] = nil
			case 1:
				x[i] = map[string]any{}
			default:
				x[i] = mutate(x[i])
			}
		}
		return x
	}
	changed := 0
	for range 15000 {
		obj := runtime.DeepCopyJSON(base)
		for range 2 + rng.IntN(5) {
			mutate(obj)
		}
		defaulted := runtime.DeepCopyJSON(obj)
		s.Default(defaulted)
		want := !reflect.DeepEqual(obj, defaulted)
		if want {
			changed++
		}
		if got := s.NeedsDefaults(obj); got != want {
			t.Fatalf("NeedsDefaults %v, Default changes it: %v\n%v", got, want, obj)
		}
	}
	if changed < 300 || changed > 14700 {
		t.Errorf("%d of 15000 variations needed defaults: the test should make both kinds", changed)
	}
}
