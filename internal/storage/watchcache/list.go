package watchcache

import (
	"context"
	"slices"
	"sort"

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
func (c *Cache) listAt(ctx context.Context, prefix, start string, rev int64, opts storage.ListOptions) (*storage.RecordList, error) {
	if !c.reaches(rev) {
		return c.cfg.Store.ListRecords(ctx, prefix, opts)
	}
	if err := c.cfg.Store.CheckListRevision(ctx, prefix, rev, opts); err != nil {
		return nil, err
	}
	if list := c.pageAt(prefix, start, rev, opts); list != nil {
		return list, nil
	}
	return c.cfg.Store.ListRecords(ctx, prefix, opts) // the cache relisted meanwhile
}

// pageAt is pageLocked at rev, or nil if the cache no longer reaches rev.
func (c *Cache) pageAt(prefix, start string, rev int64, opts storage.ListOptions) *storage.RecordList {
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
func (c *Cache) changedSinceLocked(rev int64, start, end string) map[string]*storage.Record {
	h := c.mu.history.all()
	var changed map[string]*storage.Record
	for _, e := range h[sort.Search(len(h), func(i int) bool { return h[i].rev > rev }):] {
		if e.key < start || e.key >= end {
			continue
		}
		if changed == nil {
			changed = make(map[string]*storage.Record)
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
func (c *Cache) pageLocked(prefix, start string, rev int64, changed map[string]*storage.Record, opts storage.ListOptions) *storage.RecordList {
	list := &storage.RecordList{ResourceVersion: rev}
	if opts.Limit > 0 {
		list.Items = make([]*storage.Record, 0, min(opts.Limit, int64(c.mu.objects.Len())))
	}
	var last string
	end := kv.PrefixEnd(prefix)
	ascendOver(&c.mu.objects, start, end, changed, func(r *storage.Record) bool {
		if opts.Predicate.MatchesRecord(r) {
			list.Items = append(list.Items, r)
			if opts.Limit > 0 && int64(len(list.Items)) == opts.Limit {
				last = r.Key
				return false
			}
		}
		return true
	})
	if last == "" {
		return list
	}
	after := last + "\x00"
	if !opts.Predicate.Empty() {
		// A selective list only needs to know whether any key follows.
		more := false
		ascendOver(&c.mu.objects, after, end, changed, func(*storage.Record) bool { more = true; return false })
		if more {
			list.Continue = storage.ContinueAfter(prefix, rev, last)
		}
		return list
	}
	if n := countAfter(&c.mu.objects, after, end, changed); n > 0 {
		list.Continue = storage.ContinueAfter(prefix, rev, last)
		list.Remaining = &n
	}
	return list
}

// countAfter counts the keys in [start, end) with changed laid over
// objects: the tree's count of its keys in the range (two descents, not a
// walk over the keys), corrected by the changed ones, a lookup each. It
// is the remainingItemCount of a page, so it runs once per page.
func countAfter(objects *recordTree, start, end string, changed map[string]*storage.Record) int64 {
	n := int64(objects.CountRange(start, end))
	for k, r := range changed {
		if k < start || k >= end {
			continue
		}
		if _, now := objects.Get(k); now {
			n--
		}
		if r != nil {
			n++
		}
	}
	return n
}

// ascendOver calls fn in key order for the records in [start, end), with
// changed laid over objects: a key in changed shows its record there, and
// not at all when that is nil. It stops when fn returns false.
func ascendOver(objects *recordTree, start, end string, changed map[string]*storage.Record,
	fn func(r *storage.Record) bool) {
	var keys []string
	for k := range changed {
		if k >= start && k < end {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	next := 0 // keys[:next] are done
	// emit sends the changed keys before key (all of them, for "").
	emit := func(key string) bool {
		for ; next < len(keys) && (key == "" || keys[next] < key); next++ {
			if r := changed[keys[next]]; r != nil && !fn(r) {
				return false
			}
		}
		return true
	}
	more := true
	objects.AscendRange(start, end, func(r *storage.Record) bool {
		if more = emit(r.Key); !more {
			return false
		}
		if o, ok := changed[r.Key]; ok {
			r = o
			next++ // keys[next] is this key
		}
		if r != nil {
			more = fn(r)
		}
		return more
	})
	if more {
		emit("")
	}
}
