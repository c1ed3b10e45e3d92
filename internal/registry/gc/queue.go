package gc

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// queue holds the uids of the objects the collector must look at.
//
// An item is queued at most once and handed to one worker at a time: an
// item added while a worker holds it is queued again when that worker
// calls done (client-go's workqueue contract, which the collector relies
// on so that two workers never act on one object). An item that failed
// comes back after a delay that doubles with each consecutive failure,
// from base up to max, until forget.
//
// Lock order: mu only. Nothing blocks under it; timers only call add.
type queue struct {
	base, max time.Duration

	mu struct {
		sync.Mutex
		ready      []types.UID
		dirty      map[types.UID]bool // in ready, or to be queued again when done
		processing map[types.UID]bool
		failures   map[types.UID]int
		timers     map[types.UID]*time.Timer // delayed adds not yet due
		closed     bool
	}
	cond *sync.Cond // on mu: ready grew, or the queue closed
}

func newQueue(base, max time.Duration) *queue {
	q := &queue{base: base, max: max}
	q.mu.dirty = map[types.UID]bool{}
	q.mu.processing = map[types.UID]bool{}
	q.mu.failures = map[types.UID]int{}
	q.mu.timers = map[types.UID]*time.Timer{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// add queues u unless it is queued already. After close it does nothing.
func (q *queue) add(u types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed || q.mu.dirty[u] {
		return
	}
	q.mu.dirty[u] = true
	if q.mu.processing[u] {
		return // done queues it again
	}
	q.mu.ready = append(q.mu.ready, u)
	q.cond.Signal()
}

// retry queues u again after its backoff: base·2ⁿ for its n-th failure
// in a row, at most max. A retry already pending is kept.
func (q *queue) retry(u types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.closed {
		return
	}
	n := q.mu.failures[u]
	q.mu.failures[u] = n + 1
	if _, ok := q.mu.timers[u]; ok {
		return
	}
	d := q.max
	if n < 32 && q.base<<n < q.max && q.base<<n > 0 {
		d = q.base << n
	}
	q.mu.timers[u] = time.AfterFunc(d, func() {
		q.mu.Lock()
		delete(q.mu.timers, u)
		q.mu.Unlock()
		q.add(u)
	})
}

// forget resets u's backoff: its next failure waits base again.
func (q *queue) forget(u types.UID) {
	q.mu.Lock()
	delete(q.mu.failures, u)
	q.mu.Unlock()
}

// get waits for an item and hands it to the caller, who must call done
// with it. ok is false once the queue is closed.
func (q *queue) get() (u types.UID, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.mu.ready) == 0 && !q.mu.closed {
		q.cond.Wait()
	}
	if q.mu.closed {
		return "", false
	}
	u = q.mu.ready[0]
	q.mu.ready[0] = ""
	q.mu.ready = q.mu.ready[1:]
	delete(q.mu.dirty, u)
	q.mu.processing[u] = true
	return u, true
}

// done releases u; if it was added meanwhile, it is queued again.
func (q *queue) done(u types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.mu.processing, u)
	if q.mu.dirty[u] && !q.mu.closed {
		q.mu.ready = append(q.mu.ready, u)
		q.cond.Signal()
	}
}

// close ends every get, now and later, and cancels pending retries.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.mu.closed = true
	for u, t := range q.mu.timers {
		t.Stop()
		delete(q.mu.timers, u)
	}
	q.cond.Broadcast()
}
