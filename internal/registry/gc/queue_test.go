package gc

import (
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestQueueHandsEachItemToOneWorkerAtATime(t *testing.T) {
	q := newQueue(time.Millisecond, time.Second)
	q.add("a")
	q.add("a") // already queued
	q.add("b")
	u, _ := q.get()
	if u != "a" {
		t.Fatalf("first item %q, want a (FIFO)", u)
	}
	q.add("a") // added while held: queued again after done, not before
	if v, _ := q.get(); v != "b" {
		t.Fatalf("second item %q, want b", v)
	}
	q.done("b")
	synctest.Test(t, func(t *testing.T) {
		got := make(chan types.UID)
		go func() {
			v, _ := q.get()
			got <- v
		}()
		synctest.Wait()
		select {
		case v := <-got:
			t.Fatalf("got %q while a was still held", v)
		default:
		}
		q.done("a")
		if v := <-got; v != "a" {
			t.Fatalf("after done: %q, want a", v)
		}
	})
}

func TestQueueRetryBacksOffUntilForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(10*time.Millisecond, 35*time.Millisecond)
		defer q.close()
		start := time.Now()
		var waits []time.Duration
		for range 4 {
			q.retry("x")
			u, _ := q.get()
			waits = append(waits, time.Since(start))
			start = time.Now()
			q.done(u)
		}
		want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
		for i := range want {
			if waits[i] != want[i] {
				t.Fatalf("retry delays %v, want %v", waits, want)
			}
		}
		q.forget("x")
		q.retry("x")
		q.get()
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Fatalf("after forget: %v, want the base delay again", d)
		}
	})
}

func TestQueueCloseEndsGetAndPendingRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(time.Second, time.Minute)
		q.retry("later")
		ended := make(chan bool)
		go func() {
			_, ok := q.get()
			ended <- ok
		}()
		synctest.Wait()
		q.close()
		if ok := <-ended; ok {
			t.Fatal("get returned an item after close")
		}
		time.Sleep(2 * time.Second) // the retry's time passes: nothing fires
		q.add("after")
		if _, ok := q.get(); ok {
			t.Fatal("get returned an item after close")
		}
	})
}
