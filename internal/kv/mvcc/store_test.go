package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

var ctx = context.Background()

func open(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustCreate(t testing.TB, s kv.Store, key, value string) kv.WriteResponse {
	t.Helper()
	r, err := s.Create(ctx, key, []byte(value))
	if err != nil || !r.Succeeded {
		t.Fatalf("Create(%s) = %+v, %v", key, r, err)
	}
	return r
}

func mustUpdate(t testing.TB, s kv.Store, key, value string) kv.WriteResponse {
	t.Helper()
	cur, err := s.Range(ctx, key, kv.RangeOptions{})
	if err != nil || len(cur.KVs) != 1 {
		t.Fatalf("Range(%s) = %+v, %v", key, cur, err)
	}
	r, err := s.Update(ctx, key, []byte(value), cur.KVs[0].ModRevision)
	if err != nil || !r.Succeeded {
		t.Fatalf("Update(%s) = %+v, %v", key, r, err)
	}
	return r
}

func mustDelete(t testing.TB, s kv.Store, key string) kv.WriteResponse {
	t.Helper()
	cur, err := s.Range(ctx, key, kv.RangeOptions{})
	if err != nil || len(cur.KVs) != 1 {
		t.Fatalf("Range(%s) = %+v, %v", key, cur, err)
	}
	r, err := s.Delete(ctx, key, cur.KVs[0].ModRevision)
	if err != nil || !r.Succeeded {
		t.Fatalf("Delete(%s) = %+v, %v", key, r, err)
	}
	return r
}

// dump renders every key at every retained revision from the compaction
// point on, and every event of the retained history: two stores with the
// same dump are indistinguishable to readers and watchers.
func dump(t testing.TB, s *Store) string {
	t.Helper()
	cur, compacted := s.Revision()
	var b strings.Builder
	fmt.Fprintf(&b, "revision %d compacted %d\n", cur, compacted)
	for rev := max(compacted, 1); rev <= cur; rev++ {
		r, err := s.Range(ctx, "\x00", kv.RangeOptions{End: "\xff", Revision: rev})
		if err != nil {
			t.Fatalf("Range at %d: %v", rev, err)
		}
		fmt.Fprintf(&b, "@%d:", rev)
		for _, e := range r.KVs {
			fmt.Fprintf(&b, " %s=%q(c%d,m%d,v%d)", e.Key, e.Value, e.CreateRevision, e.ModRevision, e.Version)
		}
		b.WriteByte('\n')
	}
	if cur > 1 {
		for _, ev := range collect(t, s, max(compacted, 2), cur) {
			fmt.Fprintf(&b, "event %s %s@%d prev=%v\n", ev.Type, ev.KV.Key, ev.KV.ModRevision, ev.PrevKV)
		}
	}
	return b.String()
}

// collect watches everything from rev and returns the events up to until.
func collect(t testing.TB, s kv.Store, rev, until int64) []kv.Event {
	t.Helper()
	w, err := s.Watch(ctx, "\x00", kv.WatchOptions{End: "\xff", Revision: rev})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var out []kv.Event
	timeout := time.After(10 * time.Second)
	for len(out) == 0 || out[len(out)-1].KV.ModRevision < until {
		select {
		case r, ok := <-w.Responses():
			if !ok || r.Err != nil {
				t.Fatalf("watch from %d ended after %d events: %v", rev, len(out), r.Err)
			}
			out = append(out, r.Events...)
		case <-timeout:
			t.Fatalf("watch from %d: timed out after %d events, want up to %d", rev, len(out), until)
		}
	}
	return out
}

// write creates key if it is absent; otherwise it deletes it if del, or
// updates it to value.
func write(t testing.TB, s kv.Store, key string, del bool, value string) kv.WriteResponse {
	t.Helper()
	cur, err := s.Range(ctx, key, kv.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case len(cur.KVs) == 0:
		return mustCreate(t, s, key, value)
	case del:
		return mustDelete(t, s, key)
	default:
		return mustUpdate(t, s, key, value)
	}
}

// workload applies a deterministic mix of writes and compactions to every
// store given, in lockstep.
func workload(t testing.TB, n int, stores ...*Store) {
	t.Helper()
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("/k/%02d", i%17)
		for _, s := range stores {
			write(t, s, key, i%5 == 0, strings.Repeat("x", i%300)+fmt.Sprint(i))
			if i%97 == 96 {
				rev, _ := s.Revision()
				if err := s.Compact(ctx, rev-40); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestRestartRestoresExactState(t *testing.T) {
	for _, snapshotBytes := range []int64{1 << 30, 4 << 10} {
		t.Run(fmt.Sprintf("snapshot every %d bytes", snapshotBytes), func(t *testing.T) {
			dir := t.TempDir()
			twin := open(t, Config{InMemory: true})
			s := open(t, Config{Dir: dir, SnapshotBytes: snapshotBytes})
			workload(t, 600, s, twin)
			want := dump(t, twin)
			if got := dump(t, s); got != want {
				t.Fatalf("durable store differs from the in-memory twin before restart")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, Config{Dir: dir, SnapshotBytes: snapshotBytes})
			if got := dump(t, s); got != want {
				t.Fatalf("state after restart differs:\n got: %.2000s\nwant: %.2000s", got, want)
			}
			// Revisions continue where they were.
			before, _ := s.Revision()
			if r := mustCreate(t, s, "/after-restart", "x"); r.Revision != before+1 {
				t.Fatalf("first write after restart at %d, want %d", r.Revision, before+1)
			}
			if snapshotBytes < 1<<20 {
				snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
				if len(snaps) == 0 {
					t.Fatalf("no snapshot written in %s", dir)
				}
			}
		})
	}
}

// snapshotSizes is a log handler keeping the sizes the store logs with
// each snapshot it writes.
type snapshotSizes struct {
	mu    sync.Mutex
	sizes []snapshotSize
}

type snapshotSize struct{ bytes, logged int64 }

func (h *snapshotSizes) Enabled(context.Context, slog.Level) bool { return true }
func (h *snapshotSizes) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *snapshotSizes) WithGroup(string) slog.Handler            { return h }

func (h *snapshotSizes) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "snapshot written" {
		return nil
	}
	var sz snapshotSize
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "bytes":
			sz.bytes = a.Value.Int64()
		case "loggedBytes":
			sz.logged = a.Value.Int64()
		}
		return true
	})
	h.mu.Lock()
	h.sizes = append(h.sizes, sz)
	h.mu.Unlock()
	return nil
}

// A snapshot rewrites the whole store. With the snapshot taken every
// SnapshotBytes of log, a store many times that size would write many
// bytes of snapshot per byte logged; the log must grow as large as the
// last snapshot before the next one.
func TestSnapshotsWriteNoMoreThanTheLogTheyCover(t *testing.T) {
	const (
		minLog  = 16 << 10
		keys    = 1000
		rounds  = 4
		writers = 8
	)
	var snaps snapshotSizes
	s := open(t, Config{Dir: t.TempDir(), SnapshotBytes: minLog, Logger: slog.New(&snaps)})
	value := []byte(strings.Repeat("v", 512))
	modRev := make([]int64, keys) // each writer keeps its own keys'
	// A store of about 600 KB, written over rounds times, each round
	// compacted away so that the store stays that size.
	for round := 0; round <= rounds; round++ {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := w; i < keys; i += writers {
					key := fmt.Sprintf("/snap/%04d", i)
					var r kv.WriteResponse
					var err error
					if round == 0 {
						r, err = s.Create(ctx, key, value)
					} else {
						r, err = s.Update(ctx, key, value, modRev[i])
					}
					if err != nil || !r.Succeeded {
						t.Errorf("round %d, %s: %+v, %v", round, key, r, err)
						return
					}
					modRev[i] = r.Revision
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		rev, _ := s.Revision()
		if err := s.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // waits for a snapshot being written
		t.Fatal(err)
	}
	snaps.mu.Lock()
	sizes := snaps.sizes
	snaps.mu.Unlock()
	if len(sizes) < 3 {
		t.Fatalf("%d snapshots of a store of %d keys written %d times: %+v", len(sizes), keys, rounds+1, sizes)
	}
	var written, logged int64
	for i, sz := range sizes {
		written += sz.bytes
		logged += sz.logged
		if i == 0 {
			continue
		}
		if want := max(minLog, sizes[i-1].bytes); sz.logged < want {
			t.Errorf("snapshot %d of %d bytes came after %d bytes of log, want at least %d (the snapshot before)",
				i, sz.bytes, sz.logged, want)
		}
	}
	t.Logf("%d snapshots: %d bytes written for %d bytes of log before them", len(sizes), written, logged)
}

func TestTornTailStopsAtLastIntactRecord(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Config{Dir: dir})
	var last kv.WriteResponse
	for i := 0; i < 10; i++ {
		last = mustCreate(t, s, fmt.Sprintf("/k%d", i), "value")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatalf("no log segment in %s", dir)
	}
	sort.Strings(segs)
	seg := segs[len(segs)-1]
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	// Cut into the last record, as a crash in the middle of a write would.
	if err := os.Truncate(seg, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s = open(t, Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	rev, _ := s.Revision()
	if rev != last.Revision-1 {
		t.Fatalf("recovered revision %d, want %d (the last intact record)", rev, last.Revision-1)
	}
	if r, _ := s.Range(ctx, "/k9", kv.RangeOptions{}); r.Count != 0 {
		t.Fatalf("the torn record's key is present: %+v", r)
	}
	if r, _ := s.Range(ctx, "/k8", kv.RangeOptions{}); r.Count != 1 {
		t.Fatalf("an intact record's key is missing: %+v", r)
	}
	if !strings.Contains(strings.ToLower(logs.String()), "torn") && !strings.Contains(strings.ToLower(logs.String()), "truncat") {
		t.Fatalf("recovery did not log the discarded tail:\n%s", logs.String())
	}
	if r := mustCreate(t, s, "/k9", "again"); r.Revision != last.Revision {
		t.Fatalf("rewrite after recovery at %d, want %d", r.Revision, last.Revision)
	}
}

func TestDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	open(t, Config{Dir: dir})
	if s, err := Open(Config{Dir: dir}); err == nil {
		s.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
}

func TestLaggingWatcherIsCaughtUpOrEndedWithCompacted(t *testing.T) {
	s := open(t, Config{InMemory: true, WatchBuffer: 2, WatchBatch: 10})
	w, err := s.Watch(ctx, "/", kv.WatchOptions{End: kv.PrefixEnd("/")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// 2,000 writes while nobody reads: none of them may wait for the watcher.
	for i := 0; i < 2000; i++ {
		mustCreate(t, s, fmt.Sprintf("/k%04d", i), "v")
	}
	cur, _ := s.Revision()
	if err := s.Compact(ctx, cur-100); err != nil {
		t.Fatal(err)
	}
	// The watcher delivers an unbroken run of revisions from the start,
	// then ErrCompacted: what it had buffered, never a jump past the gap.
	next := int64(2)
	for r := range w.Responses() {
		if r.Err != nil {
			if !errors.Is(r.Err, kv.ErrCompacted) || r.CompactRevision != cur-100 {
				t.Fatalf("final error %v (compact revision %d), want ErrCompacted at %d", r.Err, r.CompactRevision, cur-100)
			}
			if next >= cur-100 {
				t.Fatalf("watcher reached %d, past the compaction point, yet was ended", next)
			}
			return
		}
		for _, ev := range r.Events {
			if ev.KV.ModRevision != next {
				t.Fatalf("event at %d, want %d: a gap", ev.KV.ModRevision, next)
			}
			next++
		}
	}
	t.Fatal("watch channel closed without ErrCompacted")
}

func TestLaggingWatcherCatchesUpFromHistory(t *testing.T) {
	s := open(t, Config{InMemory: true, WatchBuffer: 1, WatchBatch: 7})
	w, err := s.Watch(ctx, "/", kv.WatchOptions{End: kv.PrefixEnd("/")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 500; i++ {
		mustCreate(t, s, fmt.Sprintf("/k%04d", i), "v")
	}
	events := collect(t, s, 2, 501) // a second watcher, opened late, from history
	next := int64(2)
	timeout := time.After(10 * time.Second)
	for next <= 501 {
		select {
		case r := <-w.Responses():
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			for _, ev := range r.Events {
				if ev.KV.ModRevision != next || ev.KV.Key != events[next-2].KV.Key {
					t.Fatalf("event %+v, want revision %d key %s", ev.KV, next, events[next-2].KV.Key)
				}
				next++
			}
		case <-timeout:
			t.Fatalf("stuck at revision %d", next)
		}
	}
}

func TestIdleWatchGetsPeriodicProgress(t *testing.T) {
	s := open(t, Config{InMemory: true, ProgressNotifyInterval: 20 * time.Millisecond})
	w, err := s.Watch(ctx, "/idle", kv.WatchOptions{ProgressNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r := mustCreate(t, s, "/elsewhere", "x")
	timeout := time.After(10 * time.Second)
	for {
		select {
		case resp := <-w.Responses():
			if resp.Err != nil || len(resp.Events) > 0 {
				t.Fatalf("unexpected response %+v", resp)
			}
			if resp.Progress && resp.Revision >= r.Revision {
				return
			}
		case <-timeout:
			t.Fatal("no periodic progress notification reached the last write's revision")
		}
	}
}

// idleWatcher registers a watcher of prefix that no goroutine runs, so
// that a test can see what commits do to it: its wake-ups stay in its
// channel and only committers move its cursor.
func idleWatcher(s *Store, prefix string) *watcher {
	w := &watcher{s: s, key: prefix, end: kv.PrefixEnd(prefix), wakeup: make(chan struct{}, 1)}
	s.mu.Lock()
	w.next = s.mu.committed + 1
	s.mu.watchers[w] = struct{}{}
	s.mu.Unlock()
	return w
}

// A watcher waiting at the head of the history is not woken by commits
// outside its range: the committer moves its cursor past them, so a
// compaction of them does not end its watch, and it still sees its own
// keys after.
func TestIdleWatcherFollowsOtherKeys(t *testing.T) {
	for _, cfg := range []Config{{InMemory: true}, {Dir: t.TempDir()}} {
		s := open(t, cfg)
		idle := idleWatcher(s, "/a/")
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		kw, err := s.Watch(wctx, "/a/", kv.WatchOptions{End: kv.PrefixEnd("/a/")})
		if err != nil {
			t.Fatal(err)
		}
		var last kv.WriteResponse
		for i := range 200 {
			last = mustCreate(t, s, fmt.Sprintf("/b/%d", i), "v")
		}
		s.mu.RLock()
		next, committed := idle.next, s.mu.committed
		s.mu.RUnlock()
		if next != committed+1 || committed != last.Revision {
			t.Fatalf("cursor %d after 200 writes elsewhere up to %d (committed %d): not moved past them", next, last.Revision, committed)
		}
		if len(idle.wakeup) != 0 {
			t.Fatalf("a wake-up is pending after writes outside the watched range")
		}
		mine := mustCreate(t, s, "/a/x", "v")
		if len(idle.wakeup) != 1 {
			t.Fatalf("no wake-up after a write in the watched range")
		}
		// The running watcher, through a compaction of the other keys.
		if err := s.Compact(ctx, last.Revision); err != nil {
			t.Fatal(err)
		}
		select {
		case resp := <-kw.Responses():
			if resp.Err != nil || len(resp.Events) != 1 || resp.Events[0].KV.Key != "/a/x" || resp.Events[0].KV.ModRevision != mine.Revision {
				t.Fatalf("after the compaction: %+v, want the event of /a/x at %d", resp, mine.Revision)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no event for /a/x")
		}
	}
}

// A commit of more revisions than a key-by-watcher comparison should
// hold the lock for wakes every watcher instead, to read under the read
// lock, and moves no cursor.
func TestLargeCommitWakesEveryWatcher(t *testing.T) {
	s := open(t, Config{InMemory: true})
	w := idleWatcher(s, "/a/")
	mustCreate(t, s, "/b/1", "v")
	s.mu.Lock()
	next := w.next
	s.notifyWatchersLocked(s.mu.committed, s.mu.committed+maxNotifyScan+1)
	moved := w.next != next
	s.mu.Unlock()
	if len(w.wakeup) != 1 || moved {
		t.Fatalf("after a large commit: %d wake-ups, cursor moved %v; want one, not moved", len(w.wakeup), moved)
	}
}

// indexOldBytes adds up, from the index itself, the values of the versions
// that are not their key's newest: what HistoryBytes keeps a count of.
func indexOldBytes(s *Store) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	s.mu.index.Ascend(func(ki *keyIndex) bool {
		for _, e := range ki.entries[:len(ki.entries)-1] {
			n += int64(len(e.Value))
		}
		return true
	})
	return n
}

func TestHistoryBytesCountsTheOldVersions(t *testing.T) {
	for _, snapshotBytes := range []int64{1 << 30, 4 << 10} {
		t.Run(fmt.Sprintf("snapshot every %d bytes", snapshotBytes), func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, Config{Dir: dir, SnapshotBytes: snapshotBytes})
			var superseded int64 // what the writes replaced or deleted
			check := func(when string) {
				t.Helper()
				held, sup := s.HistoryBytes()
				if want := indexOldBytes(s); held != want {
					t.Fatalf("%s: HistoryBytes held %d, the index holds %d", when, held, want)
				}
				if sup != superseded {
					t.Fatalf("%s: HistoryBytes superseded %d, the writes superseded %d", when, sup, superseded)
				}
			}
			for i := range 600 {
				r := write(t, s, fmt.Sprintf("/k/%02d", i%17), i%5 == 0, strings.Repeat("x", i%300)+fmt.Sprint(i))
				if r.Prev != nil {
					superseded += int64(len(r.Prev.Value))
				}
				check(fmt.Sprintf("write %d", i))
				if i%97 == 96 {
					rev, _ := s.Revision()
					if err := s.Compact(ctx, rev-40); err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprintf("compaction after write %d", i))
				}
			}
			held, _ := s.HistoryBytes()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, Config{Dir: dir, SnapshotBytes: snapshotBytes})
			if got, _ := s.HistoryBytes(); got != held || got != indexOldBytes(s) {
				t.Fatalf("after restart HistoryBytes held %d, want %d as before (the index holds %d)", got, held, indexOldBytes(s))
			}
			// Compacting to the newest revision leaves only the version
			// its write replaced, which a watch from there needs.
			rev, _ := s.Revision()
			if err := s.Compact(ctx, rev); err != nil {
				t.Fatal(err)
			}
			last, err := s.Range(ctx, "/k/", kv.RangeOptions{End: "/k0"})
			if err != nil {
				t.Fatal(err)
			}
			var want int64
			for _, e := range last.KVs {
				if e.ModRevision == rev {
					w := collect(t, s, rev, rev)
					want = int64(len(w[0].PrevKV.Value))
				}
			}
			if got, _ := s.HistoryBytes(); got != want || want == 0 {
				t.Fatalf("after compacting to %d HistoryBytes held %d, want %d (the last write's previous value)", rev, got, want)
			}
		})
	}
}

// untrimmed returns the keys that a compaction at the store's compaction
// point would still trim: none, if compaction visited every key it had to.
func untrimmed(s *Store) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	s.mu.index.Ascend(func(ki *keyIndex) bool {
		c := &keyIndex{key: ki.key, entries: append([]kv.KeyValue(nil), ki.entries...)}
		if freed, empty := c.compact(s.mu.compactRev); empty || len(c.entries) != len(ki.entries) || freed != 0 {
			out = append(out, fmt.Sprintf("%s %v", ki.key, mods(ki)))
		}
		return true
	})
	return out
}

// Compaction trims only the keys written since the last one; no other
// key has anything to drop. Checked after every compaction of a random
// workload, with a trim batch smaller than the keys written, and after a
// restart, which replays compactions from the log.
func TestCompactionTrimsEveryKeyItMust(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Dir: dir, CompactionBatch: 3, SnapshotBytes: 1 << 30}
			s := open(t, cfg)
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			for i := range 2000 {
				write(t, s, fmt.Sprintf("/k/%02d", rng.IntN(40)), rng.IntN(4) == 0, fmt.Sprint("v", i))
				if rng.IntN(50) == 0 {
					rev, compacted := s.Revision()
					to := compacted + 1 + rng.Int64N(rev-compacted)
					if err := s.Compact(ctx, to); err != nil {
						t.Fatal(err)
					}
					if left := untrimmed(s); len(left) > 0 {
						t.Fatalf("after compacting to %d, keys left to trim: %v", to, left)
					}
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, cfg)
			if left := untrimmed(s); len(left) > 0 {
				t.Fatalf("after a restart, keys left to trim: %v", left)
			}
		})
	}
}

// DiskBytes counts the store's files (log segments, snapshots) as the
// file system allocated them: at least what was written; nothing in
// memory mode.
func TestDiskBytesCountsTheStoresFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, Config{Dir: dir, SnapshotBytes: 4 << 20})
	value := strings.Repeat("v", 256<<10)
	for i := range 64 { // 16 MiB, in 32 keys: a snapshot or more
		write(t, s, fmt.Sprintf("/k/%d", i%32), false, value)
	}
	n, err := s.DiskBytes(ctx)
	if err != nil || n < 16<<20 {
		t.Fatalf("DiskBytes after 16 MiB written: %d, %v", n, err)
	}
	// Every file counts, wherever it lies under the directory.
	var files int64
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				files += info.Size()
			}
		}
		return nil
	})
	if n < files/2 {
		t.Errorf("DiskBytes %d, the files' lengths sum to %d", n, files)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.DiskBytes(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("DiskBytes with a cancelled context: %v", err)
	}
	m := open(t, Config{InMemory: true})
	write(t, m, "/k", false, value)
	if n, err := m.DiskBytes(ctx); n != 0 || err != nil {
		t.Errorf("DiskBytes in memory mode: %d, %v", n, err)
	}
}
