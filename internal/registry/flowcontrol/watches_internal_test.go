package flowcontrol

import (
	"context"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
)

// A write is told to the watches of its resource everywhere, in its
// namespace, and of its object by name.
func TestInterestedWatches(t *testing.T) {
	var w watchCounts
	watch := func(ns, name string) func() {
		return w.started(&registry.Attributes{Verb: "watch", ResourceRequest: true, Resource: "configmaps", Namespace: ns, Name: name})
	}
	all, inA, inB, one := watch("", ""), watch("a", ""), watch("b", ""), watch("a", "x")
	other := w.started(&registry.Attributes{Verb: "watch", ResourceRequest: true, APIGroup: "apps", Resource: "configmaps"})
	write := func(ns, name string) int {
		return w.interested(&registry.Attributes{Verb: "update", ResourceRequest: true, Resource: "configmaps", Namespace: ns, Name: name})
	}
	if n := write("a", "x"); n != 3 {
		t.Errorf("a write of a/x is told to %d watches, want 3 (all, in a, of x)", n)
	}
	if n := write("a", "y"); n != 2 {
		t.Errorf("a/y: %d, want 2", n)
	}
	if n := write("", "node"); n != 1 {
		t.Errorf("a cluster-scoped write: %d, want 1", n)
	}
	for _, ended := range []func(){all, inA, inB, one, other} {
		ended()
	}
	if n := write("a", "x"); n != 0 || len(w.n) != 0 {
		t.Errorf("after every watch ended: %d, %v", n, w.n)
	}
}

func TestWriteWork(t *testing.T) {
	update := &registry.Attributes{Verb: "update", ResourceRequest: true, Resource: "configmaps"}
	for _, c := range []struct {
		a        *registry.Attributes
		watchers int
		widest   int
		seats    int
		linger   time.Duration
	}{
		{update, 9, 100, 0, 0},
		{update, 10, 100, 1, 5 * time.Millisecond},
		{update, 25, 100, 3, 5 * time.Millisecond},
		{update, 150, 100, 10, 7500 * time.Microsecond}, // 15 seats' work on at most 10
		{update, 150, 4, 4, 18750 * time.Microsecond},   // and on the level's widest
		{&registry.Attributes{Verb: "get", ResourceRequest: true, Resource: "configmaps"}, 50, 100, 0, 0},
		{&registry.Attributes{Verb: "create", ResourceRequest: true, Resource: "serviceaccounts", Subresource: "token"}, 50, 100, 0, 0},
	} {
		seats, linger := writeWork(c.a, c.watchers, c.widest)
		if seats != c.seats || linger != c.linger {
			t.Errorf("%s %s/%s with %d watchers, widest %d: %d seats for %v, want %d for %v",
				c.a.Verb, c.a.Resource, c.a.Subresource, c.watchers, c.widest, seats, linger, c.seats, c.linger)
		}
	}
}

// Through Admit: watches are counted while they last, and a write they
// watch holds its seats a moment after it ends.
func TestWriteHeldForItsWatchers(t *testing.T) {
	c := New(Config{Seats: 600})
	user := registry.User{Name: "alice", Groups: []string{"system:authenticated"}}
	var watches []*Ticket
	for range 20 {
		tk, err := c.Admit(context.Background(), &registry.Attributes{User: user, Verb: "watch", ResourceRequest: true, Resource: "configmaps", Namespace: "a"}, "", time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done() // set up: its seat back, still counted
		watches = append(watches, tk)
	}
	write, err := c.Admit(context.Background(), &registry.Attributes{User: user, Verb: "create", ResourceRequest: true, Resource: "configmaps", Namespace: "a"}, "", time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := c.levels["global-default"]
	held := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.executing
	}
	if n := held(); n != 2 {
		t.Fatalf("a write 20 watches are told of holds %d seats, want 2", n)
	}
	write.Done()
	if n := held(); n != 2 {
		t.Fatalf("the write's seats right after it ended: %d, want 2 still", n)
	}
	waitFor(t, func() bool { return held() == 0 })
	for _, w := range watches {
		w.Finish()
	}
	again, _ := c.Admit(context.Background(), &registry.Attributes{User: user, Verb: "create", ResourceRequest: true, Resource: "configmaps", Namespace: "a"}, "", time.Second, 1)
	if n := held(); n != 1 {
		t.Fatalf("a write with no watches left holds %d seats", n)
	}
	again.Done()
}
