package watchcache

import (
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/storage"
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
			dropped, ok := l.trim(capacity, capacity, time.Time{}, 1<<62, 1<<62)
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
		l.trim(least, most, now.Add(-4*time.Second), 1<<62, 1<<62)
		all := l.all()
		if want := min(int(r), 5); len(all) != want || all[0].rev != r-int64(want)+1 {
			t.Fatalf("after %d: kept %d from %d, want %d", r, len(all), all[0].rev, want)
		}
	}
	// All fresh: most are kept.
	for r := int64(201); r <= 300; r++ {
		l.add(event{rev: r, at: t0.Add(500 * time.Second)})
		l.trim(least, most, t0, 1<<62, 1<<62)
	}
	if all := l.all(); len(all) != most || all[0].rev != 291 {
		t.Fatalf("all fresh: kept %d from %d, want %d from 291", len(all), all[0].rev, most)
	}
	// Quiet, then trimmed with a later cutoff: least are kept.
	dropped, ok := l.trim(least, most, t0.Add(time.Hour), 1<<62, 1<<62)
	if all := l.all(); !ok || dropped != 297 || len(all) != least || all[0].rev != 298 {
		t.Fatalf("gone stale: dropped up to %d (%v), kept %d from %d, want up to 297 and %d from 298", dropped, ok, len(all), all[0].rev, least)
	}
}

// Old events whose prior states hold more than maxBytes go even within
// least, oldest first, down to what fits; fresh ones stay whatever they
// hold, and the count of bytes follows every drop.
func TestEventLogBoundsTheBytesOfOldStates(t *testing.T) {
	const least, most, maxBytes = 100, 1000, 10_000
	t0 := time.Unix(1000, 0)
	record := func(rev int64, size int) *storage.Record {
		r, err := storage.NewRecord("/k", []byte(`{"metadata":{"name":"k"},"v":"`+strings.Repeat("x", size-len(`{"metadata":{"name":"k"},"v":""}`))+`"}`), rev)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var l eventLog
	// 50 updates of an object of 1,000 bytes, one a second, then a create.
	prior := record(1, 1000)
	for r := int64(2); r <= 51; r++ {
		cur := record(r, 1000)
		l.add(event{rev: r, cur: cur, prior: prior, at: t0.Add(time.Duration(r) * time.Second)})
		prior = cur
	}
	l.add(event{rev: 52, cur: record(52, 1000), at: t0.Add(52 * time.Second)})
	if l.priorBytes != 50_000 {
		t.Fatalf("50 prior states of 1,000 bytes: %d bytes counted", l.priorBytes)
	}
	// All fresh: nothing goes.
	if _, ok := l.trim(least, most, t0, maxBytes, 1<<62); ok || len(l.all()) != 51 {
		t.Fatalf("all fresh: dropped %v, kept %d", ok, len(l.all()))
	}
	// Those before second 45 are old: they go while the bytes pass
	// maxBytes, which leaves the last 10 updates' prior states and the
	// create, though revs 42 to 44 are old too.
	dropped, ok := l.trim(least, most, t0.Add(45*time.Second), maxBytes, 1<<62)
	if all := l.all(); !ok || dropped != 41 || len(all) != 11 || all[0].rev != 42 || l.priorBytes != 10_000 {
		t.Fatalf("old past maxBytes: dropped up to %d (%v), kept %d from %d, %d bytes; want up to 41, 11 from 42, 10000", dropped, ok, len(all), all[0].rev, l.priorBytes)
	}
	// Past a lower bound, the old ones go and the fresh ones stay.
	dropped, ok = l.trim(least, most, t0.Add(45*time.Second), 5000, 1<<62)
	if all := l.all(); !ok || dropped != 44 || len(all) != 8 || l.priorBytes != 7000 {
		t.Fatalf("bound 5000: dropped up to %d (%v), kept %d, %d bytes; want up to 44, 8 events, 7000", dropped, ok, len(all), l.priorBytes)
	}
	if _, ok := l.trim(least, most, t0.Add(45*time.Second), 5000, 1<<62); ok {
		t.Fatalf("fresh events past maxBytes were dropped: kept %d", len(l.all()))
	}
	// All old, bound 0: every update goes, and the create, which holds
	// no prior state, stays within least.
	if _, ok := l.trim(least, most, t0.Add(time.Hour), 0, 1<<62); !ok || len(l.all()) != 1 || l.all()[0].rev != 52 || l.priorBytes != 0 {
		t.Fatalf("all old, bound 0: kept %d, %d bytes; want the create alone", len(l.all()), l.priorBytes)
	}
}

// Past maxAll, even fresh events go, oldest first, down to what fits.
func TestEventLogBoundsTheBytesOfFreshStates(t *testing.T) {
	const least, most, maxOld, maxAll = 100, 1000, 2_000, 5_500
	t0 := time.Unix(1000, 0)
	var l eventLog
	prior, err := storage.NewRecord("/k", []byte(`{"metadata":{"name":"k"},"v":"`+strings.Repeat("x", 1000-len(`{"metadata":{"name":"k"},"v":""}`))+`"}`), 1)
	if err != nil {
		t.Fatal(err)
	}
	for r := int64(2); r <= 21; r++ {
		l.add(event{rev: r, cur: prior, prior: prior, at: t0})
		dropped, ok := l.trim(least, most, t0, maxOld, maxAll) // all fresh
		if want := min(r-1, 5); len(l.all()) != int(want) || l.priorBytes != want*1000 {
			t.Fatalf("after %d: kept %d events, %d bytes; want %d, %d", r, len(l.all()), l.priorBytes, want, want*1000)
		}
		if r > 6 && (!ok || dropped != r-5) {
			t.Fatalf("after %d: dropped up to %d (%v), want %d", r, dropped, ok, r-5)
		}
	}
}
