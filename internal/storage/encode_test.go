package storage

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// AppendJSON must produce exactly encoding/json's bytes.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"z":"1","a":"2"},"generation":3},"data":{"k":"v"}}`,
		`{"s":"quote\" back\\ nl\n tab\t cr\r ctl\u0001 html<>& uni\u2028\u2029 é 日本 \ud83d\ude00","n":[1,-2,3.5,1e21,12345678901234567,0.000001,-0.0],"b":[true,false,null],"e":{},"l":[]}`,
		`{"big":9007199254740993,"f":1.5e300,"neg":-7}`,
	} {
		var v map[string]any
		if err := utiljson.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendJSON(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, want)
		}
	}
	// Invalid UTF-8 is replaced as encoding/json replaces it.
	v := map[string]any{"bad": "a\xffb"}
	want, _ := json.Marshal(v)
	if got, _ := AppendJSON(nil, v); string(got) != string(want) {
		t.Errorf("invalid UTF-8: got %s want %s", got, want)
	}
}

func benchList(n int) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": map[string]any{"resourceVersion": "12345"}}}
	for i := range n {
		list.Items = append(list.Items, unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%05d", i), "namespace": "bench", "uid": "8b270a6a-60cb-4594-87da-ff3058ea1a38",
				"resourceVersion": fmt.Sprint(1000 + i), "creationTimestamp": "2026-11-23T10:57:51Z", "labels": map[string]any{"app": "bench"}},
			"data": map[string]any{"payload": strings.Repeat("x", 1024)},
		}})
	}
	return list
}

// BenchmarkListEncode compares the JSON of a 10,000-item ConfigMap list
// written with encoding/json (through UnstructuredList's MarshalJSON) and
// with the list writer.
func BenchmarkListEncode(b *testing.B) {
	list := benchList(10000)
	b.Run("codec=encoding-json", func(b *testing.B) {
		for b.Loop() {
			data, err := json.Marshal(list)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
		}
	})
	b.Run("codec=AppendJSON", func(b *testing.B) {
		for b.Loop() {
			data, err := AppendList(nil, list)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
		}
	})
}

// The stored form with the resourceVersion spliced in is the object's
// JSON with it, for any set of metadata members around where it goes.
func TestEncodedAnswerIsTheObjectsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	metaKeys := []string{"a", "annotations", "creationTimestamp", "generation", "labels", "managedFields",
		"name", "namespace", "resourceVersiom", "resourceVersionX", "uid", "zz"}
	for i := range 2000 {
		md := map[string]any{}
		for _, k := range metaKeys {
			if rng.IntN(2) == 0 {
				md[k] = fmt.Sprint("v", rng.IntN(10), "<&>\u2028")
			}
		}
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
		if rng.IntN(2) == 0 {
			obj["data"] = map[string]any{"k": "v", "n": int64(i)}
		}
		if rng.IntN(4) == 0 {
			obj["zzz"] = []any{1.5, nil, true}
		}
		u := &unstructured.Unstructured{Object: obj}
		data, enc, err := encodeAt("/k", u)
		if err != nil {
			t.Fatal(err)
		}
		want, err := AppendJSON(nil, obj)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != string(want)+"\n" {
			t.Fatalf("stored %s, want %s", data, want)
		}
		enc.rev = int64(i + 1)
		u.SetResourceVersion(fmt.Sprint(i + 1))
		want, _ = AppendJSON(nil, u.Object)
		if got := enc.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("answer %s, want %s", got, want)
		}
	}
	// Without a metadata object there is no place to splice.
	if _, enc, err := encodeAt("/k", &unstructured.Unstructured{Object: map[string]any{"kind": "X"}}); err != nil || enc != nil {
		t.Fatalf("no metadata: %v, %v", enc, err)
	}
}

// appendString must write a string as encoding/json does, escapes and
// replacements included.
func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("server:\n  host: db-1.internal\n  port: 5432\n\ttimeout: \"30s\" # <&>\r\n")
	f.Add("quote\" back\\ ctl\x01\x1f é 日本 \u2028\u2029 \U0001F600 bad\xff\xfe end")
	f.Add(strings.Repeat("abcdefghij", 20) + "\n" + strings.Repeat("k", 9))
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// configLines is n bytes of configuration text: short lines, each ending
// in a newline that JSON escapes, as a ConfigMap's files hold.
func configLines(n int) string {
	var sb strings.Builder
	for i := 0; sb.Len() < n; i++ {
		fmt.Fprintf(&sb, "  key_%d: value-%d # a comment about it\n", i, i*7)
	}
	return sb.String()[:n]
}

// BenchmarkAppendString: a ConfigMap's 1 KiB value as JSON writes it,
// with nothing to escape and as configuration text with a newline every
// 40 bytes or so.
func BenchmarkAppendString(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"letters", strings.Repeat("x", 1024)},
		{"text", configLines(1024)},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 2048)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				buf = appendString(buf[:0], c.s)
			}
		})
	}
}
