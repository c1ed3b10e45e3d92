package watchcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/storage"
)

const prefix = "/configmaps/"

// Pages read from the cache's history are checked against the store's
// pages for the same options: the store is the model. Writes land between
// the pages, so later pages read keys that changed, were created or were
// deleted since the list's revision. Up to 12 lists are paged at once,
// some at one revision, more than the cache keeps the changes of
// (maxChanges), so a list's changes are also gathered again after they
// were let go.
func TestPagesFromHistoryMatchTheStore(t *testing.T) {
	ctx := context.Background()
	s, c := startCache(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	write := randomWriter(t, s, rnd)
	render := func(l *unstructured.UnstructuredList) string {
		b, err := storage.AppendList(nil, l)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for range 40 {
		write()
	}
	type paging struct {
		prefix string
		opts   storage.ListOptions // with the next page's Continue
	}
	var lists []paging
	pages := 0
	for pages < 1500 {
		if len(lists) < 12 && rnd.IntN(4) == 0 {
			listPrefix := []string{prefix, prefix + "a/", prefix + "b/"}[rnd.IntN(3)]
			opts := storage.ListOptions{Limit: int64(1 + rnd.IntN(7))}
			if rnd.IntN(3) == 0 {
				opts.Predicate.Label, _ = labels.Parse("color=red")
			}
			first, err := c.List(ctx, listPrefix, opts)
			if err != nil {
				t.Fatal(err)
			}
			exact := opts
			exact.ResourceVersion = first.GetResourceVersion()
			want, err := s.List(ctx, listPrefix, exact)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(first); got != render(want) {
				t.Fatalf("first page of %s:\n got %s\nwant %s", listPrefix, got, render(want))
			}
			if first.GetContinue() != "" {
				opts.Continue = first.GetContinue()
				lists = append(lists, paging{listPrefix, opts})
			}
			continue
		}
		for n := rnd.IntN(3); n > 0; n-- {
			write()
		}
		if len(lists) == 0 {
			continue
		}
		i := rnd.IntN(len(lists))
		l := lists[i]
		rev, start, err := storage.DecodeContinue(l.prefix, l.opts)
		if err != nil {
			t.Fatal(err)
		}
		if c.pageAt(l.prefix, start, rev, l.opts) == nil {
			t.Fatalf("the cache does not reach revision %d", rev)
		}
		page, err := c.List(ctx, l.prefix, l.opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.List(ctx, l.prefix, l.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := render(page); got != render(want) {
			t.Fatalf("a page of %s at %d:\n got %s\nwant %s", l.prefix, rev, got, render(want))
		}
		pages++
		if lists[i].opts.Continue = page.GetContinue(); page.GetContinue() == "" {
			lists = slices.Delete(lists, i, i+1)
		}
	}
}

// Pages of one list read at once, while the resource is written, each
// agree with the store's page at the list's revision.
func TestConcurrentPagesOfOneList(t *testing.T) {
	ctx := context.Background()
	s, c := startCache(t)
	write := randomWriter(t, s, rand.New(rand.NewPCG(3, 4)))
	for range 60 {
		write()
	}
	first, err := c.ListRecords(ctx, prefix, storage.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The continue tokens of every page of the list, from the store.
	var tokens []string
	for next := first.Continue; next != ""; {
		tokens = append(tokens, next)
		page, err := s.ListRecords(ctx, prefix, storage.ListOptions{Limit: 1, Continue: next})
		if err != nil {
			t.Fatal(err)
		}
		next = page.Continue
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for range 5000 { // within the history's Capacity
			select {
			case <-stop:
				return
			default:
				write()
			}
		}
	})
	errs := make(chan error, 4)
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for range 20 {
				for _, token := range tokens {
					opts := storage.ListOptions{Limit: 1, Continue: token}
					got, err := c.ListRecords(ctx, prefix, opts)
					if err != nil {
						errs <- err
						return
					}
					want, err := s.ListRecords(ctx, prefix, opts)
					if err != nil {
						errs <- err
						return
					}
					if g, w := pageString(got), pageString(want); g != w {
						errs <- fmt.Errorf("page %q: got %s, want %s", token, g, w)
						return
					}
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// pageString renders a page: its keys at their revisions, its
// continuation and remaining count.
func pageString(l *storage.RecordList) string {
	var b strings.Builder
	for _, r := range l.Items {
		fmt.Fprintf(&b, "%s@%d ", r.Key, r.Rev)
	}
	fmt.Fprintf(&b, "continue=%q", l.Continue)
	if l.Remaining != nil {
		fmt.Fprintf(&b, " remaining=%d", *l.Remaining)
	}
	return b.String()
}

// startCache runs a cache of prefix over a fresh in-memory store.
func startCache(t *testing.T) (*storage.Store, *Cache) {
	t.Helper()
	k, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	s := storage.New(k)
	c := New(Config{Store: s, Prefix: prefix})
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done; k.Close() })
	return s, c
}

// randomWriter returns a func that makes one random write under prefix:
// it creates, relabels or deletes one of 30 objects in namespaces a and
// b. It may be called from one goroutine at a time.
func randomWriter(t *testing.T, s *storage.Store, rnd *rand.Rand) func() {
	ctx := context.Background()
	colors := []string{"red", "blue"}
	return func() {
		ns := []string{"a", "b"}[rnd.IntN(2)]
		name := fmt.Sprint("o", rnd.IntN(30))
		key := prefix + ns + "/" + name
		color := colors[rnd.IntN(2)]
		if rnd.IntN(4) == 0 {
			_, err := s.Delete(ctx, key, nil, nil)
			if err != nil && !storage.HasCode(err, storage.CodeNotFound) {
				t.Error(err)
			}
			return
		}
		_, err := s.GuaranteedUpdate(ctx, key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			cur.SetLabels(map[string]string{"color": color})
			return cur, nil
		})
		if storage.HasCode(err, storage.CodeNotFound) {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
			u.SetName(name)
			u.SetNamespace(ns)
			u.SetLabels(map[string]string{"color": color})
			_, err = s.Create(ctx, key, u)
		}
		if err != nil {
			t.Error(err)
		}
	}
}

// mergeChanges agrees with a sort of both lists together.
func TestMergeChanges(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	for round := range 500 {
		keys := rnd.Perm(rnd.IntN(60))
		var a, b []change
		for _, k := range keys {
			ch := change{key: fmt.Sprintf("k%03d", k)}
			if rnd.IntN(3) == 0 {
				b = append(b, ch)
			} else {
				a = append(a, ch)
			}
		}
		byKey := func(x, y change) int { return strings.Compare(x.key, y.key) }
		slices.SortFunc(a, byKey)
		slices.SortFunc(b, byKey)
		want := slices.SortedFunc(slices.Values(append(slices.Clone(a), b...)), byKey)
		// Room after a for some of b, or none: in place, or not.
		in := slices.Grow(slices.Clone(a), rnd.IntN(len(b)+1))
		if got := mergeChanges(in, b); !slices.Equal(got, want) {
			t.Fatalf("round %d: mergeChanges(%v, %v) = %v", round, a, b, got)
		}
	}
}

// A list's changes catch up with a revision whose events the cache has
// applied only in part (a transaction in etcd may write several keys):
// the rest of that revision's events count when they come.
func TestChangesCatchUpWithARevisionInParts(t *testing.T) {
	a, c := testRecord("/p/a"), testRecord("/p/c")
	h := []event{
		{rev: 11, key: "/p/a", prior: a, cur: testRecord("/p/a")}, // updated
		{rev: 12, key: "/p/b", cur: testRecord("/p/b")},           // created
		{rev: 12, key: "/p/c", prior: c},                          // deleted, in the same revision
		{rev: 13, key: "/p/b", prior: testRecord("/p/b")},         // and deleted again
	}
	cs := &changes{list: pagedList{"/p/", 10}, through: 10}
	for _, applied := range []int{2, 3, 3, 4} {
		cs.catchUp(h[:applied])
	}
	want := []change{{"/p/a", a, true}, {"/p/b", nil, false}, {"/p/c", c, false}}
	if !slices.Equal(cs.keys, want) {
		t.Errorf("changes %v, want %v", cs.keys, want)
	}
}
