package registry

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/randfill"
)

// A merge patch applied on the maps gives what the library gives on the
// JSON followed by the decode: random objects of several built-in kinds
// (as the API stores them), patched with pieces of other random objects,
// nulls, and values of other types.
func TestMergePlainMatchesTheLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []*Kind{
		{Kind: "ConfigMap", Versions: []string{"v1"}, Typed: func() runtime.Object { return &corev1.ConfigMap{} }},
		{Kind: "Event", Versions: []string{"v1"}, Typed: func() runtime.Object { return &corev1.Event{} }},
		{Kind: "Namespace", Versions: []string{"v1"}, Typed: func() runtime.Object { return &corev1.Namespace{} }},
		{Kind: "Lease", Group: "coordination.k8s.io", Versions: []string{"v1"}, Typed: func() runtime.Object { return &coordinationv1.Lease{} }},
		{Kind: "Role", Group: "rbac.authorization.k8s.io", Versions: []string{"v1"}, Typed: func() runtime.Object { return &rbacv1.Role{} }},
		// A custom resource, its objects random Events relabelled.
		{Kind: "Widget", Group: "x.io", Versions: []string{"v1"}},
	} {
		t.Run(k.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(k.Kind))).NilChance(0.6).NumElements(0, 2).MaxDepth(5)
			canonical := func() map[string]any {
				for {
					var obj runtime.Object = &corev1.Event{}
					if k.Typed != nil {
						obj = k.Typed()
					}
					f.Fill(obj)
					body, _ := json.Marshal(obj)
					u, _, err := decodeFull(k, body)
					if err == nil {
						u.SetAPIVersion(k.GroupVersionKind("v1").GroupVersion().String())
						u.SetKind(k.Kind)
						return u.Object
					}
				}
			}
			taken := 0
			for range 300 {
				cur := canonical()
				patch := patchFrom(rng, canonical())
				raw, err := json.Marshal(patch)
				if err != nil {
					t.Fatal(err)
				}
				var fields map[string]any
				if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &fields); err != nil {
					t.Fatal(err)
				}
				p := &parsedPatch{typ: types.MergePatchType, raw: raw, fields: fields}
				want, wantStrict, wantErr := applyPatchFull(k, &unstructured.Unstructured{Object: runtime.DeepCopyJSON(cur)}, p, PatchOptions{})
				got, ok := mergePlain(k, cur, fields)
				if !ok {
					continue
				}
				taken++
				if wantErr != nil || len(wantStrict) > 0 {
					t.Fatalf("patch %s of %v: the library's way gives %v, %v; the maps' way took it", raw, cur, wantStrict, wantErr)
				}
				if !reflect.DeepEqual(got, want.Object) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want.Object)
					t.Fatalf("patch %s:\ngot  %s\nwant %s", raw, g, w)
				}
				// The patch itself is left as it was, for a retry.
				again, _ := json.Marshal(fields)
				if string(again) != string(raw) {
					t.Fatalf("the patch changed: %s, was %s", again, raw)
				}
			}
			t.Logf("%s: %d of 300 patches applied on the maps", k.Kind, taken)
			if taken < 20 {
				t.Errorf("only %d of 300 patches applied on the maps", taken)
			}
		})
	}
}

// patchFrom makes a merge patch out of some members of a random object,
// with nulls and values of other types mixed in.
func patchFrom(rng *rand.Rand, src map[string]any) map[string]any {
	out := map[string]any{}
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same patches every run
	for _, k := range keys {
		v := src[k]
		switch rng.IntN(12) {
		case 0, 1, 2, 3, 4:
		case 5:
			out[k] = nil
		case 6, 7:
			if m, ok := v.(map[string]any); ok {
				out[k] = patchFrom(rng, m)
				continue
			}
			out[k] = v
		case 8:
			out[k] = []any{"x", nil, map[string]any{"a": nil, "b": "c"}, int64(1), 1.5, true}[rng.IntN(6)]
		default:
			out[k] = v
		}
	}
	if rng.IntN(4) == 0 {
		out[fmt.Sprintf("extra%d", rng.IntN(2))] = map[string]any{"n": nil}
	}
	return out
}

// The merge itself, on cases the library's documentation and tests spell
// out.
func TestMergeInto(t *testing.T) {
	for _, tc := range []struct{ doc, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"a":"x"}`, `{"a":{"b":null,"c":[{"d":null},null]}}`, `{"a":{"c":[{},null]}}`},
		{`{"a":{"x":1}}`, `{"a":[{"d":null}]}`, `{"a":[{"d":null}]}`},
		{`{"a":null}`, `{"a":{"b":null}}`, `{"a":{}}`},
	} {
		var doc, patch, want map[string]any
		for _, p := range []struct {
			s string
			v *map[string]any
		}{{tc.doc, &doc}, {tc.patch, &patch}, {tc.want, &want}} {
			if err := json.Unmarshal([]byte(p.s), p.v); err != nil {
				t.Fatal(err)
			}
		}
		mergeInto(doc, patch)
		if !reflect.DeepEqual(doc, want) {
			got, _ := json.Marshal(doc)
			t.Errorf("%s + %s = %s, want %s", tc.doc, tc.patch, got, tc.want)
		}
	}
}

// BenchmarkMergePatch: a merge patch of a label onto a 1 KiB object, on
// the maps and through the library, for a ConfigMap and a custom resource.
func BenchmarkMergePatch(b *testing.B) {
	payload := strings.Repeat("x", 1024)
	raw := []byte(`{"metadata":{"labels":{"patched":"yes"}},"data":{"k":"v2"}}`)
	var fields map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &fields); err != nil {
		b.Fatal(err)
	}
	p := &parsedPatch{typ: types.MergePatchType, raw: raw, fields: fields}
	for _, k := range []*Kind{
		{Kind: "ConfigMap", Versions: []string{"v1"}, Typed: func() runtime.Object { return &corev1.ConfigMap{} }},
		{Kind: "Widget", Group: "x.io", Versions: []string{"v1"}},
	} {
		cur := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k.GroupVersionKind("v1").GroupVersion().String(), "kind": k.Kind,
			"metadata": map[string]any{"name": "a", "namespace": "default", "uid": "0d5e6f2a-1c1b-4c59-9d5f-3c1e7e0c2b11", "resourceVersion": "12",
				"creationTimestamp": "2026-11-23T10:00:00Z", "labels": map[string]any{"app": "x"}},
			"data": map[string]any{"k": "v", "payload": payload}}}
		b.Run(k.Kind+"/maps", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := mergePlain(k, cur.Object, p.fields); !ok {
					b.Fatal("not taken")
				}
			}
		})
		b.Run(k.Kind+"/library", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := applyPatchFull(k, cur, p, PatchOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
