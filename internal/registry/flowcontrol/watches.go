package flowcontrol

import (
	"math"
	"sync"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
)

// A write's work goes on after it ends: each watcher of the object is
// sent an event. As upstream's estimate, a write with watchers holds a
// seat per watchesPerSeat of them for eventLinger each, once it ends.
const (
	watchesPerSeat = 10
	eventLinger    = 5 * time.Millisecond
	// maxWriteSeats caps a write's seats, as upstream's (and the level's
	// widest caps it further).
	maxWriteSeats = 10
)

// watchKey is what a watch watches: a resource (of a group), in a
// namespace or all, one object by name or all.
type watchKey struct{ group, resource, namespace, name string }

// watchCounts counts the open watches by what they watch.
type watchCounts struct {
	mu sync.Mutex
	n  map[watchKey]int
}

// started counts a watch of a until the returned func is called.
func (w *watchCounts) started(a *registry.Attributes) (ended func()) {
	k := watchKey{a.APIGroup, a.Resource, a.Namespace, a.Name}
	w.mu.Lock()
	if w.n == nil {
		w.n = map[watchKey]int{}
	}
	w.n[k]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.n[k]--; w.n[k] == 0 {
			delete(w.n, k)
		}
		w.mu.Unlock()
	}
}

// interested is the number of watches a write a notifies: those of the
// resource everywhere, in its namespace, and of its object by name.
func (w *watchCounts) interested(a *registry.Attributes) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.n) == 0 {
		return 0
	}
	k := watchKey{group: a.APIGroup, resource: a.Resource}
	n := w.n[k]
	if a.Namespace != "" {
		k.namespace = a.Namespace
		n += w.n[k]
	}
	if a.Name != "" {
		k.name = a.Name
		n += w.n[k]
	}
	return n
}

// writeWork is the seats a write holds once it ends and for how long:
// none if fewer than watchesPerSeat watchers are told of it; otherwise a
// seat per watchesPerSeat of them, at most widest, for the time that
// spreads eventLinger per seat over them.
func writeWork(a *registry.Attributes, watchers, widest int) (seats int, linger time.Duration) {
	switch a.Verb {
	case "create", "update", "patch", "delete":
	default:
		return 0, 0
	}
	if a.Resource == "serviceaccounts" && a.Subresource == "token" || watchers < watchesPerSeat {
		return 0, 0 // a token request writes nothing
	}
	seats = int(math.Ceil(float64(watchers) / watchesPerSeat))
	work := time.Duration(seats) * eventLinger
	seats = min(seats, maxWriteSeats, widest)
	return seats, work / time.Duration(seats)
}
