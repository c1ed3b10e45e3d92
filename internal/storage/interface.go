package storage

import (
	"context"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is the object store as the registry uses it: the Store itself,
// or a watch cache in front of one. Both pass the same conformance suite
// (storagetest), so the registry cannot tell which it has, except by
// speed.
type Interface interface {
	Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Get(ctx context.Context, key string, opts GetOptions) (*unstructured.Unstructured, error)
	GuaranteedUpdate(ctx context.Context, key string, pre *Preconditions, tryUpdate UpdateFunc) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, key string, pre *Preconditions, validate ValidateDeletion) (*unstructured.Unstructured, error)
	List(ctx context.Context, prefix string, opts ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, key string, opts WatchOptions) (watch.Interface, error)
	// Revision is the store's current revision.
	Revision(ctx context.Context) (int64, error)
}

var _ Interface = (*Store)(nil)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial
// events of a sendInitialEvents watch ("API Concepts", "Streaming lists").
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// Shared is an object handed to many watchers at once. It is read-only,
// and its JSON form is computed once, on first use, for all of them: the
// apiserver's caching_object idea. Anything that marshals it with
// encoding/json gets the cached bytes. One made from a Record is served
// from the record's JSON, without an encode.
type Shared struct {
	*unstructured.Unstructured
	rec  *Record
	rev  int64
	once sync.Once
	data []byte
	err  error
}

// NewShared wraps obj, which nobody may modify afterwards.
func NewShared(obj *unstructured.Unstructured) *Shared { return &Shared{Unstructured: obj} }

// SharedRecord returns the object of rec with resourceVersion rev, decoded
// once for the watchers that get it and served from rec's JSON. For rev ==
// rec.Rev the same Shared is returned while anybody still holds it, so
// that concurrent watchers starting from one cache state decode each
// object once.
func SharedRecord(rec *Record, rev int64) (*Shared, error) {
	if rev == rec.Rev {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if s := rec.shared.Value(); s != nil {
			return s, nil
		}
	}
	obj, err := rec.Decode(rev)
	if err != nil {
		return nil, err
	}
	s := &Shared{Unstructured: obj, rec: rec, rev: rev}
	if rev == rec.Rev {
		rec.shared = weak.Make(s)
	}
	return s, nil
}

// MarshalJSON returns the object's JSON, encoding it at most once.
func (s *Shared) MarshalJSON() ([]byte, error) {
	s.once.Do(func() {
		if s.rec != nil {
			s.data, s.err = s.rec.AppendJSON(make([]byte, 0, len(s.rec.Value)+32), s.rev)
		} else {
			s.data, s.err = AppendJSON(nil, s.Object)
		}
		s.data = append(s.data, '\n') // as Unstructured.MarshalJSON writes it
	})
	return s.data, s.err
}

// Record returns the record the object was decoded from and the
// resourceVersion it has, or nil when it was not made from one.
func (s *Shared) Record() (*Record, int64) { return s.rec, s.rev }

// RecordJSON is a stored object as a watch sends it to a client that only
// writes its JSON (WatchOptions.EncodedOnly): the record's JSON with
// resourceVersion rev, made at most once for every watcher of the event,
// and never decoded into a map. It is read-only, and its kind is in its
// JSON only (GetObjectKind is empty).
type RecordJSON struct {
	rec   *Record
	rev   int64
	alone bool // Alone
	once  sync.Once
	data  []byte
	err   error
	// other is another encoding (Other).
	otherOnce sync.Once
	other     []byte
	otherErr  error
}

// NewRecordJSON returns the object of rec with resourceVersion rev.
func NewRecordJSON(rec *Record, rev int64) *RecordJSON { return &RecordJSON{rec: rec, rev: rev} }

// NewInitialRecordJSON is NewRecordJSON for an object that one watcher
// alone is sent: an initial event of its watch (Alone).
func NewInitialRecordJSON(rec *Record, rev int64) *RecordJSON {
	return &RecordJSON{rec: rec, rev: rev, alone: true}
}

// Alone reports whether one watcher alone is sent the object. Its writer
// may then encode it straight into its output: JSON and Other keep what
// they make for the event's other watchers, of which it has none.
func (e *RecordJSON) Alone() bool { return e.alone }

// JSON returns the object's JSON; the caller must not modify it.
func (e *RecordJSON) JSON() ([]byte, error) {
	e.once.Do(func() {
		e.data, e.err = e.rec.AppendJSON(make([]byte, 0, len(e.rec.Value)+32), e.rev)
	})
	return e.data, e.err
}

// Record returns the object's record and the resourceVersion it has.
func (e *RecordJSON) Record() (*Record, int64) { return e.rec, e.rev }

// Other returns another encoding of the object (the HTTP layer's
// protobuf), made by encode at most once for every watcher of the event;
// the caller must not modify it.
func (e *RecordJSON) Other(encode func(rec *Record, rev int64) ([]byte, error)) ([]byte, error) {
	e.otherOnce.Do(func() { e.other, e.otherErr = encode(e.rec, e.rev) })
	return e.other, e.otherErr
}

// MarshalJSON is JSON, for encoding/json.
func (e *RecordJSON) MarshalJSON() ([]byte, error) { return e.JSON() }

// GetObjectKind implements runtime.Object.
func (e *RecordJSON) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object: e itself, which nothing can
// modify.
func (e *RecordJSON) DeepCopyObject() runtime.Object { return e }
