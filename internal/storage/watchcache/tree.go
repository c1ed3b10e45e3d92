package watchcache

import "github.com/kplane-dev/kplane/internal/storage"

// recordTree holds the cache's objects: records in the order of their
// keys, in a B-tree whose inner nodes count the records under each of
// their children (a counted B-tree). Besides what any ordered map does
// (get, replace or insert, delete, ascend over a range), it answers how
// many keys lie before a key (Rank) with one descent, so that a page's
// remainingItemCount costs O(log n) instead of a walk over the keys after
// the page.
//
// The zero value is an empty tree. A recordTree is not safe for
// concurrent use: the cache's lock guards it.
//
// Shape: every node holds up to maxItems records in key order; an inner
// node also holds one child more than it has records, child i holding the
// keys between records i-1 and i, and sizes[i], the number of records in
// that child's subtree. Every leaf is at the same depth. A node that
// overflows splits in two around its middle record, which moves up to the
// parent, except when the new key falls at either end of the node: then
// the split leaves the full side full and starts a new node with the one
// record, so that records inserted in key order (as the cache fills from
// the store's list, or as objects are created with growing names) pack
// the leaves full instead of half full. A node that drops below minItems
// after a delete takes a record from a sibling through the parent, or
// merges with it.
//
// Memory: a node is one 512-byte allocation (the size of a Go size class)
// of 62 record pointers, so a record costs 8.3 bytes in a packed tree and
// ~13 in one filled in random order; each inner node, over up to 63
// children (usually more than 31), adds a 1 KiB array of them and their
// sizes.
type recordTree struct {
	root *node // nil when empty
	len  int
}

const (
	maxItems = 62 // the records of a node: node is 512 bytes
	minItems = maxItems / 2
)

type node struct {
	items [maxItems]*storage.Record // items[:n], in key order; the rest nil
	n     int
	inner *inner // nil for a leaf
}

// inner holds an inner node's children: children[:n+1], and the number of
// records under each.
type inner struct {
	children [maxItems + 1]*node
	sizes    [maxItems + 1]int
}

// Len returns the number of records.
func (t *recordTree) Len() int { return t.len }

// Clear empties the tree.
func (t *recordTree) Clear() { *t = recordTree{} }

// Get returns the record with key.
func (t *recordTree) Get(key string) (*storage.Record, bool) {
	for n := t.root; n != nil; {
		i, found := n.search(key)
		if found {
			return n.items[i], true
		}
		if n.inner == nil {
			break
		}
		n = n.inner.children[i]
	}
	return nil, false
}

// ReplaceOrInsert puts r (not nil) in the tree, in place of the record
// with its key if there is one, which it returns.
func (t *recordTree) ReplaceOrInsert(r *storage.Record) (old *storage.Record, replaced bool) {
	if t.root == nil {
		t.root = &node{}
	}
	old, up, right := t.root.insert(r)
	if old != nil {
		return old, true
	}
	t.len++
	if right != nil { // the root split: a new root above its two halves
		left := t.root
		t.root = &node{n: 1, inner: &inner{}}
		t.root.items[0] = up
		t.root.inner.children[0], t.root.inner.children[1] = left, right
		t.root.inner.sizes[0], t.root.inner.sizes[1] = left.size(), right.size()
	}
	return nil, false
}

// Delete removes the record with key, returning it.
func (t *recordTree) Delete(key string) (*storage.Record, bool) {
	if t.root == nil {
		return nil, false
	}
	r := t.root.remove(key)
	if r == nil {
		return nil, false
	}
	t.len--
	if t.root.n == 0 { // the root's last record moved down into a merge, or went
		if t.root.inner != nil {
			t.root = t.root.inner.children[0]
		} else {
			t.root = nil
		}
	}
	return r, true
}

// AscendRange calls fn in key order for the records with keys in
// [start, end), until fn returns false.
func (t *recordTree) AscendRange(start, end string, fn func(*storage.Record) bool) {
	if t.root != nil {
		t.root.ascend(start, end, true, fn)
	}
}

// AscendFrom calls fn in key order for the records with keys from start
// on, until fn returns false.
func (t *recordTree) AscendFrom(start string, fn func(*storage.Record) bool) {
	if t.root != nil {
		t.root.ascend(start, "", false, fn)
	}
}

// Rank returns the number of keys before key (less than it).
func (t *recordTree) Rank(key string) int {
	rank := 0
	for n := t.root; n != nil; {
		i, found := n.search(key)
		rank += i // the records before key in n
		if n.inner == nil {
			break
		}
		for _, s := range n.inner.sizes[:i] { // and under the children before them
			rank += s
		}
		if found { // and under the child just before key
			return rank + n.inner.sizes[i]
		}
		n = n.inner.children[i]
	}
	return rank
}

// CountRange returns the number of keys in [start, end).
func (t *recordTree) CountRange(start, end string) int {
	if end <= start {
		return 0
	}
	return t.Rank(end) - t.Rank(start)
}

// search returns the index of the first record of n whose key is not
// less than key, and whether that record has key.
func (n *node) search(key string) (int, bool) {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if n.items[m].Key < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < n.n && n.items[lo].Key == key
}

// size returns the number of records in the subtree at n.
func (n *node) size() int {
	s := n.n
	if n.inner != nil {
		for _, c := range n.inner.sizes[:n.n+1] {
			s += c
		}
	}
	return s
}

// insert puts r in the subtree at n, returning the record it replaces,
// if any. If n had to split, it returns the record that moves up to the
// parent and the new node that follows it there.
func (n *node) insert(r *storage.Record) (old, up *storage.Record, right *node) {
	i, found := n.search(r.Key)
	if found {
		old, n.items[i] = n.items[i], r
		return old, nil, nil
	}
	if n.inner == nil {
		up, right = n.insertAt(i, r, nil)
		return nil, up, right
	}
	child := n.inner.children[i]
	if old, up, right = child.insert(r); old != nil {
		return old, nil, nil
	}
	if right == nil {
		n.inner.sizes[i]++
		return nil, nil, nil
	}
	n.inner.sizes[i] = child.size()
	up, right = n.insertAt(i, up, right)
	return nil, up, right
}

// insertAt puts item into n at index i and, in an inner node, child
// right after it (children[i+1]). A full node splits: n keeps the first
// part, and insertAt returns the record that moves up and the new node
// holding the rest.
func (n *node) insertAt(i int, item *storage.Record, child *node) (*storage.Record, *node) {
	if n.n < maxItems {
		copy(n.items[i+1:n.n+1], n.items[i:n.n])
		n.items[i] = item
		if n.inner != nil {
			copy(n.inner.children[i+2:n.n+2], n.inner.children[i+1:n.n+1])
			copy(n.inner.sizes[i+2:n.n+2], n.inner.sizes[i+1:n.n+1])
			n.inner.children[i+1], n.inner.sizes[i+1] = child, child.size()
		}
		n.n++
		return nil, nil
	}

	// The maxItems+1 records (and, in an inner node, maxItems+2 children)
	// in order, then split around items[s].
	var items [maxItems + 1]*storage.Record
	copy(items[:i], n.items[:i])
	items[i] = item
	copy(items[i+1:], n.items[i:])
	s := (maxItems + 1) / 2
	switch i {
	case maxItems: // after every key of n: keep n full
		s = maxItems - 1
	case 0: // before every key of n: keep the new node full
		s = 1
	}
	right := &node{}
	right.n = copy(right.items[:], items[s+1:])
	n.n = copy(n.items[:], items[:s])
	clear(n.items[n.n:])
	if n.inner != nil {
		var children [maxItems + 2]*node
		var sizes [maxItems + 2]int
		copy(children[:i+1], n.inner.children[:i+1])
		copy(sizes[:i+1], n.inner.sizes[:i+1])
		children[i+1], sizes[i+1] = child, child.size()
		copy(children[i+2:], n.inner.children[i+1:])
		copy(sizes[i+2:], n.inner.sizes[i+1:])
		right.inner = &inner{}
		copy(right.inner.children[:], children[s+1:])
		copy(right.inner.sizes[:], sizes[s+1:])
		copy(n.inner.children[:], children[:s+1])
		copy(n.inner.sizes[:], sizes[:s+1])
		clear(n.inner.children[s+1:])
		clear(n.inner.sizes[s+1:])
	}
	return items[s], right
}

// remove deletes key from the subtree at n, returning its record, or nil
// if it is not there. n may be left with fewer than minItems records: its
// parent refills it.
func (n *node) remove(key string) *storage.Record {
	i, found := n.search(key)
	if n.inner == nil {
		if !found {
			return nil
		}
		r := n.items[i]
		copy(n.items[i:n.n-1], n.items[i+1:n.n])
		n.n--
		n.items[n.n] = nil
		return r
	}
	var r *storage.Record
	if found {
		// Its place goes to the last record before it, from the leaves.
		r = n.items[i]
		n.items[i] = n.inner.children[i].removeMax()
	} else if r = n.inner.children[i].remove(key); r == nil {
		return nil
	}
	n.inner.sizes[i]--
	n.refill(i)
	return r
}

// removeMax removes the last record of the subtree at n (not empty) and
// returns it.
func (n *node) removeMax() *storage.Record {
	if n.inner == nil {
		n.n--
		r := n.items[n.n]
		n.items[n.n] = nil
		return r
	}
	i := n.n
	r := n.inner.children[i].removeMax()
	n.inner.sizes[i]--
	n.refill(i)
	return r
}

// refill brings child i of n, an inner node, back to minItems records
// after a delete: it takes one from a sibling that has more than
// minItems, through n, or else merges the child with a sibling (the two
// hold fewer than 2*minItems records, so they fit in one node).
func (n *node) refill(i int) {
	in := n.inner
	c := in.children[i]
	if c.n >= minItems {
		return
	}
	switch {
	case i > 0 && in.children[i-1].n > minItems:
		// n's record i-1 moves down to the front of c, and the last
		// record of the left sibling up in its place, with the last
		// child.
		l := in.children[i-1]
		copy(c.items[1:c.n+1], c.items[:c.n])
		c.items[0] = n.items[i-1]
		n.items[i-1] = l.items[l.n-1]
		l.items[l.n-1] = nil
		moved := 1
		if c.inner != nil {
			copy(c.inner.children[1:c.n+2], c.inner.children[:c.n+1])
			copy(c.inner.sizes[1:c.n+2], c.inner.sizes[:c.n+1])
			c.inner.children[0], c.inner.sizes[0] = l.inner.children[l.n], l.inner.sizes[l.n]
			l.inner.children[l.n], l.inner.sizes[l.n] = nil, 0
			moved += c.inner.sizes[0]
		}
		l.n--
		c.n++
		in.sizes[i-1] -= moved
		in.sizes[i] += moved
	case i < n.n && in.children[i+1].n > minItems:
		// The mirror image: n's record i moves down to the end of c, and
		// the first record of the right sibling up, with the first child.
		r := in.children[i+1]
		c.items[c.n] = n.items[i]
		n.items[i] = r.items[0]
		copy(r.items[:r.n-1], r.items[1:r.n])
		r.items[r.n-1] = nil
		moved := 1
		if c.inner != nil {
			c.inner.children[c.n+1], c.inner.sizes[c.n+1] = r.inner.children[0], r.inner.sizes[0]
			moved += r.inner.sizes[0]
			copy(r.inner.children[:r.n], r.inner.children[1:r.n+1])
			copy(r.inner.sizes[:r.n], r.inner.sizes[1:r.n+1])
			r.inner.children[r.n], r.inner.sizes[r.n] = nil, 0
		}
		r.n--
		c.n++
		in.sizes[i] += moved
		in.sizes[i+1] -= moved
	default:
		if i == n.n {
			i-- // merge with the left sibling
		}
		n.merge(i)
	}
}

// merge joins children i and i+1 of n, with n's record i between them,
// into child i.
func (n *node) merge(i int) {
	in := n.inner
	l, r := in.children[i], in.children[i+1]
	l.items[l.n] = n.items[i]
	copy(l.items[l.n+1:], r.items[:r.n])
	if l.inner != nil {
		copy(l.inner.children[l.n+1:], r.inner.children[:r.n+1])
		copy(l.inner.sizes[l.n+1:], r.inner.sizes[:r.n+1])
	}
	l.n += 1 + r.n
	in.sizes[i] += 1 + in.sizes[i+1]

	copy(n.items[i:n.n-1], n.items[i+1:n.n])
	copy(in.children[i+1:n.n], in.children[i+2:n.n+1])
	copy(in.sizes[i+1:n.n], in.sizes[i+2:n.n+1])
	n.items[n.n-1] = nil
	in.children[n.n], in.sizes[n.n] = nil, 0
	n.n--
}

// ascend calls fn in key order for the records of the subtree at n with
// keys from start on ("": from the first) and, when bounded, before end.
// It returns false once fn has returned false or end is reached.
func (n *node) ascend(start, end string, bounded bool, fn func(*storage.Record) bool) bool {
	i, found := 0, false
	if start != "" {
		i, found = n.search(start)
	}
	for ; ; i++ {
		// Child i holds the keys before record i; when that record is
		// start itself, none of them is in the range.
		if n.inner != nil && !found && !n.inner.children[i].ascend(start, end, bounded, fn) {
			return false
		}
		start, found = "", false // every later key is after start
		if i == n.n {
			return true
		}
		r := n.items[i]
		if bounded && r.Key >= end {
			return false
		}
		if !fn(r) {
			return false
		}
	}
}
