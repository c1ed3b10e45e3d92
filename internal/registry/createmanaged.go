package registry

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The managedFields of a create are a function of few things: the kind,
// version and manager, and the fields the object sets. The field manager
// walks the object with structured-merge-diff to find those fields, which
// for a small ConfigMap cost more than the rest of the create's handling
// in the registry. Objects created in bulk mostly share their structure
// (the Pods of a ReplicaSet, the Events of a controller, a client's
// ConfigMaps), so a create remembers what the field manager wrote for
// each shape of object and writes the same for the next object of that
// shape, with the time of this write. Anything the memo can't vouch for
// goes to the field manager.

// createMemoSize bounds a kind manager's memo; when full, it starts over.
// A memo that filled up with fewer than a quarter as many hits is left
// off for createMemoRest creates: a workload of ever new shapes pays for
// remembering them (the key and a copy of what was written: 5 % more than
// the field manager alone) on one create in seventeen.
const (
	createMemoSize = 256
	createMemoRest = 16 * createMemoSize
)

// createMemo maps a manager and an object's shape to the managedFields
// the field manager wrote on the create of an object of that shape.
type createMemo struct {
	mu   sync.RWMutex
	m    map[string]createdFields
	hits atomic.Int64 // since m started
	rest atomic.Int64 // creates left before the memo is used again
}

// createdFields is what the field manager wrote on a create: the entries,
// and the list that holds them in the object's metadata. The field sets
// in items (each entry's fieldsV1 tree) are shared by every object
// written from them, read-only: nothing in kplane changes a field set in
// place (a write replaces the managedFields list), and a test holds the
// memo unchanged by the creates it serves.
type createdFields struct {
	entries []metav1.ManagedFieldsEntry
	items   []any
}

// shapeBuf is a create's scratch for its shape.
var shapeBuf = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// create records the fields of obj, about to be created, as manager's in
// its managedFields: the field manager's UpdateNoErrors from an empty
// object, or what it wrote for an earlier object of the same shape (a
// test holds the two equal). entries and known are updateManagedEntries'.
func (m *kindManager) create(k *Kind, version string, obj *unstructured.Unstructured, manager string) (out *unstructured.Unstructured, entries []metav1.ManagedFieldsEntry, known bool) {
	if m.creates.rest.Load() > 0 && m.creates.rest.Add(-1) >= 0 {
		return updateManagedEntries(m.fm, emptyOf(k, version), obj, manager)
	}
	bp := shapeBuf.Get().(*[]byte)
	defer shapeBuf.Put(bp)
	key, ok := createKey((*bp)[:0], manager, obj.Object)
	*bp = key[:0]
	if ok {
		m.creates.mu.RLock()
		seen, hit := m.creates.m[string(key)]
		m.creates.mu.RUnlock()
		if hit {
			m.creates.hits.Add(1)
			return obj, seen.write(obj, time.Now().UTC()), true
		}
	}
	out, entries, known = updateManagedEntries(m.fm, emptyOf(k, version), obj, manager)
	if !ok || !known || out != obj || len(entries) > 1 {
		return out, entries, known
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	items, _ := md["managedFields"].([]any)
	if len(items) != len(entries) {
		return out, entries, known
	}
	seen := createdFields{entries: slices.Clone(entries), items: runtime.DeepCopyJSONValue(items).([]any)}
	m.creates.mu.Lock()
	defer m.creates.mu.Unlock()
	if len(m.creates.m) >= createMemoSize {
		m.creates.m = nil
		if m.creates.hits.Swap(0) < createMemoSize/4 {
			m.creates.rest.Store(createMemoRest)
			return out, entries, known
		}
	}
	if m.creates.m == nil {
		m.creates.m = make(map[string]createdFields)
	}
	m.creates.m[string(key)] = seen
	return out, entries, known
}

// emptyOf is the live object of a create: an empty object of version,
// as upstream's create compares with: for a built-in kind, its Go type's
// zero value, whose struct fields are there (a Lease's spec, a binding's
// roleRef), so that the creator does not own them as added, only what it
// set in them; for a custom resource, nothing.
func emptyOf(k *Kind, version string) *unstructured.Unstructured {
	live := &unstructured.Unstructured{Object: map[string]any{}}
	if k.Typed != nil {
		live.Object = runtime.DeepCopyJSON(zeroOf(k))
	}
	live.SetGroupVersionKind(k.GroupVersionKind(version))
	return live
}

// zeros caches each Go type's zero value as unstructured (shared: copy
// it).
var zeros sync.Map // reflect.Type → map[string]any

func zeroOf(k *Kind) map[string]any {
	t := goType(k)
	if z, ok := zeros.Load(t); ok {
		return z.(map[string]any)
	}
	z, err := runtime.DefaultUnstructuredConverter.ToUnstructured(k.Typed())
	if err != nil {
		z = map[string]any{}
	}
	zeros.Store(t, z)
	return z
}

// write puts c into obj's metadata as the field manager would have put it
// at time at (whose metadata, of the shape c came from, is a map or
// absent), and returns the entries.
func (c createdFields) write(obj *unstructured.Unstructured, at time.Time) []metav1.ManagedFieldsEntry {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj.Object["metadata"] = md
	}
	if c.items == nil {
		delete(md, "managedFields")
		return nil
	}
	t := metav1.Time{Time: at}
	entries := slices.Clone(c.entries)
	items := make([]any, len(c.items))
	for i, item := range c.items {
		e := maps.Clone(item.(map[string]any))
		if entries[i].Time != nil {
			entries[i].Time = &t
			e["time"] = t.ToUnstructured()
		}
		items[i] = e
	}
	md["managedFields"] = items
	return entries
}

// createKey appends to b the memo key of a create of obj by manager, and
// false when obj has no shape the memo can vouch for: an object that
// carries managedFields of its own, or holds values of other Go types
// than JSON decoding makes.
func createKey(b []byte, manager string, obj map[string]any) ([]byte, bool) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		if _, ok := md["managedFields"]; ok {
			return b, false
		}
	}
	b = appendString(b, manager)
	return appendShape(b, obj, false)
}

// appendShape appends what of v decides the fields it sets: the keys of
// every map and the JSON type of every value, whether a value outside a
// list is its type's zero ("", 0, false), and, inside lists, the values
// too (the items of keyed lists are told apart by their keys' values,
// those of sets by their own). Two objects of the same shape set the same
// fields. Zero values count because a Go type's zero object has the
// scalars it marshals without omitempty (a RoleRef's strings), and the
// field manager owns such a field only where the value differs from the
// zero's.
func appendShape(b []byte, v any, inList bool) ([]byte, bool) {
	switch x := v.(type) {
	case map[string]any:
		b = append(b, 'm')
		b = binary.AppendUvarint(b, uint64(len(x)))
		var arr [16]string
		keys := arr[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = appendString(b, k)
			var ok bool
			if b, ok = appendShape(b, x[k], inList); !ok {
				return b, false
			}
		}
		return b, true
	case []any:
		b = append(b, 'l')
		b = binary.AppendUvarint(b, uint64(len(x)))
		for _, e := range x {
			var ok bool
			if b, ok = appendShape(b, e, true); !ok {
				return b, false
			}
		}
		return b, true
	case string:
		switch {
		case inList:
			b = appendString(append(b, 's'), x)
		case x == "":
			b = append(b, 'e')
		default:
			b = append(b, 's')
		}
		return b, true
	case int64:
		switch {
		case inList:
			b = binary.LittleEndian.AppendUint64(append(b, 'i'), uint64(x))
		case x == 0:
			b = append(b, 'o')
		default:
			b = append(b, 'i')
		}
		return b, true
	case float64:
		switch {
		case inList:
			b = binary.LittleEndian.AppendUint64(append(b, 'f'), math.Float64bits(x))
		case x == 0:
			b = append(b, 'g')
		default:
			b = append(b, 'f')
		}
		return b, true
	case bool:
		if x {
			b = append(b, 'T')
		} else {
			b = append(b, 'F')
		}
		return b, true
	case nil:
		return append(b, 'n'), true
	default:
		return b, false
	}
}

// appendString appends s, length first.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
