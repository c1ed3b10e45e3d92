package kvtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// NewStore returns a fresh store for one test; it is closed by the test's
// cleanup. Its keys must be isolated from other stores', but its revision
// counter may be shared.
type NewStore func(t testing.TB) kv.Store

// wait bounds every wait on a watch.
const wait = 10 * time.Second

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Writes", func(t *testing.T) { runWrites(t, newStore) })
	t.Run("Ranges", func(t *testing.T) { runRanges(t, newStore) })
	t.Run("Compaction", func(t *testing.T) { runCompaction(t, newStore) })
	t.Run("Watches", func(t *testing.T) { runWatches(t, newStore) })
	t.Run("Close", func(t *testing.T) { runClose(t, newStore) })
}

var bg = context.Background()

// base returns the store's current revision.
func base(t testing.TB, s kv.Store) int64 {
	t.Helper()
	r, err := s.Range(bg, "/", kv.RangeOptions{CountOnly: true})
	if err != nil {
		t.Fatalf("reading the current revision: %v", err)
	}
	return r.Revision
}

func get(t testing.TB, s kv.Store, key string, rev int64) *kv.KeyValue {
	t.Helper()
	r, err := s.Range(bg, key, kv.RangeOptions{Revision: rev})
	if err != nil {
		t.Fatalf("Range(%s, rev %d): %v", key, rev, err)
	}
	if len(r.KVs) == 0 {
		return nil
	}
	return &r.KVs[0]
}

func create(t testing.TB, s kv.Store, key, value string) kv.WriteResponse {
	t.Helper()
	r, err := s.Create(bg, key, []byte(value))
	if err != nil || !r.Succeeded {
		t.Fatalf("Create(%s) = %+v, %v", key, r, err)
	}
	return r
}

// put creates key or updates it at its current revision, like etcdctl put.
func put(t testing.TB, s kv.Store, key, value string) kv.WriteResponse {
	t.Helper()
	cur := get(t, s, key, 0)
	if cur == nil {
		return create(t, s, key, value)
	}
	r, err := s.Update(bg, key, []byte(value), cur.ModRevision)
	if err != nil || !r.Succeeded {
		t.Fatalf("Update(%s) = %+v, %v", key, r, err)
	}
	return r
}

func del(t testing.TB, s kv.Store, key string) kv.WriteResponse {
	t.Helper()
	cur := get(t, s, key, 0)
	if cur == nil {
		t.Fatalf("del(%s): key absent", key)
	}
	r, err := s.Delete(bg, key, cur.ModRevision)
	if err != nil || !r.Succeeded {
		t.Fatalf("Delete(%s) = %+v, %v", key, r, err)
	}
	return r
}

// want is a key's expected state relative to a base revision.
type want struct {
	key                  string
	value                string
	create, mod, version int64 // relative to base
}

func checkKV(t testing.TB, what string, got *kv.KeyValue, b int64, w *want) {
	t.Helper()
	if w == nil {
		if got != nil {
			t.Fatalf("%s: got %s, want absent", what, show(got, b))
		}
		return
	}
	if got == nil {
		t.Fatalf("%s: absent, want %s=%q(c+%d,m+%d,v%d)", what, w.key, w.value, w.create, w.mod, w.version)
	}
	if got.Key != w.key || string(got.Value) != w.value || got.CreateRevision != b+w.create ||
		got.ModRevision != b+w.mod || got.Version != w.version {
		t.Fatalf("%s: got %s, want %s=%q(c+%d,m+%d,v%d)", what, show(got, b), w.key, w.value, w.create, w.mod, w.version)
	}
}

// show renders a key-value with revisions relative to b.
func show(e *kv.KeyValue, b int64) string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s=%q(c+%d,m+%d,v%d)", e.Key, e.Value, e.CreateRevision-b, e.ModRevision-b, e.Version)
}

// next waits for the next watch response, failing after the bound.
func next(t testing.TB, w kv.Watcher) (kv.WatchResponse, bool) {
	t.Helper()
	select {
	case r, ok := <-w.Responses():
		return r, ok
	case <-time.After(wait):
		t.Fatalf("no watch response within %v", wait)
	}
	return kv.WatchResponse{}, false
}

// events reads until n events have arrived, skipping progress responses,
// failing on an error or a closed channel.
func events(t testing.TB, w kv.Watcher, n int) []kv.Event {
	t.Helper()
	var out []kv.Event
	for len(out) < n {
		r, ok := next(t, w)
		if !ok {
			t.Fatalf("watch closed after %d of %d events", len(out), n)
		}
		if r.Err != nil {
			t.Fatalf("watch ended after %d of %d events: %v", len(out), n, r.Err)
		}
		out = append(out, r.Events...)
	}
	if len(out) > n {
		t.Fatalf("got %d events, want %d", len(out), n)
	}
	return out
}

// final reads until the watch ends and returns the final error (nil if
// the channel closed without one) and the events before it.
func final(t testing.TB, w kv.Watcher) ([]kv.Event, error) {
	t.Helper()
	var evs []kv.Event
	for {
		r, ok := next(t, w)
		if !ok {
			return evs, nil
		}
		if r.Err != nil {
			if _, ok := next(t, w); ok {
				t.Fatalf("a response followed the final error %v", r.Err)
			}
			return evs, r.Err
		}
		evs = append(evs, r.Events...)
	}
}

func watch(t testing.TB, s kv.Store, key string, opts kv.WatchOptions) kv.Watcher {
	t.Helper()
	w, err := s.Watch(bg, key, opts)
	if err != nil {
		t.Fatalf("Watch(%s, %+v): %v", key, opts, err)
	}
	t.Cleanup(w.Close)
	return w
}

func isErr(err, target error) bool { return errors.Is(err, target) }
