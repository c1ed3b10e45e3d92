package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

// Config configures a Registry.
type Config struct {
	Store *storage.Store
	// Cache is the template of every resource's watch cache (Store, Prefix
	// and Key are filled in).
	Cache watchcache.Config
	// Now is the clock for timestamps; nil is time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
}

// Registry holds the served resources. Resources added before Run start
// serving when Run starts; those added later, at once.
//
// Lock order: Registry.mu only; no I/O under it.
type Registry struct {
	cfg Config

	mu struct {
		sync.RWMutex
		resources map[schema.GroupResource]*Resource
		ctx       context.Context // set while Run runs
		wg        sync.WaitGroup  // the caches' goroutines
	}
	changed chan struct{} // signalled when the set of resources changes (capacity 1)
	noops   noopWrites    // writes that changed nothing, of every resource (noopwrites.go)
	// admission, if set, is asked about every write (SetAdmission).
	admission Admission
	// quota, if set, charges creates (SetQuota).
	quota     Quota
	converter Converter
}

// New returns an empty registry.
func New(cfg Config) *Registry {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Registry{cfg: cfg, changed: make(chan struct{}, 1)}
	r.mu.resources = make(map[schema.GroupResource]*Resource)
	return r
}

// Run serves the resources' watch caches until ctx ends, then stops them
// and waits for them.
func (r *Registry) Run(ctx context.Context) error {
	r.mu.Lock()
	r.mu.ctx = ctx
	for _, res := range r.mu.resources {
		if !res.hosted {
			r.startLocked(res)
		}
	}
	r.mu.Unlock()
	<-ctx.Done()
	r.mu.Lock()
	r.mu.ctx = nil
	r.mu.Unlock()
	r.mu.wg.Wait()
	return nil
}

func (r *Registry) startLocked(res *Resource) {
	ctx, cancel := context.WithCancel(r.mu.ctx)
	res.stop = cancel
	r.mu.wg.Add(1)
	go func() {
		defer r.mu.wg.Done()
		res.cache.Run(ctx)
	}()
}

// Add serves k. Adding a kind that is already served replaces its
// description (a CRD that changed) and keeps its cache.
func (r *Registry) Add(k *Kind) error {
	if len(k.Versions) == 0 || k.Resource == "" || k.Kind == "" {
		return fmt.Errorf("registry: kind %+v needs versions, a resource and a kind", k)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	gr := k.GroupResource()
	if old, ok := r.mu.resources[gr]; ok {
		old.setKind(k)
		r.signal()
		return nil
	}
	res := &Resource{reg: r, store: r.cfg.Store}
	switch {
	case k.Review != nil:
		res.hosted = true // no objects, no cache
	case k.IsGuest():
		// The host's objects, through the host's cache.
		host, ok := r.mu.resources[k.Cohabit.Host.GroupResource()]
		if !ok {
			return fmt.Errorf("registry: %s serves the objects of %s, which is not served", gr, k.Cohabit.Host.GroupResource())
		}
		res.cache, res.hosted = host.cache, true
	default:
		cc := r.cfg.Cache
		cc.Store, cc.Prefix, cc.Key, cc.Logger = r.cfg.Store, k.Prefix(), nil, r.cfg.Logger
		res.cache = watchcache.New(cc)
	}
	res.setKind(k)
	r.mu.resources[gr] = res
	if r.mu.ctx != nil && !res.hosted {
		r.startLocked(res)
	}
	r.signal()
	return nil
}

// Remove stops serving gr; its watches end. The objects stay in storage.
func (r *Registry) Remove(gr schema.GroupResource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res, ok := r.mu.resources[gr]; ok {
		if res.stop != nil {
			res.stop()
		}
		delete(r.mu.resources, gr)
		r.signal()
	}
}

func (r *Registry) signal() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Changed is signalled when resources are added, changed or removed.
func (r *Registry) Changed() <-chan struct{} { return r.changed }

// Lookup returns the resource serving group/version/resource.
func (r *Registry) Lookup(group, version, resource string) (*Resource, bool) {
	r.mu.RLock()
	res, ok := r.mu.resources[schema.GroupResource{Group: group, Resource: resource}]
	r.mu.RUnlock()
	if !ok || !res.Kind().Serves(version) {
		return nil, false
	}
	return res, true
}

// ForKind returns the resource serving kind gvk in its version (a
// resource's kind, not a subresource's).
func (r *Registry) ForKind(gvk schema.GroupVersionKind) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, res := range r.mu.resources {
		if k := res.Kind(); k.Group == gvk.Group && k.Kind == gvk.Kind && k.Serves(gvk.Version) {
			return res, true
		}
	}
	return nil, false
}

// Get returns the resource gr, whatever its versions.
func (r *Registry) Get(gr schema.GroupResource) (*Resource, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	res, ok := r.mu.resources[gr]
	return res, ok
}

// Resources returns every served resource, sorted by group and resource.
func (r *Registry) Resources() []*Resource {
	r.mu.RLock()
	out := make([]*Resource, 0, len(r.mu.resources))
	for _, res := range r.mu.resources {
		out = append(out, res)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Kind(), out[j].Kind()
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Resource < b.Resource
	})
	return out
}

// Now is the registry's clock.
func (r *Registry) Now() time.Time { return r.cfg.Now() }
