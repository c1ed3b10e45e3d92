package kvtest

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

func runCompaction(t *testing.T, newStore NewStore) {
	t.Run("keeps each key's latest version and refuses older reads", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		put(t, s, "/c/a", "1") // +1
		put(t, s, "/c/a", "2") // +2
		put(t, s, "/c/b", "1") // +3
		del(t, s, "/c/b")      // +4
		put(t, s, "/c/a", "3") // +5
		if err := s.Compact(bg, b+4); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Range(bg, "/c/a", kv.RangeOptions{Revision: b + 3}); !isErr(err, kv.ErrCompacted) {
			t.Fatalf("read below the compaction point: %v, want ErrCompacted", err)
		}
		checkKV(t, "a at the compaction point", get(t, s, "/c/a", b+4), b, &want{"/c/a", "2", 1, 2, 2})
		checkKV(t, "b at the compaction point", get(t, s, "/c/b", b+4), b, nil)
		checkKV(t, "a now", get(t, s, "/c/a", 0), b, &want{"/c/a", "3", 1, 5, 3})
		if err := s.Compact(bg, b+4); !isErr(err, kv.ErrCompacted) {
			t.Fatalf("compacting again at the same revision: %v, want ErrCompacted", err)
		}
		if err := s.Compact(bg, b+3); !isErr(err, kv.ErrCompacted) {
			t.Fatalf("compacting below the point: %v, want ErrCompacted", err)
		}
		if err := s.Compact(bg, b+100); !isErr(err, kv.ErrFutureRevision) {
			t.Fatalf("compacting in the future: %v, want ErrFutureRevision", err)
		}
		if err := s.Compact(bg, b+5); err != nil {
			t.Fatalf("compacting to the current revision: %v", err)
		}
		checkKV(t, "a after compacting to now", get(t, s, "/c/a", 0), b, &want{"/c/a", "3", 1, 5, 3})
		r := put(t, s, "/c/b", "again")
		checkKV(t, "b re-created after compaction", r.KV, b, &want{"/c/b", "again", 6, 6, 1})
	})
}
