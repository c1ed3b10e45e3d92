package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/kplane-dev/kplane/internal/kv"
)

// randomObject builds objects whose metadata has any subset of keys around
// resourceVersion in sort order, labels with awkward strings, and other
// fields that hold "metadata" keys of their own.
func randomObject(rnd *rand.Rand) *unstructured.Unstructured {
	meta := map[string]any{}
	awkward := []string{"a", "é", "<tag>", `q"uote`, "back\\slash", "tab\t", "z"}
	for _, k := range []string{"annotations", "creationTimestamp", "deletionTimestamp", "generation", "labels", "managedFields",
		"name", "namespace", "ownerReferences", "uid", "zzz"} {
		if rnd.IntN(2) == 0 {
			continue
		}
		switch k {
		case "labels":
			l := map[string]any{}
			for range rnd.IntN(4) {
				l[awkward[rnd.IntN(len(awkward))]] = awkward[rnd.IntN(len(awkward))]
			}
			meta[k] = l
		case "generation":
			meta[k] = int64(rnd.IntN(9))
		case "deletionTimestamp":
			meta[k] = []any{"2026-11-23T10:00:00Z", nil}[rnd.IntN(2)]
		case "managedFields":
			meta[k] = []any{map[string]any{"manager": "m", "fieldsV1": map[string]any{"f:data": map[string]any{}}}}
		default:
			meta[k] = awkward[rnd.IntN(len(awkward))]
		}
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
	if rnd.IntN(2) == 0 {
		obj["spec"] = map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "y"}}},
			"list": []any{1.5, "s", nil, true, []any{}, map[string]any{}}}
	}
	if rnd.IntN(2) == 0 {
		obj["zdata"] = map[string]any{"payload": "some\nlines\u2028"}
	}
	if rnd.IntN(2) == 0 { // between apiVersion and kind
		obj["data"] = map[string]any{"kind": "not this one"}
	}
	if rnd.IntN(2) == 0 { // between kind and metadata, as an Event's
		obj["lastTimestamp"] = "2026-11-23T10:00:00Z"
	}
	return &unstructured.Unstructured{Object: obj}
}

// A record serves exactly the bytes that decoding the stored value and
// encoding it with its resourceVersion give, and its selector attributes
// agree with the decoded object's.
func TestRecordMatchesDecode(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	sels := []string{"", "a", "a=z", "é!=a", "!z", "<tag> in (a,z)"}
	for i := range 2000 {
		obj := randomObject(rnd)
		key := "/k"
		if rnd.IntN(2) == 0 { // as the API stores it: the key ends in namespace/name
			key = "/registry/configmaps/" + obj.GetNamespace() + "/" + obj.GetName()
		}
		value, err := encode(key, obj)
		if err != nil {
			t.Fatal(err)
		}
		rev := int64(1 + rnd.IntN(1e6))
		rec, err := NewRecord(key, value, rev)
		if err != nil {
			t.Fatalf("%d: %v\n%s", i, err, value)
		}
		checkRecordStrings(t, rec, obj)
		if rec.at < 0 {
			t.Fatalf("%d: a value as the store writes it took the slow path:\n%s", i, value)
		}
		for _, at := range []int64{rev, rev + 7} {
			got, err := rec.AppendJSON(nil, at)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := decode(&kv.KeyValue{Key: "/k", Value: value}, at)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := AppendJSON(nil, dec.Object)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d: got\n%s\nwant\n%s", i, got, want)
			}
			item, err := rec.AppendItemJSON(nil, at)
			if err != nil {
				t.Fatal(err)
			}
			delete(dec.Object, "apiVersion")
			delete(dec.Object, "kind")
			if want, _ := AppendJSON(nil, dec.Object); !bytes.Equal(item, want) {
				t.Fatalf("%d: item got\n%s\nwant\n%s", i, item, want)
			}
		}
		if rec.typeMeta[0].end == 0 || rec.typeMeta[1].end == 0 {
			t.Fatalf("%d: a value as the store writes it took the slow path for a list item:\n%s", i, value)
		}
		dec, _ := rec.Decode(rev)
		if rec.Name != dec.GetName() || rec.Namespace != dec.GetNamespace() || rec.APIVersion() != dec.GetAPIVersion() {
			t.Fatalf("%d: name %q/%q, decoded %q/%q", i, rec.Namespace, rec.Name, dec.GetNamespace(), dec.GetName())
		}
		if rec.Deleting() != (dec.GetDeletionTimestamp() != nil) {
			t.Fatalf("%d: Deleting() = %v, decoded deletionTimestamp %v", i, rec.Deleting(), dec.GetDeletionTimestamp())
		}
		for _, s := range sels {
			sel, err := labels.Parse(s)
			if err != nil {
				continue // awkward label keys are not all valid selectors
			}
			p := Predicate{Label: sel}
			if p.MatchesRecord(rec) != p.Matches(dec) {
				t.Fatalf("%d: selector %q: record %v, object %v (labels %v)", i, s, p.MatchesRecord(rec), p.Matches(dec), dec.GetLabels())
			}
		}
		fsel := fields.OneTermEqualSelector("metadata.name", dec.GetName())
		if !(Predicate{Field: fsel}).MatchesRecord(rec) {
			t.Fatalf("%d: metadata.name=%q does not match its own record", i, dec.GetName())
		}
	}
}

// checkRecordStrings checks the record's name, namespace and labels
// against obj's, and that they are not copies where they need not be: the
// name and namespace share the key's bytes when the key ends in them, and
// plain label strings share the value's.
func checkRecordStrings(t *testing.T, rec *Record, obj *unstructured.Unstructured) {
	t.Helper()
	within := func(s, in string) bool {
		if s == "" {
			return true
		}
		p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(in)))
		return p >= start && p+uintptr(len(s)) <= start+uintptr(len(in))
	}
	if rec.Name != obj.GetName() || rec.Namespace != obj.GetNamespace() {
		t.Fatalf("record %q/%q, object %q/%q", rec.Namespace, rec.Name, obj.GetNamespace(), obj.GetName())
	}
	plain := func(s string) bool { return !strings.ContainsAny(s, "\"\\\t<>&") }
	if strings.HasSuffix(rec.Key, "/"+rec.Namespace+"/"+rec.Name) {
		for _, s := range []string{rec.Name, rec.Namespace} {
			if plain(s) && !within(s, rec.Key) {
				t.Fatalf("key %q: %q is a copy", rec.Key, s)
			}
		}
	}
	want := obj.GetLabels()
	if len(rec.labels) != 2*len(want) {
		t.Fatalf("labels %q, want %v", rec.labels, want)
	}
	value := unsafe.String(unsafe.SliceData(rec.Value), len(rec.Value)) // for within

	for k, v := range want {
		got, ok := rec.labels.Lookup(k)
		if !ok || got != v {
			t.Fatalf("label %q = %q (%v), want %q", k, got, ok, v)
		}
		i, _ := rec.labels.find(k)
		if plain(k+v) && (!within(rec.labels[2*i], value) || !within(rec.labels[2*i+1], value)) {
			t.Fatalf("label %q=%q: copies of the value's bytes", k, v)
		}
	}
}

// Values kplane did not write (a resourceVersion stored, metadata keys out
// of order, spaces) are served as the same object: byte identity is only
// promised for values in the form Store writes.
func TestRecordForeignValues(t *testing.T) {
	for _, v := range []string{
		`{"metadata":{"resourceVersion":"5","name":"a"},"kind":"ConfigMap"}`,
		`{"kind":"K","metadata":{"uid":"u","name":"a"}}`,
		`{ "kind":"K", "metadata" : { } , "a" : [ 1 , {"metadata":{}} ] }`,
		`{"kind":"K","metadata":{"name":"a","uid":"u"},"a":"\u00e9<"}`,
		`{"kind":"K","metadata":{"name":"a","name":"b","uid":"u"}}`,
		`{"kind":"K","metadata":{"name":"a","labels":{"x":"1"}},"metadata":{"name":"b"}}`,
		`{"kind":"K","metadata":{"name":"a"},"metadata":null}`,
		`{"kind":"K","metadata":null,"metadata":{"name":"b"}}`,
		`{"kind":"K","metadata":{"labels":{"x":"1"},"labels":null,"name":"a","name":1}}`,
	} {
		rec, err := NewRecord("/k", []byte(v), 9)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		got, err := rec.AppendJSON(nil, 9)
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := rec.Decode(9)
		if rec.Name != dec.GetName() || len(rec.Labels().(labelPairs)) != 2*len(dec.GetLabels()) {
			t.Errorf("%s: the record reads %q %v, the decode %q %v", v, rec.Name, rec.Labels(), dec.GetName(), dec.GetLabels())
		}
		served := &unstructured.Unstructured{}
		if err := served.UnmarshalJSON(got); err != nil {
			t.Fatalf("%s: served %s: %v", v, got, err)
		}
		if !equality.Semantic.DeepEqual(served.Object, dec.Object) {
			t.Fatalf("%s: served %s, want %v", v, got, dec.Object)
		}
	}
}

// CreationTimestamp reads the one a decode reads: in Store's form the
// first and only one, else the last, and "" for one that is not a string.
func TestRecordCreationTimestamp(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`{"kind":"K","metadata":{"annotations":{"creationTimestamp":"no"},"creationTimestamp":"2026-11-26T10:00:00Z","managedFields":[{"manager":"m"}],"name":"a"}}`, "2026-11-26T10:00:00Z"},
		{`{"kind":"K","metadata":{"name":"a"}}`, ""},
		{`{"kind":"K","metadata":{"creationTimestamp":null,"name":"a"}}`, ""},
		{`{"kind":"K","metadata":{"creationTimestamp":"2026-11-26T10:00:00Z","creationTimestamp":"2026-11-27T10:00:00Z"}}`, "2026-11-27T10:00:00Z"},
		{`{"kind":"K","metadata":{"creationTimestamp":"2026-11-26T10:00:00Z","name":"a","creationTimestamp":null}}`, ""},
		{`{"kind":"K","metadata":{"name":"a","creationTimestamp":"2026-11-26T10:00:00Z"}}`, "2026-11-26T10:00:00Z"},
		{`{"kind":"K","metadata":{"creationTimestamp":"2026-11-26T10:00:00Z"},"metadata":{"creationTimestamp":"2026-11-27T10:00:00Z"}}`, "2026-11-27T10:00:00Z"},
		{`{"kind":"K","metadata":{"creationTimestamp":"2026-11-26T10:00:00Z"},"metadata":1}`, ""},
	} {
		rec, err := NewRecord("/k", []byte(tc.value), 9)
		if err != nil {
			t.Fatalf("%s: %v", tc.value, err)
		}
		if got := rec.CreationTimestamp(); got != tc.want {
			t.Errorf("%s: CreationTimestamp() = %q, want %q", tc.value, got, tc.want)
		}
		obj, err := rec.Decode(9)
		if err != nil {
			t.Fatal(err)
		}
		if decoded, _, _ := unstructured.NestedString(obj.Object, "metadata", "creationTimestamp"); decoded != tc.want {
			t.Errorf("%s: the decode reads %q, the test wants %q", tc.value, decoded, tc.want)
		}
	}
}

// A list item leaves out apiVersion and kind however the value has them:
// repeated, of another type, after metadata, among spaces, or not at all.
func TestRecordItemForeignValues(t *testing.T) {
	for _, v := range []string{
		`{"apiVersion":"v1","kind":"A","kind":"B","metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","apiVersion":"v2","kind":"A","metadata":{"name":"a"}}`,
		`{"apiVersion":1,"kind":"A","metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","kind":null,"metadata":{"name":"a"}}`,
		`{"metadata":{"name":"a"},"kind":"A","apiVersion":"v1"}`,
		`{"kind":"A","apiVersion":"v1","metadata":{"name":"a"}}`,
		`{ "apiVersion" : "v1" , "kind" : "A" , "metadata" : { "name" : "a" } }`,
		`{"apiVersion":"v1","metadata":{"name":"a"}}`,
		`{"metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","kind":"A","metadata":{"resourceVersion":"5","name":"a"}}`,
		`{"apiVersion":"v\u0031","kind":"A","metadata":{}}`,
	} {
		rec, err := NewRecord("/k", []byte(v), 9)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		dec, err := rec.Decode(9)
		if err != nil {
			if _, err := rec.AppendItemJSON(nil, 9); err == nil {
				t.Errorf("%s: no error serving an object that does not decode", v)
			}
			continue
		}
		got, err := rec.AppendItemJSON(nil, 9)
		if err != nil {
			t.Fatal(err)
		}
		delete(dec.Object, "apiVersion")
		delete(dec.Object, "kind")
		var served map[string]any
		if err := json.Unmarshal(got, &served); err != nil {
			t.Fatalf("%s: served %s: %v", v, got, err)
		}
		if !equality.Semantic.DeepEqual(served, dec.Object) {
			t.Fatalf("%s: served %s, want %v", v, got, dec.Object)
		}
	}
}

// Malformed JSON is an error, never a panic. Well-formed values of the
// wrong shape are records that read as the decoded object's accessors
// read it, served through a decode.
func TestRecordMalformed(t *testing.T) {
	for _, v := range []string{``, `[]`, `{"metadata":{"name":"a"`, `{"metadata":{"name":"a\`, `{"a":tru`, `{"a"1}`, `{"metadata":{"labels":{"a":}}}`} {
		if _, err := NewRecord("/k", []byte(v), 1); !HasCode(err, CodeInvalidObj) {
			t.Errorf("%q: got %v, want CodeInvalidObj", v, err)
		}
	}
	for _, v := range []string{`{"kind":"K"}`, `{"kind":"K","metadata":[]}`, `{"kind":"K","metadata":{"name":1,"namespace":true}}`,
		`{"kind":"K","metadata":{"name":"n","labels":{"a":1,"b":"c"}}}`, `{"kind":"K","metadata":{"labels":"x"}}`} {
		rec, err := NewRecord("/k", []byte(v), 1)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		dec, err := rec.Decode(1)
		if err != nil {
			t.Fatalf("%s: decode: %v", v, err)
		}
		if rec.Name != dec.GetName() || rec.Namespace != dec.GetNamespace() || len(rec.labels) != 2*len(dec.GetLabels()) {
			t.Errorf("%s: record %q/%q %v, object %q/%q %v", v, rec.Namespace, rec.Name, rec.labels, dec.GetNamespace(), dec.GetName(), dec.GetLabels())
		}
		served, err := rec.AppendJSON(nil, 1)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		back := &unstructured.Unstructured{}
		// (metadata that is not an object gets no resourceVersion, as the
		// decoded object's SetResourceVersion leaves it.)
		if err := back.UnmarshalJSON(served); err != nil || (back.GetResourceVersion() != "1" && v != `{"kind":"K","metadata":[]}`) {
			t.Errorf("%s: served %s (%v)", v, served, err)
		}
	}
}

func FuzzRecord(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","metadata":{"labels":{"a":"b"},"name":"n","uid":"u"}}`))
	f.Add([]byte(`{"metadata":{}}`))
	f.Add([]byte(`{"metadata":{"creationTimestamp":"x","name":"a"},"metadata":{"name":"b"}}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		rec, err := NewRecord("/k", v, 3)
		if err != nil {
			return
		}
		dec, err := rec.Decode(3)
		if err != nil {
			return // the scan is lenient about what it skips; decode is the judge
		}
		if ts, _, _ := unstructured.NestedString(dec.Object, "metadata", "creationTimestamp"); rec.CreationTimestamp() != ts {
			t.Fatalf("creationTimestamp %q, decoded %q\n%s", rec.CreationTimestamp(), ts, v)
		}
		got, err := rec.AppendJSON(nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		again, err := NewRecord("/k", append(got, '\n'), 3)
		if err != nil {
			t.Fatalf("served JSON does not scan: %v\n%s", err, got)
		}
		d2, err := again.Decode(3)
		if err != nil || fmt.Sprint(d2.Object) != fmt.Sprint(dec.Object) {
			t.Fatalf("served JSON decodes differently: %v\n%s\n%v\n%v", err, got, d2, dec)
		}
		item, err := rec.AppendItemJSON(nil, 3)
		if err != nil {
			t.Fatal(err)
		}
		var bare map[string]any
		if err := utiljson.Unmarshal(item, &bare); err != nil {
			t.Fatalf("served item does not decode: %v\n%s", err, item)
		}
		delete(dec.Object, "apiVersion")
		delete(dec.Object, "kind")
		if fmt.Sprint(bare) != fmt.Sprint(dec.Object) {
			t.Fatalf("served item decodes differently:\n%s\n%v\n%v", item, bare, dec.Object)
		}
	})
}

// DecodeMetadata gives the whole decode's apiVersion, kind and metadata
// without managedFields, and nothing else.
func TestRecordDecodeMetadata(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		obj := randomObject(rnd)
		value, err := encode("/k", obj)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := NewRecord("/k", value, 9)
		if err != nil {
			t.Fatal(err)
		}
		full, _ := rec.Decode(11)
		meta, err := rec.DecodeMetadata(11)
		if err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(full.Object, "metadata", "managedFields")
		want := map[string]any{"apiVersion": full.Object["apiVersion"], "kind": full.Object["kind"], "metadata": full.Object["metadata"]}
		if !equality.Semantic.DeepEqual(meta.Object, want) {
			t.Fatalf("%d: got %v\nwant %v", i, meta.Object, want)
		}
	}
}

// Field selectors on records agree with the decoded object's, for
// metadata fields read from the record and for a kind's own fields,
// which decode it.
func TestRecordFieldSelectors(t *testing.T) {
	of := func(o *unstructured.Unstructured) fields.Set {
		color, _, _ := unstructured.NestedString(o.Object, "spec", "color")
		return fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace(), "spec.color": color}
	}
	sels := []string{"metadata.name=a", "metadata.namespace!=x", "spec.color=red", "spec.color!=red,metadata.name=b", "spec.size=1"}
	for i, name := range []string{"a", "b"} {
		for _, color := range []string{"red", "blue", ""} {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "K",
				"metadata": map[string]any{"name": name, "namespace": "x"}}}
			if color != "" {
				obj.Object["spec"] = map[string]any{"color": color}
			}
			value, _ := encode("/k", obj)
			rec, err := NewRecord("/k", value, int64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			dec, _ := rec.Decode(rec.Rev)
			for _, s := range sels {
				sel, err := fields.ParseSelector(s)
				if err != nil {
					t.Fatal(err)
				}
				p := Predicate{Field: sel, Fields: of}
				if got, want := p.MatchesRecord(rec), p.Matches(dec); got != want {
					t.Errorf("%s/%s, %s: record %v, object %v", name, color, s, got, want)
				}
			}
		}
	}
}

func TestDecodeObjectWithout(t *testing.T) {
	for _, in := range []string{
		`{}`,
		`{"a":1}`,
		`{"managedFields":[1]}`,
		`{"managedFields":[{"x":"}"}],"b":2}`,
		`{"a":1,"managedFields":[],"b":2}`,
		`{"a":{"managedFields":1},"z":[1,2]}`,
		`{"a":1,"managedFields":{"k":"v"}}`,
		`{ "managedFields" : null , "b" : 2 }`,
		`{"a":1 , "managedFields" : null }`,
	} {
		got, ok := decodeObjectWithout([]byte(in), "managedFields")
		var want map[string]any
		if err := utiljson.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		delete(want, "managedFields")
		if !ok || !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("decodeObjectWithout(%s) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{`{"a":`, `{"managedFields":[1}`, `{"managedFields":1}x`} {
		if _, ok := decodeObjectWithout([]byte(in), "managedFields"); ok {
			t.Errorf("decodeObjectWithout(%s) took invalid JSON", in)
		}
	}
}

// TypeMeta reads what encoding/json reads into a struct of apiVersion and
// kind, or says it cannot tell.
func TestTypeMeta(t *testing.T) {
	for _, body := range []string{
		`{}`,
		`{"apiVersion":"v1","kind":"ConfigMap","data":{"apiVersion":"no","kind":"no"}}`,
		` { "kind" : "Pod" , "apiVersion" : "v1" } `,
		`{"APIVERSION":"apps/v1","Kind":"Deployment"}`,
		`{"apiVersion":"v1","apiversion":"v2"}`,
		`{"kind":"A","kind":"B"}`,
		`{"apiVersion":null,"kind":null}`,
		`{"apiVersion":"v1","apiVersion":null}`,
		`{"apiVersion":"v\u0031","kind":"Config\"Map"}`,
		`{"metadata":{"name":"x"},"list":[1,2.5,true,null,{"kind":"x"}],"kind":"ConfigMap"}`,
		`{"apiVersion":1}`,
		`{"kind":["Pod"]}`,
		`{"kind":"Pod"} x`,
		`{"kind":"Pod"}{}`,
		`[]`,
		`"kind"`,
		``,
		`{"kind":"Pod"`,
		`{"kind":"Pod",}`,
		`{"a":tru,"kind":"Pod"}`, // not validated: the caller's decode refuses it
	} {
		var probe struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		jerr := json.Unmarshal([]byte(body), &probe)
		a, k, ok := TypeMeta([]byte(body))
		if !ok {
			if jerr == nil && !strings.Contains(body, ":1") && !strings.Contains(body, `["Pod"]`) {
				t.Errorf("%s: cannot tell, but encoding/json reads %+v", body, probe)
			}
			continue
		}
		if jerr != nil {
			continue // malformed beyond what the scan looked at
		}
		if a != probe.APIVersion || k != probe.Kind {
			t.Errorf("%s: got %q %q, encoding/json %q %q", body, a, k, probe.APIVersion, probe.Kind)
		}
	}
}

// PartialMetadata holds what the unstructured accessors read from
// DecodeMetadata's object, whether it scans or decodes: over random
// objects and metadata of every member's plain and odd forms.
func TestRecordPartialMetadata(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	odd := []any{nil, "s", int64(3), 1.5, -2.0, true, []any{}, []any{"a", "b"}, []any{"a", int64(1)},
		map[string]any{}, map[string]any{"k": "v"}, map[string]any{"k": nil}, map[string]any{"k": int64(1)},
		"2026-11-23T10:00:00Z", "2026-11-23T10:00:00.5+02:00", "", "not a time",
		[]any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u", "controller": true}}}
	members := []string{"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
		"ownerReferences", "finalizers", "managedFields", "unknown"}
	scanned := 0
	for i := range 3000 {
		var obj *unstructured.Unstructured
		if i%2 == 0 {
			obj = randomObject(rnd)
		} else {
			md := map[string]any{}
			for _, k := range members {
				if rnd.IntN(3) == 0 {
					continue
				}
				if rnd.IntN(6) == 0 {
					md[k] = odd[rnd.IntN(len(odd))]
					continue
				}
				switch k { // the member's plain form
				case "generation", "deletionGracePeriodSeconds":
					md[k] = int64(rnd.IntN(100))
				case "creationTimestamp", "deletionTimestamp":
					md[k] = "2026-11-23T10:00:00Z"
				case "labels", "annotations":
					md[k] = map[string]any{"a": "x", "é/b": "y<z>"}
				case "finalizers":
					md[k] = []any{"example.com/f", "orphan"}
				case "managedFields":
					md[k] = []any{map[string]any{"manager": "m", "fieldsV1": map[string]any{"f:data": map[string]any{}}}}
				case "ownerReferences":
					continue
				default:
					md[k] = "v-" + strconv.Itoa(rnd.IntN(10))
				}
			}
			obj = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}}
		}
		value, err := encode("/k", obj)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := NewRecord("/k", value, 9)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rec.PartialMetadata(11)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := rec.DecodeMetadata(11)
		if err != nil {
			t.Fatal(err)
		}
		want := metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: dec.GetAPIVersion(), Kind: dec.GetKind()}, ObjectMeta: metaFromUnstructured(dec)}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("%d: %s\n got %#v\nwant %#v", i, value, got.ObjectMeta, want.ObjectMeta)
		}
		var m metav1.ObjectMeta
		if rec.metaEnd != 0 && scanMeta(rec.Value[rec.metaStart:rec.metaEnd], &m) {
			scanned++
		}
	}
	t.Logf("%d of 3000 scanned", scanned)
	if scanned < 400 {
		t.Fatalf("only %d of 3000 metadata took the scan", scanned)
	}
}

// AppendObjectMetaJSON serves the stored metadata only where it means what
// the typed encoding of ObjectMeta decoded from the object does (the
// HTTP layer's PartialObjectMetadata and Table rows without the record),
// compared as decoded JSON, over random metadata in plain and odd forms.
func TestRecordObjectMetaJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	pick := func(vs ...any) any { return vs[rnd.IntN(len(vs))] }
	times := []any{"2026-11-23T10:00:00Z", "2026-11-23T10:00:00.5Z", "2026-11-23T12:00:00+02:00", "0001-01-01T00:00:00Z",
		"not a time", "", nil, int64(5)}
	strs := []any{"v", "é<&>\u2028", "", nil, int64(1), true}
	plainRef := func() map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u-1"}
	}
	entry := func() map[string]any {
		return map[string]any{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "time": "2026-11-23T10:00:00Z",
			"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{".": map[string]any{}, "f:a": map[string]any{}}}}
	}
	odd := func(k string) any {
		switch k {
		case "creationTimestamp", "deletionTimestamp":
			return pick(times...)
		case "generation", "deletionGracePeriodSeconds":
			return pick(int64(0), int64(-3), 1.5, 2.0, "7", nil)
		case "labels", "annotations":
			return pick(map[string]any{}, map[string]any{"k": nil}, map[string]any{"k": int64(1)}, map[string]any{"k": ""}, nil, "s")
		case "finalizers":
			return pick([]any{}, []any{"a", nil}, []any{""}, nil, "s")
		case "ownerReferences":
			r := plainRef()
			switch rnd.IntN(5) {
			case 0:
				delete(r, "uid")
			case 1:
				r["controller"] = nil
			case 2:
				r["extra"] = "x"
			case 3:
				r["name"] = ""
			default:
				r["blockOwnerDeletion"] = "true"
			}
			return pick([]any{}, []any{r}, nil)
		case "managedFields":
			e := entry()
			switch rnd.IntN(6) {
			case 0:
				e["time"] = pick(times...)
			case 1:
				e["manager"] = ""
			case 2:
				e["fieldsV1"] = pick(nil, "s", []any{})
			case 3:
				e["extra"] = int64(1)
			case 4:
				e["subresource"] = pick("", "status")
			default:
				delete(e, "fieldsV1")
			}
			return pick([]any{}, []any{e}, nil)
		}
		return pick(strs...)
	}
	members := []string{"name", "generateName", "namespace", "selfLink", "uid", "generation", "creationTimestamp",
		"deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
		"managedFields", "unknown"}
	served := 0
	for i := range 4000 {
		md := map[string]any{}
		for _, k := range members {
			switch {
			case k == "creationTimestamp" && rnd.IntN(10) > 0:
				md[k] = "2026-11-23T10:00:00Z"
			case rnd.IntN(3) == 0:
			case k == "unknown" || rnd.IntN(8) == 0:
				md[k] = odd(k)
			default:
				switch k { // the member's plain form
				case "generation", "deletionGracePeriodSeconds":
					md[k] = int64(rnd.IntN(3))
				case "creationTimestamp", "deletionTimestamp":
					md[k] = "2026-11-23T10:00:00Z"
				case "labels", "annotations":
					md[k] = map[string]any{"a": "x", "é/b": "y<z>\u2028"}
				case "finalizers":
					md[k] = []any{"example.com/f", "orphan"}
				case "ownerReferences":
					r := plainRef()
					if rnd.IntN(2) == 0 {
						r["controller"], r["blockOwnerDeletion"] = true, false
					}
					md[k] = []any{r, plainRef()}
				case "managedFields":
					md[k] = []any{entry(), map[string]any{"manager": "m", "operation": "Apply", "fieldsV1": map[string]any{}}}
				default:
					md[k] = "v-" + strconv.Itoa(rnd.IntN(10))
				}
			}
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"k": "v"}}}
		value, err := encode("/k", obj)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := NewRecord("/k", value, 9)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := rec.AppendObjectMetaJSON([]byte("x"), 11)
		if again, ok2 := rec.AppendObjectMetaJSON(nil, 11); ok2 != ok || ok && !bytes.Equal(again, got[1:]) {
			t.Fatalf("%d: the second call differs from the first", i)
		}
		if !ok {
			if string(got) != "x" {
				t.Fatalf("%d: not served, yet appended: %q", i, got)
			}
			continue
		}
		served++
		dec, err := rec.Decode(11)
		if err != nil {
			t.Fatal(err)
		}
		var typed metav1.ObjectMeta
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(dec.Object["metadata"].(map[string]any), &typed); err != nil {
			t.Fatalf("%d: served metadata the typed path cannot convert: %v\n%s", i, err, value)
		}
		wantJSON, err := json.Marshal(&typed)
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(got[1:], &gotV); err != nil {
			t.Fatalf("%d: %v\n%s", i, err, got)
		}
		if err := json.Unmarshal(wantJSON, &wantV); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotV, wantV) {
			t.Fatalf("%d: served\n%s\nwhere the typed encoding is\n%s", i, got[1:], wantJSON)
		}
	}
	t.Logf("%d of 4000 served as stored", served)
	if served < 300 {
		t.Fatalf("only %d of 4000 served as stored", served)
	}
}

// DecodeMembers gives the members named as the whole decode has them, and
// no others; metadata passed over (or named, with its resourceVersion).
func TestRecordDecodeMembers(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	names := []string{"apiVersion", "kind", "metadata", "spec", "zdata", "data", "lastTimestamp", "absent"}
	for i := range 1000 {
		value, err := encode("/k", randomObject(rnd))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := NewRecord("/k", value, 9)
		if err != nil {
			t.Fatal(err)
		}
		var members []string
		for _, n := range names {
			if rnd.IntN(3) == 0 {
				members = append(members, n)
			}
		}
		got, err := rec.DecodeMembers(11, members)
		if err != nil {
			t.Fatal(err)
		}
		full, err := rec.Decode(11)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{}
		for _, n := range members {
			if v, ok := full.Object[n]; ok {
				want[n] = v
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d: members %v of %s:\n got %v\nwant %v", i, members, value, got, want)
		}
	}
}

// TestRecordFact: a fact is known only about what it was kept about, and
// a later one replaces it.
func TestRecordFact(t *testing.T) {
	rec, err := NewRecord("/k", []byte(`{"metadata":{"name":"a"}}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	type schema struct{ n int }
	s1, s2 := &schema{1}, &schema{2}
	if _, known := rec.Fact(s1); known {
		t.Fatal("a fact known before any was kept")
	}
	rec.SetFact(s1, true)
	if yes, known := rec.Fact(s1); !known || !yes {
		t.Fatalf("Fact(s1) = %v, %v after SetFact(s1, true)", yes, known)
	}
	if _, known := rec.Fact(s2); known {
		t.Fatal("a fact about s1 known about s2")
	}
	rec.SetFact(s2, false)
	if yes, known := rec.Fact(s2); !known || yes {
		t.Fatalf("Fact(s2) = %v, %v after SetFact(s2, false)", yes, known)
	}
	if _, known := rec.Fact(s1); known {
		t.Fatal("the fact about s1 outlived the one about s2")
	}
}

// TestRecordAlt: the other encoding is nil until kept, made-before is
// true from the second time it is noted, the first encoding kept stays,
// and DropAlt lets go of it, calls its release once, and keeps no other.
func TestRecordAlt(t *testing.T) {
	rec, err := NewRecord("/k", []byte(`{"metadata":{"name":"a"}}`), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rec.AltMadeBefore() || rec.Alt() != nil {
		t.Fatal("a new record: made before, or an encoding kept")
	}
	if !rec.AltMadeBefore() || rec.Alt() != nil {
		t.Fatal("noted once: not made before, or an encoding kept")
	}
	released := 0
	if !rec.KeepAlt([]byte("pb"), func() { released++ }) || rec.KeepAlt([]byte("other"), nil) {
		t.Fatal("KeepAlt: the first did not keep, or the second did")
	}
	if string(rec.Alt()) != "pb" || !rec.AltMadeBefore() || string(rec.Alt()) != "pb" {
		t.Fatalf("kept: Alt() = %q", rec.Alt())
	}
	if released != 0 {
		t.Fatal("released while kept")
	}
	rec.DropAlt()
	rec.DropAlt()
	if rec.Alt() != nil || released != 1 {
		t.Fatalf("dropped: Alt() = %q, released %d times; want nil, once", rec.Alt(), released)
	}
	if rec.AltMadeBefore() || rec.KeepAlt([]byte("pb"), nil) || rec.Alt() != nil {
		t.Fatal("dropped: made before, or kept again")
	}

	fresh, _ := NewRecord("/k", []byte(`{"metadata":{"name":"a"}}`), 4)
	if !fresh.KeepAlt([]byte("pb"), nil) || string(fresh.Alt()) != "pb" {
		t.Fatal("KeepAlt on a record never noted")
	}
	fresh.DropAlt() // no release to call
	if fresh.Alt() != nil {
		t.Fatal("dropped without a release: still kept")
	}
	never, _ := NewRecord("/k", []byte(`{"metadata":{"name":"a"}}`), 5)
	never.DropAlt()
	if never.AltMadeBefore() || never.KeepAlt([]byte("pb"), nil) {
		t.Fatal("dropped before anything was noted: made before, or kept")
	}
}

// Reading a plain string allocates only the copy str returns: strBytes
// none, str one (none for a common key). A result whose address is taken
// would cost one more on every call.
func TestScannerStringAllocations(t *testing.T) {
	for _, tc := range []struct {
		data       string
		str, bytes float64
	}{{`"metadata"`, 0, 0}, {`"a-plain-value"`, 1, 0}} {
		data := []byte(tc.data)
		if n := testing.AllocsPerRun(100, func() {
			s := scanner{data: data}
			if _, err := s.str(); err != nil {
				t.Fatal(err)
			}
		}); n != tc.str {
			t.Errorf("str(%s): %v allocations, want %v", tc.data, n, tc.str)
		}
		if n := testing.AllocsPerRun(100, func() {
			s := scanner{data: data}
			if _, _, _, err := s.strBytes(); err != nil {
				t.Fatal(err)
			}
		}); n != tc.bytes {
			t.Errorf("strBytes(%s): %v allocations, want %v", tc.data, n, tc.bytes)
		}
	}
}

// A list written in pieces (WriteJSON) is the list written whole
// (AppendJSON), which is the decoded list's JSON; every piece but the
// last holds at least flushAt bytes, and flush's error ends the writing.
func TestRecordListWriteJSON(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	l := &RecordList{ResourceVersion: 4242, Continue: "c", Remaining: new(int64)}
	for i := range 300 {
		obj := randomObject(rnd)
		obj.SetName(fmt.Sprint("o", i))
		key := "/registry/configmaps/" + obj.GetNamespace() + "/" + obj.GetName()
		value, err := encode(key, obj)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := NewRecord(key, value, int64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		l.Items = append(l.Items, rec)
	}
	dec, err := l.decode(false)
	if err != nil {
		t.Fatal(err)
	}
	dec.SetAPIVersion("v1")
	dec.SetKind("ConfigMapList")
	want, err := AppendList(nil, dec)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := l.AppendJSON(nil, "v1", "ConfigMapList", false)
	if err != nil || !bytes.Equal(whole, want) {
		t.Fatalf("whole list (%v):\n got %s\nwant %s", err, whole, want)
	}
	for _, bare := range []bool{false, true} {
		whole, err := l.AppendJSON(nil, "v1", "ConfigMapList", bare)
		if err != nil {
			t.Fatal(err)
		}
		for _, flushAt := range []int{1, 100, 4096, 1 << 30} {
			var got []byte
			pieces := 0
			last, err := l.WriteJSON(make([]byte, 0, 64), "v1", "ConfigMapList", bare, flushAt, func(p []byte) error {
				if len(p) < flushAt {
					t.Fatalf("bare %v, flushAt %d: a piece of %d bytes", bare, flushAt, len(p))
				}
				got = append(got, p...)
				pieces++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got = append(got, last...); !bytes.Equal(got, whole) {
				t.Fatalf("bare %v, flushAt %d: pieces differ from the whole list:\n got %s\nwant %s", bare, flushAt, got, whole)
			}
			if flushAt == 1 && pieces != len(l.Items) || flushAt == 1<<30 && pieces != 0 {
				t.Fatalf("bare %v, flushAt %d: %d pieces for %d items", bare, flushAt, pieces, len(l.Items))
			}
		}
	}
	stop := fmt.Errorf("client gone")
	calls := 0
	if _, err := l.WriteJSON(nil, "v1", "ConfigMapList", true, 1, func([]byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("a failing flush: err %v after %d calls, want %v after 1", err, calls, stop)
	}
}

// CountEntries counts what a decode of the members would hold, without
// it, and says false for what is not an object, an array or null.
func TestRecordCountEntries(t *testing.T) {
	meta := `"metadata":{"name":"c","namespace":"d","annotations":{"data":"{\"x\":1,\"y\":2}"}}`
	for _, c := range []struct {
		value string
		want  int
		ok    bool
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":{"a":"1","b\n":"x\"y","c":"é"}}`, 3, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":{"a":"1"},"binaryData":{"b":"AQ==","c":"Ag=="}}`, 3, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `}`, 0, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":null}`, 0, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":{}}`, 0, true},
		{`{"data":{"a":{"b":[1,{"c":2}]},"z":[]},"apiVersion":"v1","kind":"ConfigMap",` + meta + `}`, 2, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":[1,[2,3],{"a":4}]}`, 3, true},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":"abc"}`, 0, false},
		{`{"apiVersion":"v1","kind":"ConfigMap",` + meta + `,"data":7}`, 0, false},
	} {
		rec, err := NewRecord("/configmaps/d/c", []byte(c.value), 5)
		if err != nil {
			t.Fatal(err)
		}
		n, ok := rec.CountEntries([]string{"data", "binaryData"})
		if n != c.want || ok != c.ok {
			t.Errorf("%s: %d, %v; want %d, %v", c.value, n, ok, c.want, c.ok)
		}
		if !ok {
			continue
		}
		m, err := rec.DecodeMembers(5, []string{"data", "binaryData"})
		if err != nil {
			t.Fatal(err)
		}
		decoded := 0
		for _, k := range []string{"data", "binaryData"} {
			switch v := m[k].(type) {
			case map[string]any:
				decoded += len(v)
			case []any:
				decoded += len(v)
			}
		}
		if decoded != n {
			t.Errorf("%s: counted %d, decoded %d", c.value, n, decoded)
		}
	}
}
