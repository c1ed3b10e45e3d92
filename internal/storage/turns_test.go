package storage

import (
	"context"
	"testing"
	"time"
)

// Read-modify-writes of one key take turns; a turn held too long is not
// waited for forever, and turns of other keys do not wait at all.
func TestKeyTurns(t *testing.T) {
	kt := keyTurns{m: map[string]*keyTurn{}}
	ctx := context.Background()
	done := kt.take(ctx, "a")
	other := kt.take(ctx, "b") // another key: not held up
	other()

	got := make(chan func())
	go func() { got <- kt.take(ctx, "a") }()
	select {
	case <-got:
		t.Fatal("a second turn of one key started while the first was held")
	case <-time.After(50 * time.Millisecond):
	}
	done()
	second := <-got
	second()
	if len(kt.m) != 0 {
		t.Fatalf("turns left behind: %v", kt.m)
	}

	// Nested: the same goroutine asks again while holding the turn.
	outer := kt.take(ctx, "a")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	inner := kt.take(cctx, "a") // gives up with the context, not after turnWait
	inner()
	cancel()
	outer()
	if len(kt.m) != 0 {
		t.Fatalf("turns left behind: %v", kt.m)
	}
}
