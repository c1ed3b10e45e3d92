package registry

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// libraryMeta is validateMeta without the plain path.
func libraryMeta(k *Kind, obj metav1.Object) field.ErrorList {
	nameFn := k.ValidateName
	if nameFn == nil {
		nameFn = metavalidation.NameIsDNSSubdomain
	}
	return metavalidation.ValidateObjectMetaAccessor(obj, k.Namespaced, nameFn, field.NewPath("metadata"))
}

// metaGen makes metadata near every rule's edge: names and keys from
// alphabets with and without the characters each rule refuses, lengths
// around each limit, values of the wrong JSON type, and the fields the
// plain path leaves to the library.
type metaGen struct{ r *rand.Rand }

func (g metaGen) pick(options ...string) string { return options[g.r.IntN(len(options))] }

func (g metaGen) word(maxLen int) string {
	if g.r.IntN(5) != 0 {
		// Mostly what the rules take: letters and digits, '-' inside.
		n := 1 + g.r.IntN(maxLen)
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcxyz0189"[g.r.IntN(10)]
			if i > 0 && i < n-1 && g.r.IntN(6) == 0 {
				b[i] = '-'
			}
		}
		return string(b)
	}
	alphabet := g.pick("abcxyz019", "abc-.", "abc-._", "aBc09-", "abc/", "a b\x01é")
	n := g.r.IntN(maxLen + 1)
	switch g.r.IntN(8) {
	case 0:
		n = g.pick1(62, 63, 64, 252, 253, 254, 127, 128, 129)
	case 1:
		n = 0
	}
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

func (g metaGen) pick1(options ...int) int { return options[g.r.IntN(len(options))] }

func (g metaGen) value() any {
	switch g.r.IntN(40) {
	case 0:
		return nil
	case 1:
		return int64(3)
	default:
		return g.word(12)
	}
}

func (g metaGen) stringMap() any {
	switch g.r.IntN(40) {
	case 0:
		return nil
	case 1:
		return "not a map"
	}
	m := map[string]any{}
	for range g.r.IntN(4) {
		key := g.word(10)
		if g.r.IntN(6) == 0 {
			key = g.pick("example.com", "Example.com", "a..b", "x") + "/" + key
		}
		m[key] = g.value()
	}
	if g.r.IntN(300) == 0 {
		m["big"] = strings.Repeat("x", 256*1024)
	}
	return m
}

func (g metaGen) managedFields() any {
	if g.r.IntN(40) == 0 {
		return "not a list"
	}
	var items []any
	for range g.r.IntN(3) {
		e := map[string]any{
			"manager":    g.pick("kubectl", "kubectl", "kubectl", "", "bad\x00manager", strings.Repeat("m", 129), "ünicode"),
			"operation":  g.pick("Update", "Apply", "Update", "Apply", "", "Patch"),
			"apiVersion": "v1",
			"time":       "2026-11-25T03:00:00Z",
			"fieldsType": g.pick("FieldsV1", "FieldsV1", "", "FieldsV2"),
			"fieldsV1":   map[string]any{"f:data": map[string]any{}},
		}
		switch g.r.IntN(16) {
		case 0:
			e["subresource"] = g.pick("status", strings.Repeat("s", 257))
		case 1:
			e["extra"] = "x"
		}
		items = append(items, e)
	}
	return items
}

func (g metaGen) metadata() map[string]any {
	md := map[string]any{}
	if g.r.IntN(20) != 0 {
		md["name"] = g.word(20)
	}
	if g.r.IntN(10) != 0 {
		md["namespace"] = g.word(12)
	}
	fields := map[string]func() any{
		"labels":        g.stringMap,
		"annotations":   g.stringMap,
		"managedFields": g.managedFields,
		"generation":    func() any { return []any{int64(1), int64(0), int64(2), int64(-1), 1.5}[g.r.IntN(5)] },
		"generateName":  func() any { return g.word(10) },
		"ownerReferences": func() any {
			return []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}}
		},
		"finalizers": func() any { return []any{g.word(10)} },
		"uid":        func() any { return "0b6c6d5e" },
		"creationTimestamp": func() any {
			return "2026-11-25T03:00:00Z"
		},
		"deletionTimestamp": func() any { return "2026-11-25T03:00:00Z" },
	}
	// Sorted names: the draws must not depend on map order.
	for _, name := range []string{"annotations", "creationTimestamp", "deletionTimestamp", "finalizers", "generateName", "generation", "labels", "managedFields", "ownerReferences", "uid"} {
		odds := 2 // the fields the plain path takes: one in two
		switch name {
		case "deletionTimestamp", "finalizers", "generateName", "ownerReferences":
			odds = 10 // the ones it leaves to the library: fewer
		}
		if g.r.IntN(odds) == 0 {
			md[name] = fields[name]()
		}
	}
	return md
}

func TestValidateMetaMatchesTheLibrary(t *testing.T) {
	kinds := []*Kind{
		{Kind: "Namespaced", Namespaced: true},
		{Kind: "ClusterScoped"},
		{Kind: "OwnName", Namespaced: true, ValidateName: metavalidation.NameIsDNSLabel},
	}
	g := metaGen{rand.New(rand.NewPCG(7, 11))}
	plain := 0
	const n = 20000
	for i := range n {
		k := kinds[i%len(kinds)]
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "X", "metadata": g.metadata()}}
		var meta metav1.Object = obj
		if i%4 == 0 {
			// As create hands it over: the field manager's entries typed.
			meta = metaView{obj, []metav1.ManagedFieldsEntry{{Manager: g.pick("m", "bad\tm"), Operation: metav1.ManagedFieldsOperationType(g.pick("Update", "Apply", "Bogus")), FieldsType: "FieldsV1"}}}
		}
		want := libraryMeta(k, meta)
		if metaPlain(k, meta) {
			plain++
			if len(want) != 0 {
				t.Fatalf("plain metadata the library refuses (kind %s): %v\n%#v", k.Kind, want, obj.Object["metadata"])
			}
		}
		// The library walks labels and annotations in map order: compare
		// the errors as sets.
		if got := validateMeta(k, meta); !slices.Equal(errorStrings(got), errorStrings(want)) {
			t.Fatalf("validateMeta = %v, library %v", got, want)
		}
	}
	// The plain path must be taken, or the test proves nothing about it.
	if plain < n/40 {
		t.Fatalf("only %d of %d objects took the plain path", plain, n)
	}
	t.Logf("%d of %d objects took the plain path", plain, n)
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	slices.Sort(out)
	return out
}

func TestValidateMetaPlainCases(t *testing.T) {
	ns := &Kind{Kind: "ConfigMap", Namespaced: true}
	for _, tc := range []struct {
		name  string
		md    map[string]any
		plain bool
	}{
		{"a create", map[string]any{"name": "bench-1", "namespace": "default", "labels": map[string]any{"app": "kplane-bench", "example.com/tier": ""},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": `{"a":1}`}, "uid": "x", "creationTimestamp": "2026-11-25T03:00:00Z",
			"managedFields": []any{map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-11-25T03:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": map[string]any{}}}}, true},
		{"dotted name", map[string]any{"name": "a.b-c.d", "namespace": "default"}, true},
		{"no namespace", map[string]any{"name": "a"}, false},
		{"upper-case name", map[string]any{"name": "A", "namespace": "default"}, false},
		{"finalizers", map[string]any{"name": "a", "namespace": "default", "finalizers": []any{"x"}}, false},
		{"generateName", map[string]any{"generateName": "a-", "namespace": "default"}, false},
		{"label value too long", map[string]any{"name": "a", "namespace": "default", "labels": map[string]any{"k": strings.Repeat("v", 64)}}, false},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"metadata": tc.md}}
		if got := metaPlain(ns, obj); got != tc.plain {
			t.Errorf("%s: metaPlain = %v, want %v", tc.name, got, tc.plain)
		}
		if tc.plain && len(libraryMeta(ns, obj)) != 0 {
			t.Errorf("%s: the library refuses it: %v", tc.name, libraryMeta(ns, obj))
		}
	}
}

// An update's metadata checks give what the library's give: next is cur
// with its resourceVersion and some of the changes an update may or may
// not make.
func TestValidateMetaUpdateMatchesTheLibrary(t *testing.T) {
	kinds := []*Kind{{Kind: "Namespaced", Namespaced: true}, {Kind: "ClusterScoped"}}
	g := metaGen{rand.New(rand.NewPCG(13, 17))}
	mutations := []func(md map[string]any){
		func(md map[string]any) {},
		func(md map[string]any) {},
		func(md map[string]any) {},
		func(md map[string]any) { md["name"] = g.word(8) },
		func(md map[string]any) { md["namespace"] = g.word(8) },
		func(md map[string]any) { md["uid"] = "other" },
		func(md map[string]any) { delete(md, "uid") },
		func(md map[string]any) { md["creationTimestamp"] = "2026-11-25T04:00:00Z" },
		func(md map[string]any) { md["creationTimestamp"] = int64(5) },
		func(md map[string]any) { delete(md, "resourceVersion") },
		func(md map[string]any) { md["resourceVersion"] = "" },
		func(md map[string]any) { md["generation"] = int64(0) },
		func(md map[string]any) { md["generation"] = int64(9) },
		func(md map[string]any) { md["deletionTimestamp"] = "2026-11-25T04:00:00Z" },
		func(md map[string]any) { md["deletionGracePeriodSeconds"] = int64(30) },
		func(md map[string]any) { md["labels"] = g.stringMap() },
		func(md map[string]any) { md["finalizers"] = []any{"example.com/f"} },
	}
	plain := 0
	const n = 20000
	for i := range n {
		k := kinds[i%len(kinds)]
		cmd := g.metadata()
		delete(cmd, "generateName")
		cmd["resourceVersion"] = "41"
		if g.r.IntN(2) == 0 {
			cmd["uid"] = "0b6c6d5e"
			cmd["creationTimestamp"] = "2026-11-25T03:00:00Z"
		}
		cur := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "X", "metadata": cmd}}
		next := cur.DeepCopy()
		nmd := next.Object["metadata"].(map[string]any)
		mutations[g.r.IntN(len(mutations))](nmd)
		if g.r.IntN(4) == 0 {
			mutations[g.r.IntN(len(mutations))](cmd)
		}
		want := libraryMeta(k, next)
		want = append(metavalidation.ValidateObjectMetaAccessorUpdate(next, cur, field.NewPath("metadata")), want...)
		if metaPlain(k, next) && unchangedPlain(next, cur) {
			plain++
			if len(want) != 0 {
				t.Fatalf("plain update the library refuses: %v\ncur  %#v\nnext %#v", want, cmd, nmd)
			}
		}
		if got := validateMetaUpdate(k, next, cur); !slices.Equal(errorStrings(got), errorStrings(want)) {
			t.Fatalf("validateMetaUpdate = %v, library %v", got, want)
		}
	}
	if plain < n/40 {
		t.Fatalf("only %d of %d updates took the plain path", plain, n)
	}
	t.Logf("%d of %d updates took the plain path", plain, n)
}
