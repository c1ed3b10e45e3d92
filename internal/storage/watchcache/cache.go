package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/btree"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// Config configures a Cache.
type Config struct {
	// Store and Prefix say what is cached: every object under Prefix,
	// which ends in "/".
	Store  *storage.Store
	Prefix string
	// Key returns an object's key; default Prefix + "namespace/name", or
	// Prefix + "name" for cluster-scoped objects.
	Key func(obj *unstructured.Unstructured) string
	// Capacity is how many events the history keeps for watches that
	// resume from a resourceVersion. Default 10,000.
	Capacity int
	// Buffer is how many events a watcher may have waiting before it is
	// ended as too slow. Default 1,000.
	Buffer int
	// BookmarkInterval is the period of BOOKMARK events. Default 1 minute.
	BookmarkInterval time.Duration
	// WaitTimeout bounds how long a read waits for the cache to catch up
	// before falling back to the store (or failing). Default 3 s.
	WaitTimeout time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Key == nil {
		prefix := c.Prefix
		c.Key = func(obj *unstructured.Unstructured) string {
			if ns := obj.GetNamespace(); ns != "" {
				return prefix + ns + "/" + obj.GetName()
			}
			return prefix + obj.GetName()
		}
	}
	if c.Capacity == 0 {
		c.Capacity = 10000
	}
	if c.Buffer == 0 {
		c.Buffer = 1000
	}
	if c.BookmarkInterval == 0 {
		c.BookmarkInterval = time.Minute
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// event is one change, as the cache keeps it: obj is the new state (for
// a delete, the last state with the delete's resourceVersion), prev the
// state before (nil for a create).
type event struct {
	rev       int64
	key       string
	obj, prev *unstructured.Unstructured
	// prior is the key's state before the event as a list read at an
	// earlier revision shows it (nil: absent). It is prev, except for a
	// delete, whose prev carries the delete's resourceVersion and prior
	// the object's own.
	prior *unstructured.Unstructured
	// shared wraps obj, or prev for a delete: what watchers are sent, so
	// that each event is encoded once for all of them.
	shared *storage.Shared
}

type item struct {
	key    string
	obj    *unstructured.Unstructured
	shared *storage.Shared // wraps obj
}

func newItem(key string, obj *unstructured.Unstructured) item {
	return item{key: key, obj: obj, shared: storage.NewShared(obj)}
}

// Cache is the watch cache of one resource. Create it with New, run it
// with Run. Objects it hands out are shared: callers must not modify them.
//
// Lock order: Cache.mu, then watcher.mu.
type Cache struct {
	cfg Config

	mu struct {
		sync.RWMutex
		ready   bool
		objects *btree.BTreeG[item]
		rev     int64 // everything up to rev is reflected
		// history holds the last Capacity events in revision order: every
		// event after floor. A watch may resume from any revision >=
		// floor, and a list may read any revision in [floor, rev]: the
		// objects, with the keys that changed since put back as they were
		// (stateAtLocked).
		history  []event
		floor    int64
		watchers map[*watcher]struct{}
		changed  chan struct{} // closed and replaced when rev changes
		progress storage.ProgressRequester
	}
}

// New returns a cache; it serves nothing until Run has listed the store.
func New(cfg Config) *Cache {
	cfg.setDefaults()
	c := &Cache{cfg: cfg}
	c.mu.objects = btree.NewG(32, func(a, b item) bool { return a.key < b.key })
	c.mu.watchers = make(map[*watcher]struct{})
	c.mu.changed = make(chan struct{})
	return c
}

// Run fills the cache and keeps it current until ctx ends, then ends every
// watcher. When the store watch fails (for example its history was
// compacted), Run relists, and ends the watchers with 410 Gone so that
// their clients relist too.
func (c *Cache) Run(ctx context.Context) error {
	defer c.endWatchers(nil)
	for {
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		c.cfg.Logger.Warn("watch cache relisting", "prefix", c.cfg.Prefix, "err", err)
		c.endWatchers(apierrors.NewResourceExpired(fmt.Sprintf("the watch cache of %s restarted: %v", c.cfg.Prefix, err)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond): // don't spin against a store that is down
		}
	}
}

// follow lists, then applies the store watch until it fails.
func (c *Cache) follow(ctx context.Context) error {
	list, err := c.cfg.Store.List(ctx, c.cfg.Prefix, storage.ListOptions{})
	if err != nil {
		return err
	}
	rev, _ := strconv.ParseInt(list.GetResourceVersion(), 10, 64)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.cfg.Store.Watch(wctx, c.cfg.Prefix, storage.WatchOptions{
		ResourceVersion: list.GetResourceVersion(), Recursive: true, ProgressNotify: true})
	if err != nil {
		return err
	}
	defer w.Stop()

	c.mu.Lock()
	c.mu.objects.Clear(false)
	for i := range list.Items {
		obj := &list.Items[i]
		c.mu.objects.ReplaceOrInsert(newItem(c.cfg.Key(obj), obj))
	}
	c.mu.rev, c.mu.floor, c.mu.history = rev, rev, nil
	c.mu.progress, _ = w.(storage.ProgressRequester)
	c.mu.ready = true
	c.broadcastLocked()
	c.mu.Unlock()

	bookmarks := time.NewTicker(c.cfg.BookmarkInterval)
	defer bookmarks.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the store watch closed")
			}
			if err := c.apply(ev); err != nil {
				return err
			}
		case <-bookmarks.C:
			c.bookmark()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply records one store event and hands it to the watchers.
func (c *Cache) apply(ev watch.Event) error {
	if ev.Type == watch.Error {
		return fmt.Errorf("store watch error: %v", apierrors.FromObject(ev.Object))
	}
	obj, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("store watch sent a %T", ev.Object)
	}
	rev, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return fmt.Errorf("store watch event without a resourceVersion: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Type == watch.Bookmark {
		if rev > c.mu.rev {
			c.mu.rev = rev
			c.broadcastLocked()
		}
		return nil
	}
	key := c.cfg.Key(obj)
	e := event{rev: rev, key: key}
	if old, found := c.mu.objects.Get(item{key: key}); found {
		e.prev, e.prior = old.obj, old.obj
	}
	if ev.Type == watch.Deleted {
		e.prev = obj // the store sends the last state at the delete's revision
		e.shared = storage.NewShared(obj)
		c.mu.objects.Delete(item{key: key})
	} else {
		e.obj = obj
		it := newItem(key, obj)
		e.shared = it.shared
		c.mu.objects.ReplaceOrInsert(it)
	}
	c.mu.history = append(c.mu.history, e)
	if over := len(c.mu.history) - c.cfg.Capacity; over > 0 {
		c.mu.floor = c.mu.history[over-1].rev
		c.mu.history = append(c.mu.history[:0:0], c.mu.history[over:]...)
	}
	c.mu.rev = rev
	for w := range c.mu.watchers {
		if out, ok := w.transform(e); ok {
			w.push(out)
		}
	}
	c.broadcastLocked()
	return nil
}

// bookmark sends a BOOKMARK at the cache's revision to the watchers that
// allow them.
func (c *Cache) bookmark() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for w := range c.mu.watchers {
		if w.bookmarks {
			w.push(watch.Event{Type: watch.Bookmark, Object: bookmarkObject(c.mu.rev, false)})
		}
	}
}

func (c *Cache) broadcastLocked() {
	close(c.mu.changed)
	c.mu.changed = make(chan struct{})
}

// endWatchers ends every watcher, with an ERROR event if err is set.
func (c *Cache) endWatchers(err *apierrors.StatusError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.mu.watchers {
		w.end(err)
		delete(c.mu.watchers, w)
	}
	c.mu.ready = false
}

// waitFor waits until the cache reflects revision rev, asking the store
// watch for progress so an idle cache learns it is current. It reports
// false after the wait timeout.
func (c *Cache) waitFor(ctx context.Context, rev int64) bool {
	deadline := time.NewTimer(c.cfg.WaitTimeout)
	defer deadline.Stop()
	asked := false
	for {
		c.mu.RLock()
		ready, cur, changed, progress := c.mu.ready, c.mu.rev, c.mu.changed, c.mu.progress
		c.mu.RUnlock()
		if ready && cur >= rev {
			return true
		}
		if ready && !asked && progress != nil {
			progress.RequestProgress(ctx)
			asked = true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// CacheRevision returns the revision the cache reflects.
func (c *Cache) CacheRevision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.rev
}
