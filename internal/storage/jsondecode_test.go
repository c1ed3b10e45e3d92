package storage

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// decodeObject must give exactly what the library's decoder gives for
// everything it takes, and take the objects the store writes; the fuzz
// seeds run with go test.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		`{}`, ` {"a" : 1 } `, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"y"},"managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]},"data":{"k":"v"}}`,
		`{"i":0,"n":-12,"big":9223372036854775807,"over":9223372036854775808,"neg":-9223372036854775809,"f":1.5,"e":1e3,"E":-2E-2,"z":-0,"zf":-0.0,"huge":1e400}`,
		`{"s":"\u00e9\n\"\\\/\b\f\r\t","u":"\ud83d\ude00","bad":"\ud800","x":"<&>"}`, "{\"inv\":\"\xff\xfe\"}", "{\"ctl\":\"\x01\"}",
		`{"a":[],"b":[1,"2",null,true,false,{"c":[[]]}],"d":null}`, `{"a":1,"a":2}`,
		`[]`, `null`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":truex}`, `{"a":1,}`, `{"a":[1,]}`, `{"a" 1}`, `{a:1}`, `{"a":1}x`, `{"a":"\x"}`, `{"a":"\u12"}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeObject(data)
		var want map[string]any
		err := utiljson.Unmarshal(data, &want)
		if _, withoutOK := decodeObjectWithout(data, "managedFields"); withoutOK && err != nil {
			t.Fatalf("%q: taken without managedFields, but the library says %v", data, err)
		}
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("%q: taken, but the library says %v", data, err)
		}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
		without, ok := decodeObjectWithout(data, "managedFields")
		delete(want, "managedFields")
		if !ok || !equality.Semantic.DeepEqual(without, want) {
			t.Fatalf("%q without managedFields:\n got %#v, %v\nwant %#v", data, without, ok, want)
		}
	})
}

// The documents the store writes must all be taken (else every read
// would go the slow way).
func TestDecodeObjectTakesStoredObjects(t *testing.T) {
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u","creationTimestamp":"2026-01-02T03:04:05Z","labels":{"x":"y"}},"data":{"k":"v\u003c\n"}}` + "\n",
		`{"a":[1,2.5,-3e-7,"x",true,false,null,{},[]]}`,
	} {
		if _, ok := decodeObject([]byte(s)); !ok {
			t.Errorf("%s: not taken", s)
		}
	}
}

// BenchmarkDecode compares reading a stored 1 KiB ConfigMap (with its
// managedFields) back into an object with the library's decoder
// (Unstructured.UnmarshalJSON) and with decodeObject.
func BenchmarkDecode(b *testing.B) {
	data := []byte(`{"apiVersion":"v1","data":{"payload":"` + strings.Repeat("x", 1024) + `"},"kind":"ConfigMap","metadata":{"creationTimestamp":"2026-11-23T16:30:05Z","labels":{"app":"kplane-bench"},` +
		`"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"kplane-bench","operation":"Update","time":"2026-11-23T16:30:05Z"}],` +
		`"name":"bench-1","namespace":"default","uid":"8b270a6a-60cb-4594-87da-ff3058ea1a38"}}` + "\n")
	b.Run("codec=library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=decodeObject", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unmarshalObject(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeText is decodeObject on a ConfigMap of configuration
// text: a string with an escaped newline every 40 bytes or so.
func BenchmarkDecodeText(b *testing.B) {
	text, err := json.Marshal(configLines(1024))
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"apiVersion":"v1","data":{"payload":` + string(text) + `},"kind":"ConfigMap","metadata":{"name":"bench-1","namespace":"default"}}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := unmarshalObject(data); err != nil {
			b.Fatal(err)
		}
	}
}
