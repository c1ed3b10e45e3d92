package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"google.golang.org/protobuf/encoding/protowire"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/apiserver/transcode"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// protoScheme knows the built-in kinds' Go types, for protobuf request
// bodies and responses (kubectl and typed clients use protobuf for
// built-in kinds) and for the List types the OpenAPI documents refer to.
// Custom resources have no protobuf form: a client that also accepts JSON
// gets JSON, as from kube-apiserver. It is built on first use, so that a
// server nobody has asked for protobuf or OpenAPI yet does not hold it.
var protoScheme = sync.OnceValue(func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{admissionregistrationv1.AddToScheme, corev1.AddToScheme, eventsv1.AddToScheme, coordinationv1.AddToScheme, authorizationv1.AddToScheme, authenticationv1.AddToScheme, rbacv1.AddToScheme, apiextensionsv1.AddToScheme, flowcontrolv1.AddToScheme, certificatesv1.AddToScheme, svmv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // a broken scheme is a programming error
		}
	}
	return scheme
})

// protoSerializer is the protobuf serializer over protoScheme, built with
// it on first use.
var protoSerializer lazyProtoSerializer

type lazyProtoSerializer struct{}

var newProtoSerializer = sync.OnceValue(func() *protobuf.Serializer {
	return protobuf.NewSerializer(protoScheme(), protoScheme())
})

func (lazyProtoSerializer) Encode(obj runtime.Object, w io.Writer) error {
	return newProtoSerializer().Encode(obj, w)
}

func (lazyProtoSerializer) Decode(data []byte, gvk *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return newProtoSerializer().Decode(data, gvk, into)
}

// protoCapable reports whether version v of kind k has a protobuf form.
func protoCapable(k *registry.Kind, v string) bool {
	if k == nil || k.Typed == nil {
		return false
	}
	gvk := k.GroupVersionKind(v)
	// A review has no list.
	return protoScheme().Recognizes(gvk) && (k.Review != nil || protoScheme().Recognizes(gvk.GroupVersion().WithKind(k.ListKind)))
}

// typedFromJSON decodes an object's JSON into version v of kind k's Go
// type.
func typedFromJSON(k *registry.Kind, v string, data []byte) (runtime.Object, error) {
	obj, err := protoScheme().New(k.GroupVersionKind(v))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// writeProto writes obj (typed, its TypeMeta set) in protobuf.
func writeProto(w http.ResponseWriter, code int, obj runtime.Object) {
	var buf bytes.Buffer
	if err := protoSerializer.Encode(obj, &buf); err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", protobufType)
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// typedFromObject converts an object's map into version v of kind k's Go
// type: by the unstructured converter, twice as fast as decoding its
// JSON; by its JSON when the converter refuses it. A test holds the two
// equal over random objects of every kind with a protobuf form.
//
// The metadata's times and managedFields are lifted out and converted
// here: the converter takes each of them (types with their own JSON
// decode) through a json.Marshal of its value and the type's
// UnmarshalJSON, a third of its time on a 1 KiB ConfigMap.
func typedFromObject(k *registry.Kind, v string, obj map[string]any) (runtime.Object, error) {
	typed, err := protoScheme().New(k.GroupVersionKind(v))
	if err != nil {
		return nil, err
	}
	if rest, lifted, ok := liftMetadata(obj); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(rest, typed) == nil {
		if m, err := apimeta.Accessor(typed); err == nil {
			lifted.setOn(m)
			return typed, nil
		}
		if typed, err = protoScheme().New(k.GroupVersionKind(v)); err != nil {
			return nil, err
		}
	}
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, typed) == nil {
		return typed, nil
	}
	data, err := storage.AppendJSON(make([]byte, 0, 2048), obj)
	if err != nil {
		return nil, err
	}
	return typedFromJSON(k, v, data)
}

// liftedMetadata is what liftMetadata took out of an object's metadata,
// converted: its creationTimestamp and managedFields, where present.
type liftedMetadata struct {
	created           metav1.Time
	managed           []metav1.ManagedFieldsEntry
	hasCreated, hasMF bool
}

func (l *liftedMetadata) setOn(m metav1.Object) {
	if l.hasCreated {
		m.SetCreationTimestamp(l.created)
	}
	if l.hasMF {
		m.SetManagedFields(l.managed)
	}
}

// liftMetadata returns obj without its metadata's creationTimestamp and
// managedFields (copies of the two maps; obj is not modified) and the two
// converted, as a JSON decode of the object would give them. ok is false
// when there is nothing to lift or a value is not in the form the store
// writes (a time not in RFC 3339, a null, a member the Go type lacks):
// the converter then takes the object whole, as before.
func liftMetadata(obj map[string]any) (rest map[string]any, l liftedMetadata, ok bool) {
	md, isMap := obj["metadata"].(map[string]any)
	if !isMap {
		return nil, l, false
	}
	created, hasCreated := md["creationTimestamp"]
	_, hasMF := md["managedFields"]
	if !hasCreated && !hasMF {
		return nil, l, false
	}
	if hasCreated {
		if l.created, ok = parseTime(created); !ok {
			return nil, l, false
		}
		l.hasCreated = true
	}
	if hasMF {
		if l.managed, ok = registry.ManagedFieldsEntries(obj); !ok {
			return nil, l, false
		}
		l.hasMF = true
	}
	rmd := make(map[string]any, len(md))
	for key, val := range md {
		if key != "creationTimestamp" && key != "managedFields" {
			rmd[key] = val
		}
	}
	rest = make(map[string]any, len(obj))
	for key, val := range obj {
		rest[key] = val
	}
	rest["metadata"] = rmd
	return rest, l, true
}

// parseTime is metav1.Time's JSON decode of a string member.
func parseTime(v any) (metav1.Time, bool) {
	s, ok := v.(string)
	if !ok || s == "" {
		return metav1.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return metav1.Time{}, false
	}
	return metav1.NewTime(t.Local()), true
}

// writeProtoMessage answers code with version v of kind k's object in
// protobuf: the message appendMsg appends, in the serializer's envelope,
// assembled in pooled buffers. An error appending it is the answer.
func writeProtoMessage(w http.ResponseWriter, k *registry.Kind, v string, code int, appendMsg func(dst, scratch []byte) (msg, scratchOut []byte, err error)) {
	writeProtoAs(w, k.GroupVersionKind(v), code, appendMsg)
}

// writeProtoAs is writeProtoMessage for a message of kind gvk.
func writeProtoAs(w http.ResponseWriter, gvk schema.GroupVersionKind, code int, appendMsg func(dst, scratch []byte) (msg, scratchOut []byte, err error)) {
	msgs := protoItems.Get().(*itemsBuffer)
	defer msgs.put()
	var err error
	if msgs.msgs, msgs.spare, err = appendMsg(msgs.msgs[:0], msgs.spare[:0]); err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writePooled(w, &answerBuffers, maxPooledAnswer, protobufType, code, func(b []byte) ([]byte, error) {
		return appendEnvelope(b, gvk, msgs.msgs), nil
	})
}

// The kinds of metadata-only answers (meta.k8s.io/v1).
var (
	partialGVK     = metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")
	partialListGVK = metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList")
)

// partialPlan transcodes a PartialObjectMetadata's JSON into its message.
var partialPlan = sync.OnceValue(func() *transcode.Plan {
	return transcode.For(reflect.TypeFor[metav1.PartialObjectMetadata]())
})

// appendPartialProto appends the PartialObjectMetadata message of a
// stored object, rec at rev or obj (as appendPartial takes them),
// transcoded from its JSON, which scratch holds; or, for what the plan
// refuses, decoded into the Go type and marshaled.
func appendPartialProto(dst []byte, scratch *[]byte, rec *storage.Record, rev int64, obj *unstructured.Unstructured) ([]byte, error) {
	data, err := appendPartial((*scratch)[:0], rec, rev, obj)
	if err != nil {
		return nil, err
	}
	*scratch = data
	if p := partialPlan(); p != nil {
		if out, ok := p.Append(dst, data); ok {
			return out, nil
		}
	}
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return appendMarshaled(dst, &m)
}

// appendMarshaled appends m's generated Marshal.
func appendMarshaled(dst []byte, m protoMessage) ([]byte, error) {
	n := m.Size()
	dst = slices.Grow(dst, n)
	if _, err := m.MarshalToSizedBuffer(dst[len(dst) : len(dst)+n]); err != nil {
		return nil, err
	}
	return dst[:len(dst)+n], nil
}

// writePartialProto answers code with a stored object's
// PartialObjectMetadata in protobuf: rec at rev, or obj.
func writePartialProto(w http.ResponseWriter, code int, rec *storage.Record, rev int64, obj *unstructured.Unstructured) {
	writeProtoAs(w, partialGVK, code, func(dst, scratch []byte) ([]byte, []byte, error) {
		dst, err := appendPartialProto(dst, &scratch, rec, rev, obj)
		return dst, scratch, err
	})
}

// partialProtoObject is a stored object's PartialObjectMetadata in
// protobuf, in the serializer's envelope, as a watch event carries it.
func partialProtoObject(rec *storage.Record, rev int64, obj *unstructured.Unstructured) ([]byte, error) {
	scratch := jsonScratch.Get().(*[]byte)
	defer jsonScratch.Put(scratch)
	msgs := protoItems.Get().(*itemsBuffer)
	defer msgs.put()
	var err error
	if msgs.msgs, err = appendPartialProto(msgs.msgs[:0], scratch, rec, rev, obj); err != nil {
		return nil, err
	}
	return appendEnvelope(nil, partialGVK, msgs.msgs), nil
}

// partialListProto is a PartialObjectMetadataList of objects in
// protobuf, in the serializer's envelope.
func partialListProto(items []unstructured.Unstructured, meta metav1.ListMeta) ([]byte, error) {
	list := &metav1.PartialObjectMetadataList{ListMeta: meta}
	for i := range items {
		list.Items = append(list.Items, *partial(&items[i]))
	}
	msg, err := appendMarshaled(nil, list)
	if err != nil {
		return nil, err
	}
	return appendEnvelope(nil, partialListGVK, msg), nil
}

// writeProtoJSON answers code with the protobuf form of version v of
// kind k's object whose JSON appendJSON appends.
func writeProtoJSON(w http.ResponseWriter, k *registry.Kind, v string, code int, appendJSON func([]byte) ([]byte, error)) {
	writeProtoMessage(w, k, v, code, func(dst, scratch []byte) ([]byte, []byte, error) {
		data, err := appendJSON(scratch)
		if err != nil {
			return nil, scratch, err
		}
		dst, err = appendProtoMessage(dst, k, v, data)
		return dst, data, err
	})
}

// writeProtoObject writes an object of kind k in protobuf.
func writeProtoObject(w http.ResponseWriter, k *registry.Kind, v string, code int, obj *unstructured.Unstructured) {
	writeProtoJSON(w, k, v, code, func(b []byte) ([]byte, error) { return storage.AppendJSON(b, obj.Object) })
}

// writeProtoRecord writes a record's object in protobuf.
func writeProtoRecord(w http.ResponseWriter, k *registry.Kind, v string, code int, r *storage.Record) {
	writeProtoMessage(w, k, v, code, func(dst, scratch []byte) ([]byte, []byte, error) {
		dst, err := appendRecordProto(dst, &scratch, k, v, r, r.Rev)
		return dst, scratch, err
	})
}

// protoList builds the typed list of kind k from the items' JSON.
func protoList(k *registry.Kind, v string, n int, item func(i int, b []byte) ([]byte, error), meta metav1.ListMeta) (runtime.Object, error) {
	gvk := k.GroupVersionKind(v).GroupVersion().WithKind(k.ListKind)
	list, err := protoScheme().New(gvk)
	if err != nil {
		return nil, err
	}
	items := make([]runtime.Object, n)
	var buf []byte
	for i := range n {
		if buf, err = item(i, buf[:0]); err != nil {
			return nil, err
		}
		if items[i], err = typedFromJSON(k, v, buf); err != nil {
			return nil, err
		}
	}
	if err := apimeta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, err := apimeta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(meta.ResourceVersion)
	lm.SetContinue(meta.Continue)
	lm.SetRemainingItemCount(meta.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(gvk)
	return list, nil
}

// decodeProto decodes a protobuf body of kind k into its Go type, its
// apiVersion and kind set.
func decodeProto(k *registry.Kind, v string, body []byte) (runtime.Object, error) {
	if k.Typed == nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: errUnknownBodyFormat,
		}}
	}
	gvk := k.GroupVersionKind(v)
	obj, _, err := protoSerializer.Decode(body, &gvk, k.Typed())
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", k.Kind, v, k.Kind, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// protoMessage is what k8s.io/api's generated types implement.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// protoPlans holds each built-in kind version's transcode.Plan, by
// GroupVersionKind; nil for one without.
var protoPlans sync.Map

func planFor(k *registry.Kind, v string) *transcode.Plan {
	gvk := k.GroupVersionKind(v)
	if p, ok := protoPlans.Load(gvk); ok {
		return p.(*transcode.Plan)
	}
	var p *transcode.Plan
	if obj, err := protoScheme().New(gvk); err == nil {
		p = transcode.For(reflect.TypeOf(obj).Elem())
	}
	protoPlans.Store(gvk, p)
	return p
}

// appendProtoMessage appends the protobuf message of version v of kind
// k's object whose JSON is data: transcoded from the JSON, or, for what
// the plan refuses, made the long way (decoded, converted into the Go
// type, marshaled).
func appendProtoMessage(dst []byte, k *registry.Kind, v string, data []byte) ([]byte, error) {
	if p := planFor(k, v); p != nil {
		if out, ok := p.Append(dst, data); ok {
			return out, nil
		}
	}
	var obj map[string]any
	if err := storage.UnmarshalMap(data, &obj); err != nil {
		return nil, err
	}
	return appendTypedMessage(dst, k, v, obj)
}

// appendTypedMessage appends the protobuf message of an object's map,
// through its Go type.
func appendTypedMessage(dst []byte, k *registry.Kind, v string, obj map[string]any) ([]byte, error) {
	typed, err := typedFromObject(k, v, obj)
	if err != nil {
		return nil, err
	}
	m, ok := typed.(protoMessage)
	if !ok {
		return nil, fmt.Errorf("%T has no protobuf form", typed)
	}
	return appendMarshaled(dst, m)
}

// jsonScratch holds a record's JSON while its message is transcoded.
var jsonScratch = sync.Pool{New: func() any { return new([]byte) }}

// appendRecordProto appends the protobuf message of a record's object
// with resourceVersion rev, transcoded from its JSON (scratch holds the
// JSON) or copied from the message kept with the record. The message of
// the record's own revision in its stored version is kept the second
// time it is made, within protoKept: objects read again (a client that
// polls a list, a repeated paged walk, a GET after a watch event) are
// then copied as JSON is, while those read once, as an informer's list
// reads them, cost no memory.
func appendRecordProto(dst []byte, scratch *[]byte, k *registry.Kind, v string, r *storage.Record, rev int64) ([]byte, error) {
	keep := keepable(k, v, r, rev)
	if keep {
		if b := r.Alt(); b != nil {
			return append(dst, b...), nil
		}
		keep = r.AltMadeBefore()
	}
	start := len(dst)
	dst, err := transcodeRecord(dst, scratch, k, v, r, rev)
	if err == nil && keep {
		protoKept.keep(r, dst[start:])
	}
	return dst, err
}

// appendRecordProtoAgain is appendRecordProto for a message the same
// answer made before (a long list measures its items, then writes them):
// it neither keeps the message nor counts as a read.
func appendRecordProtoAgain(dst []byte, scratch *[]byte, k *registry.Kind, v string, r *storage.Record, rev int64) ([]byte, error) {
	if keepable(k, v, r, rev) {
		if b := r.Alt(); b != nil {
			return append(dst, b...), nil
		}
	}
	return transcodeRecord(dst, scratch, k, v, r, rev)
}

// keepable reports whether the message of r at rev in version v is one
// kept with the record: its own revision, in the version it is stored in.
func keepable(k *registry.Kind, v string, r *storage.Record, rev int64) bool {
	return rev == r.Rev && r.APIVersion() == k.GroupVersionKind(v).GroupVersion().String()
}

// transcodeRecord appends the protobuf message of r's object at rev,
// made from its JSON, which scratch holds.
func transcodeRecord(dst []byte, scratch *[]byte, k *registry.Kind, v string, r *storage.Record, rev int64) ([]byte, error) {
	data, err := r.AppendJSON((*scratch)[:0], rev)
	if err != nil {
		return nil, err
	}
	*scratch = data
	return appendProtoMessage(dst, k, v, data)
}

// protoKept bounds the protobuf messages kept with records (several
// servers in one process share it). 16 MiB holds 10,000 ConfigMaps of
// 1.5 KB; past it, messages are transcoded on each read, and a large
// store's memory stays that of its JSON.
var protoKept = &keptBytes{max: 16 << 20}

// keptBytes counts the bytes kept with records, up to max.
type keptBytes struct {
	n   atomic.Int64
	max int64
}

// keep keeps a copy of b with r if it fits and r keeps no other, and
// counts it until r lets go of it (storage.Record.DropAlt) or is
// collected, whichever comes first.
func (k *keptBytes) keep(r *storage.Record, b []byte) {
	n := int64(len(b))
	if k.n.Load()+n > k.max {
		return
	}
	c := &keptCount{k: k, n: n}
	if !r.KeepAlt(bytes.Clone(b), c.release) {
		return
	}
	k.n.Add(n)
	goruntime.AddCleanup(r, (*keptCount).release, c)
}

// keptCount is the bytes one record keeps, given back to k once.
type keptCount struct {
	k    *keptBytes
	n    int64
	done atomic.Bool
}

func (c *keptCount) release() {
	if c.done.CompareAndSwap(false, true) {
		c.k.n.Add(-c.n)
	}
}

// writeProtoList writes a list of kind k's records in protobuf after
// dst: the serializer's envelope (the "k8s\x00" prefix and a
// runtime.Unknown naming the list kind) around the list message, whose
// field 1 is the ListMeta and field 2 each item, as every Kubernetes list
// type has them. The envelope's length comes first, so every item's
// message is transcoded before any byte goes out: into a pooled buffer
// while the messages fit in maxHeldItems, and past that only to measure
// them, to be transcoded again as they go out (a whole list of 10,000
// ConfigMaps would otherwise hold its 15 MB of messages). The bytes,
// runtime.Unknown's Marshal of the list message (fields 1 and 2, then
// the empty contentEncoding and contentType, which a test holds them
// to), go out through flush whenever dst holds flushAt bytes, as
// RecordList.WriteJSON writes JSON. It returns the last piece; a nil
// flush never flushes, and the whole list is that piece.
func writeProtoList(dst []byte, k *registry.Kind, v string, l *storage.RecordList, flushAt int, flush func([]byte) error) ([]byte, error) {
	gvk := k.GroupVersionKind(v).GroupVersion().WithKind(k.ListKind)
	return writeProtoListOf(dst, gvk, l, func(dst []byte, scratch *[]byte, r *storage.Record, again bool) ([]byte, error) {
		if again {
			return appendRecordProtoAgain(dst, scratch, k, v, r, r.Rev)
		}
		return appendRecordProto(dst, scratch, k, v, r, r.Rev)
	}, flushAt, flush)
}

// writePartialProtoList writes a PartialObjectMetadataList of the
// records in protobuf, as writeProtoList writes a list.
func writePartialProtoList(dst []byte, l *storage.RecordList, flushAt int, flush func([]byte) error) ([]byte, error) {
	return writeProtoListOf(dst, partialListGVK, l, func(dst []byte, scratch *[]byte, r *storage.Record, _ bool) ([]byte, error) {
		return appendPartialProto(dst, scratch, r, r.Rev, nil)
	}, flushAt, flush)
}

// writeProtoListOf is writeProtoList for a list of kind gvk whose item
// messages item appends (again: a second time in the same answer).
func writeProtoListOf(dst []byte, gvk schema.GroupVersionKind, l *storage.RecordList, item func(dst []byte, scratch *[]byte, r *storage.Record, again bool) ([]byte, error), flushAt int, flush func([]byte) error) ([]byte, error) {
	lm := recordsMeta(l)
	meta, err := lm.Marshal()
	if err != nil {
		return nil, err
	}
	tm := runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}
	typeMeta, err := tm.Marshal()
	if err != nil {
		return nil, err
	}
	buf := protoItems.Get().(*itemsBuffer)
	defer buf.put()
	scratch := jsonScratch.Get().(*[]byte)
	defer jsonScratch.Put(scratch)
	buf.msgs = slices.Grow(buf.msgs, min(listSize(l), maxHeldItems))
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(meta))
	held := 0 // the first held items' messages are in buf.msgs
	for _, r := range l.Items {
		var n int
		if len(buf.msgs) < maxHeldItems {
			start := len(buf.msgs)
			if buf.msgs, err = item(buf.msgs, scratch, r, false); err != nil {
				return nil, err
			}
			n = len(buf.msgs) - start
			held++
		} else {
			if buf.spare, err = item(buf.spare[:0], scratch, r, false); err != nil {
				return nil, err
			}
			n = len(buf.spare)
		}
		buf.sizes = append(buf.sizes, n)
		size += protowire.SizeTag(2) + protowire.SizeBytes(n)
	}
	total := 4 + protowire.SizeTag(1) + protowire.SizeBytes(len(typeMeta)) + protowire.SizeTag(2) + protowire.SizeBytes(size) + 4
	if flush != nil {
		total = min(total, flushAt+64<<10)
	}
	dst = slices.Grow(dst, total)
	dst = append(dst, "k8s\x00"...)
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendBytes(dst, typeMeta)
	dst = protowire.AppendTag(dst, 2, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(size))
	dst = protowire.AppendTag(dst, 1, protowire.BytesType)
	dst = protowire.AppendBytes(dst, meta)
	start := 0
	for i, n := range buf.sizes {
		dst = protowire.AppendVarint(protowire.AppendTag(dst, 2, protowire.BytesType), uint64(n))
		if i < held {
			dst = append(dst, buf.msgs[start:start+n]...)
			start += n
		} else {
			at := len(dst)
			if dst, err = item(dst, scratch, l.Items[i], true); err != nil {
				return nil, err
			}
			if len(dst)-at != n {
				return nil, fmt.Errorf("%s: its protobuf message took %d bytes, then %d", l.Items[i].Key, n, len(dst)-at)
			}
		}
		if dst, err = flushFull(dst, flushAt, flush); err != nil {
			return nil, err
		}
	}
	for _, field := range []protowire.Number{3, 4} { // contentEncoding, contentType: ""
		dst = protowire.AppendTag(dst, field, protowire.BytesType)
		dst = protowire.AppendVarint(dst, 0)
	}
	return dst, nil
}

// maxHeldItems is how many bytes of a protobuf list's item messages
// writeProtoList holds; past it, it transcodes the rest twice.
var maxHeldItems = 4 << 20

// itemsBuffer holds a protobuf list's item messages, one after the
// other, their sizes, and a message measured and dropped.
type itemsBuffer struct {
	msgs, spare []byte
	sizes       []int
}

var protoItems = sync.Pool{New: func() any { return new(itemsBuffer) }}

// put gives the buffer back for the next list, unless one message made
// it large.
func (b *itemsBuffer) put() {
	if cap(b.msgs) > 2*maxHeldItems || cap(b.spare) > maxHeldItems {
		return
	}
	b.msgs, b.spare, b.sizes = b.msgs[:0], b.spare[:0], b.sizes[:0]
	protoItems.Put(b)
}

// recordProtoObject is a record's object in protobuf, as writeProto
// writes it: its message in the serializer's envelope.
func recordProtoObject(k *registry.Kind, v string, r *storage.Record) ([]byte, error) {
	return recordProtoObjectAt(k, v, r, r.Rev)
}

// recordProtoObjectAt is recordProtoObject for the object of r with
// resourceVersion rev, as a watch event carries it (a DELETED event's
// object is the state before, with the event's resourceVersion).
func recordProtoObjectAt(k *registry.Kind, v string, r *storage.Record, rev int64) ([]byte, error) {
	return appendRecordProtoObject(nil, k, v, r, rev, appendEnvelope)
}

// appendRecordWatchEvent appends the watch event of r's object at rev as
// appendProtoWatchEvent appends it, for an event one watcher alone is
// sent (storage.RecordJSON.Alone): written in place, not enveloped into a
// slice of its own first (recordProtoObjectAt) and copied.
func appendRecordWatchEvent(dst []byte, k *registry.Kind, v string, typ watch.EventType, r *storage.Record, rev int64) ([]byte, error) {
	return appendRecordProtoObject(dst, k, v, r, rev, func(dst []byte, gvk schema.GroupVersionKind, msg []byte) []byte {
		dst = appendWatchEventHead(dst, typ, envelopeSize(gvk, len(msg)))
		return appendEnvelope(dst, gvk, msg)
	})
}

// appendRecordProtoObject appends r's object at rev as wrap writes its
// protobuf message: the message kept with the record, or one made into a
// pooled buffer (appendRecordProto).
func appendRecordProtoObject(dst []byte, k *registry.Kind, v string, r *storage.Record, rev int64, wrap func(dst []byte, gvk schema.GroupVersionKind, msg []byte) []byte) ([]byte, error) {
	gvk := k.GroupVersionKind(v)
	if keepable(k, v, r, rev) {
		if msg := r.Alt(); msg != nil {
			return wrap(dst, gvk, msg), nil
		}
	}
	scratch := jsonScratch.Get().(*[]byte)
	defer jsonScratch.Put(scratch)
	msgs := protoItems.Get().(*itemsBuffer)
	defer msgs.put()
	var err error
	if msgs.msgs, err = appendRecordProto(msgs.msgs[:0], scratch, k, v, r, rev); err != nil {
		return nil, err
	}
	return wrap(dst, gvk, msgs.msgs), nil
}

// protoObject is an object's map in protobuf, in the serializer's
// envelope.
func protoObject(k *registry.Kind, v string, obj map[string]any) ([]byte, error) {
	scratch := jsonScratch.Get().(*[]byte)
	defer jsonScratch.Put(scratch)
	data, err := storage.AppendJSON((*scratch)[:0], obj)
	if err != nil {
		return nil, err
	}
	*scratch = data
	msgs := protoItems.Get().(*itemsBuffer)
	defer msgs.put()
	if msgs.msgs, err = appendProtoMessage(msgs.msgs[:0], k, v, data); err != nil {
		return nil, err
	}
	return appendEnvelope(nil, k.GroupVersionKind(v), msgs.msgs), nil
}

// appendEnvelope appends a message of kind gvk as Kubernetes' protobuf
// serializer writes it: a magic prefix, then runtime.Unknown's Marshal
// (its TypeMeta, the message, and an empty contentEncoding and
// contentType).
func appendEnvelope(dst []byte, gvk schema.GroupVersionKind, msg []byte) []byte {
	apiVersion := gvk.GroupVersion().String()
	typeMeta := protowire.SizeTag(1) + protowire.SizeBytes(len(apiVersion)) + protowire.SizeTag(2) + protowire.SizeBytes(len(gvk.Kind))
	dst = slices.Grow(dst, envelopeSize(gvk, len(msg)))
	dst = append(dst, "k8s\x00"...)
	dst = protowire.AppendVarint(protowire.AppendTag(dst, 1, protowire.BytesType), uint64(typeMeta))
	dst = protowire.AppendString(protowire.AppendTag(dst, 1, protowire.BytesType), apiVersion)
	dst = protowire.AppendString(protowire.AppendTag(dst, 2, protowire.BytesType), gvk.Kind)
	dst = protowire.AppendBytes(protowire.AppendTag(dst, 2, protowire.BytesType), msg)
	for _, field := range []protowire.Number{3, 4} {
		dst = protowire.AppendVarint(protowire.AppendTag(dst, field, protowire.BytesType), 0)
	}
	return dst
}

// envelopeSize is the length of appendEnvelope's bytes for a message of
// kind gvk and n bytes.
func envelopeSize(gvk schema.GroupVersionKind, n int) int {
	apiVersion := gvk.GroupVersion().String()
	typeMeta := protowire.SizeTag(1) + protowire.SizeBytes(len(apiVersion)) + protowire.SizeTag(2) + protowire.SizeBytes(len(gvk.Kind))
	return 4 + protowire.SizeTag(1) + protowire.SizeBytes(typeMeta) + protowire.SizeTag(2) + protowire.SizeBytes(n) + 4
}

// appendProtoWatchEvent appends a watch event as kube-apiserver streams
// it to a client that asked for protobuf: a metav1.WatchEvent message
// (its type, and a RawExtension holding the object in the serializer's
// envelope), preceded by its length in 4 bytes, big-endian
// (protobuf.LengthDelimitedFramer).
func appendProtoWatchEvent(b []byte, typ watch.EventType, object []byte) []byte {
	return append(appendWatchEventHead(b, typ, len(object)), object...)
}

// appendWatchEventHead appends what appendProtoWatchEvent writes before
// an object of n bytes.
func appendWatchEventHead(b []byte, typ watch.EventType, n int) []byte {
	raw := protowire.SizeTag(1) + protowire.SizeBytes(n)
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(typ)) + protowire.SizeTag(2) + protowire.SizeBytes(raw)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = protowire.AppendString(protowire.AppendTag(b, 1, protowire.BytesType), string(typ))
	b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.BytesType), uint64(raw))
	return protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.BytesType), uint64(n))
}
