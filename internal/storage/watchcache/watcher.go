package watchcache

import (
	"context"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// watcher is one client watch. The cache pushes events into its queue
// without ever blocking; the watcher's goroutine sends them on. A queue
// that reaches its limit means the client is not keeping up: the watch is
// ended with an ERROR event after the events already queued, so the client
// sees no gap and relists.
type watcher struct {
	cache     *Cache
	match     func(key string) bool // the watched key or prefix
	pred      storage.Predicate
	bookmarks bool
	out       chan watch.Event
	done      chan struct{} // closed when the watch ends
	stopOnce  sync.Once
	wake      chan struct{} // capacity 1

	mu struct {
		sync.Mutex
		queue []watch.Event
		limit int
		ended bool // no more events are accepted
	}
}

func newWatcher(ctx context.Context, c *Cache, match func(string) bool, opts storage.WatchOptions, limit int) *watcher {
	w := &watcher{
		cache:     c,
		match:     match,
		pred:      opts.Predicate,
		bookmarks: opts.AllowBookmarks || opts.ProgressNotify,
		out:       make(chan watch.Event),
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
	}
	w.mu.limit = limit
	go w.run(ctx)
	return w
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.out }

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
	for {
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

// transform turns a cache event into what this watcher's client sees.
// Clients get the event's shared object whenever they see the change as
// it happened; only an object leaving the selection needs its own copy.
func (w *watcher) transform(e event) (watch.Event, bool) {
	if !w.match(e.key) {
		return watch.Event{}, false
	}
	prev := e.prev
	if prev != nil && e.obj != nil && w.pred.Matches(prev) && !w.pred.Matches(e.obj) {
		// Leaving the selection: the last matching state, at this revision.
		prev = prev.DeepCopy()
		prev.SetResourceVersion(strconv.FormatInt(e.rev, 10))
		return watch.Event{Type: watch.Deleted, Object: prev}, true
	}
	typ, _, ok := w.pred.Transform(e.obj, prev)
	return watch.Event{Type: typ, Object: e.shared}, ok
}

func errorEvent(err *apierrors.StatusError) watch.Event {
	st := err.Status()
	return watch.Event{Type: watch.Error, Object: &st}
}
