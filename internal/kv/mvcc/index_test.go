package mvcc

import (
	"fmt"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

// exampleKey builds the key of keyIndex's worked example: put @2, put @4,
// delete @5, put @7.
func exampleKey() *keyIndex {
	ki := &keyIndex{key: "k"}
	var cur *kv.KeyValue
	for _, w := range []struct {
		rev int64
		del bool
	}{{2, false}, {4, false}, {5, true}, {7, false}} {
		ki.entries = append(ki.entries, newVersion("k", cur, w.rev, []byte(fmt.Sprint("v", w.rev)), w.del))
		cur = ki.live()
	}
	return ki
}

func mods(ki *keyIndex) []int64 {
	var out []int64
	for _, e := range ki.entries {
		out = append(out, e.ModRevision)
	}
	return out
}

func TestKeyIndexVersions(t *testing.T) {
	ki := exampleKey()
	want := []struct{ rev, create, version int64 }{{2, 2, 1}, {4, 2, 2}, {5, 0, 0}, {7, 7, 1}}
	for i, w := range want {
		e := ki.entries[i]
		if e.ModRevision != w.rev || e.CreateRevision != w.create || e.Version != w.version {
			t.Errorf("entry %d = %+v, want mod %d create %d version %d", i, e, w.rev, w.create, w.version)
		}
	}
	for rev, want := range map[int64]int64{1: 0, 2: 2, 3: 2, 4: 4, 5: 0, 6: 0, 7: 7, 100: 7} {
		got := ki.at(rev)
		if (got == nil) != (want == 0) || (got != nil && got.ModRevision != want) {
			t.Errorf("at(%d) = %+v, want mod revision %d (0 = absent)", rev, got, want)
		}
	}
}

func TestKeyIndexCompact(t *testing.T) {
	for _, c := range []struct {
		name  string
		rev   int64
		want  []int64
		freed int // the bytes of the values dropped
	}{
		{"below every entry keeps all", 1, []int64{2, 4, 5, 7}, 0},
		{"at the first entry keeps all", 2, []int64{2, 4, 5, 7}, 0},
		{"between puts keeps the latest at or below", 3, []int64{2, 4, 5, 7}, 0},
		{"at a put keeps it and the version before it", 4, []int64{2, 4, 5, 7}, 0},
		{"at a delete keeps the tombstone and the deleted version", 5, []int64{4, 5, 7}, len("v2")},
		{"past a delete drops the tombstone", 6, []int64{7}, len("v2") + len("v4")},
		{"at the newest keeps it alone", 7, []int64{7}, len("v2") + len("v4")},
	} {
		t.Run(c.name, func(t *testing.T) {
			ki := exampleKey()
			if freed, empty := ki.compact(c.rev); empty || freed != int64(c.freed) {
				t.Fatalf("compact(%d) = freed %d, empty %v; want %d, false", c.rev, freed, empty, c.freed)
			}
			if got := fmt.Sprint(mods(ki)); got != fmt.Sprint(c.want) {
				t.Fatalf("compact(%d) left %s, want %v", c.rev, got, c.want)
			}
			// Every read at or above the compaction point is unchanged.
			ref := exampleKey()
			for rev := c.rev; rev <= 8; rev++ {
				if a, b := ki.at(rev), ref.at(rev); fmt.Sprint(a) != fmt.Sprint(b) {
					t.Errorf("after compact(%d), at(%d) = %v, want %v", c.rev, rev, a, b)
				}
			}
		})
	}
	t.Run("a key deleted below the point is removed", func(t *testing.T) {
		ki := exampleKey()
		ki.entries = ki.entries[:3] // put 2, put 4, delete 5
		if freed, empty := ki.compact(6); !empty || freed != int64(len("v2")+len("v4")) {
			t.Fatalf("compact(6) = freed %d, empty %v, left %v; want both values freed and nothing left", freed, empty, mods(ki))
		}
	})
}

func TestKeyIndexEventCarriesPrevious(t *testing.T) {
	ki := exampleKey()
	ki.compact(5)
	ev := ki.event(5)
	if ev.Type != kv.Delete || ev.PrevKV == nil || ev.PrevKV.ModRevision != 4 || string(ev.PrevKV.Value) != "v4" {
		t.Fatalf("event(5) after compact(5) = %+v, want DELETE with the version at 4", ev)
	}
	if ev := ki.event(7); !ev.IsCreate() || ev.PrevKV != nil {
		t.Fatalf("event(7) = %+v, want a create without previous value", ev)
	}
}
