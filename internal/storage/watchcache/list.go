package watchcache

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

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
	if err := c.cfg.Store.CheckListRevision(ctx, prefix, start, rev, opts); err != nil {
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
	if rev == c.mu.rev { // nothing changed since
		return c.pageLocked(prefix, start, rev, nil, opts)
	}
	cs := c.changesLocked(prefix, rev)
	defer cs.mu.Unlock()
	cs.catchUp(c.mu.history.all())
	return c.pageLocked(prefix, start, rev, cs.keys, opts)
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

// maxChanges is how many lists (a prefix at a revision) the cache keeps
// the changes of.
const maxChanges = 8

// change is a key that changed after a list's revision: its state at that
// revision (prior; nil when the key was absent then), and whether the key
// is in the cache's objects now.
type change struct {
	key   string
	prior *storage.Record
	now   bool
}

// changes holds the keys under prefix that changed after revision rev, in
// key order, as the history's events show them through revision through
// (and some after it).
//
// The pages of a list all read the state at the list's revision. Each
// would otherwise scan every event since that revision and sort the keys
// they changed: with a resource written fast, up to MaxCapacity events
// and as many keys, for each page. The cache keeps a list's changes from
// one page to the next instead (Cache.lists), and each page adds only the
// events since the last.
type changes struct {
	mu      sync.Mutex // held while a page catches up and reads keys
	list    pagedList  // prefix and rev
	through int64
	keys    []change
	used    uint64 // when a page last read it, for eviction
}

// pagedList names the state the pages of a list read: a prefix at a
// revision.
type pagedList struct {
	prefix string
	rev    int64
}

// changesLocked returns the changes under prefix after rev, locked: the
// ones kept for that list, or new ones in place of the least recently
// used. The caller holds c.mu.
func (c *Cache) changesLocked(prefix string, rev int64) *changes {
	c.lists.Lock()
	c.lists.pages++
	at := pagedList{prefix, rev}
	cs := c.lists.kept[at]
	if cs == nil {
		if len(c.lists.kept) >= maxChanges {
			var oldest *changes
			for _, o := range c.lists.kept {
				if oldest == nil || o.used < oldest.used {
					oldest = o
				}
			}
			delete(c.lists.kept, oldest.list)
		}
		if c.lists.kept == nil {
			c.lists.kept = make(map[pagedList]*changes)
		}
		cs = &changes{list: at, through: rev}
		c.lists.kept[at] = cs
	}
	cs.used = c.lists.pages
	c.lists.Unlock()
	cs.mu.Lock()
	return cs
}

// forgetChangesLocked drops the changes kept for revisions before floor,
// which no list can read any more. The caller holds c.mu.
func (c *Cache) forgetChangesLocked(floor int64) {
	c.lists.Lock()
	defer c.lists.Unlock()
	for at := range c.lists.kept {
		if at.rev < floor {
			delete(c.lists.kept, at)
		}
	}
}

// catchUp adds the events of h (the history, oldest first) after
// cs.through on keys under the list's prefix. For a key first seen, the
// state before its earliest event is its state at the list's revision;
// its latest event says whether it is there now.
func (cs *changes) catchUp(h []event) {
	h = h[sort.Search(len(h), func(i int) bool { return h[i].rev > cs.through }):]
	if len(h) == 0 {
		return
	}
	// The newest revision's events are read again next time: kplane
	// writes one key a revision, but a transaction in etcd may write
	// several, and the cache may have applied only some of them yet.
	// Reading an event again changes nothing.
	cs.through = h[len(h)-1].rev - 1
	var added []change
	for _, e := range h {
		if !strings.HasPrefix(e.key, cs.list.prefix) {
			continue
		}
		if i, found := searchChanges(cs.keys, e.key); found {
			cs.keys[i].now = e.cur != nil
			continue
		}
		added = append(added, change{key: e.key, prior: e.prior, now: e.cur != nil})
	}
	if len(added) == 0 {
		return
	}
	// Sort the new keys, keeping each key's events in order, and fold
	// each key's events into one change: the earliest's prior, the latest's
	// now.
	slices.SortStableFunc(added, func(a, b change) int { return cmp.Compare(a.key, b.key) })
	folded := added[:0]
	for _, a := range added {
		if n := len(folded); n > 0 && folded[n-1].key == a.key {
			folded[n-1].now = a.now
			continue
		}
		folded = append(folded, a)
	}
	cs.keys = mergeChanges(cs.keys, folded)
}

// searchChanges returns the index of key in changed (in key order), or
// where it would go.
func searchChanges(changed []change, key string) (int, bool) {
	return slices.BinarySearchFunc(changed, key, func(c change, k string) int { return cmp.Compare(c.key, k) })
}

// mergeChanges merges b into a, both in key order with no key in both.
// It works in place from the back: each run of a's changes between two of
// b's moves once, by one copy, so a page's few new keys cost a binary
// search each and a move of the keys after the first of them (nothing,
// when they all come last), not a comparison of every key.
func mergeChanges(a, b []change) []change {
	m := len(a)
	a = slices.Grow(a, len(b))[:m+len(b)]
	end := len(a) // a[end:] are in place
	for i := len(b) - 1; i >= 0; i-- {
		p := sort.Search(m, func(j int) bool { return a[j].key > b[i].key })
		end -= m - p
		copy(a[end:], a[p:m])
		m = p
		end--
		a[end] = b[i]
	}
	return a
}

// changesIn returns the changes with keys in [start, end).
func changesIn(changed []change, start, end string) []change {
	lo, _ := searchChanges(changed, start)
	hi, _ := searchChanges(changed, end)
	return changed[lo:max(lo, hi)]
}

// pageLocked lists the objects in [start, end of prefix) at revision rev:
// the cache's objects with changed (in key order) laid over them. It
// pages as the store's List does: at most Limit matching items; a
// continue token when any key follows the last of them; and, for an
// unselective list, the count of those keys.
func (c *Cache) pageLocked(prefix, start string, rev int64, changed []change, opts storage.ListOptions) *storage.RecordList {
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
// walk over the keys), corrected by the changed ones in it. It is the
// remainingItemCount of a page, so it runs once per page.
func countAfter(objects *recordTree, start, end string, changed []change) int64 {
	n := int64(objects.CountRange(start, end))
	for _, ch := range changesIn(changed, start, end) {
		if ch.now {
			n--
		}
		if ch.prior != nil {
			n++
		}
	}
	return n
}

// ascendOver calls fn in key order for the records in [start, end), with
// changed (in key order) laid over objects: a key in changed shows its
// prior record, and not at all when that is nil. It stops when fn returns
// false.
func ascendOver(objects *recordTree, start, end string, changed []change, fn func(r *storage.Record) bool) {
	changed = changesIn(changed, start, end)
	// emit sends the changed keys before key (all of them, for "").
	emit := func(key string) bool {
		for ; len(changed) > 0 && (key == "" || changed[0].key < key); changed = changed[1:] {
			if r := changed[0].prior; r != nil && !fn(r) {
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
		if len(changed) > 0 && changed[0].key == r.Key {
			r = changed[0].prior
			changed = changed[1:]
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
