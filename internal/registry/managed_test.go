package registry

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// managedFieldsEntryMap must write an entry exactly as apimachinery's
// converter does (what Unstructured.SetManagedFields stores), or refuse.
func TestManagedFieldsEntryMapMatchesTheConverter(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 23, 16, 30, 5, 123, time.FixedZone("x", 3600)))
	zero := metav1.Time{}
	for _, e := range []metav1.ManagedFieldsEntry{
		{},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:a":{}},"f:metadata":{"f:labels":{"f:x":{}}}}`)},
		{Manager: "m", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &zero, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{}`), Subresource: "status"},
		{Manager: "m", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}}`)},
	} {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&e)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := managedFieldsEntryMap(&e)
		if !ok {
			t.Fatalf("%+v: refused", e)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("got  %#v\nwant %#v", got, want)
		}
	}
	for _, raw := range []string{"", "null", `"x"`} {
		e := metav1.ManagedFieldsEntry{FieldsV1: metav1.NewFieldsV1(raw)}
		if _, ok := managedFieldsEntryMap(&e); ok {
			t.Errorf("fieldsV1 %q: taken, want it left to the converter", raw)
		}
	}
}

// updateManaged must leave an object exactly as the field manager's
// UpdateNoErrors leaves it on a plain Unstructured: creates and updates,
// keyed and atomic lists, a kind with status, a status write, managedFields
// sent by the client, and owners from apply and other managers.
func TestUpdateManagedMatchesTheFieldManager(t *testing.T) {
	configMaps := &Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	services := &Kind{Versions: []string{"v1"}, Kind: "Service", Status: true, Typed: func() runtime.Object { return &corev1.Service{} }}
	pods := &Kind{Versions: []string{"v1"}, Kind: "Pod", Status: true, Typed: func() runtime.Object { return &corev1.Pod{} }}
	widgets := &Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Widget"}
	SetTypeConverters(configMaps, services, pods)

	applied := `"managedFields":[{"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}},` +
		`{"manager":"other","operation":"Update","apiVersion":"v1","time":"2026-01-02T03:04:05Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:b":{}}}}]`
	for _, tc := range []struct {
		name        string
		manager     string // "" is "tester"
		kind        *Kind
		subresource string
		live, obj   string // live "" is a create
	}{
		{"configmap create", "", configMaps, "", "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","labels":{"x":"1"},"annotations":{"y":""}},"data":{"a":"1","b":"2"},"binaryData":{"c":"AAE="}}`},
		{"configmap create, manager name too long", strings.Repeat("m", 200), configMaps, "", "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"},"data":{"a":"1"}}`},
		{"configmap create, name only", "", configMaps, "", "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}`},
		{"configmap create with managedFields", "", configMaps, "", "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a",` + applied + `},"data":{"a":"1","b":"2","c":"3"}}`},
		{"configmap create with bad managedFields", "", configMaps, "", "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:data":5}}]},"data":{"a":"1"}}`},
		{"configmap update over apply", "", configMaps, "",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u","resourceVersion":"5",` + applied + `},"data":{"a":"1","b":"2"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u","resourceVersion":"5"},"data":{"a":"9","b":"2","d":"4"}}`},
		{"service create", "", services, "", "",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"selector":{"app":"x"},"ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080},{"name":"dns","port":53,"protocol":"UDP"}]},"status":{"loadBalancer":{}}}`},
		{"service status", "", services, "status",
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","uid":"u"},"spec":{"ports":[{"port":80,"protocol":"TCP"}]}}`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","uid":"u"},"spec":{"ports":[{"port":80,"protocol":"TCP"}]},"status":{"loadBalancer":{"ingress":[{"ip":"10.0.0.1"}]}}}`},
		{"pod create", "", pods, "", "",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"u1"}],"finalizers":["f"]},"spec":{"containers":[{"name":"c","image":"i","args":["a","b"],"env":[{"name":"E","value":"v"}],"ports":[{"containerPort":80,"protocol":"TCP"}]}],"tolerations":[{"key":"k","operator":"Exists"}]}}`},
		{"custom resource update", "", widgets, "",
			`{"apiVersion":"x.io/v1","kind":"Widget","metadata":{"name":"w","uid":"u"},"spec":{"a":[1,2],"m":{"k":"v"}}}`,
			`{"apiVersion":"x.io/v1","kind":"Widget","metadata":{"name":"w","uid":"u"},"spec":{"a":[1,3],"m":{"k":"v","l":true}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm, err := (&Resource{}).fieldManager(tc.kind, "v1", tc.subresource)
			if err != nil {
				t.Fatal(err)
			}
			newLive := func() *unstructured.Unstructured {
				if tc.live == "" {
					live, _ := creater{}.New(tc.kind.GroupVersionKind("v1"))
					return live.(*unstructured.Unstructured)
				}
				return parseObject(t, tc.live)
			}
			manager := tc.manager
			if manager == "" {
				manager = "tester"
			}
			got, entries, known := updateManagedEntries(fm, newLive(), parseObject(t, tc.obj), manager)
			want := fm.UpdateNoErrors(newLive(), parseObject(t, tc.obj), manager).(*unstructured.Unstructured)
			// Validation of the entries at hand says what validation of
			// the map says.
			if known {
				if g, w := validateMeta(tc.kind, metaView{got, entries}), validateMeta(tc.kind, got); !equality.Semantic.DeepEqual(g, w) {
					t.Errorf("validation of the entries: %v, of the map: %v", g, w)
				}
				if tc.manager != "" && len(validateMeta(tc.kind, got)) == 0 {
					t.Errorf("manager %q: no validation error", tc.manager)
				}
			} else if !strings.Contains(tc.name, "bad managedFields") {
				t.Errorf("entries not known")
			}
			sameTimes(t, got, want)
			if !equality.Semantic.DeepEqual(got.Object, want.Object) {
				g, _ := utiljson.Marshal(got.Object)
				w, _ := utiljson.Marshal(want.Object)
				t.Errorf("got  %s\nwant %s", g, w)
			}
			if tc.name == "configmap create" && len(got.GetManagedFields()) != 1 {
				t.Errorf("managedFields %v, want one entry", got.GetManagedFields())
			}
		})
	}
}

func parseObject(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// sameTimes gives got's entries the times of want's, and want's order
// (the field manager sorts the entries by time): the two writes ran a
// moment apart, perhaps across a second. Entries are matched by manager,
// operation, subresource and apiVersion; without a match for each,
// nothing changes and the comparison reports it.
func sameTimes(t *testing.T, got, want *unstructured.Unstructured) {
	t.Helper()
	g, _, _ := unstructured.NestedSlice(got.Object, "metadata", "managedFields")
	w, _, _ := unstructured.NestedSlice(want.Object, "metadata", "managedFields")
	if len(g) != len(w) || len(g) == 0 {
		return
	}
	key := func(e any) string {
		m, _ := e.(map[string]any)
		return fmt.Sprint(m["manager"], "|", m["operation"], "|", m["subresource"], "|", m["apiVersion"])
	}
	at := make(map[string]int, len(w))
	for i, e := range w {
		at[key(e)] = i
	}
	ordered := make([]any, len(w))
	for _, e := range g {
		i, ok := at[key(e)]
		if !ok || ordered[i] != nil {
			return
		}
		ordered[i] = e
	}
	for i := range ordered {
		ge, ok1 := ordered[i].(map[string]any)
		we, ok2 := w[i].(map[string]any)
		if ok1 && ok2 && ge["time"] != nil && we["time"] != nil {
			ge["time"] = we["time"]
		}
	}
	if err := unstructured.SetNestedSlice(got.Object, ordered, "metadata", "managedFields"); err != nil {
		t.Fatal(err)
	}
}

// managedObject.GetManagedFields reads what Unstructured.GetManagedFields
// reads, for entries as the field manager writes them and for odd ones
// (which it leaves to Unstructured's): random lists of entries with field
// sets, awkward keys, times in and out of UTC, values of other types.
func TestGetManagedFieldsMatchesUnstructured(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	keys := []string{"f:data", ".", "f:metadata", `k:{"name":"a<&>"}`, "v:5", "i:0", "f:é", "f:\u2028"}
	var tree func(depth int) any
	tree = func(depth int) any {
		if depth > 0 && rng.IntN(50) == 0 {
			return []any{"x", int64(1), 1.5, nil, true}[rng.IntN(5)]
		}
		m := map[string]any{}
		if depth < 4 {
			for range rng.IntN(4) {
				m[keys[rng.IntN(len(keys))]] = tree(depth + 1)
			}
		}
		return m
	}
	odd := []any{nil, int64(3), true, []any{}, map[string]any{}}
	fast := 0
	for i := range 3000 {
		var items []any
		for range rng.IntN(4) {
			e := map[string]any{}
			for _, k := range []string{"manager", "operation", "apiVersion", "fieldsType", "subresource"} {
				if rng.IntN(3) > 0 {
					e[k] = []string{"m", "Update", "Apply", "v1", "FieldsV1", "status", ""}[rng.IntN(7)]
				}
			}
			if rng.IntN(3) > 0 {
				e["time"] = []any{"2026-11-25T05:06:39Z", "2026-11-25T05:06:39Z", "2026-11-25T06:06:39+01:00", "2026-11-25T05:06:39.5Z", "", "x"}[rng.IntN(6)]
			}
			if rng.IntN(4) > 0 {
				e["fieldsV1"] = tree(0)
			}
			if rng.IntN(30) == 0 {
				e[[]string{"manager", "time", "fieldsV1", "unknown"}[rng.IntN(4)]] = odd[rng.IntN(len(odd))]
			}
			items = append(items, e)
		}
		md := map[string]any{"name": "a", "managedFields": items}
		switch rng.IntN(40) {
		case 0:
			delete(md, "managedFields")
		case 1:
			md["managedFields"] = nil
		case 2:
			md["managedFields"] = append(items, "not an entry")
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
		want := u.DeepCopy().GetManagedFields()
		got := (&managedObject{Unstructured: u}).GetManagedFields()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d: %v\ngot  %#v\nwant %#v", i, items, got, want)
		}
		if _, ok := ManagedFieldsEntries(u.Object); ok {
			fast++
		}
	}
	t.Logf("read directly: %d of 3000", fast)
	if fast < 1000 {
		t.Errorf("read directly: %d of 3000, want more", fast)
	}
}

// TestUpdateManagedHistories runs random histories of writes (updates of
// the main resource and through /status, by three managers, bodies with
// and without managedFields, a reset to []) through updateManagedFor and
// through the field manager called with the objects as they are, and
// requires the same object after every write: the live object handed over
// without its managedFields, and both without the part the kind's field
// manager ignores (status on the main resource, spec through /status),
// change nothing.
func TestUpdateManagedHistories(t *testing.T) {
	services := &Kind{Versions: []string{"v1"}, Kind: "Service", Status: true, Typed: func() runtime.Object { return &corev1.Service{} }}
	configMaps := &Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	gadgets := &Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Gadget", Status: true}
	SetTypeConverters(services, configMaps)
	rng := rand.New(rand.NewPCG(11, 12))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	// mutate changes, adds or removes a few fields of the body.
	mutate := func(k *Kind, obj map[string]any) {
		md := obj["metadata"].(map[string]any)
		for range 1 + rng.IntN(3) {
			switch rng.IntN(4) {
			case 0:
				labels, _ := md["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
				}
				if rng.IntN(3) == 0 {
					delete(labels, pick("a", "b"))
				} else {
					labels[pick("a", "b", "c")] = pick("1", "2")
				}
				md["labels"] = labels
			case 1, 2:
				switch k.Kind {
				case "ConfigMap":
					data, _ := obj["data"].(map[string]any)
					if data == nil {
						data = map[string]any{}
					}
					if rng.IntN(3) == 0 {
						delete(data, pick("x", "y"))
					} else {
						data[pick("x", "y", "z")] = pick("1", "2", "3")
					}
					obj["data"] = data
				case "Service":
					spec := obj["spec"].(map[string]any)
					spec["selector"] = map[string]any{"app": pick("a", "b")}
					ports := []any{map[string]any{"name": "http", "port": int64(80), "protocol": "TCP"}}
					if rng.IntN(2) == 0 {
						ports = append(ports, map[string]any{"name": "dns", "port": int64(53), "protocol": "UDP"})
					}
					spec["ports"] = ports
				default:
					spec := obj["spec"].(map[string]any)
					spec[pick("a", "b")] = pick("1", "2")
				}
			case 3:
				switch k.Kind {
				case "Service":
					obj["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": pick("10.0.0.1", "10.0.0.2")}}}}
				case "Gadget":
					st, _ := obj["status"].(map[string]any)
					if st == nil {
						st = map[string]any{}
					}
					st[pick("happy", "note")] = pick("yes", "no")
					obj["status"] = st
				}
			}
		}
	}
	initial := map[string]string{
		"ConfigMap": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"1"},"data":{"x":"1"}}`,
		"Service":   `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"n","uid":"u","resourceVersion":"1"},"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP"}]}}`,
		"Gadget":    `{"apiVersion":"x.io/v1","kind":"Gadget","metadata":{"name":"g","namespace":"n","uid":"u","resourceVersion":"1"},"spec":{"a":"1"}}`,
	}
	writes := 0
	shared := 0 // writes after which two managers or more own fields
	for range 150 {
		k := []*Kind{configMaps, services, gadgets}[rng.IntN(3)]
		// Created through the field manager: an object without
		// managedFields never gets any from an update (upstream's too).
		empty, _ := creater{}.New(k.GroupVersionKind("v1"))
		fm, err := (&Resource{}).fieldManager(k, "v1", "")
		if err != nil {
			t.Fatal(err)
		}
		cur := fm.UpdateNoErrors(empty, parseObject(t, initial[k.Kind]), "creator").(*unstructured.Unstructured)
		for range 6 {
			sub := ""
			if k.Status && rng.IntN(2) == 0 {
				sub = "status"
			}
			fm, err := (&Resource{}).fieldManager(k, "v1", sub)
			if err != nil {
				t.Fatal(err)
			}
			body := cur.DeepCopy()
			mutate(k, body.Object)
			switch rng.IntN(12) {
			case 0, 1, 2:
				unstructured.RemoveNestedField(body.Object, "metadata", "managedFields")
			case 3:
				body.SetManagedFields([]metav1.ManagedFieldsEntry{}) // a reset
			}
			manager := pick("alpha", "beta", "gamma")
			want := updateMatchesLibrary(t, fmt.Sprintf("%s write %d", k.Kind, writes), k, sub, fm, cur, body, manager)
			writes++
			cur = want
			if len(want.GetManagedFields()) >= 2 {
				shared++
			}
		}
	}
	t.Logf("%d writes, %d of them leaving several owners", writes, shared)
	if shared < writes/2 {
		t.Errorf("only %d of %d writes leave several owners: the histories should build them up", shared, writes)
	}
}

// updateMatchesLibrary writes body over cur as manager through
// subresource sub with updateManagedFor, fails the test unless that
// leaves cur as it was and gives what the field manager gives fed whole
// objects, and returns the field manager's result.
func updateMatchesLibrary(t *testing.T, what string, k *Kind, sub string, fm *managedfields.FieldManager, cur, body *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	t.Helper()
	live := cur.DeepCopy()
	got := updateManagedFor(k, k.StorageVersion(), sub, fm, live, body.DeepCopy(), manager)
	if !equality.Semantic.DeepEqual(live.Object, cur.Object) {
		t.Fatalf("%s: the live object changed", what) // update hands it over uncopied
	}
	want := fm.UpdateNoErrors(cur.DeepCopy(), body.DeepCopy(), manager).(*unstructured.Unstructured)
	sameTimes(t, got, want)
	if !equality.Semantic.DeepEqual(got.Object, want.Object) {
		g, _ := utiljson.Marshal(got.Object)
		w, _ := utiljson.Marshal(want.Object)
		c, _ := utiljson.Marshal(cur.Object)
		t.Fatalf("%s by %s through %q:\nlive %s\ngot  %s\nwant %s", what, manager, sub, c, g, w)
	}
	return want
}
