package watchcache

import "testing"

// The history keeps exactly the last capacity events and reports each
// dropped revision in order, however many events go through it.
func TestEventLogKeepsTheLastEvents(t *testing.T) {
	for _, capacity := range []int{1, 2, 7, 64} {
		var l eventLog
		next := int64(1) // the next revision expected to be dropped
		for rev := int64(1); rev <= 1000; rev++ {
			dropped, ok := l.add(event{rev: rev}, capacity)
			if ok != (rev > int64(capacity)) {
				t.Fatalf("capacity %d, rev %d: dropped=%v", capacity, rev, ok)
			}
			if ok {
				if dropped != next {
					t.Fatalf("capacity %d: dropped %d, want %d", capacity, dropped, next)
				}
				next++
			}
			all := l.all()
			if want := min(int(rev), capacity); len(all) != want || all[len(all)-1].rev != rev || all[0].rev != rev-int64(want)+1 {
				t.Fatalf("capacity %d, rev %d: history %d events from %d to %d", capacity, rev, len(all), all[0].rev, all[len(all)-1].rev)
			}
		}
		if cap(l.events) > 4*capacity+8 {
			t.Fatalf("capacity %d: the log grew to %d slots", capacity, cap(l.events))
		}
	}
}
