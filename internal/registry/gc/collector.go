package gc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Config configures a Collector.
type Config struct {
	// Registry holds the resources to collect; required.
	Registry *registry.Registry
	// Logger; nil discards. What the collector deletes is logged at debug
	// level.
	Logger *slog.Logger
	// Workers is how many objects are worked on at once. Default 4.
	Workers int
	// RetryBase and RetryMax bound the delay before an object whose
	// processing failed (a conflict, an owner of a kind not served) is
	// looked at again; it doubles with each failure in a row. Defaults
	// 5 ms and 1 minute.
	RetryBase, RetryMax time.Duration
	// Resync is how often the set of served resources is compared with
	// the watched ones even if the registry did not signal a change.
	// Default 10 s.
	Resync time.Duration
	// RelistDelay is the pause before listing a resource again after its
	// list or watch failed. Default 1 s.
	RelistDelay time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 5 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = time.Minute
	}
	if c.Resync <= 0 {
		c.Resync = 10 * time.Second
	}
	if c.RelistDelay <= 0 {
		c.RelistDelay = time.Second
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.Registry == nil {
		return errors.New("gc: a Registry is required")
	}
	return nil
}

// Collector is the garbage collector. Run it once.
type Collector struct {
	cfg   Config
	log   *slog.Logger
	graph *graph
	queue *queue
	// synced is closed once the graph holds every served resource's
	// first list.
	synced     chan struct{}
	syncedOnce sync.Once

	unknown struct {
		sync.Mutex
		uids map[types.UID]bool // failed on an owner of a kind not served
	}

	// processed, if set (by tests), is called after each attempt at u.
	processed func(u types.UID, err error)
	// read, if set (by tests), is called each time a resource's whole
	// state has been read into the graph.
	read func(gr schema.GroupResource)
}

// New returns a collector over cfg.Registry.
func New(cfg Config) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	c := &Collector{cfg: cfg, log: cfg.Logger, graph: newGraph(), queue: newQueue(cfg.RetryBase, cfg.RetryMax), synced: make(chan struct{})}
	c.unknown.uids = map[types.UID]bool{}
	return c, nil
}

// monitor follows one resource into the graph.
type monitor struct {
	res    *registry.Resource
	cancel context.CancelFunc
	synced chan struct{} // closed once its first read is in the graph
	done   chan struct{} // closed when its goroutine has returned
}

// Run collects until ctx ends, then stops its goroutines and waits for
// them. It lists every served resource into the graph and only then
// starts working, so that an owner's dependents are all known before it
// loses its orphan or foregroundDeletion finalizer; from then on it
// follows the resources' watches and the registry's changes.
func (c *Collector) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(registry.AsController(ctx, registry.ControllerUser("generic-garbage-collector")))
	var wg sync.WaitGroup
	// Deferred calls run in reverse: cancel, close the queue, wait.
	defer wg.Wait()
	defer c.queue.close()
	defer cancel()

	monitors := map[schema.GroupResource]*monitor{}
	defer func() {
		for _, m := range monitors {
			m.cancel()
			<-m.done
		}
	}()
	tick := time.NewTicker(c.cfg.Resync)
	defer tick.Stop()
	c.resync(ctx, monitors)
	for !c.waitSynced(ctx, monitors, tick.C) {
		if ctx.Err() != nil {
			return nil
		}
		c.resync(ctx, monitors) // a resource came or went meanwhile
	}
	// Every owner listed is known to its dependents by now: the graph
	// keeps only the nodes ownership needs.
	c.graph.sweep()
	c.syncedOnce.Do(func() { close(c.synced) })
	c.enqueue(c.graph.all())
	for i := 0; i < c.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.work(ctx)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Registry.Changed():
		case <-tick.C:
		}
		c.resync(ctx, monitors)
	}
}

// Synced is closed once Run has listed every served resource into its
// graph, before it starts working.
func (c *Collector) Synced() <-chan struct{} { return c.synced }

// waitSynced waits until every monitor has listed its resource once. It
// returns false early when ctx ends or the set of resources may have
// changed (the registry's signal, or tick).
func (c *Collector) waitSynced(ctx context.Context, monitors map[schema.GroupResource]*monitor, tick <-chan time.Time) bool {
	for _, m := range monitors {
		select {
		case <-m.synced:
		case <-ctx.Done():
			return false
		case <-c.cfg.Registry.Changed():
			return false
		case <-tick:
			return false
		}
	}
	return true
}

// resync starts a monitor for every served resource that has none, and
// stops those of resources no longer served (or replaced). When the set
// changed, objects whose owner's kind was unknown are looked at again.
func (c *Collector) resync(ctx context.Context, monitors map[schema.GroupResource]*monitor) {
	current := map[schema.GroupResource]*registry.Resource{}
	for _, res := range c.cfg.Registry.Resources() {
		if res.Kind().OwnsObjects() { // a guest's objects are its host's; a review has none
			current[res.Kind().GroupResource()] = res
		}
	}
	changed := false
	for gr, m := range monitors {
		if current[gr] == m.res {
			continue
		}
		m.cancel()
		<-m.done
		delete(monitors, gr)
		c.enqueue(c.graph.drop(gr))
		changed = true
	}
	for gr, res := range current {
		if monitors[gr] != nil {
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		m := &monitor{res: res, cancel: cancel, synced: make(chan struct{}), done: make(chan struct{})}
		monitors[gr] = m
		go func() {
			defer close(m.done)
			c.follow(mctx, m)
		}()
		changed = true
	}
	if changed {
		c.unknown.Lock()
		var again []types.UID
		for u := range c.unknown.uids {
			again = append(again, u)
		}
		c.unknown.Unlock()
		c.enqueue(again)
	}
}

// follow reads m's resource into the graph and keeps it there, until ctx
// ends. It watches with sendInitialEvents: the watch starts with every
// object as an ADDED event, read from the watch cache at one revision,
// then a bookmark, then the changes since. The initial events become the
// resource's whole state in the graph (graph.replace); the watch goes on
// from there. When the watch ends (the cache ended a watcher that fell
// behind), it starts over.
//
// A list in pages, then a watch from the list's revision, would not do
// for a large resource written fast: the pages after the first are read
// at the first one's revision, which the cache's history stops reaching
// (it keeps only its last events), so they are read from the store,
// each counting the keys after it; and the watch from that revision is
// refused as too old, so the list starts over, again and again.
func (c *Collector) follow(ctx context.Context, m *monitor) {
	k := m.res.Kind()
	gr, v := k.GroupResource(), k.StorageVersion()
	first := true
	for ctx.Err() == nil {
		// Metadata is all the graph reads: a fraction of a whole decode.
		// Without a resourceVersion the start is consistent (the store's
		// state now), so what was stored before Run is in the graph at
		// Synced.
		w, err := m.res.Watch(ctx, v, "", registry.ListOptions{
			ListOptions:       storage.ListOptions{MetadataOnly: true},
			AllowBookmarks:    true,
			SendInitialEvents: true,
		})
		if err != nil {
			if ctx.Err() == nil {
				c.log.Debug("garbage collector: watching", "resource", gr.String(), "err", err)
			}
			c.pause(ctx)
			continue
		}
		var nodes []*node // the initial state, until its bookmark
		initial := true
		c.apply(ctx, w, func(ev watch.Event) bool {
			if !initial {
				return c.observe(k, ev)
			}
			switch ev.Type {
			case watch.Added:
				if obj, ok := ev.Object.(metav1.Object); ok {
					nodes = append(nodes, newNode(k, obj))
				}
			case watch.Bookmark:
				if obj, ok := ev.Object.(metav1.Object); ok && obj.GetAnnotations()[storage.InitialEventsEndAnnotation] == "true" {
					c.enqueue(c.graph.replace(gr, nodes))
					nodes, initial = nil, false
					if c.read != nil {
						c.read(gr)
					}
					if first {
						close(m.synced)
						first = false
					}
				}
			case watch.Error:
				c.log.Debug("garbage collector: reading", "resource", gr.String(), "err", apierrors.FromObject(ev.Object))
				return false
			}
			return true
		})
		w.Stop()
		if initial {
			c.pause(ctx) // it ended before its initial events did
		}
	}
}

// apply hands w's events to handle until the watch ends or handle returns
// false.
func (c *Collector) apply(ctx context.Context, w watch.Interface, handle func(watch.Event) bool) {
	if q, ok := w.(storage.EventQueue); ok {
		// The cache's queue, read in batches: no goroutine between the
		// cache and the graph.
		var batch []watch.Event
		for {
			if batch, ok = q.Next(ctx, batch); !ok {
				return
			}
			for _, ev := range batch {
				if !handle(ev) {
					return
				}
			}
			clear(batch) // let the events' objects go
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || !handle(ev) {
				return
			}
		}
	}
}

// observe puts one watch event into the graph; false when the watch ended
// with an error.
func (c *Collector) observe(k *registry.Kind, ev watch.Event) bool {
	if ev.Type == watch.Error {
		return false
	}
	obj, ok := ev.Object.(metav1.Object)
	if !ok || ev.Type == watch.Bookmark {
		return true
	}
	if ev.Type == watch.Deleted {
		c.enqueue(c.graph.forget(obj.GetUID()))
	} else {
		c.enqueue(c.graph.observe(newNode(k, obj)))
	}
	return true
}

func (c *Collector) pause(ctx context.Context) {
	t := time.NewTimer(c.cfg.RelistDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (c *Collector) enqueue(uids []types.UID) {
	for _, u := range uids {
		c.queue.add(u)
	}
}

// work processes queued objects until the queue closes.
func (c *Collector) work(ctx context.Context) {
	for {
		u, ok := c.queue.get()
		if !ok {
			return
		}
		err := c.process(ctx, u)
		c.settle(ctx, u, err)
		c.queue.done(u)
		if c.processed != nil {
			c.processed(u, err)
		}
	}
}

// settle decides what follows an attempt at u, as upstream's
// attemptToDelete worker does: success forgets its failures; an owner of
// a kind not served (maybe not yet) and transient errors retry with
// backoff; a cluster-scoped object naming a namespaced owner is left
// alone.
func (c *Collector) settle(ctx context.Context, u types.UID, err error) {
	unknown := errors.Is(err, errUnknownKind)
	c.unknown.Lock()
	if unknown {
		c.unknown.uids[u] = true
	} else {
		delete(c.unknown.uids, u)
	}
	c.unknown.Unlock()
	switch {
	case err == nil:
		c.queue.forget(u)
	case ctx.Err() != nil:
	case errors.Is(err, errNamespacedOwner):
		c.queue.forget(u)
		c.log.Info("garbage collector: a cluster-scoped object names a namespaced owner; it is left alone", "uid", u, "err", err)
	default:
		c.log.Debug("garbage collector: will retry", "uid", u, "err", err)
		c.queue.retry(u)
	}
}
