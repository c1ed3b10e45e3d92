package registry

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// A create through the memo must leave every object exactly as the field
// manager leaves it, whether the memo knew the object's shape or not.
// Random objects of a few kinds, drawn from small pools of keys and list
// items so that shapes repeat while the values outside lists vary.
func TestCreateMemoMatchesTheFieldManager(t *testing.T) {
	configMaps := &Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	pods := &Kind{Versions: []string{"v1"}, Kind: "Pod", Namespaced: true, Status: true, Typed: func() runtime.Object { return &corev1.Pod{} }}
	widgets := &Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Widget"}
	// A Go type whose zero value has scalars (a RoleRef's strings, a
	// TokenRequest's token): the field manager owns one only where the
	// object's value differs from the zero's.
	bindings := &Kind{Group: "rbac.authorization.k8s.io", Versions: []string{"v1"}, Kind: "RoleBinding", Namespaced: true,
		Typed: func() runtime.Object { return &rbacv1.RoleBinding{} }}
	SetTypeConverters(configMaps, pods, bindings)

	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	labels := func() map[string]any {
		m := map[string]any{}
		for _, k := range []string{"app", "x.io/tier"}[:rng.IntN(3)] {
			m[k] = fmt.Sprint(rng.IntN(1000))
		}
		return m
	}
	meta := func() map[string]any {
		m := map[string]any{"name": fmt.Sprintf("o-%d", rng.IntN(1e6))}
		if rng.IntN(2) == 0 {
			m["labels"] = labels()
		}
		if rng.IntN(4) == 0 {
			m["annotations"] = map[string]any{pick("a", "b"): pick("", "v")}
		}
		if rng.IntN(8) == 0 {
			m["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "X", "name": "o", "uid": pick("u1", "u2")}}
		}
		if rng.IntN(16) == 0 {
			m["finalizers"] = []any{pick("f", "g")}
		}
		return m
	}
	configMap := func() map[string]any {
		o := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta()}
		if rng.IntN(3) > 0 {
			data := map[string]any{}
			for range rng.IntN(3) {
				data[pick("payload", "a", "b")] = fmt.Sprint(rng.IntN(100))
			}
			o["data"] = data
		}
		if rng.IntN(6) == 0 {
			o["immutable"] = rng.IntN(2) == 0
		}
		return o
	}
	pod := func() map[string]any {
		var containers []any
		for i := range 1 + rng.IntN(4)/3 {
			c := map[string]any{"name": fmt.Sprintf("c%d", i), "image": "img:1"}
			if rng.IntN(4) == 0 {
				c["env"] = []any{map[string]any{"name": pick("A", "B"), "value": "1"}}
			}
			if rng.IntN(4) == 0 {
				c["ports"] = []any{map[string]any{"containerPort": int64(80), "protocol": pick("TCP", "UDP")}}
			}
			if rng.IntN(6) == 0 {
				c["args"] = []any{pick("a", "b"), pick("a", "c")}
			}
			containers = append(containers, c)
		}
		spec := map[string]any{"containers": containers}
		if rng.IntN(3) == 0 {
			spec["nodeSelector"] = map[string]any{"disk": pick("ssd", "hdd")}
		}
		if rng.IntN(3) == 0 {
			spec["restartPolicy"] = pick("Always", "Never")
		}
		// Pods vary enough in their lists; their metadata is simpler.
		md := map[string]any{"generateName": "p-", "labels": labels()}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}
	}
	widget := func() map[string]any {
		spec := map[string]any{}
		switch rng.IntN(4) {
		case 0:
			spec["n"] = int64(rng.IntN(5))
		case 1:
			spec["n"] = float64(rng.IntN(5)) + 0.5
		case 2:
			spec["n"] = fmt.Sprint(rng.IntN(5))
		}
		if rng.IntN(2) == 0 {
			spec["list"] = []any{int64(1), pick("a", "b"), true, nil}
		}
		if rng.IntN(2) == 0 {
			spec["m"] = map[string]any{pick("k", "l"): rng.IntN(2) == 0}
		}
		return map[string]any{"apiVersion": "x.io/v1", "kind": "Widget", "metadata": meta(), "spec": spec}
	}

	binding := func() map[string]any {
		roleRef := map[string]any{"apiGroup": pick("", "rbac.authorization.k8s.io"), "kind": pick("", "Role"), "name": pick("", "r", "s")}
		o := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(), "roleRef": roleRef}
		if rng.IntN(2) == 0 {
			o["subjects"] = []any{map[string]any{"kind": "User", "name": pick("", "u")}}
		}
		return o
	}

	for _, tc := range []struct {
		kind *Kind
		gen  func() map[string]any
	}{{configMaps, configMap}, {pods, pod}, {widgets, widget}, {bindings, binding}} {
		t.Run(tc.kind.Kind, func(t *testing.T) {
			km, err := (&Resource{}).kindManager(tc.kind, "v1", "")
			if err != nil {
				t.Fatal(err)
			}
			hits := 0
			for i := range 600 {
				o := tc.gen()
				manager := pick("tester", "other")
				obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(o)}
				key, _ := createKey(nil, manager, obj.Object)
				km.creates.mu.RLock()
				_, hit := km.creates.m[string(key)]
				km.creates.mu.RUnlock()
				if hit {
					hits++
				}
				before := time.Now().UTC().Truncate(time.Second)
				got, entries, known := km.create(tc.kind, "v1", obj, manager)
				want := km.fm.UpdateNoErrors(emptyOf(tc.kind, "v1"), &unstructured.Unstructured{Object: runtime.DeepCopyJSON(o)}, manager).(*unstructured.Unstructured)
				if !known {
					t.Fatalf("object %d: entries not known", i)
				}
				if g, w := validateMeta(tc.kind, metaView{got, entries}), validateMeta(tc.kind, got); !equality.Semantic.DeepEqual(g, w) {
					t.Errorf("object %d: validation of the entries: %v, of the map: %v", i, g, w)
				}
				for _, e := range got.GetManagedFields() {
					if e.Time == nil || e.Time.Time.Before(before) {
						t.Errorf("object %d (hit %v): entry time %v, want now (%v or later)", i, hit, e.Time, before)
					}
				}
				sameTimes(t, got, want)
				if !equality.Semantic.DeepEqual(got.Object, want.Object) {
					g, _ := utiljson.Marshal(got.Object)
					w, _ := utiljson.Marshal(want.Object)
					t.Fatalf("object %d (hit %v):\ngot  %s\nwant %s", i, hit, g, w)
				}
			}
			t.Logf("%d of 600 creates found their shape", hits)
			// The pools are small: shapes come back, and new ones keep coming.
			if hits < 50 || hits > 550 {
				t.Errorf("%d of 600 creates found their shape, want both hits and misses", hits)
			}
		})
	}
}

// Objects that differ in what decides their fields get different keys;
// objects that differ only in non-zero values outside lists get the same
// key.
func TestCreateKey(t *testing.T) {
	key := func(manager, s string) string {
		t.Helper()
		var m map[string]any
		if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		k, ok := createKey(nil, manager, m)
		if !ok {
			t.Fatalf("%s: no key", s)
		}
		return string(k)
	}
	same := [][2]string{
		{`{"data":{"a":"1"}}`, `{"data":{"a":"2"}}`},
		{`{"a":1,"b":true,"c":0.5}`, `{"b":true,"a":2,"c":1.5}`},
		{`{"l":[{"k":"v"}]}`, `{"l":[{"k":"v"}]}`},
	}
	for _, p := range same {
		if key("m", p[0]) != key("m", p[1]) {
			t.Errorf("%s and %s: different keys", p[0], p[1])
		}
	}
	different := [][2]string{
		{`{"data":{"a":"1"}}`, `{"data":{"b":"1"}}`},
		{`{"a":"1"}`, `{"a":1}`},
		{`{"a":1}`, `{"a":1.5}`},
		{`{"a":null}`, `{"a":{}}`},
		{`{"a":{}}`, `{"a":[]}`},
		{`{"a":{}}`, `{}`},
		{`{"l":[{"k":"v"}]}`, `{"l":[{"k":"w"}]}`},
		{`{"l":["a","b"]}`, `{"l":["b","a"]}`},
		{`{"l":[true]}`, `{"l":[false]}`},
		{`{"l":[1]}`, `{"l":[2]}`},
		{`{"ab":{"c":"1"}}`, `{"a":{"bc":"1"}}`},
		// A zero value outside a list is not another.
		{`{"a":""}`, `{"a":"x"}`},
		{`{"a":0}`, `{"a":1}`},
		{`{"a":0.0}`, `{"a":0.5}`},
		{`{"a":false}`, `{"a":true}`},
	}
	for _, p := range different {
		if key("m", p[0]) == key("m", p[1]) {
			t.Errorf("%s and %s: the same key", p[0], p[1])
		}
	}
	if key("m", `{}`) == key("n", `{}`) {
		t.Error("managers m and n: the same key")
	}
	// Nothing for objects with managedFields of their own or values JSON
	// does not decode to.
	for _, o := range []map[string]any{
		{"metadata": map[string]any{"managedFields": nil}},
		{"a": int32(1)},
		{"a": []string{"x"}},
	} {
		if _, ok := createKey(nil, "m", o); ok {
			t.Errorf("%v: got a key", o)
		}
	}
}

// A full memo starts over rather than grow, and one that filled up
// without hits rests: the next creates go straight to the field manager.
func TestCreateMemoIsBoundedAndRests(t *testing.T) {
	configMaps := &Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	SetTypeConverters(configMaps)
	km, err := (&Resource{}).kindManager(configMaps, "v1", "")
	if err != nil {
		t.Fatal(err)
	}
	create := func(key string) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "a"}, "data": map[string]any{key: "x"}}}
		if _, _, known := km.create(configMaps, "v1", obj, "m"); !known {
			t.Fatal("entries not known")
		}
	}
	// Shapes seen often enough: the memo starts over, and stays in use.
	for i := range 3 * createMemoSize {
		create(strconv.Itoa(i % (createMemoSize / 4)))
		create(strconv.Itoa(createMemoSize + i))
		if n := len(km.creates.m); n > createMemoSize || n == 0 {
			t.Fatalf("after %d creates the memo holds %d", i+1, n)
		}
	}
	if r := km.creates.rest.Load(); r != 0 {
		t.Fatalf("rests for %d creates with half of them hits", r)
	}
	// New shapes only: it rests once it has filled up with them.
	for i := 0; km.creates.rest.Load() == 0; i++ {
		if i == 2*createMemoSize {
			t.Fatalf("%d creates of new shapes, and the memo does not rest", i)
		}
		create("new-" + strconv.Itoa(i))
	}
	if r := km.creates.rest.Load(); r != createMemoRest {
		t.Fatalf("rest %d, want %d", r, createMemoRest)
	}
	for i := range createMemoRest {
		create("rest-" + strconv.Itoa(i))
		if n := len(km.creates.m); n != 0 {
			t.Fatalf("create %d of the rest: the memo holds %d", i, n)
		}
	}
	create("after")
	if n := len(km.creates.m); n != 1 {
		t.Fatalf("after the rest: the memo holds %d, want 1", n)
	}
}

// BenchmarkCreateManagedFields: the managedFields of a create of a small
// ConfigMap from the field manager, from the memo, and from the memo
// when every object has a new shape (a miss, then the field manager).
func BenchmarkCreateManagedFields(b *testing.B) {
	configMaps := &Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	SetTypeConverters(configMaps)
	obj := func(key string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm-00001", "namespace": "bench", "labels": map[string]any{"app": "kplane-bench"}},
			"data":     map[string]any{key: "x"}}}
	}
	b.Run("field-manager", func(b *testing.B) {
		km, _ := (&Resource{}).kindManager(configMaps, "v1", "")
		b.ReportAllocs()
		for b.Loop() {
			live, _ := creater{}.New(configMaps.GroupVersionKind("v1"))
			updateManagedEntries(km.fm, live.(*unstructured.Unstructured), obj("payload"), "bench")
		}
	})
	b.Run("memo-hit", func(b *testing.B) {
		km, _ := (&Resource{}).kindManager(configMaps, "v1", "")
		b.ReportAllocs()
		for b.Loop() {
			km.create(configMaps, "v1", obj("payload"), "bench")
		}
	})
	b.Run("memo-miss", func(b *testing.B) {
		km, _ := (&Resource{}).kindManager(configMaps, "v1", "")
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			km.create(configMaps, "v1", obj(strconv.Itoa(i)), "bench")
		}
	})
}
