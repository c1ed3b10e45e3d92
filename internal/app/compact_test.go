package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
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
	if c.sizer != nil {
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
}

func TestCompactorBoundsTheOldVersionsHeld(t *testing.T) {
	const (
		maxHistory = 64 << 10
		value      = 4 << 10
		perCheck   = 4 // writes between two checks: 16 KiB superseded
	)
	s := memoryStore(t)
	c := newCompactor(s, maxHistory, slog.New(slog.DiscardHandler))
	if c.sizer == nil {
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
