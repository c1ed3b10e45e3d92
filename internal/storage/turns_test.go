package storage

import (
	"context"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Read-modify-writes of one key take turns; a turn held too long is not
// waited for forever, and turns of other keys do not wait at all.
func TestKeyTurns(t *testing.T) {
	kt := keyTurns{m: map[string]*keyTurn{}}
	ctx := context.Background()
	first := kt.take(ctx, "a")
	other := kt.take(ctx, "b") // another key: not held up
	other.end(nil)

	got := make(chan *turn)
	go func() { got <- kt.take(ctx, "a") }()
	select {
	case <-got:
		t.Fatal("a second turn of one key started while the first was held")
	case <-time.After(50 * time.Millisecond):
	}
	written := &handoff{kv: kv.KeyValue{Key: "a", ModRevision: 7}}
	first.end(written)
	first.end(nil) // ended already: no effect
	second := <-got
	if second.from != written {
		t.Fatalf("the second turn got %v, want the first one's write", second.from)
	}
	go func() { got <- kt.take(ctx, "a") }()
	waitRefs(t, &kt, "a", 2)
	second.end(nil) // wrote nothing: hands on what it got
	third := <-got
	if third.from != written {
		t.Fatalf("the third turn got %v, want the first one's write", third.from)
	}
	third.end(nil)
	if len(kt.m) != 0 {
		t.Fatalf("turns left behind: %v", kt.m)
	}

	// Nested: the same goroutine asks again while holding the turn.
	outer := kt.take(ctx, "a")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	inner := kt.take(cctx, "a") // gives up with the context, not after turnWait
	if inner.held || inner.from != nil {
		t.Fatalf("a turn not granted: held %v, from %v", inner.held, inner.from)
	}
	inner.end(nil)
	cancel()
	outer.end(nil)
	if len(kt.m) != 0 {
		t.Fatalf("turns left behind: %v", kt.m)
	}
}

// A stale turn hands nothing on.
func TestKeyTurnStaleHandsNothing(t *testing.T) {
	kt := keyTurns{m: map[string]*keyTurn{}}
	ctx := context.Background()
	first := kt.take(ctx, "a")
	got := make(chan *turn)
	go func() { got <- kt.take(ctx, "a") }()
	waitRefs(t, &kt, "a", 2)
	first.from = &handoff{}
	first.stale = true
	first.end(nil)
	second := <-got
	if second.from != nil {
		t.Fatalf("got %v from a stale turn", second.from)
	}
	second.end(nil)
}

// waitRefs waits until key's turn is taken or waited for n times.
func waitRefs(t *testing.T, kt *keyTurns, key string, n int) {
	t.Helper()
	for range 5000 {
		kt.mu.Lock()
		k := kt.m[key]
		refs := 0
		if k != nil {
			refs = k.refs
		}
		kt.mu.Unlock()
		if refs == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s: never %d turns", key, n)
}
