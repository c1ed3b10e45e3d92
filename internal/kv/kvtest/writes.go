package kvtest

import (
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

func runWrites(t *testing.T, newStore NewStore) {
	t.Run("seed 002 sequence gives etcd's four numbers", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		// put k1 v1; put k2 v2
		if r := put(t, s, "/k1", "v1"); r.Revision != b+1 {
			t.Fatalf("put k1 at %d, want base+1", r.Revision-b)
		}
		if r := put(t, s, "/k2", "v2"); r.Revision != b+2 {
			t.Fatalf("put k2 at %d, want base+2", r.Revision-b)
		}
		// get k1, k2
		checkKV(t, "get k1", get(t, s, "/k1", 0), b, &want{"/k1", "v1", 1, 1, 1})
		checkKV(t, "get k2", get(t, s, "/k2", 0), b, &want{"/k2", "v2", 2, 2, 1})
		if rev := base(t, s); rev != b+2 {
			t.Fatalf("header revision base+%d, want base+2", rev-b)
		}
		// put k1 nv1
		r := put(t, s, "/k1", "nv1")
		checkKV(t, "put k1 nv1 answer", r.KV, b, &want{"/k1", "nv1", 1, 3, 2})
		checkKV(t, "put k1 nv1 previous", r.Prev, b, &want{"/k1", "v1", 1, 1, 1})
		checkKV(t, "get k1", get(t, s, "/k1", 0), b, &want{"/k1", "nv1", 1, 3, 2})
		checkKV(t, "get k2", get(t, s, "/k2", 0), b, &want{"/k2", "v2", 2, 2, 1})
		// del k1
		r = del(t, s, "/k1")
		if r.Revision != b+4 {
			t.Fatalf("del k1 at base+%d, want base+4", r.Revision-b)
		}
		checkKV(t, "del k1 previous", r.Prev, b, &want{"/k1", "nv1", 1, 3, 2})
		checkKV(t, "get k1 after delete", get(t, s, "/k1", 0), b, nil)
		// get k1 --rev=<first put>
		checkKV(t, "get k1 at its first revision", get(t, s, "/k1", b+1), b, &want{"/k1", "v1", 1, 1, 1})
		checkKV(t, "get k1 at base+3", get(t, s, "/k1", b+3), b, &want{"/k1", "nv1", 1, 3, 2})
		// put k1 dnv1: a new generation
		r = put(t, s, "/k1", "dnv1")
		checkKV(t, "put k1 again", r.KV, b, &want{"/k1", "dnv1", 5, 5, 1})
		if r.Prev != nil {
			t.Fatalf("re-create answered a previous value %s", show(r.Prev, b))
		}
		checkKV(t, "get k1 new generation", get(t, s, "/k1", 0), b, &want{"/k1", "dnv1", 5, 5, 1})
	})

	t.Run("lost compares answer the current value and write nothing", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		create(t, s, "/a", "1")
		r, err := s.Create(bg, "/a", []byte("2"))
		if err != nil || r.Succeeded || r.Revision != b+1 || r.KV != nil {
			t.Fatalf("Create on an existing key = %+v, %v; want a lost compare at base+1", r, err)
		}
		checkKV(t, "lost create's current value", r.Prev, b, &want{"/a", "1", 1, 1, 1})
		for _, stale := range []int64{0, b, b + 2, -1} {
			r, err := s.Update(bg, "/a", []byte("x"), stale)
			if err != nil || r.Succeeded || r.Revision != b+1 {
				t.Fatalf("Update with revision %d = %+v, %v; want a lost compare", stale, r, err)
			}
			checkKV(t, "lost update's current value", r.Prev, b, &want{"/a", "1", 1, 1, 1})
			r, err = s.Delete(bg, "/a", stale)
			if err != nil || r.Succeeded || r.Revision != b+1 {
				t.Fatalf("Delete with revision %d = %+v, %v; want a lost compare", stale, r, err)
			}
			checkKV(t, "lost delete's current value", r.Prev, b, &want{"/a", "1", 1, 1, 1})
		}
		for _, rev := range []int64{0, b + 1} {
			r, err := s.Update(bg, "/absent", []byte("x"), rev)
			if err != nil || r.Succeeded || r.Prev != nil {
				t.Fatalf("Update of an absent key with revision %d = %+v, %v", rev, r, err)
			}
			r, err = s.Delete(bg, "/absent", rev)
			if err != nil || r.Succeeded || r.Prev != nil {
				t.Fatalf("Delete of an absent key with revision %d = %+v, %v", rev, r, err)
			}
		}
		if rev := base(t, s); rev != b+1 {
			t.Fatalf("lost compares moved the revision to base+%d", rev-b)
		}
		checkKV(t, "key after lost compares", get(t, s, "/a", 0), b, &want{"/a", "1", 1, 1, 1})
		checkKV(t, "absent key", get(t, s, "/absent", 0), b, nil)
	})

	t.Run("each successful write bumps the revision by one and answers it", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		r := create(t, s, "/w", "1")
		if r.Revision != b+1 || r.Prev != nil {
			t.Fatalf("create = %+v", r)
		}
		checkKV(t, "create answer", r.KV, b, &want{"/w", "1", 1, 1, 1})
		r, err := s.Update(bg, "/w", []byte("2"), b+1)
		if err != nil || !r.Succeeded || r.Revision != b+2 {
			t.Fatalf("update = %+v, %v", r, err)
		}
		checkKV(t, "update answer", r.KV, b, &want{"/w", "2", 1, 2, 2})
		checkKV(t, "update previous", r.Prev, b, &want{"/w", "1", 1, 1, 1})
		r, err = s.Delete(bg, "/w", b+2)
		if err != nil || !r.Succeeded || r.Revision != b+3 || r.KV != nil {
			t.Fatalf("delete = %+v, %v", r, err)
		}
		checkKV(t, "delete previous", r.Prev, b, &want{"/w", "2", 1, 2, 2})
		r = create(t, s, "/w", "")
		checkKV(t, "re-create with an empty value", r.KV, b, &want{"/w", "", 4, 4, 1})
	})

	t.Run("limits refuse bad keys and values and write nothing", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		if _, err := s.Create(bg, "", []byte("x")); !isErr(err, kv.ErrEmptyKey) {
			t.Fatalf("empty key: %v, want ErrEmptyKey", err)
		}
		if _, err := s.Range(bg, "", kv.RangeOptions{}); !isErr(err, kv.ErrEmptyKey) {
			t.Fatalf("range of an empty key: %v, want ErrEmptyKey", err)
		}
		long := "/" + strings.Repeat("k", kv.MaxKeySize)
		if _, err := s.Create(bg, long, []byte("x")); !isErr(err, kv.ErrKeyTooLarge) {
			t.Fatalf("oversized key: %v, want ErrKeyTooLarge", err)
		}
		big := make([]byte, kv.DefaultMaxValueSize+1)
		if _, err := s.Create(bg, "/big", big); !isErr(err, kv.ErrValueTooLarge) {
			t.Fatalf("oversized value: %v, want ErrValueTooLarge", err)
		}
		if rev := base(t, s); rev != b {
			t.Fatalf("refused writes moved the revision to base+%d", rev-b)
		}
		checkKV(t, "refused key", get(t, s, "/big", 0), b, nil)
		r := create(t, s, "/big", string(big[:kv.DefaultMaxValueSize]))
		if got := get(t, s, "/big", 0); got == nil || len(got.Value) != kv.DefaultMaxValueSize {
			t.Fatalf("a value at the limit was not stored: %+v", r)
		}
		if _, err := s.Update(bg, "/big", big, r.Revision); !isErr(err, kv.ErrValueTooLarge) {
			t.Fatalf("oversized update: %v, want ErrValueTooLarge", err)
		}
	})
}
