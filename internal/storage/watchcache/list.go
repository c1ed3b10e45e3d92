package watchcache

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

// listAt serves a list of the state at revision rev, from key start on:
// a continued page or an Exact list. The cache serves it while its history
// reaches back to rev and the store has not compacted rev (so that a page
// expires here exactly when it would in the store); anything else, such
// as a revision the cache has not reached yet, goes to the store.
//
// Example: the first page of a list read revision 10, and since then key b
// was updated at 11 and key c deleted at 12. The history holds both events
// with the states before them (prior), so the next page shows b and c as
// they were at 10, and every other key as the cache holds it now.
func (c *Cache) listAt(ctx context.Context, prefix, start string, rev int64, opts storage.ListOptions) (*unstructured.UnstructuredList, error) {
	if !c.reaches(rev) {
		return c.cfg.Store.List(ctx, prefix, opts)
	}
	if err := c.cfg.Store.CheckListRevision(ctx, prefix, rev, opts); err != nil {
		return nil, err
	}
	if list := c.pageAt(prefix, start, rev, opts); list != nil {
		return list, nil
	}
	return c.cfg.Store.List(ctx, prefix, opts) // the cache relisted meanwhile
}

// pageAt is pageLocked at rev, or nil if the cache no longer reaches rev.
func (c *Cache) pageAt(prefix, start string, rev int64, opts storage.ListOptions) *unstructured.UnstructuredList {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.reachesLocked(rev) {
		return nil
	}
	return c.pageLocked(prefix, start, rev, c.changedSinceLocked(rev, start, kv.PrefixEnd(prefix)), opts)
}

// reaches reports whether the cache can show the state at rev.
func (c *Cache) reaches(rev int64) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.reachesLocked(rev)
}

func (c *Cache) reachesLocked(rev int64) bool {
	return c.mu.ready && rev >= c.mu.floor && rev <= c.mu.rev
}

// changedSinceLocked returns the keys in [start, end) that changed after
// rev, each with its state at rev (nil: absent then). rev must be in
// [floor, rev] of the cache.
func (c *Cache) changedSinceLocked(rev int64, start, end string) map[string]*unstructured.Unstructured {
	h := c.mu.history
	var changed map[string]*unstructured.Unstructured
	for _, e := range h[sort.Search(len(h), func(i int) bool { return h[i].rev > rev }):] {
		if e.key < start || e.key >= end {
			continue
		}
		if changed == nil {
			changed = make(map[string]*unstructured.Unstructured)
		}
		if _, seen := changed[e.key]; !seen { // the earliest change holds the state at rev
			changed[e.key] = e.prior
		}
	}
	return changed
}

// pageLocked lists the objects in [start, end of prefix) at revision rev:
// the cache's objects with changed laid over them. It pages as the store's
// List does: at most Limit matching items; a continue token when any key
// follows the last of them; and, for an unselective list, the count of
// those keys.
func (c *Cache) pageLocked(prefix, start string, rev int64, changed map[string]*unstructured.Unstructured, opts storage.ListOptions) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	if opts.Limit > 0 {
		list.Items = make([]unstructured.Unstructured, 0, min(opts.Limit, int64(c.mu.objects.Len())))
	}
	var (
		last  string
		full  bool
		after int64 // keys after last
	)
	ascendOver(c.mu.objects, start, kv.PrefixEnd(prefix), changed, func(key string, obj *unstructured.Unstructured) bool {
		if full {
			after++
			return opts.Predicate.Empty() // a selective list only needs to know there is more
		}
		if opts.Predicate.Matches(obj) {
			list.Items = append(list.Items, *obj)
			if opts.Limit > 0 && int64(len(list.Items)) == opts.Limit {
				full, last = true, key
			}
		}
		return true
	})
	list.SetResourceVersion(strconv.FormatInt(rev, 10))
	if full && after > 0 {
		list.SetContinue(storage.ContinueAfter(prefix, rev, last))
		if opts.Predicate.Empty() {
			list.SetRemainingItemCount(&after)
		}
	}
	return list
}

// ascendOver calls fn in key order for the objects in [start, end), with
// changed laid over objects: a key in changed shows its value there, and
// not at all when that is nil. It stops when fn returns false.
func ascendOver(objects *btree.BTreeG[item], start, end string, changed map[string]*unstructured.Unstructured,
	fn func(key string, obj *unstructured.Unstructured) bool) {
	keys := slices.Sorted(maps.Keys(changed))
	next := 0 // keys[:next] are done
	// emit sends the changed keys before key (all of them, for "").
	emit := func(key string) bool {
		for ; next < len(keys) && (key == "" || keys[next] < key); next++ {
			if obj := changed[keys[next]]; obj != nil && !fn(keys[next], obj) {
				return false
			}
		}
		return true
	}
	more := true
	objects.AscendRange(item{key: start}, item{key: end}, func(it item) bool {
		if more = emit(it.key); !more {
			return false
		}
		obj := it.obj
		if o, ok := changed[it.key]; ok {
			obj = o
			next++ // keys[next] is it.key
		}
		if obj != nil {
			more = fn(it.key, obj)
		}
		return more
	})
	if more {
		emit("")
	}
}
