package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// configMapKind is the core ConfigMap kind.
func configMapKind() *registry.Kind {
	for _, k := range core.Kinds() {
		if k.Kind == "ConfigMap" {
			return k
		}
	}
	panic("no ConfigMap kind")
}

// A protobuf list written from records decodes, with apimachinery's own
// serializer, to the list the JSON holds; a second list, which copies the
// kept messages, gives the same bytes, as do lists that hold none, some
// or all of their messages while they count the list's length.
func TestRecordsProtoList(t *testing.T) {
	k := configMapKind()
	remaining := int64(7)
	newList := func() *storage.RecordList {
		list := &storage.RecordList{ResourceVersion: 42, Continue: "tok", Remaining: &remaining}
		for i := range 5 {
			value, _ := storage.AppendJSON(nil, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprint("c", i), "namespace": "ns", "labels": map[string]any{"a": "b"}},
				"data":     map[string]any{"k": fmt.Sprint("v\u00e9", i)}})
			r, err := storage.NewRecord(fmt.Sprint("/configmaps/ns/c", i), value, int64(10+i))
			if err != nil {
				t.Fatal(err)
			}
			list.Items = append(list.Items, r)
		}
		return list
	}
	list := newList()
	var want corev1.ConfigMapList
	for _, r := range list.Items {
		served, _ := r.AppendJSON(nil, r.Rev)
		var cm corev1.ConfigMap
		if err := json.Unmarshal(served, &cm); err != nil {
			t.Fatal(err)
		}
		cm.TypeMeta = metav1.TypeMeta{}
		want.Items = append(want.Items, cm)
	}
	want.ResourceVersion, want.Continue, want.RemainingItemCount = "42", "tok", &remaining

	first, err := writeProtoList(nil, k, "v1", list, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		if r.Alt() != nil {
			t.Fatalf("%s: a message kept after one list", r.Key)
		}
	}
	// With none, some or all of the messages held while the length is
	// counted (the others transcoded again as they go out), the same
	// bytes, and still nothing kept after a list read once.
	defer func(held int) { maxHeldItems = held }(maxHeldItems)
	for _, held := range []int{0, 1, len(first) / 2} {
		maxHeldItems = held
		fresh := newList()
		if got, err := writeProtoList(nil, k, "v1", fresh, 0, nil); err != nil || !bytes.Equal(got, first) {
			t.Fatalf("holding %d bytes of messages: the list differs (%v)", held, err)
		}
		for _, r := range fresh.Items {
			if r.Alt() != nil {
				t.Fatalf("holding %d bytes of messages: %s: a message kept after one list", held, r.Key)
			}
		}
	}
	maxHeldItems = 1 << 20
	// Byte for byte what apimachinery's runtime.Unknown writes around the
	// list message, in the serializer's envelope.
	lm := metav1.ListMeta{ResourceVersion: "42", Continue: "tok", RemainingItemCount: &remaining}
	meta, _ := lm.Marshal()
	body := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), meta)
	for _, r := range list.Items {
		msg, err := appendRecordProto(nil, new([]byte), k, "v1", r, r.Rev) // the second read: kept
		if err != nil {
			t.Fatal(err)
		}
		body = protowire.AppendBytes(protowire.AppendTag(body, 2, protowire.BytesType), msg)
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"}, Raw: body}
	env, _ := unk.Marshal()
	if want := append([]byte("k8s\x00"), env...); !bytes.Equal(first, want) {
		t.Fatalf("the list's envelope differs from runtime.Unknown's:\n got %q\nwant %q", first, want)
	}
	// Appended to what a pooled buffer held before, the same bytes.
	if again, err := writeProtoList([]byte("leftover")[:0], k, "v1", list, 0, nil); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("appended to a used buffer: %v", err)
	}
	var got corev1.ConfigMapList
	obj, gvk, err := protoSerializer.Decode(first, nil, &got)
	if err != nil || obj != &got || gvk.Kind != "ConfigMapList" || gvk.Version != "v1" {
		t.Fatalf("decode: %v %v", err, gvk)
	}
	got.TypeMeta = metav1.TypeMeta{}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if !bytes.Equal(gj, wj) {
		t.Fatalf("got  %s\nwant %s", gj, wj)
	}
	for _, r := range list.Items {
		if r.Alt() == nil {
			t.Fatalf("%s: no protobuf message kept, asked for twice", r.Key)
		}
	}
	second, err := writeProtoList(nil, k, "v1", list, 0, nil)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("the second list differs: %v", err)
	}
	list = newList()
	maxHeldItems = 1
	// Written in pieces, the same bytes; every piece but the last holds
	// at least flushAt of them.
	for _, flushAt := range []int{1, 100, 1 << 30} {
		var got []byte
		last, err := writeProtoList(nil, k, "v1", list, flushAt, func(p []byte) error {
			if len(p) < flushAt {
				t.Fatalf("flushAt %d: a piece of %d bytes", flushAt, len(p))
			}
			got = append(got, p...)
			return nil
		})
		if got = append(got, last...); err != nil || !bytes.Equal(got, first) {
			t.Fatalf("flushAt %d: the pieces differ from the whole list (%v):\n got %q\nwant %q", flushAt, err, got, first)
		}
	}
}

// A record's object in protobuf is byte for byte what apimachinery's
// serializer writes for the typed object, the first two times (made; the
// second kept) and the third (from the message kept with the record),
// and at another resourceVersion, as a DELETED event has it.
func TestRecordProtoObject(t *testing.T) {
	k := configMapKind()
	u := map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "labels": map[string]any{"a": "b"}, "uid": "u-1"},
		"data":     map[string]any{"k": "v\u00e9"}, "binaryData": map[string]any{"b": "AAE="}}
	value, _ := storage.AppendJSON(nil, u)
	r, err := storage.NewRecord("/configmaps/ns/c", value, 12)
	if err != nil {
		t.Fatal(err)
	}
	want := typedConfigMapProto(t, r, r.Rev)
	for i := range 3 {
		got, err := recordProtoObject(k, "v1", r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d: got\n%q\nwant\n%q", i, got, want)
		}
		if kept := r.Alt() != nil; kept != (i > 0) {
			t.Fatalf("after %d reads: a message kept with the record: %v", i+1, kept)
		}
	}
	want = typedConfigMapProto(t, r, 15)
	if got, err := recordProtoObjectAt(k, "v1", r, 15); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("at revision 15 (%v): got\n%q\nwant\n%q", err, got, want)
	}
}

// typedConfigMapProto is the ConfigMap of r at rev as apimachinery's
// serializer writes the typed object in protobuf: the reference for the
// bytes made from the record.
func typedConfigMapProto(t *testing.T, r *storage.Record, rev int64) []byte {
	t.Helper()
	served, err := r.AppendJSON(nil, rev)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(served, &cm); err != nil {
		t.Fatal(err)
	}
	var enc bytes.Buffer
	if err := protoSerializer.Encode(&cm, &enc); err != nil {
		t.Fatal(err)
	}
	return enc.Bytes()
}

// A watch event written in place (appendRecordWatchEvent) is the event
// written from the record's object in protobuf: made into a pooled
// buffer before the record keeps its message, from that message once it
// does, and made again at another resourceVersion (a DELETED event's),
// which the kept message is not. envelopeSize is the envelope's length.
func TestAppendRecordWatchEvent(t *testing.T) {
	k := configMapKind()
	value, _ := storage.AppendJSON(nil, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u-1"},
		"data":     map[string]any{"k": strings.Repeat("v", 200)}})
	r, err := storage.NewRecord("/configmaps/ns/c", value, 12)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, typ watch.EventType, rev int64) {
		t.Helper()
		obj := typedConfigMapProto(t, r, rev)
		got, err := appendRecordWatchEvent([]byte("before"), k, "v1", typ, r, rev)
		if w := appendProtoWatchEvent([]byte("before"), typ, obj); err != nil || !bytes.Equal(got, w) {
			t.Fatalf("%s, %s at %d (%v): got\n%q\nwant\n%q", what, typ, rev, err, got, w)
		}
	}
	check("nothing kept", watch.Added, 12)
	check("nothing kept", watch.Modified, 12)
	if r.Alt() == nil {
		t.Fatal("no message kept after two reads")
	}
	for _, typ := range []watch.EventType{watch.Added, watch.Modified} {
		check("kept", typ, 12)
	}
	check("kept, at another revision", watch.Deleted, 15)
	for _, gvk := range []schema.GroupVersionKind{k.GroupVersionKind("v1"), {Group: "apps", Version: "v1", Kind: "Deployment"}} {
		for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 70000} {
			if got, want := envelopeSize(gvk, n), len(appendEnvelope(nil, gvk, make([]byte, n))); got != want {
				t.Errorf("envelopeSize(%v, %d) = %d, the envelope is %d bytes", gvk, n, got, want)
			}
		}
	}
}

// An object the transcoder refuses (a member whose key matches a field
// only without regard to case) is made the long way, through its Go
// type, and comes out as that way makes it.
func TestRecordProtoRefusedByTheTranscoder(t *testing.T) {
	k := configMapKind()
	value := []byte(`{"Data":{"a":"b"},"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"}}`)
	r, err := storage.NewRecord("/configmaps/ns/c", value, 12)
	if err != nil {
		t.Fatal(err)
	}
	served, _ := r.AppendJSON(nil, r.Rev)
	if _, ok := planFor(k, "v1").Append(nil, served); ok {
		t.Fatal("the transcoder took the object: the test does not reach the long way")
	}
	got, err := appendRecordProto([]byte("x"), new([]byte), k, "v1", r, r.Rev)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := r.Decode(r.Rev)
	typed, err := typedFromObject(k, "v1", obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := typed.(*corev1.ConfigMap).Marshal()
	if string(got[:1]) != "x" || !bytes.Equal(got[1:], want) {
		t.Fatalf("got\n%q\nwant\n%q", got[1:], want)
	}
}

// The messages kept with records stay within protoKept's bound, and a
// record gives its message's bytes back when it drops it or is collected.
func TestProtoKeptIsBounded(t *testing.T) {
	k := configMapKind()
	readTwice := func(recs []*storage.Record) {
		for range 2 {
			for _, r := range recs {
				if _, err := appendRecordProto(nil, new([]byte), k, "v1", r, r.Rev); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	msg, _ := appendRecordProto(nil, new([]byte), k, "v1", configMapRecords(t, 1)[0], 10)
	defer func(kept *keptBytes) { protoKept = kept }(protoKept)
	protoKept = &keptBytes{max: 3 * int64(len(msg))}

	recs := configMapRecords(t, 5)
	readTwice(recs)
	for i, r := range recs {
		if kept := r.Alt() != nil; kept != (i < 3) {
			t.Fatalf("record %d: kept %v; want the first 3 of 5 kept", i, kept)
		}
	}
	if got := protoKept.n.Load(); got != 3*int64(len(msg)) {
		t.Fatalf("kept %d bytes, want %d", got, 3*len(msg))
	}

	// A record that lets go of its message gives the bytes back at once,
	// and the next record read twice is kept in its place.
	recs[0].DropAlt()
	if got := protoKept.n.Load(); got != 2*int64(len(msg)) {
		t.Fatalf("dropped one: %d bytes counted, want %d", got, 2*len(msg))
	}
	readTwice(recs)
	for i, r := range recs {
		if kept := r.Alt() != nil; kept != (i == 1 || i == 2 || i == 3) {
			t.Fatalf("after a drop, record %d: kept %v; want records 1 to 3 kept", i, kept)
		}
	}

	// Collected, they give the bytes back, and others are kept.
	recs = nil
	for i := 0; protoKept.n.Load() != 0; i++ {
		if i == 1000 {
			t.Fatalf("%d bytes still counted after the records were collected", protoKept.n.Load())
		}
		goruntime.GC()
		goruntime.Gosched() // the cleanups run on a goroutine of their own
	}
	more := configMapRecords(t, 2)
	readTwice(more)
	if more[0].Alt() == nil || more[1].Alt() == nil {
		t.Fatal("nothing kept once the bytes were given back")
	}
}

// configMapRecords returns n records of ConfigMaps of 100 bytes of data,
// c0… in ns, at revisions 10….
func configMapRecords(t *testing.T, n int) []*storage.Record {
	t.Helper()
	var recs []*storage.Record
	for i := range n {
		value, _ := storage.AppendJSON(nil, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("c", i), "namespace": "ns"},
			"data":     map[string]any{"k": strings.Repeat("x", 100)}})
		r, err := storage.NewRecord(fmt.Sprint("/configmaps/ns/c", i), value, int64(10+i))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Messages kept and dropped at once, from several goroutines (lists
// reading records while the watch cache supersedes them): each record's
// bytes are given back once, and the count ends as what the records
// still keep.
func TestProtoKeptWhileDropped(t *testing.T) {
	k := configMapKind()
	defer func(kept *keptBytes) { protoKept = kept }(protoKept)
	protoKept = &keptBytes{max: 1 << 30}
	recs := configMapRecords(t, 300)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			for round := range 3 {
				for i, r := range recs {
					if _, err := appendRecordProto(nil, new([]byte), k, "v1", r, r.Rev); err != nil {
						errs <- err
						return
					}
					if g == round && i%3 == round && round < 2 {
						r.DropAlt() // two thirds, each by one goroutine
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want int64
	kept, dropped := 0, 0
	for _, r := range recs {
		if b := r.Alt(); b != nil {
			want += int64(len(b))
			kept++
		} else {
			dropped++
		}
	}
	if got := protoKept.n.Load(); got != want || kept != 100 || dropped != 200 {
		t.Fatalf("%d bytes counted, the records keep %d (%d kept, %d dropped; want 100 and 200)", got, want, kept, dropped)
	}
}

// A protobuf watch event is the bytes apimachinery's stream encoder
// writes: metav1.WatchEvent's message behind its length, and it reads
// back through the length-delimited framer and the raw serializer, as
// client-go reads a watch.
func TestAppendProtoWatchEvent(t *testing.T) {
	for _, typ := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		for _, obj := range [][]byte{[]byte("k8s\x00x"), bytes.Repeat([]byte("y"), 300), bytes.Repeat([]byte("z"), 70000)} {
			got := appendProtoWatchEvent([]byte("before"), typ, obj)
			msg, err := (&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: obj}}).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			want := binary.BigEndian.AppendUint32([]byte("before"), uint32(len(msg)))
			if want = append(want, msg...); !bytes.Equal(got, want) {
				t.Fatalf("%s, %d bytes: got\n%q\nwant\n%q", typ, len(obj), got, want)
			}
			r := protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(bytes.NewReader(got[len("before"):])))
			var ev metav1.WatchEvent
			if _, _, err := streaming.NewDecoder(r, protobuf.NewRawSerializer(protoScheme(), protoScheme())).Decode(nil, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type != string(typ) || !bytes.Equal(ev.Object.Raw, obj) {
				t.Fatalf("read back %s, %d bytes", ev.Type, len(ev.Object.Raw))
			}
		}
	}
}

// A PartialObjectMetadata's message is transcoded from its JSON, not made
// through the Go type: the plan takes what appendPartial writes, and
// writes what the generated Marshal writes. A JSON form the plan refuses
// (here, a key given twice) still gives the right message, the long way.
func TestPartialProtoIsTranscoded(t *testing.T) {
	p := partialPlan()
	if p == nil {
		t.Fatal("no transcode plan for PartialObjectMetadata")
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
		"name": "a", "namespace": "default", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2026-11-26T10:00:00Z",
		"labels": map[string]any{"x": "y"}, "finalizers": []any{"f"},
		"managedFields": []any{map[string]any{"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2026-11-26T10:00:00Z",
			"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:data": map[string]any{}}}},
	}}}
	data, err := appendPartial(nil, nil, 0, obj)
	if err != nil {
		t.Fatal(err)
	}
	var want metav1.PartialObjectMetadata
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	wantMsg, _ := want.Marshal()
	got, ok := p.Append(nil, data)
	if !ok || !bytes.Equal(got, wantMsg) {
		t.Fatalf("plan: ok %v\n got %q\nwant %q", ok, got, wantMsg)
	}
	var scratch []byte
	if got, err = appendPartialProto(nil, &scratch, nil, 0, obj); err != nil || !bytes.Equal(got, wantMsg) {
		t.Fatalf("appendPartialProto: %v\n got %q\nwant %q", err, got, wantMsg)
	}
	twice := bytes.Replace(data, []byte(`"name":"a"`), []byte(`"name":"a","name":"a"`), 1)
	if _, ok := p.Append(nil, twice); ok {
		t.Fatal("the plan took a key given twice")
	}
}

// BenchmarkRecordWatchEvent: a protobuf watch event of a ConfigMap of
// 1 KiB, as the watch handler writes it into its buffer. shared: the
// object enveloped once into a slice kept for every watcher of the event
// (RecordJSON.Other), then copied into the frame; alone: made into a
// pooled buffer and enveloped in place, for an event that one watcher
// alone is sent (a watch-list's initial events); kept: written straight
// from the message kept with the record. Nothing is kept in the first
// two, as for objects listed once (an informer's first sync).
func BenchmarkRecordWatchEvent(b *testing.B) {
	k := configMapKind()
	value, _ := storage.AppendJSON(nil, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u-1", "creationTimestamp": "2026-11-26T10:00:00Z"},
		"data":     map[string]any{"k": strings.Repeat("v", 1024)}})
	r, err := storage.NewRecord("/configmaps/ns/c", value, 12)
	if err != nil {
		b.Fatal(err)
	}
	defer func(kept *keptBytes) { protoKept = kept }(protoKept)
	protoKept = &keptBytes{max: 0}
	buf := make([]byte, 0, 4096)
	b.Run("shared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, err := storage.NewRecordJSON(r, r.Rev).Other(func(rec *storage.Record, rev int64) ([]byte, error) { return recordProtoObjectAt(k, "v1", rec, rev) })
			if err != nil {
				b.Fatal(err)
			}
			buf = appendProtoWatchEvent(buf[:0], watch.Added, obj)
		}
	})
	b.Run("alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = appendRecordWatchEvent(buf[:0], k, "v1", watch.Added, r, r.Rev); err != nil {
				b.Fatal(err)
			}
		}
	})
	protoKept = &keptBytes{max: 1 << 20}
	for range 2 {
		if _, err := recordProtoObject(k, "v1", r); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = appendRecordWatchEvent(buf[:0], k, "v1", watch.Added, r, r.Rev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
