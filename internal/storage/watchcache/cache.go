package watchcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

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
	// Capacity is how many events the history keeps at least, for
	// watches that resume from a resourceVersion and for the pages of a
	// list after its first. Default 10,000.
	Capacity int
	// Beyond Capacity, the history also keeps the events of the last
	// FreshFor, up to MaxCapacity events in all, so that a resource
	// written fast still has a window of that long: kube-apiserver's
	// watch cache grows to 102,400 events for the last 75 s. Defaults
	// 75 s and 102,400; MaxCapacity is at least Capacity.
	FreshFor    time.Duration
	MaxCapacity int
	// MaxBytes bounds the stored bytes of the states the history alone
	// holds (each update's and delete's state before it) once they are
	// older than FreshFor: past it, old events go even within Capacity,
	// so that a resource of large objects, updated often and then left
	// alone, keeps MaxBytes of old versions and not Capacity of them.
	// Fresh events are kept as above, up to MaxFreshBytes. Default 64 MiB.
	MaxBytes int64
	// MaxFreshBytes bounds the same bytes for every event, fresh ones
	// too: a resource of large objects written so fast that FreshFor of
	// them would hold more keeps the newest that fit, and a watch from
	// before them gets 410 Gone. Default 256 MiB; at least MaxBytes.
	MaxFreshBytes int64
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
	if c.FreshFor == 0 {
		c.FreshFor = 75 * time.Second
	}
	if c.MaxCapacity == 0 {
		c.MaxCapacity = 100 * 1024
	}
	c.MaxCapacity = max(c.MaxCapacity, c.Capacity)
	if c.MaxBytes == 0 {
		c.MaxBytes = 64 << 20
	}
	if c.MaxFreshBytes == 0 {
		c.MaxFreshBytes = 256 << 20
	}
	c.MaxFreshBytes = max(c.MaxFreshBytes, c.MaxBytes)
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

// event is one change, as the cache keeps it: cur is the key's new state
// (nil for a delete), prior its state before (nil for a create), at when
// the cache received it.
type event struct {
	rev        int64
	key        string
	cur, prior *storage.Record
	at         time.Time
}

// eventLog is the history: the last events, oldest first, in a slice
// that drops from the front by moving an offset and is compacted only
// when half of it is dropped, so adding an event costs O(1) amortized,
// not a copy of the whole history.
type eventLog struct {
	events []event
	start  int // events[:start] are dropped
	// priorBytes is the stored bytes of the kept events' prior states:
	// what the history alone holds (an event's current state is the
	// cache's object, or the prior of a later event).
	priorBytes int64
}

// all returns the events kept, oldest first.
func (l *eventLog) all() []event { return l.events[l.start:] }

// add appends e, the newest event.
func (l *eventLog) add(e event) {
	l.events = append(l.events, e)
	l.priorBytes += priorSize(e)
}

func priorSize(e event) int64 {
	if e.prior == nil {
		return 0
	}
	return int64(len(e.prior.Value))
}

// trim drops the oldest events while more than most are kept, or their
// prior states hold more than maxAll bytes, or the oldest came before
// cutoff and either more than least are kept or their prior states hold
// more than maxOld. It returns the revision of the last one dropped.
func (l *eventLog) trim(least, most int, cutoff time.Time, maxOld, maxAll int64) (dropped int64, ok bool) {
	for n := len(l.events) - l.start; n > 0; n-- {
		oldest := &l.events[l.start]
		if n <= most && l.priorBytes <= maxAll &&
			(!oldest.at.Before(cutoff) || n <= least && l.priorBytes <= maxOld) {
			break
		}
		dropped, ok = oldest.rev, true
		l.priorBytes -= priorSize(*oldest)
		*oldest = event{} // let its records go
		l.start++
	}
	if ok && l.start >= len(l.events)/2 {
		kept := len(l.events) - l.start
		l.events = append(make([]event, 0, max(2*kept, 16)), l.events[l.start:]...)
		l.start = 0
	}
	return dropped, ok
}

// Cache is the watch cache of one resource. Create it with New, run it
// with Run. Objects it hands out are shared: callers must not modify them.
//
// Lock order: Cache.mu, then watcher.mu.
type Cache struct {
	cfg Config

	mu struct {
		sync.RWMutex
		ready bool
		// objects holds the records of the current state: their stored
		// JSON, not decoded objects (see storage.Record), in key order,
		// counted so that a page's remainingItemCount is O(log n).
		objects recordTree
		bytes   int64 // the objects' stored JSON, in all
		rev     int64 // everything up to rev is reflected
		// history holds the last events in revision order (Capacity, or
		// more while they are fresh): every event after floor. A watch
		// may resume from any revision >= floor, and a list may read any
		// revision in [floor, rev]: the objects, with the keys that
		// changed since put back as they were (stateAtLocked).
		history  eventLog
		floor    int64
		watchers map[*watcher]struct{}
		changed  chan struct{} // closed and replaced when rev changes
		progress storage.ProgressRequester
	}

	// Counted for Stats.
	received, terminated atomic.Uint64

	// lists keeps, for the lists being paged, the keys changed since
	// their revisions (see changes). Lock order: mu, lists, a changes.
	lists struct {
		sync.Mutex
		kept  map[pagedList]*changes
		pages uint64 // pages served from it, a clock for eviction
	}
}

// New returns a cache; it serves nothing until Run has listed the store.
func New(cfg Config) *Cache {
	cfg.setDefaults()
	c := &Cache{cfg: cfg}
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
	list, err := c.cfg.Store.ListRecords(ctx, c.cfg.Prefix, storage.ListOptions{})
	if err != nil {
		return err
	}
	w, err := c.cfg.Store.WatchRecords(ctx, c.cfg.Prefix, list.ResourceVersion)
	if err != nil {
		return err
	}
	defer w.Stop()

	c.mu.Lock()
	c.mu.objects.Clear()
	c.mu.bytes = 0
	for _, r := range list.Items {
		c.mu.objects.ReplaceOrInsert(r)
		c.mu.bytes += int64(len(r.Value))
	}
	c.mu.rev, c.mu.floor, c.mu.history = list.ResourceVersion, list.ResourceVersion, eventLog{}
	c.forgetChangesLocked(math.MaxInt64) // all: they came from the history dropped
	c.mu.progress = w
	c.mu.ready = true
	c.broadcastLocked()
	c.mu.Unlock()

	bookmarks := time.NewTicker(c.cfg.BookmarkInterval)
	defer bookmarks.Stop()
	for {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return errors.New("the store watch closed")
			}
			if err := c.apply(ev); err != nil {
				return err
			}
		case <-bookmarks.C:
			c.bookmark()
			// A resource gone quiet lets go of the events beyond
			// Capacity that only a burst of writes had kept.
			c.mu.Lock()
			c.trimLocked(time.Now())
			c.mu.Unlock()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply records one store event and hands it to the watchers.
func (c *Cache) apply(ev storage.RecordEvent) error {
	if ev.Err != nil {
		return fmt.Errorf("store watch error: %w", ev.Err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Key == "" { // progress
		if ev.Rev > c.mu.rev {
			c.mu.rev = ev.Rev
			c.broadcastLocked()
		}
		return nil
	}
	c.received.Add(1)
	e := event{rev: ev.Rev, key: ev.Key, cur: ev.Record}
	if ev.Deleted {
		e.prior, _ = c.mu.objects.Delete(ev.Key)
	} else {
		e.prior, _ = c.mu.objects.ReplaceOrInsert(ev.Record)
		c.mu.bytes += int64(len(ev.Record.Value))
	}
	if e.prior != nil {
		c.mu.bytes -= int64(len(e.prior.Value))
		// Superseded: what was kept for reading it again goes.
		e.prior.DropAlt()
	}
	c.mu.rev = ev.Rev
	if e.cur == nil && e.prior == nil {
		c.broadcastLocked() // a delete of a key the cache never saw: nothing to tell
		return nil
	}
	e.at = time.Now()
	c.mu.history.add(e)
	c.trimLocked(e.at)
	objs := &eventObjects{e: e}
	for w := range c.mu.watchers {
		if e.rev <= w.after {
			continue
		}
		if out, ok := w.transform(e, objs); ok {
			w.push(out)
		}
	}
	c.broadcastLocked()
	return nil
}

// trimLocked drops the events the history need not keep at now, and moves
// the floor past them.
func (c *Cache) trimLocked(now time.Time) {
	if dropped, ok := c.mu.history.trim(c.cfg.Capacity, c.cfg.MaxCapacity, now.Add(-c.cfg.FreshFor), c.cfg.MaxBytes, c.cfg.MaxFreshBytes); ok {
		c.mu.floor = dropped
		c.forgetChangesLocked(dropped)
	}
}

// bookmark sends a BOOKMARK at the cache's revision to the watchers that
// allow them.
func (c *Cache) bookmark() {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for w := range c.mu.watchers {
		if w.bookmarks && c.mu.rev >= w.after {
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
	// The timer only once there is something to wait for: most reads find
	// the cache there already.
	var deadline <-chan time.Time
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
		if deadline == nil {
			t := time.NewTimer(c.cfg.WaitTimeout)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-changed:
		case <-deadline:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// Stats are a cache's figures, for /metrics.
type Stats struct {
	Objects  int   // objects held
	Bytes    int64 // their stored JSON, in all
	Ready    bool  // false until the first list from the store is in
	Revision int64 // the store revision the cache reflects
	// Events received from the store's watch since New: every write
	// of the resource, not progress notices.
	EventsReceived uint64
	// Watchers ended because they fell Buffer events behind.
	WatchersTerminated uint64
}

// Stats returns the cache's figures.
func (c *Cache) Stats() Stats {
	c.mu.RLock()
	st := Stats{Objects: c.mu.objects.Len(), Bytes: c.mu.bytes, Ready: c.mu.ready, Revision: c.mu.rev}
	c.mu.RUnlock()
	st.EventsReceived, st.WatchersTerminated = c.received.Load(), c.terminated.Load()
	return st
}

// CacheRevision returns the revision the cache reflects.
func (c *Cache) CacheRevision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.mu.rev
}
