package kvbench

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

var ctx = context.Background()

// engine opens a fresh store of one kind for a benchmark.
type engine struct {
	name string
	open func(b *testing.B) kv.Store
}

// engines lists the engines for the benchmark parent; the etcd server is
// started once for parent (on first use) and stopped when parent ends.
func engines(parent *testing.B) []engine {
	var srv *etcdtest.Server
	return []engine{
		{"embedded", func(b *testing.B) kv.Store {
			s, err := mvcc.Open(mvcc.Config{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"etcd", func(b *testing.B) kv.Store {
			if srv == nil {
				srv = etcdtest.Start(parent)
			}
			return srv.NewStore(b)
		}},
	}
}

var value1KiB = make([]byte, 1024)

// BenchmarkPut measures durable creates of 1 KiB values by 1 and 16
// concurrent writers.
func BenchmarkPut(b *testing.B) {
	for _, e := range engines(b) {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("engine=%s/writers=%d", e.name, writers), func(b *testing.B) {
				s := e.open(b)
				b.ResetTimer()
				start := time.Now()
				load(b, s, "/bench/put/", b.N, writers)
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
			})
		}
	}
}

// BenchmarkRange10k measures reading a prefix of 10,000 keys of 1 KiB.
func BenchmarkRange10k(b *testing.B) {
	const n = 10000
	for _, e := range engines(b) {
		b.Run("engine="+e.name, func(b *testing.B) {
			s := e.open(b)
			load(b, s, "/bench/range/", n, 16)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := s.Range(ctx, "/bench/range/", kv.RangeOptions{End: kv.PrefixEnd("/bench/range/")})
				if err != nil || len(r.KVs) != n {
					b.Fatalf("range: %d keys, %v", len(r.KVs), err)
				}
			}
		})
	}
}

// load creates n keys under prefix with the given number of writers.
func load(b *testing.B, s kv.Store, prefix string, n, writers int) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				if r, err := s.Create(ctx, fmt.Sprintf("%s%09d", prefix, i), value1KiB); err != nil || !r.Succeeded {
					b.Errorf("create: %+v %v", r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkWatchFanout measures delivery of 10,000 writes to 1,000 watchers
// of one prefix: every watcher must receive every event, in order, and the
// latency from the start of each write (so it includes the write's own
// commit, fsync included) to each watcher's receipt is reported as p50 and
// p99. One iteration is the whole scenario; run it with
// -benchtime=1x.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers, writes, writers = 1000, 10000, 16
	for _, e := range engines(b) {
		b.Run(fmt.Sprintf("engine=%s/watchers=%d/writes=%d", e.name, watchers, writes), func(b *testing.B) {
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				all = append(all, fanout(b, e.open(b), watchers, writes, writers)...)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
		})
	}
}

func fanout(b *testing.B, s kv.Store, watchers, writes, writers int) []time.Duration {
	b.Helper()
	b.StopTimer()
	prefix := "/bench/watch/"
	start, err := s.Range(ctx, prefix, kv.RangeOptions{End: kv.PrefixEnd(prefix), CountOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	base := start.Revision
	// issued[i-1] is when the write of key i started.
	issued := make([]atomic.Int64, writes)
	lat := make([][]time.Duration, watchers)
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < watchers; w++ {
		wt, err := s.Watch(wctx, prefix, kv.WatchOptions{End: kv.PrefixEnd(prefix), Revision: base + 1})
		if err != nil {
			b.Fatal(err)
		}
		lat[w] = make([]time.Duration, 0, writes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wt.Close()
			next := base + 1
			for r := range wt.Responses() {
				if r.Err != nil {
					b.Errorf("watch: %v", r.Err)
					return
				}
				now := time.Now().UnixNano()
				for _, ev := range r.Events {
					if ev.KV.ModRevision != next {
						b.Errorf("watcher got revision %d, want %d", ev.KV.ModRevision, next)
						return
					}
					next++
					i, err := strconv.Atoi(ev.KV.Key[len(prefix):])
					if err != nil {
						b.Errorf("unexpected key %q", ev.KV.Key)
						return
					}
					lat[w] = append(lat[w], time.Duration(now-issued[i-1].Load()))
				}
				if next > base+int64(writes) {
					return
				}
			}
		}()
	}
	b.StartTimer()
	var n atomic.Int64
	var ww sync.WaitGroup
	for i := 0; i < writers; i++ {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				i := n.Add(1)
				if i > int64(writes) {
					return
				}
				issued[i-1].Store(time.Now().UnixNano())
				r, err := s.Create(ctx, fmt.Sprintf("%s%09d", prefix, i), value1KiB[:256])
				if err != nil || !r.Succeeded {
					b.Errorf("create: %+v %v", r, err)
					return
				}
			}
		}()
	}
	ww.Wait()
	wg.Wait()
	b.StopTimer()
	var out []time.Duration
	for _, l := range lat {
		if len(l) != writes {
			b.Fatalf("a watcher received %d of %d events", len(l), writes)
		}
		out = append(out, l...)
	}
	return out
}
