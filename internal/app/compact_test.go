package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

func memoryStore(t *testing.T) *mvcc.Store {
	t.Helper()
	s, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rewrite writes value to key, creating it if absent.
func rewrite(t *testing.T, s kv.Store, key, value string) {
	t.Helper()
	ctx := context.Background()
	cur, err := s.Range(ctx, key, kv.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var r kv.WriteResponse
	if len(cur.KVs) == 0 {
		r, err = s.Create(ctx, key, []byte(value))
	} else {
		r, err = s.Update(ctx, key, []byte(value), cur.KVs[0].ModRevision)
	}
	if err != nil || !r.Succeeded {
		t.Fatalf("writing %s: %+v, %v", key, r, err)
	}
}

func TestCompactorTicksToThePreviousTicksRevision(t *testing.T) {
	s := memoryStore(t)
	c := newCompactor(s, 0, slog.New(slog.DiscardHandler))
	if c.bounded() {
		t.Fatal("a bound of 0 still checks the history's size")
	}
	ctx := context.Background()
	rewrite(t, s, "/a", "1")
	c.tick(ctx) // records the revision; nothing to compact yet
	if _, compacted := s.Revision(); compacted != 0 {
		t.Fatalf("the first tick compacted to %d", compacted)
	}
	first, _ := s.Revision()
	rewrite(t, s, "/a", "2")
	c.tick(ctx)
	if _, compacted := s.Revision(); compacted != first {
		t.Fatalf("the second tick compacted to %d, want the first tick's revision %d", compacted, first)
	}
	if n := c.intervalCompactions.Load(); n != 1 {
		t.Fatalf("%d interval compactions counted, want 1", n)
	}
}

func TestCompactorBoundsTheOldVersionsHeld(t *testing.T) {
	const (
		maxHistory = 64 << 10
		value      = 4 << 10
		perCheck   = 4 // writes between two checks: 16 KiB superseded
	)
	s := memoryStore(t)
	c := newCompactor(s, maxHistory, slog.New(slog.DiscardHandler))
	if !c.bounded() {
		t.Fatal("the memory engine's history is not bounded")
	}
	ctx := context.Background()
	revAt := map[int64]int64{} // revision → bytes superseded until then, at each check
	early := 0
	for i := range 40 {
		for j := range perCheck {
			rewrite(t, s, fmt.Sprintf("/k/%d", j%2), strings.Repeat(fmt.Sprint(i%10), value))
		}
		_, compactedBefore := s.Revision()
		c.check(ctx)
		rev, compacted := s.Revision()
		held, superseded := s.HistoryBytes()
		revAt[rev] = superseded
		if held > maxHistory {
			t.Fatalf("check %d: %d bytes of old versions held, over the bound %d", i, held, maxHistory)
		}
		if compacted == compactedBefore {
			continue
		}
		early++
		// The compaction went to a revision an earlier check saw ...
		if compacted >= rev {
			t.Fatalf("check %d compacted to %d, the current revision: the last check's history is gone", i, compacted)
		}
		at, seen := revAt[compacted]
		if !seen {
			t.Fatalf("check %d compacted to %d, a revision no check saw", i, compacted)
		}
		// ... keeping no more than half the bound, and no less than what
		// fits in it: the check before that one had more after it.
		if superseded-at > maxHistory/2 {
			t.Fatalf("check %d kept %d bytes superseded since %d, over half the bound", i, superseded-at, compacted)
		}
		for r, sup := range revAt {
			if r < compacted && r > compactedBefore && superseded-sup <= maxHistory/2 {
				t.Fatalf("check %d compacted to %d, but %d kept more history within half the bound", i, compacted, r)
			}
		}
	}
	if early < 5 {
		t.Fatalf("%d early compactions in 40 checks of 16 KiB each, want one every few checks", early)
	}
	// Reads at the compaction point, and watches from it, still work.
	_, compacted := s.Revision()
	if _, err := s.Range(ctx, "/k/0", kv.RangeOptions{Revision: compacted}); err != nil {
		t.Fatalf("read at the compaction point %d: %v", compacted, err)
	}
}

func TestCompactorLeavesSmallHistoriesToTheInterval(t *testing.T) {
	s := memoryStore(t)
	c := newCompactor(s, 1<<20, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	for i := range 20 {
		rewrite(t, s, "/a", strings.Repeat("x", 1000+i))
		c.check(ctx)
	}
	if _, compacted := s.Revision(); compacted != 0 {
		t.Fatalf("compacted to %d with %d bytes held, under the bound", compacted, heldOf(s.HistoryBytes()))
	}
}

func heldOf(held, _ int64) int64 { return held }

func TestCompactorKeepsTheWritesSinceTheLastCheck(t *testing.T) {
	const maxHistory = 64 << 10
	s := memoryStore(t)
	c := newCompactor(s, maxHistory, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	rewrite(t, s, "/a", "first")
	c.check(ctx)
	last, _ := s.Revision()
	// A burst past the whole bound between two checks.
	for i := range 24 {
		rewrite(t, s, "/a", strings.Repeat(fmt.Sprint(i%10), 4<<10))
	}
	c.check(ctx)
	_, compacted := s.Revision()
	held, _ := s.HistoryBytes()
	if compacted != last {
		t.Fatalf("compacted to %d, want the last check's revision %d", compacted, last)
	}
	if held < 23*(4<<10) {
		t.Fatalf("%d bytes held after the compaction, want the burst's 23 old versions of 4 KiB kept", held)
	}
}

// Under churn past the bound, early compactions come every few checks:
// the first is logged at Info, the next ones at Debug until a minute has
// passed, and then one at Info again, counting those since. /metrics
// counts every one, and shows the bytes held and the bound.
func TestCompactorLogsEarlyCompactionsAtInfoOnceAMinute(t *testing.T) {
	const maxHistory = 64 << 10
	s := memoryStore(t)
	var logged strings.Builder
	c := newCompactor(s, maxHistory, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug})))
	clock := time.Unix(1e9, 0)
	c.now = func() time.Time { return clock }
	ctx := context.Background()
	churn := func(checks int) {
		for i := range checks {
			for j := range 4 { // 16 KiB superseded a check
				rewrite(t, s, fmt.Sprintf("/k/%d", j%2), strings.Repeat(fmt.Sprint(i%10), 4<<10))
			}
			c.check(ctx)
			clock = clock.Add(time.Second)
		}
	}
	lines := func(level string) []string {
		var out []string
		for l := range strings.Lines(logged.String()) {
			if strings.Contains(l, "level="+level) && strings.Contains(l, "compacted early") {
				out = append(out, l)
			}
		}
		return out
	}

	churn(40) // 40 s: one line at Info, the rest at Debug
	info, debug := lines("INFO"), lines("DEBUG")
	if len(info) != 1 || !strings.Contains(info[0], " earlySinceLastInfo=1\n") {
		t.Fatalf("after 40 s of churn, %d lines at Info, want the first early compaction's:\n%s", len(info), logged.String())
	}
	if len(debug) < 4 {
		t.Fatalf("after 40 s of churn, %d early compactions logged at Debug, want one every few checks:\n%s", len(debug), logged.String())
	}
	churn(30) // past the minute since the line at Info: one more, counting those since
	info, debug = lines("INFO"), lines("DEBUG")
	if len(info) != 2 {
		t.Fatalf("after 70 s of churn, %d lines at Info, want 2:\n%s", len(info), logged.String())
	}
	// It counts itself and those logged at Debug since the first.
	all := lines("")
	second := slices.Index(all, info[1])
	if want := fmt.Sprintf(" earlySinceLastInfo=%d\n", second); !strings.Contains(info[1], want) {
		t.Errorf("the second line at Info, early compaction %d of %d, lacks%s:\n%s", second+1, len(all), want, info[1])
	}

	values := map[string]float64{}
	for _, m := range c.metrics() {
		for _, smp := range m.Read() {
			values[m.Name+fmt.Sprint(smp.Labels)] = smp.Value
		}
	}
	held, _ := s.HistoryBytes()
	want := map[string]float64{
		"kplane_storage_compactions_total[reason interval]": 0,
		"kplane_storage_compactions_total[reason history]":  float64(len(info) + len(debug)),
		"kplane_storage_history_bytes[]":                    float64(held),
		"kplane_storage_history_max_bytes[]":                maxHistory,
	}
	if fmt.Sprint(values) != fmt.Sprint(want) {
		t.Errorf("metrics: %v, want %v", values, want)
	}
}

func TestCompactorsOnOneEtcdTakeTurns(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	a, b := srv.NewStore(t), srv.NewStore(t)
	ca := newCompactor(a, 0, slog.New(slog.DiscardHandler))
	cb := newCompactor(b, 0, slog.New(slog.DiscardHandler))
	if ca.turns == nil || ca.bounded() {
		t.Fatal("the compactor over etcd does not take turns, or bounds a history it cannot see")
	}
	// Interleaved ticks, as two servers' would be: A took the first turn,
	// so A compacts at each of its ticks and B at none.
	for i := range 4 {
		rewrite(t, a, "/a", fmt.Sprint(i))
		ca.tick(ctx)
		rewrite(t, b, "/b", fmt.Sprint(i))
		cb.tick(ctx)
	}
	if na, nb := ca.intervalCompactions.Load(), cb.intervalCompactions.Load(); na != 3 || nb != 0 {
		t.Fatalf("compactions: A %d, B %d; want 3 and 0 (one a tick, the first tick records)", na, nb)
	}
	// A stops: B takes over at its next tick, compacting to the revision it
	// saw at its tick before.
	to := cb.last
	cb.tick(ctx)
	if nb := cb.intervalCompactions.Load(); nb != 1 {
		t.Fatalf("B compacted %d times once A stopped, want 1", nb)
	}
	if _, err := b.Range(ctx, "/", kv.RangeOptions{Revision: to, CountOnly: true}); err != nil {
		t.Fatalf("B compacted past the revision it saw at its last tick, %d: %v", to, err)
	}
	if _, err := b.Range(ctx, "/", kv.RangeOptions{Revision: to - 1, CountOnly: true}); !errors.Is(err, kv.ErrCompacted) {
		t.Fatalf("a read below %d, where B compacted: %v; want ErrCompacted", to, err)
	}
}
