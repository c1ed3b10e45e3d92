package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv"
)

// WatchOptions qualify Watch.
type WatchOptions struct {
	// ResourceVersion: unset or "0" starts with a synthetic ADDED event for
	// every object that exists now, then follows changes; N follows the
	// changes after revision N (and fails with 410 Gone if N was compacted).
	ResourceVersion string
	// Recursive watches every key under the key, which must then end in "/".
	Recursive bool
	Predicate Predicate
	// ProgressNotify asks for periodic BOOKMARK events while the watch is
	// idle. Whatever the option, the watcher answers RequestProgress with a
	// BOOKMARK once every event up to the store's current revision has been
	// sent. A BOOKMARK's object is an Unstructured holding only
	// metadata.resourceVersion.
	ProgressNotify bool
	// AllowBookmarks asks for BOOKMARK events (the API's
	// allowWatchBookmarks); for the store it is the same as ProgressNotify.
	AllowBookmarks bool
	// SendInitialEvents starts the watch with the current state as ADDED
	// events (at least as new as ResourceVersion), then, if
	// AllowBookmarks, a BOOKMARK annotated InitialEventsEndAnnotation.
	SendInitialEvents bool
	// MetadataOnly lets the events' objects be *metav1.PartialObjectMetadata:
	// apiVersion, kind and metadata without managedFields, as the
	// unstructured accessors read it (the watch cache sends them so, read
	// by a scan of the stored metadata; the Store sends whole objects),
	// for in-process watchers that read nothing else.
	MetadataOnly bool
	// EncodedOnly says that all the caller does with an event's object is
	// write its JSON: the watch cache then sends a *RecordJSON, the stored
	// JSON never decoded (MetadataOnly wins over it). The Store sends
	// whole objects either way.
	EncodedOnly bool
}

// EventQueue is implemented by the watch cache's watchers: a consumer
// that takes their events with Next instead of ResultChan reads the
// watcher's queue directly, in batches, with no goroutine between the
// cache and it. A watcher is read one way or the other, not both; a Next
// consumer calls Stop when done.
type EventQueue interface {
	// Next returns the events queued since the last call, waiting for one
	// if there are none, and false once the watch has ended (every event
	// before the end returned) or ctx is done. The slice passed in (the
	// previous batch, nil at first) is reused for the next batch.
	Next(ctx context.Context, reuse []watch.Event) ([]watch.Event, bool)
}

// ProgressRequester is implemented by the watchers Watch returns.
type ProgressRequester interface {
	RequestProgress(ctx context.Context) error
}

// Revision returns the store's current revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	r, err := s.kv.Range(ctx, "/", kv.RangeOptions{CountOnly: true})
	if err != nil {
		return 0, interpret("/", 0, err)
	}
	return r.Revision, nil
}

// Watch follows the object at key, or the objects under it when
// Recursive, as kube-apiserver's storage watch does:
//
//   - an object that starts matching the predicate is ADDED, one that
//     keeps matching is MODIFIED, and one that stops matching (or is
//     deleted) is DELETED, carrying its last matching state with the
//     resourceVersion of the change;
//   - history that was compacted ends the watch with an ERROR event
//     carrying a 410 Gone Status ("too old resource version"), after which
//     the client relists: never a silent gap.
func (s *Store) Watch(ctx context.Context, key string, opts WatchOptions) (watch.Interface, error) {
	rv, err := ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	end := ""
	if opts.Recursive {
		end = kv.PrefixEnd(key)
	}
	var initial []watch.Event
	if rv == 0 || opts.SendInitialEvents {
		r, err := s.kv.Range(ctx, key, kv.RangeOptions{End: end})
		if err != nil {
			return nil, interpret(key, 0, err)
		}
		if rv > r.Revision {
			return nil, newErr(CodeTooLargeResourceVersion, key, rv, "Too large resource version: %d, current: %d", rv, r.Revision)
		}
		for i := range r.KVs {
			obj, err := decode(&r.KVs[i], r.KVs[i].ModRevision)
			if err != nil {
				return nil, err
			}
			if opts.Predicate.Matches(obj) {
				initial = append(initial, watch.Event{Type: watch.Added, Object: obj})
			}
		}
		rv = r.Revision
		if opts.SendInitialEvents && opts.AllowBookmarks {
			b := bookmark(rv)
			b.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
			initial = append(initial, watch.Event{Type: watch.Bookmark, Object: b})
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	kw, err := s.kv.Watch(wctx, key, kv.WatchOptions{End: end, Revision: rv + 1,
		ProgressNotify: opts.ProgressNotify || opts.AllowBookmarks})
	if err != nil {
		cancel()
		return nil, interpret(key, rv, err)
	}
	w := &watcher{kw: kw, cancel: cancel, out: make(chan watch.Event, 100), pred: opts.Predicate, from: rv}
	w.wg.Add(1)
	go w.run(wctx, initial)
	return w, nil
}

type watcher struct {
	kw     kv.Watcher
	cancel context.CancelFunc
	out    chan watch.Event
	pred   Predicate
	from   int64
	wg     sync.WaitGroup
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

// RequestProgress implements ProgressRequester.
func (w *watcher) RequestProgress(ctx context.Context) error { return w.kw.RequestProgress(ctx) }

// Stop ends the watch and waits for its goroutine.
func (w *watcher) Stop() {
	w.cancel()
	w.wg.Wait()
}

func (w *watcher) run(ctx context.Context, initial []watch.Event) {
	defer w.wg.Done()
	defer close(w.out)
	defer w.kw.Close()
	send := func(ev watch.Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, ev := range initial {
		if !send(ev) {
			return
		}
	}
	for resp := range w.kw.Responses() {
		if resp.Err != nil {
			send(errorEvent(w.from, resp))
			return
		}
		if resp.Progress {
			if !send(watch.Event{Type: watch.Bookmark, Object: bookmark(resp.Revision)}) {
				return
			}
			continue
		}
		for _, e := range resp.Events {
			ev, ok, err := w.transform(e)
			if err != nil {
				send(watch.Event{Type: watch.Error, Object: statusObject(apierrors.NewInternalError(err))})
				return
			}
			if ok && !send(ev) {
				return
			}
		}
	}
}

// transform turns a kv event into the watch event a client of this
// predicate sees, if any.
func (w *watcher) transform(e kv.Event) (watch.Event, bool, error) {
	rev := e.KV.ModRevision
	var cur, prev *unstructured.Unstructured
	var err error
	if e.Type == kv.Put {
		if cur, err = decode(&e.KV, rev); err != nil {
			return watch.Event{}, false, err
		}
	}
	if e.PrevKV != nil {
		// The previous state is reported with the revision of this change,
		// as kube-apiserver does for DELETED events.
		if prev, err = decode(e.PrevKV, rev); err != nil {
			return watch.Event{}, false, err
		}
	}
	typ, obj, ok := w.pred.Transform(cur, prev)
	return watch.Event{Type: typ, Object: obj}, ok, nil
}

// bookmark is the object of a BOOKMARK event at rev.
func bookmark(rev int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	return u
}

// errorEvent is the ERROR event that ends a watch after a kv error.
func errorEvent(from int64, resp kv.WatchResponse) watch.Event {
	if errors.Is(resp.Err, kv.ErrCompacted) {
		return watch.Event{Type: watch.Error, Object: statusObject(
			apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, resp.CompactRevision)))}
	}
	return watch.Event{Type: watch.Error, Object: statusObject(apierrors.NewInternalError(resp.Err))}
}

func statusObject(err *apierrors.StatusError) *metav1.Status {
	st := err.Status()
	return &st
}

// RecordEvent is a change as the watch cache follows it: the new state of
// a key, or its deletion, at Rev; or, with only Rev set, a progress
// notification (every change up to Rev has been sent); or Err, which ends
// the watch (*Error CodeExpired when the history was compacted).
type RecordEvent struct {
	Rev     int64
	Key     string
	Record  *Record // nil: deleted
	Deleted bool
	Err     error
}

// RecordWatch follows the keys under a prefix as records: no decoding,
// for the watch cache.
type RecordWatch struct {
	kw     kv.Watcher
	cancel context.CancelFunc
	out    chan RecordEvent
	done   chan struct{}
}

// WatchRecords follows the changes under prefix after revision rev, with
// progress notifications when idle.
func (s *Store) WatchRecords(ctx context.Context, prefix string, rev int64) (*RecordWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	kw, err := s.kv.Watch(wctx, prefix, kv.WatchOptions{End: kv.PrefixEnd(prefix), Revision: rev + 1, ProgressNotify: true})
	if err != nil {
		cancel()
		return nil, interpret(prefix, rev, err)
	}
	w := &RecordWatch{kw: kw, cancel: cancel, out: make(chan RecordEvent, 100), done: make(chan struct{})}
	go w.run(wctx, prefix, rev)
	return w, nil
}

// Events delivers the changes; it is closed after an event with Err, or
// after Stop.
func (w *RecordWatch) Events() <-chan RecordEvent { return w.out }

// RequestProgress implements ProgressRequester.
func (w *RecordWatch) RequestProgress(ctx context.Context) error { return w.kw.RequestProgress(ctx) }

// Stop ends the watch and waits for its goroutine.
func (w *RecordWatch) Stop() {
	w.cancel()
	<-w.done
}

func (w *RecordWatch) run(ctx context.Context, prefix string, from int64) {
	defer close(w.done)
	defer close(w.out)
	defer w.kw.Close()
	send := func(ev RecordEvent) bool {
		select {
		case w.out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for resp := range w.kw.Responses() {
		switch {
		case resp.Err != nil:
			err := interpret(prefix, from, resp.Err)
			if errors.Is(resp.Err, kv.ErrCompacted) {
				err = &Error{Code: CodeExpired, Key: prefix, ResourceVersion: from,
					Msg: fmt.Sprintf("too old resource version: %d (%d)", from, resp.CompactRevision), Err: resp.Err}
			}
			send(RecordEvent{Rev: resp.Revision, Err: err})
			return
		case resp.Progress:
			if !send(RecordEvent{Rev: resp.Revision}) {
				return
			}
			continue
		}
		for _, e := range resp.Events {
			ev := RecordEvent{Rev: e.KV.ModRevision, Key: e.KV.Key, Deleted: e.Type == kv.Delete}
			if !ev.Deleted {
				rec, err := NewRecord(e.KV.Key, e.KV.Value, e.KV.ModRevision)
				if err != nil {
					send(RecordEvent{Rev: ev.Rev, Err: err})
					return
				}
				ev.Record = rec
			}
			if !send(ev) {
				return
			}
		}
	}
}
