package storage

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Store keeps objects in a kv.Store. It is safe for concurrent use.
type Store struct {
	kv    kv.Store
	turns keyTurns // read-modify-writes of one key, one at a time
}

// New returns a Store over s.
func New(s kv.Store) *Store { return &Store{kv: s, turns: keyTurns{m: map[string]*keyTurn{}}} }

// Preconditions must hold for an update or delete to proceed.
type Preconditions struct {
	UID             *types.UID
	ResourceVersion *string
}

// check returns a CodeConflict error when cur fails the preconditions,
// with kube-apiserver's messages.
func (p *Preconditions) check(key string, cur *unstructured.Unstructured) error {
	if p == nil {
		return nil
	}
	if p.UID != nil && *p.UID != cur.GetUID() {
		return newErr(CodeConflict, key, 0, "Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, cur.GetUID())
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
		return newErr(CodeConflict, key, 0, "Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, cur.GetResourceVersion())
	}
	return nil
}

// ParseResourceVersion parses a resourceVersion; "" is 0.
func ParseResourceVersion(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v < 0 {
		return 0, newErr(CodeInvalidRequest, "", 0, "invalid resource version %q", rv)
	}
	return v, nil
}

// encode returns the stored form of obj: JSON without resourceVersion.
func encode(key string, obj *unstructured.Unstructured) ([]byte, error) {
	data, _, err := encodeAt(key, obj)
	return data, err
}

// encodeAt is encode, and also returns the object's Encoded form (its
// revision still to be set), for the answer to the write.
func encodeAt(key string, obj *unstructured.Unstructured) ([]byte, *Encoded, error) {
	rv := obj.GetResourceVersion()
	obj.SetResourceVersion("")
	data, at, sep, err := appendStored(make([]byte, 0, 1024), obj.Object)
	if rv != "" {
		obj.SetResourceVersion(rv)
	}
	if err != nil {
		return nil, nil, &Error{Code: CodeInvalidObj, Key: key, Msg: "encoding", Err: err}
	}
	var e *Encoded
	if at >= 0 {
		e = &Encoded{value: data, at: at, sep: sep}
	}
	data = append(data, '\n') // as Unstructured.MarshalJSON writes it
	return data, e, nil
}

// decode reads a stored object and sets its resourceVersion to rev.
func decode(e *kv.KeyValue, rev int64) (*unstructured.Unstructured, error) {
	obj, err := unmarshalObject(e.Value)
	if err != nil {
		return nil, &Error{Code: CodeInvalidObj, Key: e.Key, ResourceVersion: e.ModRevision, Msg: "decoding the stored object", Err: err}
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}

// interpret turns kv errors into storage errors where they have a meaning.
func interpret(key string, rev int64, err error) error {
	switch {
	case errors.Is(err, kv.ErrCompacted):
		return &Error{Code: CodeExpired, Key: key, ResourceVersion: rev, Msg: "too old resource version", Err: err}
	case errors.Is(err, kv.ErrFutureRevision):
		return &Error{Code: CodeTooLargeResourceVersion, Key: key, ResourceVersion: rev, Msg: "Too large resource version", Err: err}
	case errors.Is(err, kv.ErrValueTooLarge), errors.Is(err, kv.ErrKeyTooLarge), errors.Is(err, kv.ErrEmptyKey):
		return &Error{Code: CodeInvalidObj, Key: key, Msg: err.Error(), Err: err}
	}
	return err
}

// Create stores obj at key if the key is free and returns it, with its
// resourceVersion set: obj itself, which the caller must not modify
// afterwards if it shares it. obj must not carry a resourceVersion.
func (s *Store) Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, _, err := s.CreateEncoded(ctx, key, obj)
	return out, err
}

// CreateEncoded is Create, and also returns the object's JSON as stored,
// for the answer (nil when the stored form has no place for it).
func (s *Store) CreateEncoded(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, *Encoded, error) {
	if obj.GetResourceVersion() != "" {
		return nil, nil, newErr(CodeInvalidObj, key, 0, "resourceVersion should not be set on objects to be created")
	}
	data, enc, err := encodeAt(key, obj)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.kv.Create(ctx, key, data)
	if err != nil {
		return nil, nil, interpret(key, 0, err)
	}
	if !r.Succeeded {
		return nil, nil, newErr(CodeExists, key, r.Revision, "already exists")
	}
	// obj is what was stored: hand it back with its resourceVersion rather
	// than decoding the bytes just written.
	obj.SetResourceVersion(strconv.FormatInt(r.Revision, 10))
	if enc != nil {
		enc.rev = r.Revision
	}
	return obj, enc, nil
}

// GetOptions qualify Get.
type GetOptions struct {
	// ResourceVersion: "" and "0" read the latest state; N reads the
	// latest state provided the store has reached N, else
	// CodeTooLargeResourceVersion (the API "Not older than" semantics).
	ResourceVersion string
}

// Get reads the object at key.
func (s *Store) Get(ctx context.Context, key string, opts GetOptions) (*unstructured.Unstructured, error) {
	e, err := s.get(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return decode(e, e.ModRevision)
}

// GetRecord is Get without the decode: the object as stored.
func (s *Store) GetRecord(ctx context.Context, key string, opts GetOptions) (*Record, error) {
	return s.GetRecordOr(ctx, key, opts, nil)
}

// GetRecordOr is GetRecord, except that it returns cached, a record of
// key made earlier (nil: none), when the object at key is still at
// cached's revision: a key's value at a revision never changes, so the
// record is the same, and what callers kept with it (Fact, Alt) serves
// again, with nothing parsed.
func (s *Store) GetRecordOr(ctx context.Context, key string, opts GetOptions, cached *Record) (*Record, error) {
	e, err := s.get(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	if cached != nil && cached.Key == key && cached.Rev == e.ModRevision {
		return cached, nil
	}
	return NewRecord(key, e.Value, e.ModRevision)
}

// get reads the stored value at key, provided the store has reached
// opts.ResourceVersion.
func (s *Store) get(ctx context.Context, key string, opts GetOptions) (*kv.KeyValue, error) {
	min, err := ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	r, err := s.kv.Range(ctx, key, kv.RangeOptions{})
	if err != nil {
		return nil, interpret(key, 0, err)
	}
	if min > r.Revision {
		return nil, newErr(CodeTooLargeResourceVersion, key, min, "Too large resource version: %d, current: %d", min, r.Revision)
	}
	if len(r.KVs) == 0 {
		return nil, newErr(CodeNotFound, key, r.Revision, "not found")
	}
	return &r.KVs[0], nil
}

// UpdateFunc computes the new object from the current one. It must not
// modify current. Returning an error aborts the update with that error.
type UpdateFunc func(current *unstructured.Unstructured) (*unstructured.Unstructured, error)

// GuaranteedUpdate applies tryUpdate to the current object and stores the
// result if the object did not change meanwhile, calling tryUpdate again
// on the new current state until the write wins (kube-apiserver's
// GuaranteedUpdate). Conditional updates are the caller's: a tryUpdate that
// compares the request's resourceVersion with current's and returns a
// CodeConflict error turns the retry loop into an optimistic lock.
//
// An update that changes nothing (same stored bytes) writes nothing and
// returns the current object with its resourceVersion unchanged: no new
// revision, no watch event.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, pre *Preconditions, tryUpdate UpdateFunc) (*unstructured.Unstructured, error) {
	out, _, err := s.GuaranteedUpdateEncoded(ctx, key, pre, tryUpdate)
	return out, err
}

// GuaranteedUpdateEncoded is GuaranteedUpdate, and also returns the
// object's JSON as stored, for the answer (nil when the stored form has no
// place for it).
func (s *Store) GuaranteedUpdateEncoded(ctx context.Context, key string, pre *Preconditions, tryUpdate UpdateFunc) (*unstructured.Unstructured, *Encoded, error) {
	var enc *Encoded // of the last attempt
	out, err := s.conditionally(ctx, key, pre, func(cur *kv.KeyValue, obj *unstructured.Unstructured, t *turn) (*unstructured.Unstructured, *kv.KeyValue, error) {
		// obj is this attempt's own decode: tryUpdate may change it, and
		// what it returns is what gets stored and handed back (with its
		// resourceVersion), without decoding the bytes just written.
		next, err := tryUpdate(obj)
		if err != nil {
			return nil, nil, err
		}
		var data []byte
		data, enc, err = encodeAt(key, next)
		if err != nil {
			return nil, nil, err
		}
		rev := cur.ModRevision
		if !bytes.Equal(data, cur.Value) {
			w, err := s.update(ctx, key, data, cur.ModRevision, t)
			if err != nil {
				return nil, nil, interpret(key, 0, err)
			}
			if !w.Succeeded {
				return nil, w.Prev, nil
			}
			rev = w.Revision
		}
		next.SetResourceVersion(strconv.FormatInt(rev, 10))
		if enc != nil {
			enc.rev = rev
		}
		return next, nil, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, enc, nil
}

// update is kv.Update. On an engine that orders writes before making them
// durable, the turn of key ends as soon as the write is ordered and the
// next writer of key starts from the value written: while this write's
// fsync runs, the next one is computed and joins the next batch, instead
// of every write of a hot key waiting for the one before to be durable.
func (s *Store) update(ctx context.Context, key string, data []byte, modRevision int64, t *turn) (kv.WriteResponse, error) {
	o, ok := s.kv.(kv.OrderedUpdater)
	if !ok || t == nil {
		return s.kv.Update(ctx, key, data, modRevision)
	}
	var h *handoff
	w, err := o.UpdateOrdered(ctx, key, data, modRevision, func(w kv.WriteResponse) {
		h = &handoff{kv: *w.KV, durable: make(chan struct{})}
		t.end(h)
	})
	if h != nil {
		h.err = err
		close(h.durable)
	}
	return w, err
}

// ValidateDeletion may refuse a delete after seeing the current object,
// which it must not modify: that object is what Delete returns.
type ValidateDeletion func(current *unstructured.Unstructured) error

// Delete removes the object at key if it passes the preconditions and
// validate (nil means no check), retrying when the object changes
// meanwhile. It returns the deleted object with its resourceVersion set to
// the revision of the delete, as kube-apiserver does, so that the answer
// and the DELETED watch event agree.
func (s *Store) Delete(ctx context.Context, key string, pre *Preconditions, validate ValidateDeletion) (*unstructured.Unstructured, error) {
	return s.conditionally(ctx, key, pre, func(cur *kv.KeyValue, obj *unstructured.Unstructured, t *turn) (*unstructured.Unstructured, *kv.KeyValue, error) {
		t.stale = true // whatever happens, the value handed over may be gone
		if validate != nil {
			if err := validate(obj); err != nil {
				return nil, nil, err
			}
		}
		w, err := s.kv.Delete(ctx, key, cur.ModRevision)
		if err != nil {
			return nil, nil, interpret(key, 0, err)
		}
		if !w.Succeeded {
			return nil, w.Prev, nil
		}
		// What went is cur (the delete compared its ModRevision), whose
		// object is decoded already and left alone by validate.
		obj.SetResourceVersion(strconv.FormatInt(w.Revision, 10))
		return obj, nil, nil
	})
}

// conditionally runs a conditional write on the key's current value until
// it wins. op gets the current value and its object (preconditions
// already checked) and returns the result when it is done, or nil and the
// value its lost compare saw, which the next attempt starts from: no
// second read per retry. The first attempt starts from the value the
// key's previous writer in this process handed over, when there is one
// (see update), else from a read.
func (s *Store) conditionally(ctx context.Context, key string, pre *Preconditions,
	op func(cur *kv.KeyValue, obj *unstructured.Unstructured, t *turn) (*unstructured.Unstructured, *kv.KeyValue, error)) (out *unstructured.Unstructured, err error) {
	t := s.turns.take(ctx, key)
	defer t.end(nil)
	var cur *kv.KeyValue
	var readAt int64 // the store's revision when cur was read
	if h := t.from; h != nil {
		// Not durable yet: whatever this call answers waits until it is,
		// so that no answer reflects a write a crash could take back. A
		// write of ours succeeding implies it (the log is in order).
		defer func() {
			if werr := h.wait(ctx); werr != nil && err == nil {
				out, err = nil, interpret(key, 0, werr)
			}
		}()
		kvc := h.kv
		cur, readAt = &kvc, kvc.ModRevision
	} else {
		r, err := s.kv.Range(ctx, key, kv.RangeOptions{})
		if err != nil {
			return nil, interpret(key, 0, err)
		}
		if len(r.KVs) > 0 {
			cur = &r.KVs[0]
		}
		readAt = r.Revision
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, newErr(CodeNotFound, key, readAt, "not found")
		}
		obj, err := decode(cur, cur.ModRevision)
		if err != nil {
			return nil, err
		}
		if err := pre.check(key, obj); err != nil {
			return nil, err
		}
		out, lostTo, err := op(cur, obj, t)
		if err != nil || out != nil {
			return out, err
		}
		cur, t.stale = lostTo, true
	}
}

// keyTurns queues the read-modify-writes of one key in this process. They
// would be correct without it, the compare of each write guarding against
// any other writer, but writers of one key would then race: every one that
// read while the winner's write was being made durable loses its compare,
// redoes its update (a patch: decode, apply, validate, field manager) and
// tries again. Taking turns, each does one read and one write; a writer
// whose write is ordered hands the value it wrote to the next (update), so
// that one does no read at all. A turn that is not granted within turnWait
// is done without one (the compare still guards it), so an update that
// nests a write of its own key cannot wait for itself forever.
type keyTurns struct {
	mu sync.Mutex
	m  map[string]*keyTurn
}

type keyTurn struct {
	ch   chan struct{} // holds a token while a turn is taken
	refs int           // turns taken or waited for
	last *handoff      // what the last turn wrote, for the next (under keyTurns.mu)
}

// handoff is a write a turn made, handed to the next turn of the key
// before it is durable.
type handoff struct {
	kv      kv.KeyValue
	durable chan struct{} // closed once the write is durable, or failed
	err     error         // why it failed, set before durable is closed
}

// wait waits until the write is durable.
func (h *handoff) wait(ctx context.Context) error {
	select {
	case <-h.durable:
		return h.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// turn is one writer's turn at a key.
type turn struct {
	t     *keyTurns
	key   string
	k     *keyTurn
	held  bool     // the token is ours
	from  *handoff // what the turn before wrote, if it handed it over
	stale bool     // from is not the key's value: a compare was lost, or the turn deleted it
	ended bool
}

const turnWait = time.Second

// take waits for key's turn.
func (t *keyTurns) take(ctx context.Context, key string) *turn {
	t.mu.Lock()
	k := t.m[key]
	if k == nil {
		k = &keyTurn{ch: make(chan struct{}, 1)}
		t.m[key] = k
	}
	k.refs++
	t.mu.Unlock()
	tr := &turn{t: t, key: key, k: k}
	select {
	case k.ch <- struct{}{}:
		tr.held = true
	default:
		timer := time.NewTimer(turnWait)
		select {
		case k.ch <- struct{}{}:
			tr.held = true
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	if tr.held {
		t.mu.Lock()
		tr.from, k.last = k.last, nil
		t.mu.Unlock()
	}
	return tr
}

// end ends the turn, handing h (if not nil) to the next turn: the value
// this turn wrote. A turn that wrote nothing hands on what it was handed.
// Only the first call counts.
func (tr *turn) end(h *handoff) {
	if tr.ended {
		return
	}
	tr.ended = true
	tr.t.mu.Lock()
	if tr.held {
		if h == nil && !tr.stale {
			h = tr.from
		}
		tr.k.last = h
	}
	if tr.k.refs--; tr.k.refs == 0 {
		delete(tr.t.m, tr.key)
	}
	tr.t.mu.Unlock()
	if tr.held {
		<-tr.k.ch
	}
}
