package watchcache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

// A node is sized to a Go size class: growing it by a field wastes the
// next class's difference on every node.
func TestNodeSize(t *testing.T) {
	if s := unsafe.Sizeof(node{}); s != 512 {
		t.Errorf("a node is %d bytes, want 512", s)
	}
}

// model is what a recordTree should hold: its records sorted by key.
type model []*storage.Record

func (m model) search(key string) (int, bool) {
	return slices.BinarySearchFunc(m, key, func(r *storage.Record, k string) int { return strings.Compare(r.Key, k) })
}

func (m model) rank(key string) int { i, _ := m.search(key); return i }

func (m *model) put(r *storage.Record) (old *storage.Record) {
	i, found := m.search(r.Key)
	if found {
		old, (*m)[i] = (*m)[i], r
		return old
	}
	*m = slices.Insert(*m, i, r)
	return nil
}

func (m *model) delete(key string) *storage.Record {
	i, found := m.search(key)
	if !found {
		return nil
	}
	r := (*m)[i]
	*m = slices.Delete(*m, i, i+1)
	return r
}

// checkTree checks the shape of t and that it holds exactly m: keys in
// order, every leaf at one depth, sizes that count the records under each
// child, no record but root's in a node that is empty, and no stale
// pointer past a node's records.
func checkTree(t *testing.T, tr *recordTree, m model) {
	t.Helper()
	var got []*storage.Record
	leafDepth := -1
	var walk func(n *node, depth int) int
	walk = func(n *node, depth int) int {
		if n != tr.root && n.n == 0 {
			t.Fatalf("an empty node below the root at depth %d", depth)
		}
		if n.n > maxItems {
			t.Fatalf("a node of %d records", n.n)
		}
		for _, r := range n.items[n.n:] {
			if r != nil {
				t.Fatalf("a record left past the end of a node")
			}
		}
		if n.inner == nil {
			if leafDepth < 0 {
				leafDepth = depth
			} else if depth != leafDepth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
			got = append(got, n.items[:n.n]...)
			return n.n
		}
		for i, c := range n.inner.children[n.n+1:] {
			if c != nil || n.inner.sizes[n.n+1+i] != 0 {
				t.Fatalf("a child left past the end of a node")
			}
		}
		total := n.n
		for i := 0; i <= n.n; i++ {
			c := n.inner.children[i]
			if c == nil {
				t.Fatalf("child %d of a node of %d records is nil", i, n.n)
			}
			s := walk(c, depth+1)
			if s != n.inner.sizes[i] {
				t.Fatalf("child %d counted %d records, holds %d", i, n.inner.sizes[i], s)
			}
			total += s
			if i < n.n {
				got = append(got, n.items[i])
			}
		}
		return total
	}
	if tr.root == nil {
		if tr.len != 0 || len(m) != 0 {
			t.Fatalf("empty tree of len %d, model of %d", tr.len, len(m))
		}
		return
	}
	if tr.root.n == 0 {
		t.Fatalf("an empty root")
	}
	if n := walk(tr.root, 0); n != tr.len || n != tr.Len() {
		t.Fatalf("the tree holds %d records, Len says %d", n, tr.len)
	}
	if len(got) != len(m) {
		t.Fatalf("the tree holds %d records, the model %d", len(got), len(m))
	}
	for i := range got {
		if got[i] != m[i] {
			t.Fatalf("record %d is %q, want %q", i, got[i].Key, m[i].Key)
		}
	}
}

// treeKeys makes random keys shaped like the cache's: a prefix, a
// namespace and a name over a small alphabet, so that keys share prefixes
// and a range can end at the end of a prefix.
type treeKeys struct{ rnd *rand.Rand }

func (k treeKeys) name(max int) string {
	b := make([]byte, 1+k.rnd.IntN(max))
	for i := range b {
		b[i] = "abcd"[k.rnd.IntN(4)]
	}
	return string(b)
}

func (k treeKeys) key() string { return "/r/" + k.name(2) + "/" + k.name(6) }

// bound is any key a range may start or end at: a key (in the tree or
// not), a prefix of one or the end of that prefix, or a key before or
// after every key.
func (k treeKeys) bound() string {
	key := k.key()
	switch k.rnd.IntN(6) {
	case 0:
		return key[:k.rnd.IntN(len(key)+1)]
	case 1:
		return kv.PrefixEnd(key[:1+k.rnd.IntN(len(key))])
	case 2:
		return []string{"", "\x00", "/", "/r/", "/r0", "\xff\xff"}[k.rnd.IntN(6)]
	default:
		return key
	}
}

var recordSeq int

func testRecord(key string) *storage.Record {
	recordSeq++
	return &storage.Record{Key: key, Rev: int64(recordSeq)}
}

// checkReads compares reads of tr with the model at random bounds: Get,
// Rank, CountRange, and AscendRange and AscendFrom stopped after a random
// number of records.
func checkReads(t *testing.T, tr *recordTree, m model, keys treeKeys, rounds int) {
	t.Helper()
	for range rounds {
		key := keys.key()
		if len(m) > 0 && keys.rnd.IntN(2) == 0 {
			key = m[keys.rnd.IntN(len(m))].Key
		}
		got, ok := tr.Get(key)
		if i, found := m.search(key); ok != found || (found && got != m[i]) {
			t.Fatalf("Get(%q) = %v, %v; the model has it: %v", key, got, ok, found)
		}

		start, end := keys.bound(), keys.bound()
		if r, want := tr.Rank(start), m.rank(start); r != want {
			t.Fatalf("Rank(%q) = %d, want %d", start, r, want)
		}
		want := 0
		if end > start {
			want = m.rank(end) - m.rank(start)
		}
		if n := tr.CountRange(start, end); n != want {
			t.Fatalf("CountRange(%q, %q) = %d, want %d", start, end, n, want)
		}

		// The model's records in range, and where the ascent stops.
		var in []*storage.Record
		if end > start {
			in = m[m.rank(start):m.rank(end)]
		}
		stop := 1 + keys.rnd.IntN(len(in)+1) // stop after this many; len(in)+1: never
		var seen []*storage.Record
		tr.AscendRange(start, end, func(r *storage.Record) bool {
			seen = append(seen, r)
			return len(seen) != stop
		})
		if wantSeen := in[:min(stop, len(in))]; !slices.Equal(seen, wantSeen) {
			t.Fatalf("AscendRange(%q, %q) stopping after %d gave %d records, want %d", start, end, stop, len(seen), len(wantSeen))
		}
		from := m[m.rank(start):]
		stop = 1 + keys.rnd.IntN(min(len(from), 200)+1)
		seen = seen[:0]
		tr.AscendFrom(start, func(r *storage.Record) bool {
			seen = append(seen, r)
			return len(seen) != stop
		})
		wantSeen := from
		if stop <= len(from) {
			wantSeen = from[:stop]
		}
		if !slices.Equal(seen, wantSeen) {
			t.Fatalf("AscendFrom(%q) stopping after %d gave %d records, want %d", start, stop, len(seen), len(wantSeen))
		}
	}
}

// Random inserts, replaces and deletes, checked against a sorted slice:
// the tree grows past three levels, shrinks to nothing, and is filled in
// key order (both ways) and emptied in key order, so that every kind of
// split, borrow and merge runs at leaves and inner nodes.
func TestRecordTreeAgainstAModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 99))
			keys := treeKeys{rnd}
			var tr recordTree
			var m model
			put := func(key string) {
				r := testRecord(key)
				old, replaced := tr.ReplaceOrInsert(r)
				if want := m.put(r); old != want || replaced != (want != nil) {
					t.Fatalf("ReplaceOrInsert(%q) replaced %v (%v), want %v", key, old, replaced, want)
				}
			}
			del := func(key string) {
				old, ok := tr.Delete(key)
				if want := m.delete(key); old != want || ok != (want != nil) {
					t.Fatalf("Delete(%q) = %v, %v, want %v", key, old, ok, want)
				}
			}
			step := 0
			check := func() {
				if step++; step%1000 == 0 {
					checkTree(t, &tr, m)
					checkReads(t, &tr, m, keys, 20)
				}
			}

			// Grow with random keys, some replaced and some deleted.
			for len(m) < 20000 {
				switch op := rnd.IntN(10); {
				case op < 7:
					put(keys.key())
				case op < 8 && len(m) > 0:
					put(m[rnd.IntN(len(m))].Key) // replace
				default:
					if len(m) > 0 && rnd.IntN(2) == 0 {
						del(m[rnd.IntN(len(m))].Key)
					} else {
						del(keys.key()) // mostly absent
					}
				}
				check()
			}
			checkTree(t, &tr, m)
			checkReads(t, &tr, m, keys, 2000)

			// Shrink to nothing, with a few inserts on the way.
			for len(m) > 0 {
				if rnd.IntN(8) == 0 {
					put(keys.key())
				} else {
					del(m[rnd.IntN(len(m))].Key)
				}
				check()
			}
			checkTree(t, &tr, m)
			checkReads(t, &tr, m, keys, 50)

			// In key order, ascending then descending, between keys
			// already there; then emptied from the front and the back.
			for i := range 3000 {
				put(fmt.Sprintf("/r/b/%06d", i))
				check()
			}
			for i := 3000; i > 0; i-- {
				put(fmt.Sprintf("/r/a/%06d", i))
				check()
			}
			for range 1000 {
				put(keys.key())
			}
			checkTree(t, &tr, m)
			checkReads(t, &tr, m, keys, 2000)
			for len(m) > 0 {
				if rnd.IntN(2) == 0 {
					del(m[0].Key)
				} else {
					del(m[len(m)-1].Key)
				}
				check()
			}
			checkTree(t, &tr, m)

			put("/r/x")
			tr.Clear()
			m = nil
			checkTree(t, &tr, m)
			checkReads(t, &tr, m, keys, 10)
		})
	}
}

// Records added in key order, as the cache fills from the store's list,
// pack the nodes full: ~8.3 bytes of node per record, where splitting in
// the middle would leave them half full. So do records added in reverse
// order.
func TestRecordTreeInKeyOrderPacks(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		checkPacked(t, reverse)
	}
}

func checkPacked(t *testing.T, reverse bool) {
	var tr recordTree
	const n = 100000
	for i := range n {
		if reverse {
			i = n - 1 - i
		}
		tr.ReplaceOrInsert(testRecord(fmt.Sprintf("/r/a/%07d", i)))
	}
	nodes, inners := 0, 0
	var walk func(n *node)
	walk = func(n *node) {
		nodes++
		if n.inner != nil {
			inners++
			for _, c := range n.inner.children[:n.n+1] {
				walk(c)
			}
		}
	}
	walk(tr.root)
	perRecord := float64(nodes*int(unsafe.Sizeof(node{}))+inners*int(unsafe.Sizeof(inner{}))) / n
	if perRecord > 9 {
		t.Errorf("reverse=%v: %d nodes (%d inner) for %d records: %.1f bytes per record", reverse, nodes, inners, n, perRecord)
	}
}

// countAfter, with changed laid over the objects, agrees with a count of
// the keys ascendOver shows and with a count over a map of the state it
// stands for.
func TestCountAfterWithChangedKeys(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 8))
	keys := treeKeys{rnd}
	for round := range 300 {
		var objects recordTree
		for range rnd.IntN(3000) {
			objects.ReplaceOrInsert(testRecord(keys.key()))
		}
		// changed: keys with their state then, a record or nil (absent),
		// whether they are in objects now or not: updated, deleted,
		// created, or created and deleted since.
		var now []string
		objects.AscendFrom("", func(r *storage.Record) bool { now = append(now, r.Key); return true })
		byKey := make(map[string]*storage.Record)
		for range rnd.IntN(40) {
			k := keys.key()
			if len(now) > 0 && rnd.IntN(2) == 0 {
				k = now[rnd.IntN(len(now))]
			}
			byKey[k] = nil
			if rnd.IntN(2) == 0 {
				byKey[k] = testRecord(k)
			}
		}
		var changed []change
		for k, r := range byKey {
			_, in := objects.Get(k)
			changed = append(changed, change{key: k, prior: r, now: in})
		}
		slices.SortFunc(changed, func(a, b change) int { return strings.Compare(a.key, b.key) })
		state := make(map[string]bool)
		for _, k := range now {
			state[k] = true
		}
		for _, ch := range changed {
			state[ch.key] = ch.prior != nil
		}
		for range 20 {
			start, end := keys.bound(), keys.bound()
			want := 0
			for k, in := range state {
				if in && k >= start && k < end {
					want++
				}
			}
			if n := countAfter(&objects, start, end, changed); n != int64(want) {
				t.Fatalf("round %d: countAfter(%q, %q) = %d, want %d", round, start, end, n, want)
			}
			shown := 0
			ascendOver(&objects, start, end, changed, func(*storage.Record) bool { shown++; return true })
			if shown != want {
				t.Fatalf("round %d: ascendOver(%q, %q) showed %d records, want %d", round, start, end, shown, want)
			}
		}
	}
}
