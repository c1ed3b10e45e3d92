package kvtest

import (
	"fmt"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

func runRanges(t *testing.T, newStore NewStore) {
	t.Run("prefix, limit, count and past revisions", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		for i := 0; i < 5; i++ {
			create(t, s, fmt.Sprintf("/p/%d", i), fmt.Sprint(i))
		}
		create(t, s, "/q", "outside")
		create(t, s, "/p", "the prefix itself without slash")
		end := kv.PrefixEnd("/p/")
		r, err := s.Range(bg, "/p/", kv.RangeOptions{End: end})
		if err != nil || r.Count != 5 || len(r.KVs) != 5 || r.More || r.Revision != b+7 {
			t.Fatalf("prefix range = %+v, %v", r, err)
		}
		for i, e := range r.KVs {
			checkKV(t, "prefix range", &e, b, &want{fmt.Sprintf("/p/%d", i), fmt.Sprint(i), int64(i + 1), int64(i + 1), 1})
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, Limit: 2})
		if err != nil || r.Count != 5 || len(r.KVs) != 2 || !r.More || r.KVs[1].Key != "/p/1" {
			t.Fatalf("limited range = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, Limit: 2, NoCount: true})
		if err != nil || r.Count != 0 || len(r.KVs) != 2 || !r.More || r.KVs[1].Key != "/p/1" {
			t.Fatalf("limited range without the count = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, Limit: 5, NoCount: true})
		if err != nil || r.Count != 0 || len(r.KVs) != 5 || r.More {
			t.Fatalf("range without the count, limit reaching its end = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/2", kv.RangeOptions{End: end})
		if err != nil || r.Count != 3 || r.KVs[0].Key != "/p/2" {
			t.Fatalf("range from a key inside the prefix = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, CountOnly: true})
		if err != nil || r.Count != 5 || len(r.KVs) != 0 {
			t.Fatalf("count-only range = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, Revision: b + 3})
		if err != nil || r.Count != 3 || r.Revision != b+3 {
			t.Fatalf("range at base+3 = %+v, %v", r, err)
		}
		del(t, s, "/p/0")
		put(t, s, "/p/1", "changed")
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end, Revision: b + 7})
		if err != nil || r.Count != 5 || string(r.KVs[1].Value) != "1" {
			t.Fatalf("range at base+7 after later writes = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/p/", kv.RangeOptions{End: end})
		if err != nil || r.Count != 4 || string(r.KVs[0].Value) != "changed" || r.Revision != b+9 {
			t.Fatalf("current range = %+v, %v", r, err)
		}
		r, err = s.Range(bg, "/nothing/", kv.RangeOptions{End: kv.PrefixEnd("/nothing/")})
		if err != nil || r.Count != 0 || len(r.KVs) != 0 || r.Revision != b+9 {
			t.Fatalf("empty range = %+v, %v", r, err)
		}
	})

	t.Run("future revisions are refused", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		if _, err := s.Range(bg, "/x", kv.RangeOptions{Revision: b + 1000}); !isErr(err, kv.ErrFutureRevision) {
			t.Fatalf("range in the future: %v, want ErrFutureRevision", err)
		}
	})
}
