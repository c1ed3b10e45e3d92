package watchcache

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// watcher is one client watch. The cache pushes events into its queue
// without ever blocking. A consumer takes them with Next (the API
// server's watch handler: no goroutine in between), or from ResultChan,
// whose first call starts the goroutine that sends them on. A queue that
// reaches its limit means the client is not keeping up: the watch is
// ended with an ERROR event after the events already queued, so the
// client sees no gap and relists.
type watcher struct {
	ctx       context.Context
	started   sync.Once // the ResultChan goroutine
	cache     *Cache
	match     func(key string) bool // the watched key or prefix
	pred      storage.Predicate
	bookmarks bool
	after     int64 // events at or before it, bookmarks before it, are not sent: a watch from a revision the cache had not reached
	form      form  // how the events carry their objects
	out       chan watch.Event
	done      chan struct{} // closed when the watch ends
	stopOnce  sync.Once
	wake      chan struct{} // capacity 1

	mu struct {
		sync.Mutex
		// initial are the records of the state the watch starts with, not
		// yet sent: they go before the queue, made into events a batch at
		// a time, so that a watch of 100,000 objects never holds them all
		// as objects at once.
		initial []*storage.Record
		queue   []watch.Event
		limit   int
		ended   bool // no more events are accepted
	}
}

// initialBatch is how many initial events are made at a time.
const initialBatch = 256

// takeInitial appends to buf the events of the next initialBatch initial
// records and returns it, or nil once they have all been taken. The
// objects are made outside the lock, which the cache takes to queue live
// events (only the consumer takes initial records). An object that cannot
// be made ends the watch with an error event.
func (w *watcher) takeInitial(buf []watch.Event) []watch.Event {
	w.mu.Lock()
	n := min(initialBatch, len(w.mu.initial))
	recs := w.mu.initial[:n:n]
	w.mu.initial = w.mu.initial[n:]
	w.mu.Unlock()
	if n == 0 {
		return nil
	}
	buf = buf[:0]
	for _, r := range recs {
		obj, err := recordObject(r, r.Rev, w.form, true)
		if err != nil {
			w.mu.Lock()
			w.mu.initial, w.mu.queue, w.mu.ended = nil, nil, true
			w.mu.Unlock()
			return append(buf[:0], errorEvent(apierrors.NewInternalError(err)))
		}
		buf = append(buf, watch.Event{Type: watch.Added, Object: obj})
	}
	clear(recs) // the records may go once their events have
	return buf
}

func newWatcher(ctx context.Context, c *Cache, match func(string) bool, opts storage.WatchOptions, limit int) *watcher {
	w := &watcher{
		ctx:       ctx,
		cache:     c,
		match:     match,
		pred:      opts.Predicate,
		bookmarks: opts.AllowBookmarks || opts.ProgressNotify,
		form:      formOf(opts),
		out:       make(chan watch.Event),
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
	w.mu.limit = limit
	return w
}

// ResultChan implements watch.Interface; the first call starts the
// goroutine that feeds it.
func (w *watcher) ResultChan() <-chan watch.Event {
	w.started.Do(func() { go w.run(w.ctx) })
	return w.out
}

// Next implements storage.EventQueue.
func (w *watcher) Next(ctx context.Context, reuse []watch.Event) ([]watch.Event, bool) {
	if evs := w.takeInitial(reuse); evs != nil {
		return evs, true
	}
	for {
		w.mu.Lock()
		queue, ended := w.mu.queue, w.mu.ended
		w.mu.queue = reuse[:0]
		w.mu.Unlock()
		if len(queue) > 0 {
			return queue, true
		}
		if ended {
			return nil, false
		}
		// reuse is the queue now: the next swap must not hand it out
		// again while the watcher appends to it.
		reuse = queue
		select {
		case <-w.wake:
		case <-w.done:
			return nil, false
		case <-ctx.Done():
			return nil, false
		case <-w.ctx.Done():
			return nil, false
		}
	}
}

// RequestProgress implements storage.ProgressRequester: a BOOKMARK at the
// store's current revision follows the events before it.
func (w *watcher) RequestProgress(ctx context.Context) error { return w.cache.progress(ctx, w) }

// Stop ends the watch.
func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.done) }) }

// push queues an event; if the queue is full, the watch is ended instead.
func (w *watcher) push(ev watch.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.ended {
		return
	}
	if len(w.mu.queue) >= w.mu.limit {
		w.mu.ended = true
		w.cache.terminated.Add(1)
		w.mu.queue = append(w.mu.queue, errorEvent(apierrors.NewResourceExpired(
			"the watcher fell behind the server and was closed; list again and watch from the list's resourceVersion")))
	} else {
		w.mu.queue = append(w.mu.queue, ev)
	}
	w.signal()
}

// end stops accepting events; err, if set, is sent after the queued ones.
func (w *watcher) end(err *apierrors.StatusError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.ended {
		return
	}
	w.mu.ended = true
	if err != nil {
		w.mu.queue = append(w.mu.queue, errorEvent(err))
	}
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	defer w.Stop()
	var initial []watch.Event
	for {
		if initial = w.takeInitial(initial); initial != nil {
			for i, ev := range initial {
				select {
				case w.out <- ev:
					initial[i] = watch.Event{}
				case <-w.done:
					return
				case <-ctx.Done():
					return
				}
			}
			continue
		}
		w.mu.Lock()
		queue, ended := w.mu.queue, w.mu.ended
		w.mu.queue = nil
		w.mu.Unlock()
		for _, ev := range queue {
			select {
			case w.out <- ev:
			case <-w.done:
				return
			case <-ctx.Done():
				return
			}
		}
		if ended && len(queue) == 0 {
			return
		}
		if len(queue) > 0 {
			continue
		}
		select {
		case <-w.wake:
		case <-w.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// transform turns a cache event into what this watcher's client sees, as
// storage.Predicate.Transform does: an object that starts matching is
// ADDED, one that keeps matching MODIFIED, and one that stops matching or
// is deleted DELETED with its last state at the event's revision. The
// objects come from objs, decoded once for every watcher of the event.
func (w *watcher) transform(e event, objs *eventObjects) (watch.Event, bool) {
	if !w.match(e.key) {
		return watch.Event{}, false
	}
	curOK := e.cur != nil && w.pred.MatchesRecord(e.cur)
	priorOK := e.prior != nil && w.pred.MatchesRecord(e.prior)
	var (
		typ watch.EventType
		obj runtime.Object
		err error
	)
	switch {
	case curOK && priorOK:
		typ = watch.Modified
		obj, err = objs.current(w.form)
	case curOK:
		typ = watch.Added
		obj, err = objs.current(w.form)
	case priorOK:
		typ = watch.Deleted
		obj, err = objs.last(w.form)
	default:
		return watch.Event{}, false
	}
	if err != nil {
		return errorEvent(apierrors.NewInternalError(err)), true
	}
	return watch.Event{Type: typ, Object: obj}, true
}

// form is how a watcher's events carry their objects.
type form uint8

const (
	formWhole form = iota // *storage.Shared, decoded
	formMeta              // *metav1.PartialObjectMetadata (MetadataOnly)
	formJSON              // *storage.RecordJSON, the JSON only (EncodedOnly)
	forms
)

func formOf(opts storage.WatchOptions) form {
	switch {
	case opts.MetadataOnly:
		return formMeta
	case opts.EncodedOnly:
		return formJSON
	}
	return formWhole
}

// eventObjects are an event's objects as watchers are sent them, made on
// first use in each form, for every watcher of the event that asked for
// that form.
type eventObjects struct {
	e     event
	objs  [forms][2]runtime.Object // [form][0: current, 1: last]
	errs  [forms][2]error
	tried [forms][2]bool
}

// current is the new state.
func (o *eventObjects) current(f form) (runtime.Object, error) {
	return o.get(f, 0, o.e.cur, o.e.cur.Rev)
}

// last is the state before, with the event's resourceVersion, as
// kube-apiserver reports a DELETED object.
func (o *eventObjects) last(f form) (runtime.Object, error) {
	return o.get(f, 1, o.e.prior, o.e.rev)
}

func (o *eventObjects) get(f form, which int, r *storage.Record, rev int64) (runtime.Object, error) {
	if !o.tried[f][which] {
		o.tried[f][which] = true
		o.objs[f][which], o.errs[f][which] = recordObject(r, rev, f, false)
	}
	return o.objs[f][which], o.errs[f][which]
}

// recordObject is r at rev as a watcher is sent it in form f: whole and
// shared by every watcher, its metadata, or its JSON (alone: the
// watcher's alone, an initial event; storage.RecordJSON.Alone).
func recordObject(r *storage.Record, rev int64, f form, alone bool) (runtime.Object, error) {
	switch f {
	case formMeta:
		return r.PartialMetadata(rev)
	case formJSON:
		if alone {
			return storage.NewInitialRecordJSON(r, rev), nil
		}
		return storage.NewRecordJSON(r, rev), nil
	}
	return storage.SharedRecord(r, rev)
}

func errorEvent(err *apierrors.StatusError) watch.Event {
	st := err.Status()
	return watch.Event{Type: watch.Error, Object: &st}
}
