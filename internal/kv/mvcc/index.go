package mvcc

import (
	"sort"

	"github.com/google/btree"

	"github.com/kplane-dev/kplane/internal/kv"
)

// keyIndex holds every retained version of one key, oldest first.
//
// Each entry is a kv.KeyValue. A tombstone (the key deleted at ModRevision)
// is an entry with Version 0 and no value, which is also exactly the KV a
// DELETE event carries. Entries are strictly increasing in ModRevision.
//
// Worked example, key k, no compaction:
//
//	put k  @2   entries: [{mod 2 create 2 ver 1}]
//	put k  @4   entries: [{2 2 1} {mod 4 create 2 ver 2}]
//	del k  @5   entries: [{2 2 1} {4 2 2} {tomb 5}]
//	put k  @7   entries: [{2 2 1} {4 2 2} {tomb 5} {mod 7 create 7 ver 1}]
//
// compact(6) keeps the latest entry at or below 6; here that is the
// tombstone at 5, which reads at 6 and later never need, so it goes too:
//
//	entries: [{7 7 1}]
//
// compact(5) instead would keep the tombstone at 5 and the version it
// deleted, because a watcher may start exactly at the compaction revision
// and the DELETE at 5 must carry its previous value (etcd keeps the
// tombstone at the compaction revision for the same reason, etcd#18089):
//
//	entries: [{4 2 2} {tomb 5} {7 7 1}]
//
// A keyIndex whose entries are all gone is removed from the tree. That only
// happens to keys whose last write at or below the compaction point is a
// delete, so no history slot (which covers revisions at or above the
// compaction point) ever points to a removed keyIndex.
type keyIndex struct {
	key     string
	entries []kv.KeyValue
}

func newTree() *btree.BTreeG[*keyIndex] {
	return btree.NewG(32, func(a, b *keyIndex) bool { return a.key < b.key })
}

func isTombstone(e *kv.KeyValue) bool { return e.Version == 0 }

// last returns the newest entry, or nil.
func (ki *keyIndex) last() *kv.KeyValue {
	if len(ki.entries) == 0 {
		return nil
	}
	return &ki.entries[len(ki.entries)-1]
}

// live returns the newest entry if the key currently exists, else nil.
func (ki *keyIndex) live() *kv.KeyValue {
	if e := ki.last(); e != nil && !isTombstone(e) {
		return e
	}
	return nil
}

// find returns the position of the newest entry with ModRevision <= rev,
// or -1 if there is none.
func (ki *keyIndex) find(rev int64) int {
	n := len(ki.entries)
	if n > 0 && ki.entries[n-1].ModRevision <= rev {
		return n - 1 // the common case: reading the latest state
	}
	return sort.Search(n, func(i int) bool { return ki.entries[i].ModRevision > rev }) - 1
}

// at returns the key's value as of rev, or nil if it did not exist then.
func (ki *keyIndex) at(rev int64) *kv.KeyValue {
	i := ki.find(rev)
	if i < 0 || isTombstone(&ki.entries[i]) {
		return nil
	}
	return &ki.entries[i]
}

// event builds the watch event of the write at rev, which must be one of
// this key's retained entries.
func (ki *keyIndex) event(rev int64) kv.Event {
	i := ki.find(rev)
	if i < 0 || ki.entries[i].ModRevision != rev {
		panic("mvcc: history points to a key without an entry at that revision")
	}
	ev := kv.Event{Type: kv.Put, KV: ki.entries[i]}
	if isTombstone(&ki.entries[i]) {
		ev.Type = kv.Delete
	}
	if i > 0 && !isTombstone(&ki.entries[i-1]) {
		prev := ki.entries[i-1]
		ev.PrevKV = &prev
	}
	if ev.PrevKV == nil && !ev.IsCreate() {
		// The compaction rules keep the previous version of every event at
		// or above the compaction point; reaching here is a broken invariant.
		panic("mvcc: retained event without its previous value")
	}
	return ev
}

// compact drops the entries no read or watch at or above rev needs, as the
// type's comment explains. It returns the size of the values dropped, all
// of them old versions, and whether the key is now empty.
func (ki *keyIndex) compact(rev int64) (freed int64, empty bool) {
	i := ki.find(rev)
	if i < 0 {
		return 0, false // every entry is newer than rev
	}
	keep := i
	switch {
	case ki.entries[i].ModRevision == rev:
		// The write at the compaction revision stays servable to a watcher
		// starting there, with its previous value.
		if i > 0 && !isTombstone(&ki.entries[i-1]) {
			keep = i - 1
		}
	case isTombstone(&ki.entries[i]):
		keep = i + 1
	}
	if keep == 0 {
		return 0, false
	}
	for _, e := range ki.entries[:keep] {
		freed += int64(len(e.Value))
	}
	if keep >= len(ki.entries) {
		ki.entries = nil
		return freed, true
	}
	rest := ki.entries[keep:]
	if cap(ki.entries) > 4*len(rest)+8 {
		// Mostly dropped: a smaller array lets the old one be reclaimed.
		ki.entries = append([]kv.KeyValue(nil), rest...)
		return freed, false
	}
	// Shift in place: compaction then allocates nothing for most keys,
	// which keeps its garbage-collection cost off the writers.
	n := copy(ki.entries, rest)
	clear(ki.entries[n:]) // drop references to the old values
	ki.entries = ki.entries[:n]
	return freed, false
}
