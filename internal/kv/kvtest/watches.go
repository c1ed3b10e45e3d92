package kvtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

func runWatches(t *testing.T, newStore NewStore) {
	t.Run("from now delivers later writes in order with previous values", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		create(t, s, "/w/before", "x")
		w := watch(t, s, "/w/", kv.WatchOptions{End: kv.PrefixEnd("/w/")})
		create(t, s, "/w/a", "1")
		put(t, s, "/w/a", "2")
		create(t, s, "/other", "not watched")
		del(t, s, "/w/a")
		evs := events(t, w, 3)
		checkEvent(t, evs[0], kv.Put, b, &want{"/w/a", "1", 2, 2, 1}, nil)
		checkEvent(t, evs[1], kv.Put, b, &want{"/w/a", "2", 2, 3, 2}, &want{"/w/a", "1", 2, 2, 1})
		if evs[2].Type != kv.Delete || evs[2].KV.Key != "/w/a" || evs[2].KV.ModRevision != b+5 {
			t.Fatalf("delete event = %+v", evs[2])
		}
		checkKV(t, "delete's previous value", evs[2].PrevKV, b, &want{"/w/a", "2", 2, 3, 2})
	})

	t.Run("a key watch sees only its key", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		w := watch(t, s, "/k", kv.WatchOptions{Revision: b + 1})
		create(t, s, "/k2", "no")
		create(t, s, "/k", "yes")
		evs := events(t, w, 1)
		checkEvent(t, evs[0], kv.Put, b, &want{"/k", "yes", 2, 2, 1}, nil)
	})

	t.Run("from an old revision catches up from history then follows", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		for i := 0; i < 20; i++ {
			put(t, s, fmt.Sprintf("/h/%d", i%3), fmt.Sprint(i))
		}
		w := watch(t, s, "/h/", kv.WatchOptions{End: kv.PrefixEnd("/h/"), Revision: b + 5})
		for i := 20; i < 30; i++ {
			put(t, s, fmt.Sprintf("/h/%d", i%3), fmt.Sprint(i))
		}
		evs := events(t, w, 26)
		for i, ev := range evs {
			if ev.KV.ModRevision != b+5+int64(i) || string(ev.KV.Value) != fmt.Sprint(i+4) {
				t.Fatalf("event %d = %s, want revision base+%d value %d", i, show(&ev.KV, b), 5+i, i+4)
			}
			if ev.PrevKV == nil && !ev.IsCreate() {
				t.Fatalf("event %d has no previous value", i)
			}
		}
	})

	t.Run("a compacted start revision ends the watch with ErrCompacted", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		for i := 0; i < 5; i++ {
			put(t, s, "/cw", fmt.Sprint(i))
		}
		if err := s.Compact(bg, b+4); err != nil {
			t.Fatal(err)
		}
		w := watch(t, s, "/cw", kv.WatchOptions{Revision: b + 2})
		evs, err := final(t, w)
		if !isErr(err, kv.ErrCompacted) || len(evs) != 0 {
			t.Fatalf("watch below the compaction point: %d events, %v; want ErrCompacted and none", len(evs), err)
		}
	})

	t.Run("a watch exactly at the compaction revision delivers it with its previous value or ends", func(t *testing.T) {
		for _, delAtPoint := range []bool{false, true} {
			t.Run(fmt.Sprintf("delete at the point %v", delAtPoint), func(t *testing.T) {
				s := newStore(t)
				b := base(t, s)
				put(t, s, "/x", "1") // +1
				put(t, s, "/x", "2") // +2
				point := put(t, s, "/x", "3").Revision
				if delAtPoint {
					point = del(t, s, "/x").Revision
				}
				put(t, s, "/x", "after")
				if err := s.Compact(bg, point); err != nil {
					t.Fatal(err)
				}
				w := watch(t, s, "/x", kv.WatchOptions{Revision: point})
				r, ok := next(t, w)
				if !ok {
					t.Fatal("watch closed without an answer")
				}
				if r.Err != nil {
					if !isErr(r.Err, kv.ErrCompacted) {
						t.Fatalf("watch at the compaction point ended with %v, want ErrCompacted", r.Err)
					}
					return
				}
				ev := r.Events[0]
				if ev.KV.ModRevision != point || ev.PrevKV == nil {
					t.Fatalf("first event %s prev %s, want the write at the point with its previous value",
						show(&ev.KV, b), show(ev.PrevKV, b))
				}
				if delAtPoint && ev.Type != kv.Delete {
					t.Fatalf("first event type %v, want DELETE", ev.Type)
				}
			})
		}
	})

	t.Run("a future start revision waits for it", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		w := watch(t, s, "/f/", kv.WatchOptions{End: kv.PrefixEnd("/f/"), Revision: b + 3})
		create(t, s, "/f/1", "early")
		create(t, s, "/f/2", "early")
		create(t, s, "/f/3", "first")
		create(t, s, "/f/4", "second")
		evs := events(t, w, 2)
		if evs[0].KV.ModRevision != b+3 || evs[1].KV.ModRevision != b+4 {
			t.Fatalf("future watch delivered %s, %s; want base+3, base+4", show(&evs[0].KV, b), show(&evs[1].KV, b))
		}
	})

	t.Run("seed 003: compaction between a delete and its delivery never loses the previous value", func(t *testing.T) {
		s := newStore(t)
		put(t, s, "/s3", "value")
		w := watch(t, s, "/s3", kv.WatchOptions{})
		d := del(t, s, "/s3")
		put(t, s, "/s3-other", "moves the revision on")
		cur := base(t, s)
		if err := s.Compact(bg, cur); err != nil {
			t.Fatal(err)
		}
		evs, err := final2(t, w, 1)
		if err != nil {
			if !isErr(err, kv.ErrCompacted) {
				t.Fatalf("watch ended with %v, want the DELETE or ErrCompacted", err)
			}
			return
		}
		if evs[0].Type != kv.Delete || evs[0].KV.ModRevision != d.Revision || evs[0].PrevKV == nil ||
			string(evs[0].PrevKV.Value) != "value" {
			t.Fatalf("delete event %+v: want the DELETE with its previous value", evs[0])
		}
	})

	t.Run("progress never runs ahead of an undelivered event", func(t *testing.T) {
		s := newStore(t)
		w := watch(t, s, "/pr", kv.WatchOptions{})
		r := create(t, s, "/pr", "x")
		if err := w.RequestProgress(bg); err != nil {
			t.Fatal(err)
		}
		sawEvent := false
		for {
			resp, ok := next(t, w)
			if !ok || resp.Err != nil {
				t.Fatalf("watch ended: %v", resp.Err)
			}
			if len(resp.Events) > 0 {
				sawEvent = true
				continue
			}
			if resp.Progress && resp.Revision >= r.Revision {
				if !sawEvent {
					t.Fatalf("progress at %d arrived before the event at %d", resp.Revision, r.Revision)
				}
				return
			}
			if resp.Progress {
				// An earlier progress report is allowed; ask again.
				if err := w.RequestProgress(bg); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	t.Run("an idle watch learns the current revision from progress", func(t *testing.T) {
		s := newStore(t)
		create(t, s, "/idle-other", "x")
		w := watch(t, s, "/idle", kv.WatchOptions{})
		cur := base(t, s)
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			if err := w.RequestProgress(bg); err != nil {
				t.Fatal(err)
			}
			resp, ok := next(t, w)
			if !ok || resp.Err != nil || len(resp.Events) > 0 {
				t.Fatalf("unexpected response %+v", resp)
			}
			if resp.Progress && resp.Revision >= cur {
				return
			}
		}
		t.Fatalf("no progress response reached revision %d", cur)
	})

	t.Run("a watcher that does not read blocks no writer and misses nothing", func(t *testing.T) {
		s := newStore(t)
		b := base(t, s)
		w := watch(t, s, "/slow/", kv.WatchOptions{End: kv.PrefixEnd("/slow/")})
		const n = 3000
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < n; i++ {
				if r, err := s.Create(bg, fmt.Sprintf("/slow/%05d", i), []byte("v")); err != nil || !r.Succeeded {
					t.Errorf("create %d: %+v, %v", i, r, err)
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("writers blocked behind a watcher that does not read")
		}
		evs := events(t, w, n)
		for i, ev := range evs {
			if ev.KV.ModRevision != b+1+int64(i) || ev.KV.Key != fmt.Sprintf("/slow/%05d", i) {
				t.Fatalf("event %d = %s: a gap or a reordering", i, show(&ev.KV, b))
			}
		}
	})

	t.Run("Close and context cancellation end the channel without an error", func(t *testing.T) {
		s := newStore(t)
		w := watch(t, s, "/cl", kv.WatchOptions{})
		w.Close()
		w.Close()
		if _, err := final(t, w); err != nil {
			t.Fatalf("Close ended the watch with %v", err)
		}
		ctx, cancel := context.WithCancel(bg)
		w2, err := s.Watch(ctx, "/cl", kv.WatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w2.Close()
		cancel()
		if _, err := final(t, w2); err != nil {
			t.Fatalf("cancellation ended the watch with %v", err)
		}
	})
}

// final2 reads n events, or returns the error that ended the watch first.
func final2(t testing.TB, w kv.Watcher, n int) ([]kv.Event, error) {
	t.Helper()
	var evs []kv.Event
	for len(evs) < n {
		r, ok := next(t, w)
		if !ok {
			t.Fatalf("watch closed after %d events", len(evs))
		}
		if r.Err != nil {
			return evs, r.Err
		}
		evs = append(evs, r.Events...)
	}
	return evs, nil
}

func checkEvent(t testing.TB, ev kv.Event, typ kv.EventType, b int64, kvWant, prevWant *want) {
	t.Helper()
	if ev.Type != typ {
		t.Fatalf("event type %v, want %v", ev.Type, typ)
	}
	checkKV(t, "event", &ev.KV, b, kvWant)
	checkKV(t, "event's previous value", ev.PrevKV, b, prevWant)
}

func runClose(t *testing.T, newStore NewStore) {
	t.Run("a closed store refuses calls and ends watches", func(t *testing.T) {
		s := newStore(t)
		w := watch(t, s, "/z", kv.WatchOptions{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := final(t, w); !isErr(err, kv.ErrClosed) {
			t.Fatalf("watch ended with %v, want ErrClosed", err)
		}
		if _, err := s.Range(bg, "/z", kv.RangeOptions{}); !isErr(err, kv.ErrClosed) {
			t.Fatalf("Range after Close: %v", err)
		}
		if _, err := s.Create(bg, "/z", nil); !isErr(err, kv.ErrClosed) {
			t.Fatalf("Create after Close: %v", err)
		}
		if _, err := s.Watch(bg, "/z", kv.WatchOptions{}); !isErr(err, kv.ErrClosed) {
			t.Fatalf("Watch after Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}
