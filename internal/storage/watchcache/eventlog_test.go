package watchcache

import (
	"testing"
	"time"
)

// Without fresh events to keep, the history keeps exactly the last
// capacity events and reports each dropped revision in order, however
// many events go through it.
func TestEventLogKeepsTheLastEvents(t *testing.T) {
	for _, capacity := range []int{1, 2, 7, 64} {
		var l eventLog
		next := int64(1) // the next revision expected to be dropped
		for rev := int64(1); rev <= 1000; rev++ {
			l.add(event{rev: rev})
			dropped, ok := l.trim(capacity, capacity, time.Time{})
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
		if cap(l.events) > 4*capacity+16 {
			t.Fatalf("capacity %d: the log grew to %d slots", capacity, cap(l.events))
		}
	}
}

// Beyond least, the history keeps the events at or after the cutoff, up
// to most in all.
func TestEventLogKeepsFreshEventsUpToMost(t *testing.T) {
	const least, most = 3, 10
	t0 := time.Unix(1000, 0)
	var l eventLog
	// Event r arrives at t0 + r seconds; the cutoff trails the newest by
	// 4 seconds, so 5 events are fresh (least < 5 < most).
	for r := int64(1); r <= 200; r++ {
		now := t0.Add(time.Duration(r) * time.Second)
		l.add(event{rev: r, at: now})
		l.trim(least, most, now.Add(-4*time.Second))
		all := l.all()
		if want := min(int(r), 5); len(all) != want || all[0].rev != r-int64(want)+1 {
			t.Fatalf("after %d: kept %d from %d, want %d", r, len(all), all[0].rev, want)
		}
	}
	// All fresh: most are kept.
	for r := int64(201); r <= 300; r++ {
		l.add(event{rev: r, at: t0.Add(500 * time.Second)})
		l.trim(least, most, t0)
	}
	if all := l.all(); len(all) != most || all[0].rev != 291 {
		t.Fatalf("all fresh: kept %d from %d, want %d from 291", len(all), all[0].rev, most)
	}
	// Quiet, then trimmed with a later cutoff: least are kept.
	dropped, ok := l.trim(least, most, t0.Add(time.Hour))
	if all := l.all(); !ok || dropped != 297 || len(all) != least || all[0].rev != 298 {
		t.Fatalf("gone stale: dropped up to %d (%v), kept %d from %d, want up to 297 and %d from 298", dropped, ok, len(all), all[0].rev, least)
	}
}
