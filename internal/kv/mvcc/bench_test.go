package mvcc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// BenchmarkCompactionStall measures how long writers wait while a large
// compaction runs: 100,000 keys, each written three times, compacted to
// the second round while 4 writers keep writing and a watcher follows
// their keys. It reports the compaction's duration, and the writers' and
// the watcher's latency during it. One iteration
// is the whole scenario: run it with -benchtime=1x.
func BenchmarkCompactionStall(b *testing.B) {
	for _, batch := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				compactionStall(b, batch)
			}
		})
	}
}

func compactionStall(b *testing.B, batch int) {
	const keys, rounds, writers = 100000, 3, 4
	b.StopTimer()
	s, err := Open(Config{Dir: b.TempDir(), CompactionBatch: batch, SnapshotBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 128)
	var compactAt int64
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		var next atomic.Int64
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= keys; i = next.Add(1) {
					key := fmt.Sprintf("/stall/%06d", i)
					var err error
					if round == 0 {
						_, err = s.Create(ctx, key, value)
					} else {
						var cur kv.RangeResponse
						cur, err = s.Range(ctx, key, kv.RangeOptions{})
						if err == nil {
							_, err = s.Update(ctx, key, value, cur.KVs[0].ModRevision)
						}
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if round == 1 {
			compactAt, _ = s.Revision()
		}
	}

	var stop atomic.Bool
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	// A watcher of the writers' keys measures delivery during compaction:
	// from the start of each write to the event's receipt.
	var started sync.Map // key -> time.Time
	var watchLat []time.Duration
	watch, err := s.Watch(ctx, "/during/", kv.WatchOptions{End: kv.PrefixEnd("/during/")})
	if err != nil {
		b.Fatal(err)
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for r := range watch.Responses() {
			now := time.Now()
			for _, ev := range r.Events {
				if t, ok := started.Load(ev.KV.Key); ok {
					watchLat = append(watchLat, now.Sub(t.(time.Time)))
				}
			}
		}
	}()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; !stop.Load(); i++ {
				start := time.Now()
				key := fmt.Sprintf("/during/%d/%d", w, i)
				started.Store(key, start)
				if _, err := s.Create(ctx, key, value); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	b.StartTimer()
	start := time.Now()
	if err := s.Compact(ctx, compactAt); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	watch.Close()
	<-watchDone
	sort.Slice(watchLat, func(i, j int) bool { return watchLat[i] < watchLat[j] })
	if len(watchLat) > 0 {
		b.ReportMetric(float64(watchLat[len(watchLat)*99/100].Microseconds())/1000, "watch-p99-ms")
		b.ReportMetric(float64(watchLat[len(watchLat)-1].Microseconds())/1000, "watch-max-ms")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) == 0 {
		b.Fatal("no writes completed during the compaction")
	}
	b.ReportMetric(float64(took.Microseconds())/1000, "compact-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "write-p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "write-max-ms")
	b.ReportMetric(float64(len(lat)), "writes-during")
}

// BenchmarkRangeLatest and BenchmarkRangeHistorical measure the read path
// on 10,000 keys in memory, without the cost of any client or disk.
func BenchmarkRangeLatest(b *testing.B) {
	s, err := Open(Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 10000; i++ {
		s.Create(ctx, fmt.Sprintf("/r/%05d", i), make([]byte, 1024))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Range(ctx, "/r/", kv.RangeOptions{End: kv.PrefixEnd("/r/")})
		if err != nil || len(r.KVs) != 10000 {
			b.Fatal(len(r.KVs), err)
		}
	}
}

// BenchmarkCreateMemory measures the write path without the disk.
func BenchmarkCreateMemory(b *testing.B) {
	s, err := Open(Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("/c/%09d", i), value); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecovery measures Open on 100,000 keys of 1 KiB (about the
// size of the API's 1 KiB ConfigMaps), once with everything in the log
// and once with everything in a snapshot: a snapshot is taken once the
// log holds as much as the last one, so a restart reads at worst both.
func BenchmarkRecovery(b *testing.B) {
	const keys = 100000
	for _, from := range []string{"log", "snapshot"} {
		b.Run("from="+from, func(b *testing.B) {
			dir := b.TempDir()
			s, err := Open(Config{Dir: dir, SnapshotBytes: 1 << 40})
			if err != nil {
				b.Fatal(err)
			}
			value := make([]byte, 1024)
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 64 {
				wg.Go(func() {
					for i := next.Add(1); i <= keys; i = next.Add(1) {
						if _, err := s.Create(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%07d", i), value); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := s.Close(); err != nil || b.Failed() {
				b.Fatal(err)
			}
			if from == "snapshot" {
				// The log replayed at Open counts towards the next snapshot:
				// one write then snapshots all of it.
				s, err := Open(Config{Dir: dir, SnapshotBytes: 1})
				if err != nil {
					b.Fatal(err)
				}
				mustCreate(b, s, "/registry/last", "x")
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			var size int64
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				if fi, err := os.Stat(f); err == nil {
					size += fi.Size()
				}
			}
			b.SetBytes(size)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s, err := Open(Config{Dir: dir, SnapshotBytes: 1 << 40})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if cur, _ := s.Revision(); cur < keys+1 {
					b.Fatalf("recovered revision %d, want at least %d", cur, keys+1)
				}
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkCompactFewChanges measures one compaction of a store of
// 1,000,000 keys after 100 writes to one of them: a large store whose
// history holds little, as between two of the compactor's ticks, or
// between the early compactions of a loop rewriting one object.
func BenchmarkCompactFewChanges(b *testing.B) {
	s, err := Open(Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 16)
	for i := range 1_000_000 {
		if _, err := s.Create(ctx, fmt.Sprintf("/few/%07d", i), value); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var rev int64
		for range 100 {
			cur, err := s.Range(ctx, "/few/0000000", kv.RangeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			r, err := s.Update(ctx, "/few/0000000", value, cur.KVs[0].ModRevision)
			if err != nil || !r.Succeeded {
				b.Fatal(r, err)
			}
			rev = r.Revision
		}
		b.StartTimer()
		if err := s.Compact(ctx, rev); err != nil {
			b.Fatal(err)
		}
	}
}
