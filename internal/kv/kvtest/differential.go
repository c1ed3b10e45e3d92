package kvtest

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Differential drives two stores with the same seeded random sequence of
// operations and fails at the first answer or watch event that differs:
// types, keys, values, the four numbers (relative to each store's base
// revision), previous values and error sentinels.
//
// Operations: creates, updates and deletes with right, stale and zero
// revisions; ranges of keys and prefixes at current, past, compacted and
// future revisions with limits and count-only; compactions; and watches
// opened from now, from history, below the compaction point and in the
// future, compared event by event. The one case where engines may
// legitimately differ, a watch starting exactly at the compaction
// revision, is not generated (the conformance suite covers it).
func Differential(t testing.TB, a, b NewStore, seed int64, steps int) {
	d := &diff{t: t, rnd: rand.New(rand.NewSource(seed))}
	d.pair[0].s, d.pair[1].s = a(t), b(t)
	for i := range d.pair {
		d.pair[i].base = base(t, d.pair[i].s)
	}
	for d.step = 1; d.step <= steps; d.step++ {
		d.once()
	}
	d.drainWatches()
	t.Logf("seed %d: %d steps, %d writes, %d watches compared", seed, steps, d.rev, len(d.watches))
}

type side struct {
	s    kv.Store
	base int64
}

type diff struct {
	t       testing.TB
	rnd     *rand.Rand
	pair    [2]side
	step    int
	rev     int64 // relative current revision
	compact int64 // relative compaction point, 0 if none
	watches []*watchPair
}

type watchPair struct {
	desc   string
	w      [2]kv.Watcher
	events [2][]string
	err    [2]string
	done   [2]bool
}

var diffKeys = []string{"/d/a/0", "/d/a/1", "/d/a/2", "/d/a/3", "/d/b/0", "/d/b/1", "/d/b/2", "/d/b/3"}

func (d *diff) fail(format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("step %d: %s", d.step, fmt.Sprintf(format, args...))
}

// rel renders a key-value with revisions relative to base.
func rel(e *kv.KeyValue, base int64) string {
	if e == nil {
		return "nil"
	}
	r := func(v int64) int64 {
		if v == 0 {
			return 0
		}
		return v - base
	}
	return fmt.Sprintf("%s=%q(c%d,m%d,v%d)", e.Key, e.Value, r(e.CreateRevision), r(e.ModRevision), e.Version)
}

// errName reduces an error to the sentinel it wraps, for comparison.
func errName(err error) string {
	for _, s := range []error{kv.ErrCompacted, kv.ErrFutureRevision, kv.ErrClosed, kv.ErrEmptyKey,
		kv.ErrKeyTooLarge, kv.ErrValueTooLarge, kv.ErrUnavailable} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err == nil {
		return "ok"
	}
	return "other: " + err.Error()
}

// both runs op on each store and fails if the rendered answers differ.
func (d *diff) both(what string, op func(s side) string) string {
	d.t.Helper()
	x, y := op(d.pair[0]), op(d.pair[1])
	if x != y {
		d.fail("%s differs:\n a: %s\n b: %s", what, x, y)
	}
	return x
}

func (d *diff) current(s side, key string) int64 {
	r, err := s.s.Range(bg, key, kv.RangeOptions{})
	if err != nil {
		d.fail("Range(%s): %v", key, err)
	}
	if len(r.KVs) == 0 {
		return 0
	}
	return r.KVs[0].ModRevision
}

func (d *diff) once() {
	key := diffKeys[d.rnd.Intn(len(diffKeys))]
	value := fmt.Sprintf("v%d-%s", d.step, strings.Repeat("x", d.rnd.Intn(20)))
	switch p := d.rnd.Intn(100); {
	case p < 20:
		d.write(fmt.Sprintf("Create(%s)", key), func(s side) (kv.WriteResponse, error) {
			return s.s.Create(bg, key, []byte(value))
		})
	case p < 45, p < 60:
		isDelete := p >= 45
		mode := d.rnd.Intn(4) // 0,1: right revision; 2: stale; 3: zero
		what := fmt.Sprintf("Update(%s, mode %d)", key, mode)
		if isDelete {
			what = fmt.Sprintf("Delete(%s, mode %d)", key, mode)
		}
		d.write(what, func(s side) (kv.WriteResponse, error) {
			rev := d.current(s, key)
			switch mode {
			case 2:
				if rev > 0 {
					rev--
				}
			case 3:
				rev = 0
			}
			if isDelete {
				return s.s.Delete(bg, key, rev)
			}
			return s.s.Update(bg, key, []byte(value), rev)
		})
	case p < 80:
		d.rangeOp(key)
	case p < 85:
		if d.rev > d.compact+1 {
			target := d.compact + 1 + d.rnd.Int63n(d.rev-d.compact)
			d.drainWatches() // no watcher may lag behind the new point
			d.both(fmt.Sprintf("Compact(+%d)", target), func(s side) string {
				return errName(s.s.Compact(bg, s.base+target))
			})
			d.compact = target
		}
	case p < 95:
		d.openWatch(key)
	default:
		// Compaction errors: below and at the point, and in the future.
		target := d.compact - d.rnd.Int63n(2)
		if d.rnd.Intn(2) == 0 {
			target = d.rev + 1 + d.rnd.Int63n(3)
		}
		if target > 0 {
			d.both(fmt.Sprintf("Compact(+%d) expected to fail", target), func(s side) string {
				return errName(s.s.Compact(bg, s.base+target))
			})
		}
	}
}

func (d *diff) write(what string, op func(s side) (kv.WriteResponse, error)) {
	succeeded := false
	d.both(what, func(s side) string {
		r, err := op(s)
		if err != nil {
			return errName(err)
		}
		succeeded = r.Succeeded
		return fmt.Sprintf("ok=%v rev=%d kv=%s prev=%s", r.Succeeded, r.Revision-s.base, rel(r.KV, s.base), rel(r.Prev, s.base))
	})
	if succeeded {
		d.rev++
	}
}

func (d *diff) rangeOp(key string) {
	opts := kv.RangeOptions{}
	prefix := ""
	if d.rnd.Intn(2) == 0 {
		prefix = key[:len("/d/a/")]
		if d.rnd.Intn(3) == 0 {
			prefix = "/d/"
		}
	}
	var relRev int64
	switch d.rnd.Intn(4) {
	case 0:
		relRev = d.rnd.Int63n(d.rev + 1) // past, possibly compacted
	case 1:
		relRev = d.rev + 1 + d.rnd.Int63n(2) // future
	}
	opts.Limit = int64(d.rnd.Intn(4))
	opts.CountOnly = d.rnd.Intn(5) == 0
	what := fmt.Sprintf("Range(%s prefix=%q rev=+%d limit=%d count-only=%v)", key, prefix, relRev, opts.Limit, opts.CountOnly)
	d.both(what, func(s side) string {
		o := opts
		k := key
		if prefix != "" {
			k, o.End = prefix, kv.PrefixEnd(prefix)
		}
		if relRev > 0 {
			o.Revision = s.base + relRev
		}
		r, err := s.s.Range(bg, k, o)
		if err != nil {
			return errName(err)
		}
		var kvs []string
		for i := range r.KVs {
			kvs = append(kvs, rel(&r.KVs[i], s.base))
		}
		return fmt.Sprintf("rev=%d count=%d more=%v kvs=%v", r.Revision-s.base, r.Count, r.More, kvs)
	})
}

func (d *diff) openWatch(key string) {
	prefix := d.rnd.Intn(2) == 0
	var relRev int64
	switch d.rnd.Intn(4) {
	case 0: // from history, above the compaction point
		relRev = d.compact + 1 + d.rnd.Int63n(d.rev-d.compact+1)
	case 1: // below the compaction point
		if d.compact > 1 {
			relRev = 1 + d.rnd.Int63n(d.compact-1)
		}
	case 2: // in the future
		relRev = d.rev + 1 + d.rnd.Int63n(3)
	}
	wp := &watchPair{desc: fmt.Sprintf("watch #%d (%s prefix=%v from +%d, opened at step %d)", len(d.watches), key, prefix, relRev, d.step)}
	for i, s := range d.pair {
		k, opts := key, kv.WatchOptions{}
		if prefix {
			k = key[:len("/d/a/")]
			opts.End = kv.PrefixEnd(k)
		}
		if relRev > 0 {
			opts.Revision = s.base + relRev
		}
		w, err := s.s.Watch(bg, k, opts)
		if err != nil {
			d.fail("%s: %v", wp.desc, err)
		}
		d.t.Cleanup(w.Close)
		wp.w[i] = w
	}
	d.watches = append(d.watches, wp)
}

// drainWatches reads every open watch up to the current revision, using
// progress requests to know when a watch has delivered everything, and
// compares what the two stores' watches delivered.
func (d *diff) drainWatches() {
	for _, wp := range d.watches {
		for i, s := range d.pair {
			d.drain(wp, i, s)
		}
		if fmt.Sprint(wp.events[0]) != fmt.Sprint(wp.events[1]) || wp.err[0] != wp.err[1] {
			d.fail("%s differs:\n a: %v err=%s\n b: %v err=%s", wp.desc, wp.events[0], wp.err[0], wp.events[1], wp.err[1])
		}
	}
}

func (d *diff) drain(wp *watchPair, i int, s side) {
	if wp.done[i] {
		return
	}
	target := s.base + d.rev
	asked := false
	for {
		if !asked {
			if err := wp.w[i].RequestProgress(bg); err != nil {
				d.fail("%s: RequestProgress: %v", wp.desc, err)
			}
			asked = true
		}
		var r kv.WatchResponse
		var ok bool
		select {
		case r, ok = <-wp.w[i].Responses():
		case <-time.After(wait):
			d.fail("%s: store %d: nothing within %v while waiting for revision +%d (events so far %v)", wp.desc, i, wait, d.rev, wp.events[i])
		}
		if !ok {
			d.fail("%s: channel closed without an error", wp.desc)
		}
		if r.Err != nil {
			wp.err[i], wp.done[i] = errName(r.Err), true
			return
		}
		for _, ev := range r.Events {
			if ev.PrevKV == nil && !ev.IsCreate() {
				d.fail("%s: event without its previous value: %s", wp.desc, rel(&ev.KV, s.base))
			}
			wp.events[i] = append(wp.events[i], fmt.Sprintf("%s %s prev=%s", ev.Type, rel(&ev.KV, s.base), rel(ev.PrevKV, s.base)))
		}
		if r.Progress {
			if r.Revision >= target {
				return
			}
			asked = false
		}
	}
}
