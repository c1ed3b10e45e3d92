package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
	"github.com/kplane-dev/kplane/internal/storage"
)

// The converter's typed object is the JSON decode's: random objects of
// every built-in kind with a protobuf form, as the store holds them (the
// map its decoder reads from their JSON), encode to the same protobuf
// bytes both ways.
func TestTypedFromObjectMatchesTheJSONDecode(t *testing.T) {
	kinds := append(core.Kinds(), core.Namespace(), crd.Kind())
	registry.SetTypeConverters(kinds...)
	tested := 0
	seen := map[string]bool{}
	for _, k := range kinds {
		v := k.StorageVersion()
		if k.Typed == nil || !protoCapable(k, v) || seen[k.Kind] {
			continue
		}
		seen[k.Kind] = true
		tested++
		t.Run(k.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(k.Kind))).NilChance(0.5).NumElements(0, 2).MaxDepth(5)
			converted, direct := 0, 0
			for range 200 {
				obj := k.Typed()
				f.Fill(obj)
				data, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := storage.UnmarshalMap(data, &m); err != nil {
					t.Fatal(err)
				}
				if runtime.DefaultUnstructuredConverter.FromUnstructured(m, k.Typed()) == nil {
					direct++ // the converter's path, not the fallback
				}
				want, wantErr := typedFromJSON(k, v, data)
				got, gotErr := typedFromObject(k, v, m)
				if (wantErr == nil) != (gotErr == nil) {
					t.Fatalf("JSON decode: %v; converter: %v\n%s", wantErr, gotErr, data)
				}
				if wantErr != nil {
					continue
				}
				converted++
				var wb, gb bytes.Buffer
				want.GetObjectKind().SetGroupVersionKind(k.GroupVersionKind(v))
				got.GetObjectKind().SetGroupVersionKind(k.GroupVersionKind(v))
				if err := protoSerializer.Encode(want, &wb); err != nil {
					t.Fatal(err)
				}
				if err := protoSerializer.Encode(got, &gb); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(wb.Bytes(), gb.Bytes()) {
					t.Fatalf("protobuf differs:\nJSON decode %+v\nconverter   %+v\nfrom %s", want, got, data)
				}
			}
			t.Logf("%s: %d of 200 converted, %d by the converter", k.Kind, converted, direct)
			if direct == 0 {
				t.Fatal("the converter took no object: the test compares the fallback with itself")
			}
		})
	}
	if tested < 5 {
		t.Fatalf("only %d kinds with a protobuf form", tested)
	}
}
