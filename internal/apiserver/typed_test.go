package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// bytes both ways, and the transcoder writes them from the stored JSON.
func TestTypedFromObjectMatchesTheJSONDecode(t *testing.T) {
	for _, k := range protoKinds(t) {
		v := k.StorageVersion()
		t.Run(k.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(k.Kind))).NilChance(0.5).NumElements(0, 2).MaxDepth(5).
				Funcs(func(fv *metav1.FieldsV1, c randfill.Continue) {
					// A field set as the store holds one: JSON, keys sorted.
					b, _ := storage.AppendJSON(nil, randomFieldSet(c, 3))
					fv.SetRawBytes(b)
				})
			converted, direct, lifted, transcoded := 0, 0, 0, 0
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
				if _, l, ok := liftMetadata(m); ok && len(l.managed) > 0 && l.managed[0].FieldsV1 != nil {
					lifted++ // and with managedFields lifted out
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
				// And transcoded from the JSON as the store holds it, in
				// the envelope appendEnvelope writes.
				stored, err := storage.AppendJSON(nil, m)
				if err != nil {
					t.Fatal(err)
				}
				msg, err := appendProtoMessage(nil, k, v, stored)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := planFor(k, v).Append(nil, stored); ok {
					transcoded++
				}
				if env := appendEnvelope(nil, k.GroupVersionKind(v), msg); !bytes.Equal(env, wb.Bytes()) {
					t.Fatalf("transcoded protobuf differs:\n got %q\nwant %q\nfrom %s", env, wb.Bytes(), stored)
				}
			}
			t.Logf("%s: %d of 200 converted, %d by the converter, %d with managed fields lifted out, %d transcoded", k.Kind, converted, direct, lifted, transcoded)
			if direct == 0 || lifted == 0 || transcoded*10 < converted*9 {
				t.Fatal("the converter, the lifted metadata or the transcoder took too few objects: the test compares the fallback with itself")
			}
		})
	}
}

// protoKinds are the built-in kinds with a protobuf form whose objects are
// stored (a guest's are its host's, a review's never are), each once,
// their type converters set.
func protoKinds(t *testing.T) []*registry.Kind {
	kinds := append(core.Kinds(), core.Namespace(), crd.Kind())
	registry.SetTypeConverters(kinds...)
	var out []*registry.Kind
	seen := map[string]bool{}
	for _, k := range kinds {
		if k.Typed == nil || !k.OwnsObjects() || !protoCapable(k, k.StorageVersion()) || seen[k.Kind] {
			continue
		}
		seen[k.Kind] = true
		out = append(out, k)
	}
	if len(out) < 5 {
		t.Fatalf("only %d kinds with a protobuf form", len(out))
	}
	return out
}

// randomFieldSet is a random managedFields field set: members such as
// kube-apiserver's (f:name, k:{...} with quotes, v:...), some with HTML
// and line-separator characters JSON escapes, nested up to depth.
func randomFieldSet(c randfill.Continue, depth int) map[string]any {
	names := []string{"f:metadata", "f:data", ".", `k:{"name":"a<b&c"}`, "v:\u2028x", "f:spec", `k:{"port":80,"protocol":"TCP"}`}
	m := map[string]any{}
	for range c.Intn(4) {
		name := names[c.Intn(len(names))]
		if depth == 0 || c.Intn(2) == 0 {
			m[name] = map[string]any{}
		} else {
			m[name] = randomFieldSet(c, depth-1)
		}
	}
	return m
}

// BenchmarkTypedFromObject is the Go type of a stored 1 KiB ConfigMap
// made from its map, as a protobuf answer makes it.
func BenchmarkTypedFromObject(b *testing.B) {
	k := configMapKind()
	data := []byte(`{"apiVersion":"v1","data":{"payload":"` + strings.Repeat("x", 1024) + `"},"kind":"ConfigMap","metadata":{"creationTimestamp":"2026-11-25T23:00:00Z","labels":{"app":"kplane-bench"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"kplane-bench","operation":"Update","time":"2026-11-25T23:00:00Z"}],"name":"bench-1","namespace":"default","resourceVersion":"12","uid":"6f0c8c4e-3b8f-4a43-9d1e-1a2b3c4d5e6f"}}`)
	var m map[string]any
	if err := storage.UnmarshalMap(data, &m); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := typedFromObject(k, "v1", m); err != nil {
			b.Fatal(err)
		}
	}
}

// A protobuf body's Go type made a map by registry.DecodeTyped is what
// the long way gives, its JSON decoded by registry.Decode: random objects
// of every built-in kind with a protobuf form, sent in protobuf, with
// strings that are not UTF-8, times with nanoseconds, zero times and
// field sets the shortcut must refuse. Where the long way fails, the
// shortcut must refuse too.
func TestDecodeTypedMatchesTheJSONDecode(t *testing.T) {
	kinds := protoKinds(t)
	taken := 0
	for _, k := range kinds {
		v := k.StorageVersion()
		t.Run(k.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(k.Kind))+7).NilChance(0.3).NumElements(0, 2).MaxDepth(5).
				Funcs(func(s *string, c randfill.Continue) {
					*s = c.String(6)
					switch c.Intn(8) {
					case 0:
						*s += "\xff\xfe" // each byte becomes U+FFFD
					case 1:
						*s = ""
					}
				}, func(tm *metav1.Time, c randfill.Continue) {
					switch c.Intn(4) {
					case 0: // the zero time
					case 1:
						tm.Time = time.Unix(c.Int63n(4e9), c.Int63n(1e9))
					default:
						tm.Time = time.Unix(c.Int63n(4e9), 0)
					}
				}, func(tm *metav1.MicroTime, c randfill.Continue) {
					if c.Intn(4) > 0 {
						tm.Time = time.Unix(c.Int63n(4e9), c.Int63n(1e9))
					}
				}, func(fv *metav1.FieldsV1, c randfill.Continue) {
					switch c.Intn(6) {
					case 0:
						fv.SetRawBytes([]byte(`{"f:a":{},"f:a":{}}`)) // a member twice
					case 1:
						fv.SetRawBytes([]byte(`{"f:a":1}`)) // not a field set
					default:
						b, _ := storage.AppendJSON(nil, randomFieldSet(c, 3))
						fv.SetRawBytes(b)
					}
				})
			gvk := k.GroupVersionKind(v)
			shortcut, refused := 0, 0
			for range 300 {
				obj := k.Typed()
				f.Fill(obj)
				obj.GetObjectKind().SetGroupVersionKind(gvk)
				var body bytes.Buffer
				if err := protoSerializer.Encode(obj, &body); err != nil {
					t.Fatal(err)
				}
				typed, err := decodeProto(k, v, body.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				got, ok := registry.DecodeTyped(k, typed)
				data, err := json.Marshal(typed)
				if err != nil {
					if ok {
						t.Fatalf("the JSON fails (%v), the shortcut takes %+v", err, typed)
					}
					continue
				}
				want, strict, err := registry.Decode(k, data)
				if err != nil || len(strict) > 0 {
					if ok {
						t.Fatalf("the JSON decode fails (%v, %v), the shortcut takes\n%s", err, strict, data)
					}
					refused++
					continue
				}
				if !ok {
					refused++
					continue
				}
				shortcut++
				if !reflect.DeepEqual(got.Object, want.Object) {
					t.Fatalf("the shortcut's map differs:\n got %#v\nwant %#v\nfrom %s", got.Object, want.Object, data)
				}
			}
			t.Logf("%s: %d of 300 by the shortcut, %d the long way", k.Kind, shortcut, refused)
			taken += shortcut
		})
	}
	if taken < 300 {
		t.Fatalf("%d objects of %d kinds by the shortcut: too few to compare", taken, len(kinds))
	}
}

// A ConfigMap as client-go sends it in protobuf, with managedFields as an
// update sends them back, takes the shortcut.
func TestDecodeTypedTakesAConfigMap(t *testing.T) {
	k := configMapKind()
	registry.SetTypeConverters(k)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", Labels: map[string]string{"app": "x"},
		CreationTimestamp: metav1.Unix(1764000000, 0), ResourceVersion: "12",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &metav1.Time{Time: time.Unix(1764000000, 0)}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{}}}},
		Data: map[string]string{"k": "v"}}
	cm.ManagedFields[0].FieldsV1.SetRawBytes([]byte(`{"f:data":{"f:k":{}}}`))
	cm.SetGroupVersionKind(k.GroupVersionKind("v1"))
	var body bytes.Buffer
	if err := protoSerializer.Encode(cm, &body); err != nil {
		t.Fatal(err)
	}
	typed, err := decodeProto(k, "v1", body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, ok := registry.DecodeTyped(k, typed)
	if !ok {
		t.Fatal("refused")
	}
	want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"creationTimestamp":"2025-11-24T16:00:00Z","labels":{"app":"x"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:k":{}}},"manager":"m","operation":"Update","time":"2025-11-24T16:00:00Z"}],"name":"a","namespace":"default","resourceVersion":"12"}}`
	if b, _ := storage.AppendJSON(nil, got.Object); string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// BenchmarkDecodeProtobufBody is a 1 KiB ConfigMap's protobuf create
// body made the object's map: through its Go type by DecodeTyped, and
// the long way, through the Go type's JSON, for comparison.
func BenchmarkDecodeProtobufBody(b *testing.B) {
	k := configMapKind()
	registry.SetTypeConverters(k)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bench-1", Labels: map[string]string{"app": "kplane-bench"}},
		Data: map[string]string{"payload": strings.Repeat("x", 1024)}}
	cm.SetGroupVersionKind(k.GroupVersionKind("v1"))
	var body bytes.Buffer
	if err := protoSerializer.Encode(cm, &body); err != nil {
		b.Fatal(err)
	}
	b.Run("shortcut", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			typed, err := decodeProto(k, "v1", body.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := registry.DecodeTyped(k, typed); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			typed, err := decodeProto(k, "v1", body.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			data, err := json.Marshal(typed)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := registry.Decode(k, data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
