package watchcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Pages read from the cache's history are checked against the store's
// pages for the same options: the store is the model. Writes land between
// the pages, so later pages read keys that changed, were created or were
// deleted since the list's revision.
func TestPagesFromHistoryMatchTheStore(t *testing.T) {
	ctx := context.Background()
	k, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	s := storage.New(k)
	const prefix = "/configmaps/"
	c := New(Config{Store: s, Prefix: prefix})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done; k.Close() })

	rnd := rand.New(rand.NewPCG(1, 2))
	colors := []string{"red", "blue"}
	write := func() {
		ns := []string{"a", "b"}[rnd.IntN(2)]
		name := fmt.Sprint("o", rnd.IntN(30))
		key := prefix + ns + "/" + name
		color := colors[rnd.IntN(2)]
		if rnd.IntN(4) == 0 {
			_, err := s.Delete(ctx, key, nil, nil)
			if err != nil && !storage.HasCode(err, storage.CodeNotFound) {
				t.Fatal(err)
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
			t.Fatal(err)
		}
	}
	render := func(l *unstructured.UnstructuredList) string {
		b, err := storage.AppendList(nil, l)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for i := 0; i < 40; i++ {
		write()
	}
	for round := 0; round < 200; round++ {
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
			t.Fatalf("round %d, first page of %s:\n got %s\nwant %s", round, listPrefix, got, render(want))
		}
		for page := first; page.GetContinue() != ""; {
			for n := rnd.IntN(4); n > 0; n-- {
				write()
			}
			next := opts
			next.Continue = page.GetContinue()
			rev, start, err := storage.DecodeContinue(next.Continue, listPrefix)
			if err != nil {
				t.Fatal(err)
			}
			if c.pageAt(listPrefix, start, rev, next) == nil {
				t.Fatalf("round %d: the cache does not reach revision %d", round, rev)
			}
			if page, err = c.List(ctx, listPrefix, next); err != nil {
				t.Fatal(err)
			}
			want, err := s.List(ctx, listPrefix, next)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(page); got != render(want) {
				t.Fatalf("round %d, a page of %s at %d:\n got %s\nwant %s", round, listPrefix, rev, got, render(want))
			}
		}
	}
}
