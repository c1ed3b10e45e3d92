package watchcache

import (
	"fmt"
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
			changed := make(map[string]*storage.Record)
			for i := range 100 {
				k := keys[(i*7919)%n]
				r, _ := c.mu.objects.Get(k)
				switch i % 3 {
				case 0:
					changed[k] = r
				case 1:
					changed[k] = nil
				case 2:
					gone := k + "-deleted"
					changed[gone] = r
				}
			}
			middle := keys[n/2]
			for _, tc := range []struct {
				name    string
				start   string
				changed map[string]*storage.Record
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
