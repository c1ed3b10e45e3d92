package schema

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/randfill"

	"github.com/kplane-dev/kplane/internal/registry/plain"
)

// Expected answers: kubernetes/kubernetes staging/src/k8s.io/
// apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go
// (unknown fields dropped, meta fields kept at the root and in embedded
// resources, preserve-unknown-fields subtrees kept but their specified
// fields still pruned), pkg/apiserver/schema/options.go (the path
// notation), defaulting/prunenulls.go (non-nullable nulls without a
// default dropped), objectmeta/coerce.go (embedded metadata through
// ObjectMeta) and customresource_handler.go unstructuredSchemaCoercer.apply
// (the order of the reported paths).
func TestPrune(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      string
		want    string
		unknown []string
	}{
		{"nested unknown fields",
			`{apiVersion: example.com/v1, kind: Widget, extra: 1, spec: {image: abc, foo: 1, ports: [{name: a, port: 1, extra: x}], limits: {cpu: {max: 1, extra: 2}}}, status: {bar: 1}}`,
			`{apiVersion: example.com/v1, kind: Widget, spec: {image: abc, ports: [{name: a, port: 1}], limits: {cpu: {max: 1}}}, status: {}}`,
			[]string{"extra", "spec.foo", "spec.limits.cpu.extra", "spec.ports[0].extra", "status.bar"}},
		{"preserve-unknown-fields keeps unknown but prunes specified",
			`{spec: {image: abc, config: {level: 1, other: {deep: true}}, template: {apiVersion: v1, kind: Pod, spec: {containers: [{name: c}]}}}}`,
			`{spec: {image: abc, config: {level: 1, other: {deep: true}}, template: {apiVersion: v1, kind: Pod, spec: {containers: [{name: c}]}}}}`,
			nil},
		{"embedded resource metadata pruned to ObjectMeta",
			`{spec: {image: abc, claim: {apiVersion: v1, kind: Claim, extra: 1, metadata: {name: c, bogus: 1, labels: {a: b}}, spec: {size: 1Gi, other: 2}}, template: {apiVersion: v1, kind: Pod, metadata: {name: p, color: red}}}}`,
			`{spec: {image: abc, claim: {apiVersion: v1, kind: Claim, metadata: {name: c, labels: {a: b}}, spec: {size: 1Gi}}, template: {apiVersion: v1, kind: Pod, metadata: {name: p}}}}`,
			[]string{"spec.claim.extra", "spec.claim.spec.other", "spec.claim.metadata.bogus", "spec.template.metadata.color"}},
		{"root metadata pruned to ObjectMeta",
			`{metadata: {name: w, namespace: ns, bogus: 1}, spec: {image: abc}}`,
			`{metadata: {name: w, namespace: ns}, spec: {image: abc}}`,
			[]string{"metadata.bogus"}},
		{"non-nullable nulls without default dropped",
			`{spec: {image: abc, email: null, note: null, owner: null}}`,
			`{spec: {image: abc, note: null, owner: null}}`,
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := widget(t)
			obj := parse(t, c.in)
			got := s.Prune(obj)
			if !reflect.DeepEqual(got, c.unknown) {
				t.Errorf("unknown fields %q, want %q", got, c.unknown)
			}
			if want := parse(t, c.want); !reflect.DeepEqual(obj, want) {
				t.Errorf("pruned to\n%v\nwant\n%v", obj, want)
			}
		})
	}
}

// TestCheckEmbedded: upstream's decoder refuses an embedded resource whose
// apiVersion or kind is not a string, or whose metadata does not decode as
// ObjectMeta (schema/objectmeta/algorithm.go CoerceWithOptions without
// DropInvalidFields, called from customresource_handler.go
// unstructuredSchemaCoercer.apply on request bodies); the error text is
// field.Invalid's with encoding/json's message.
func TestCheckEmbedded(t *testing.T) {
	w := widget(t)
	for _, c := range []struct{ name, in, want string }{
		{"kind a number", `{spec: {image: abc, template: {apiVersion: v1, kind: 5}}}`,
			`spec.template.kind: Invalid value: 5: must be a string`},
		{"apiVersion a list", `{spec: {image: abc, claim: {apiVersion: [v1], kind: Claim}}}`,
			`spec.claim.apiVersion: Invalid value: ["v1"]: must be a string`},
		{"metadata name a number", `{spec: {image: abc, template: {apiVersion: v1, kind: Pod, metadata: {name: 5}}}}`,
			`spec.template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`},
		{"metadata a string", `{spec: {image: abc, template: {apiVersion: v1, kind: Pod, metadata: x}}}`,
			`spec.template.metadata: Invalid value: "x": json: cannot unmarshal string into Go value of type v1.ObjectMeta`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := w.CheckEmbedded(parse(t, c.in))
			if err == nil || err.Error() != c.want {
				t.Errorf("err = %v\nwant %s", err, c.want)
			}
		})
	}
	for _, ok := range []string{
		`{spec: {image: abc, template: {apiVersion: v1, kind: Pod, metadata: {name: p, bogus: 1}}}}`,
		`{spec: {image: abc, bogus: {apiVersion: 1, kind: 2, metadata: 3}}}`, // not in the schema: pruned, never checked
		`{metadata: {name: 5}, spec: {image: abc}}`,                          // the root: the registry's concern
	} {
		if err := w.CheckEmbedded(parse(t, ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// coerceMeta gives what the round trip through ObjectMeta gives, whether
// it takes the metadata as plain or makes the round trip: random
// metadata, as clients send it and as the API writes it back, and with
// one member changed (another type, null, empty, unknown).
func TestCoerceMetaMatchesTheRoundTrip(t *testing.T) {
	f := randfill.NewWithSeed(9).NilChance(0.5).NumElements(0, 2).MaxDepth(4)
	rng := rand.New(rand.NewPCG(9, 10))
	values := []any{"", "x", int64(0), int64(7), 1.5, true, false, nil, map[string]any{}, []any{"a"}, "2026-01-02T03:04:05Z"}
	taken := 0
	for range 400 {
		var meta metav1.ObjectMeta
		f.Fill(&meta)
		raw, err := json.Marshal(&meta)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		if err := utiljson.Unmarshal(raw, &md); err != nil {
			t.Fatal(err)
		}
		canonical := map[string]any{"metadata": runtime.DeepCopyJSONValue(md)}
		coerceMetaFull(canonical, nil)
		for i, m := range []any{md, canonical["metadata"], nil} {
			m, _ := runtime.DeepCopyJSONValue(m).(map[string]any)
			if m == nil {
				// a changed member of the canonical form
				m = runtime.DeepCopyJSONValue(canonical["metadata"]).(map[string]any)
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				if len(keys) > 0 && rng.IntN(4) > 0 {
					m[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
				} else {
					m["unknownField"] = values[rng.IntN(len(values))]
				}
			}
			got := map[string]any{"metadata": runtime.DeepCopyJSONValue(m)}
			want := map[string]any{"metadata": runtime.DeepCopyJSONValue(m)}
			gotUnknown := coerceMeta(got, field.NewPath("spec"))
			wantUnknown := coerceMetaFull(want, field.NewPath("spec"))
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotUnknown, wantUnknown) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("metadata %d %v:\ngot  %s %v\nwant %s %v", i, m, g, gotUnknown, w, wantUnknown)
			}
			if _, ok := plain.ObjectMeta(m); ok {
				taken++
			}
		}
	}
	t.Logf("plain: %d of 1200", taken)
	if taken < 300 {
		t.Errorf("only %d of 1200 metadata taken as plain", taken)
	}
}
