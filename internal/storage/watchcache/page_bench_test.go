package watchcache

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/storage"
)

// pageBenchCache is a cache holding n small ConfigMap records in 10
// namespaces, filled as follow fills it from the store's list (in key
// order), without a store: pageLocked reads only the objects. keys are the
// records' keys, in order.
func pageBenchCache(b *testing.B, prefix string, n int) (*Cache, []string) {
	b.Helper()
	c := New(Config{Prefix: prefix})
	keys := make([]string, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range n {
		ns, name := fmt.Sprintf("ns-%d", i*10/n), fmt.Sprintf("cm-%07d", i)
		keys[i] = prefix + ns + "/" + name
		value := fmt.Appendf(nil, `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"name":%q,"namespace":%q}}`, name, ns)
		r, err := storage.NewRecord(keys[i], value, int64(i+1))
		if err != nil {
			b.Fatal(err)
		}
		c.mu.objects.ReplaceOrInsert(r)
	}
	c.mu.rev, c.mu.floor, c.mu.ready = int64(n), int64(n), true
	return c, keys
}

// BenchmarkPage serves one page of 500 of an unselective list, with its
// remainingItemCount, from a cache of 100,000 and 1,000,000 small
// records: the first page at the cache's revision (the count covers every
// key after it), and a continued page from the middle of the keys at an
// older revision, with 100 keys changed since laid over the objects.
func BenchmarkPage(b *testing.B) {
	const prefix = "/configmaps/"
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			c, keys := pageBenchCache(b, prefix, n)
			// changed holds 100 keys spread over the cache: some as they
			// were (updated since), some absent then (created since), some
			// that existed then (deleted since: not in the objects now).
			var changed []change
			for i := range 100 {
				k := keys[(i*7919)%n]
				r, _ := c.mu.objects.Get(k)
				switch i % 3 {
				case 0:
					changed = append(changed, change{key: k, prior: r, now: true})
				case 1:
					changed = append(changed, change{key: k, now: true})
				case 2:
					changed = append(changed, change{key: k + "-deleted", prior: r})
				}
			}
			slices.SortFunc(changed, func(a, b change) int { return strings.Compare(a.key, b.key) })
			middle := keys[n/2]
			for _, tc := range []struct {
				name    string
				start   string
				changed []change
			}{{"first", prefix, nil}, {"continued", middle, changed}} {
				b.Run(tc.name, func(b *testing.B) {
					b.ReportAllocs()
					opts := storage.ListOptions{Limit: 500}
					for b.Loop() {
						c.mu.RLock()
						list := c.pageLocked(prefix, tc.start, c.mu.rev, tc.changed, opts)
						c.mu.RUnlock()
						if len(list.Items) != 500 || list.Remaining == nil || *list.Remaining <= 0 {
							b.Fatalf("%d items, remaining %v", len(list.Items), list.Remaining)
						}
					}
				})
			}
		})
	}
}

// BenchmarkPageAtOldRevision serves a continued page of 500 at a revision
// with 100,000 events since, from a cache of 1,000,000 small records. The
// events are creates into another namespace than the listed one, or into
// it, after the page. A list's later pages reuse the changes its earlier
// pages gathered (kept); the first page of a revision gathers them (new).
func BenchmarkPageAtOldRevision(b *testing.B) {
	const prefix, n, events = "/configmaps/", 1_000_000, 100_000
	for _, where := range []string{"ns-9", "ns-0"} {
		c, keys := pageBenchCache(b, prefix, n)
		rev := c.mu.rev
		for i := range events {
			r, err := storage.NewRecord(fmt.Sprintf("%s%s/new-%07d", prefix, where, i), []byte(`{"kind":"ConfigMap"}`), rev+int64(i)+1)
			if err != nil {
				b.Fatal(err)
			}
			c.mu.objects.ReplaceOrInsert(r)
			c.mu.history.add(event{rev: r.Rev, key: r.Key, cur: r})
		}
		c.mu.rev += events
		listPrefix, start := prefix+"ns-0/", keys[n/20]
		opts := storage.ListOptions{Limit: 500}
		for _, kept := range []bool{true, false} {
			b.Run(fmt.Sprintf("writes=%s/kept=%v", where, kept), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !kept {
						c.mu.Lock()
						c.forgetChangesLocked(math.MaxInt64)
						c.mu.Unlock()
					}
					if list := c.pageAt(listPrefix, start, rev, opts); len(list.Items) != 500 {
						b.Fatalf("%d items", len(list.Items))
					}
				}
			})
		}
	}
}
