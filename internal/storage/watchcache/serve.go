package watchcache

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

var _ storage.Interface = (*Cache)(nil)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial
// events of a sendInitialEvents watch.
const InitialEventsEndAnnotation = storage.InitialEventsEndAnnotation

// Create, GuaranteedUpdate and Delete go to the store; the cache sees
// their effect through its watch.
func (c *Cache) Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return c.cfg.Store.Create(ctx, key, obj)
}

// CreateEncoded: see storage.Store.CreateEncoded.
func (c *Cache) CreateEncoded(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, *storage.Encoded, error) {
	return c.cfg.Store.CreateEncoded(ctx, key, obj)
}

// GuaranteedUpdate: see storage.Store.GuaranteedUpdate.
func (c *Cache) GuaranteedUpdate(ctx context.Context, key string, pre *storage.Preconditions, tryUpdate storage.UpdateFunc) (*unstructured.Unstructured, error) {
	return c.cfg.Store.GuaranteedUpdate(ctx, key, pre, tryUpdate)
}

// GuaranteedUpdateEncoded: see storage.Store.GuaranteedUpdateEncoded.
func (c *Cache) GuaranteedUpdateEncoded(ctx context.Context, key string, pre *storage.Preconditions, tryUpdate storage.UpdateFunc) (*unstructured.Unstructured, *storage.Encoded, error) {
	return c.cfg.Store.GuaranteedUpdateEncoded(ctx, key, pre, tryUpdate)
}

// Delete: see storage.Store.Delete.
func (c *Cache) Delete(ctx context.Context, key string, pre *storage.Preconditions, validate storage.ValidateDeletion) (*unstructured.Unstructured, error) {
	return c.cfg.Store.Delete(ctx, key, pre, validate)
}

// Revision is the store's current revision (not the cache's: see
// CacheRevision).
func (c *Cache) Revision(ctx context.Context) (int64, error) { return c.cfg.Store.Revision(ctx) }

// Get reads one object. An unset resourceVersion is a consistent read and
// goes to the store, as kube-apiserver does; "0" and N are served from the
// cache once it has reached N (else TooLargeResourceVersion).
func (c *Cache) Get(ctx context.Context, key string, opts storage.GetOptions) (*unstructured.Unstructured, error) {
	if opts.ResourceVersion == "" {
		return c.cfg.Store.Get(ctx, key, opts)
	}
	r, err := c.GetRecord(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return r.Decode(r.Rev)
}

// GetRecord is Get without the decode: the object as stored, for a caller
// that reads what a record knows (Deleting, labels) or copies its JSON.
func (c *Cache) GetRecord(ctx context.Context, key string, opts storage.GetOptions) (*storage.Record, error) {
	if opts.ResourceVersion == "" {
		// A consistent read goes to the store, as kube-apiserver's does;
		// the cache's record answers when it is still the object's.
		c.mu.RLock()
		cached, _ := c.mu.objects.Get(key)
		c.mu.RUnlock()
		return c.cfg.Store.GetRecordOr(ctx, key, opts, cached)
	}
	rv, err := storage.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if !c.waitFor(ctx, rv) {
		if rv == 0 {
			return c.cfg.Store.GetRecord(ctx, key, storage.GetOptions{})
		}
		return nil, c.tooLarge(key, rv)
	}
	c.mu.RLock()
	r, ok := c.mu.objects.Get(key)
	rev := c.mu.rev
	c.mu.RUnlock()
	if !ok {
		return nil, &storage.Error{Code: storage.CodeNotFound, Key: key, ResourceVersion: rev, Msg: "not found"}
	}
	return r, nil
}

func (c *Cache) tooLarge(key string, rv int64) error {
	return &storage.Error{Code: storage.CodeTooLargeResourceVersion, Key: key, ResourceVersion: rv,
		Msg: fmt.Sprintf("Too large resource version: %d, current: %d", rv, c.CacheRevision())}
}

// within reports whether key is the cache's to serve.
func (c *Cache) within(key string) bool { return strings.HasPrefix(key, c.cfg.Prefix) }

// List serves a list from the cache where it can, and from the store
// otherwise. prefix must lie under the cache's prefix (a namespace, for
// example).
//
//   - Consistent and NotOlderThan lists, paged or not, read the cache's
//     current state once it has caught up (see waitFor), as
//     kube-apiserver's cacher does with ConsistentListFromCache.
//   - A resourceVersion "0" list reads the current state and ignores
//     Limit, as kube-apiserver's cache does.
//   - Continued pages and Exact lists read the state at their revision,
//     while the cache's history still reaches back to it (listAt).
//
// Continue tokens are the store's, so the pages of one list may come from
// either.
func (c *Cache) List(ctx context.Context, prefix string, opts storage.ListOptions) (*unstructured.UnstructuredList, error) {
	l, err := c.ListRecords(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	if opts.MetadataOnly {
		return l.DecodeMetadata()
	}
	return l.Decode()
}

// ListRecords is List without the decode: the objects as stored, for the
// HTTP layer to serve their JSON as it is.
func (c *Cache) ListRecords(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.RecordList, error) {
	if !c.within(prefix) || !strings.HasSuffix(prefix, "/") {
		return nil, &storage.Error{Code: storage.CodeInvalidRequest, Key: prefix, Msg: "list prefix outside the cache " + c.cfg.Prefix}
	}
	rv, err := storage.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	match := opts.ResourceVersionMatch
	from := prefix // where the page starts
	switch {
	case opts.Continue != "":
		rev, start, err := storage.DecodeContinue(prefix, opts)
		if err != nil {
			return nil, err
		}
		if rev > 0 {
			return c.listAt(ctx, prefix, start, rev, opts)
		}
		// Resumed at the newest revision: a consistent read.
		from = start
		fresh, err := c.fresh(ctx)
		if err != nil {
			return nil, err
		}
		if !fresh {
			return c.cfg.Store.ListRecords(ctx, prefix, opts)
		}
	case match == metav1.ResourceVersionMatchExact || (match == "" && rv > 0 && opts.Limit > 0):
		if rv == 0 {
			return c.cfg.Store.ListRecords(ctx, prefix, opts) // the store's error
		}
		return c.listAt(ctx, prefix, prefix, rv, opts)
	case opts.ResourceVersion == "0":
		if !c.waitFor(ctx, 0) {
			return c.cfg.Store.ListRecords(ctx, prefix, opts)
		}
		opts.Limit = 0
	case match != "" && (match != metav1.ResourceVersionMatchNotOlderThan || opts.ResourceVersion == ""):
		return c.cfg.Store.ListRecords(ctx, prefix, opts) // the store's error
	case opts.ResourceVersion == "":
		fresh, err := c.fresh(ctx)
		if err != nil {
			return nil, err
		}
		if !fresh {
			return c.cfg.Store.ListRecords(ctx, prefix, opts)
		}
	default:
		if !c.waitFor(ctx, rv) {
			return nil, c.tooLarge(prefix, rv)
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.pageLocked(prefix, from, c.mu.rev, nil, opts), nil
}

// fresh waits, for a consistent read, until the cache reflects the
// store's revision now; false if it does not in time.
func (c *Cache) fresh(ctx context.Context) (bool, error) {
	cur, err := c.cfg.Store.Revision(ctx)
	if err != nil {
		return false, err
	}
	return c.waitFor(ctx, cur), nil
}

// Watch starts a watch of key (or of every key under it, when Recursive)
// served from the cache. Errors the API reports in the stream (410 Gone,
// too large a resourceVersion) come as an ERROR event.
func (c *Cache) Watch(ctx context.Context, key string, opts storage.WatchOptions) (watch.Interface, error) {
	if !c.within(key) {
		return nil, &storage.Error{Code: storage.CodeInvalidRequest, Key: key, Msg: "watch key outside the cache " + c.cfg.Prefix}
	}
	rv, err := storage.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	match := func(k string) bool { return k == key }
	if opts.Recursive {
		match = func(k string) bool { return strings.HasPrefix(k, key) }
	}
	// A watch that starts with the state needs the cache at rv; one from
	// a revision only needs it running: from a revision it has not
	// reached, the watch waits, silently, for the changes after it, as
	// upstream's cacher and etcd do.
	plain := rv > 0 && !opts.SendInitialEvents
	wait := rv
	if plain {
		wait = 0
	}
	if !c.waitFor(ctx, wait) {
		w := newWatcher(ctx, c, match, opts, 1)
		w.end(storage.TooLargeResourceVersionError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, c.CacheRevision())))
		return w, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var (
		initial []watch.Event
		state   []*storage.Record // the initial state, made into events as they are sent
	)
	switch {
	case rv == 0 || opts.SendInitialEvents:
		c.mu.objects.AscendFrom(key, func(r *storage.Record) bool {
			if !strings.HasPrefix(r.Key, key) {
				return false
			}
			if match(r.Key) && opts.Predicate.MatchesRecord(r) {
				state = append(state, r)
			}
			return true
		})
		if opts.SendInitialEvents && opts.AllowBookmarks {
			initial = append(initial, watch.Event{Type: watch.Bookmark, Object: bookmarkObject(c.mu.rev, true)})
		}
	case rv < c.mu.floor:
		w := newWatcher(ctx, c, match, opts, 1)
		w.end(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, c.mu.floor)))
		return w, nil
	default:
		replay := &watcher{pred: opts.Predicate, match: match, form: formOf(opts)}
		h := c.mu.history.all()
		for _, e := range h[sort.Search(len(h), func(i int) bool { return h[i].rev > rv }):] {
			if out, ok := replay.transform(e, &eventObjects{e: e}); ok {
				initial = append(initial, out)
			}
		}
	}
	w := newWatcher(ctx, c, match, opts, c.cfg.Buffer+len(state)+len(initial))
	if plain {
		w.after = rv
	}
	w.mu.initial = state
	for _, ev := range initial {
		w.push(ev)
	}
	c.mu.watchers[w] = struct{}{}
	go func() {
		select {
		case <-w.done:
		case <-ctx.Done():
			w.Stop()
		}
		c.mu.Lock()
		delete(c.mu.watchers, w)
		c.mu.Unlock()
	}()
	return w, nil
}

// progress answers a watcher's RequestProgress: once the cache reflects
// the store's current revision, a BOOKMARK at that revision follows every
// event already queued for the watcher.
func (c *Cache) progress(ctx context.Context, w *watcher) error {
	cur, err := c.cfg.Store.Revision(ctx)
	if err != nil {
		return err
	}
	if !c.waitFor(ctx, cur) {
		return c.tooLarge(c.cfg.Prefix, cur)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.mu.rev >= w.after {
		w.push(watch.Event{Type: watch.Bookmark, Object: bookmarkObject(c.mu.rev, false)})
	}
	return nil
}

func bookmarkObject(rev int64, initialEnd bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		u.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return u
}
