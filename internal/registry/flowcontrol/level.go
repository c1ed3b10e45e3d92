package flowcontrol

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// serviceEstimate is the time a request is first assumed to take, for fair
// queuing's virtual time; each request's real time replaces it when it
// ends. Upstream assumes the same 3 ms.
const serviceEstimate = 0.003 // seconds

// Reasons a request is refused, as the rejected requests metric labels
// them.
const (
	reasonQueueFull        = "queue-full"
	reasonConcurrencyLimit = "concurrency-limit"
	// A wait that ran out, or whose client left (upstream counts both
	// so).
	reasonTimeOut = "time-out"
)

// level is a priority level's dispatcher: the seats it may fill at once
// (current, moved between nominal's bounds by the borrowing), the requests
// executing, and its queues. A level outlives a change of its
// configuration: its executing and queued requests stay.
type level struct {
	name string

	mu     sync.Mutex
	uid    string
	exempt bool // never limited
	reject bool // Limited with the Reject response: no queues
	// The seats: nominal from the shares; minCL and maxCL the bounds the
	// borrowing keeps current in (nominal less what it lends, plus what it
	// may borrow).
	nominal, minCL, maxCL, current int
	queues                         []*queue
	handSize, queueLengthLimit     int

	executing int // seats held by requests
	waiting   int // seats asked for by the requests in a queue

	// Fair queuing's virtual time: the service each active queue has had
	// a right to, in seconds, at vtAt. It advances at the rate of the
	// seats in use shared among the queues with requests.
	vt     float64
	vtAt   time.Time
	active int // queues with requests waiting or executing

	demand demand // the seats asked for (executing and waiting), for the borrowing
	drops  drops  // for Retry-After

	// For the debug dumps: the executing requests (a list through their
	// tickets) and their number, and the counts of requests dispatched,
	// refused, and refused after a wait (in upstream's words, cancelled).
	runHead                         *Ticket
	running                         int
	dispatched, rejected, cancelled int
}

// queue is one of a level's queues: its waiting requests, first first,
// the requests it dispatched that still run, and the virtual time at which
// its next request starts.
type queue struct {
	waiters   []*waiter
	asked     int // the waiters' seats
	executing int // seats held by the requests it dispatched
	running   int // those requests
	next      float64
	// detached is set on the queues a new configuration replaced: they
	// only see their executing requests end.
	detached bool
}

func (q *queue) load() int { return q.asked + q.executing }

// waiter is a request in a queue.
type waiter struct {
	t     *Ticket
	flow  uint64
	width int           // the seats it asks for
	ready chan struct{} // closed when dispatched
	// from is set, under the level's lock, to the queue that gave the
	// waiter its seat; a waiter that gave up before then is removed
	// instead.
	from *queue
	at   time.Time // when it was dispatched
}

// seat is a request's hold on a level, given back by release.
type seat struct {
	l       *level
	t       *Ticket // the request's, unlinked from the level's list on release
	width   int     // seats held
	q       *queue  // nil for an exempt level's or a Reject level's
	start   time.Time
	limited bool // not an exempt level's
}

func newLevel(name string) *level { return &level{name: name} }

// advance moves the virtual time on to now.
func (l *level) advance(now time.Time) {
	if l.active > 0 && !l.vtAt.IsZero() {
		inUse := min(l.executing, l.current)
		l.vt += now.Sub(l.vtAt).Seconds() * float64(inUse) / float64(l.active)
	}
	l.vtAt = now
	l.demand.observe(now, l.executing+l.waiting)
}

// activate counts q as active if it was not, before a request joins it;
// an idle queue starts no earlier than the virtual time, so idleness earns
// no credit.
func (l *level) activate(q *queue) {
	if q.load() == 0 && !q.detached {
		l.active++
		q.next = math.Max(q.next, l.vt)
	}
}

// deactivate uncounts q if it just emptied.
func (l *level) deactivate(q *queue) {
	if q.load() == 0 && !q.detached {
		l.active--
	}
}

// enter waits for width seats for a request of flow, at most wait or
// until ctx ends: at once if the level is exempt or has the seats free and
// no one waiting, else in the shortest of the flow's hand of queues. It
// returns the seats, or the reason the request was refused. queued counts
// the request while it is in a queue.
func (l *level) enter(ctx context.Context, t *Ticket, wait time.Duration, flow uint64, width int, now time.Time, queued *atomic.Int64) (seat, string) {
	l.mu.Lock()
	l.advance(now)
	if l.exempt {
		l.executing += width
		l.link(t, nil, now)
		l.mu.Unlock()
		return seat{l: l, t: t, width: width, start: now}, ""
	}
	if l.reject || len(l.queues) == 0 {
		if !l.fits(width) {
			l.drops.record(now)
			l.rejected++
			l.mu.Unlock()
			return seat{}, reasonConcurrencyLimit
		}
		l.executing += width
		l.link(t, nil, now)
		l.mu.Unlock()
		return seat{l: l, t: t, width: width, start: now, limited: true}, ""
	}
	q := l.choose(flow)
	if l.waiting == 0 && l.fits(width) {
		l.activate(q)
		l.startOn(q, width)
		l.link(t, q, now)
		l.mu.Unlock()
		return seat{l: l, t: t, width: width, q: q, start: now, limited: true}, ""
	}
	if len(q.waiters) >= l.queueLengthLimit {
		l.drops.record(now)
		l.rejected++
		l.mu.Unlock()
		return seat{}, reasonQueueFull
	}
	w := &waiter{t: t, flow: flow, width: width, ready: make(chan struct{})}
	l.activate(q)
	q.waiters = append(q.waiters, w)
	q.asked += width
	l.waiting += width
	// Seats may be free that the head of the first queue does not fit
	// in, and this queue may now come first.
	l.dispatch()
	l.mu.Unlock()
	queued.Add(1)
	defer queued.Add(-1)

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return seat{l: l, t: t, width: width, q: w.from, start: w.at, limited: true}, ""
	case <-timer.C:
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.from != nil { // dispatched as the wait ran out: take the seat
		return seat{l: l, t: t, width: width, q: w.from, start: w.at, limited: true}, ""
	}
	end := time.Now()
	l.advance(end)
	l.remove(w)
	l.drops.record(end)
	l.rejected++
	l.cancelled++
	return seat{}, reasonTimeOut
}

// fits reports whether width more seats may be taken now: within the
// level's seats, or alone (a request wider than the level runs when
// nothing else does, so it is never starved).
func (l *level) fits(width int) bool {
	return l.executing == 0 || l.executing+width <= l.current
}

// startOn gives width seats to a request of q.
func (l *level) startOn(q *queue, width int) {
	q.executing += width
	l.executing += width
	q.next += serviceEstimate * float64(width)
}

// link counts t as executing, dispatched from q (nil: from no queue) at
// start.
func (l *level) link(t *Ticket, q *queue, start time.Time) {
	t.running, t.runQ, t.started = true, q, start
	t.prev, t.next = nil, l.runHead
	if l.runHead != nil {
		l.runHead.prev = t
	}
	l.runHead = t
	l.running++
	l.dispatched++
	if q != nil {
		q.running++
	}
}

// unlink uncounts t, which no longer executes.
func (l *level) unlink(t *Ticket) {
	if !t.running {
		return
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		l.runHead = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.running, t.prev, t.next = false, nil, nil
	l.running--
	if t.runQ != nil {
		t.runQ.running--
	}
}

// idle reports whether no request of l waits or executes.
func (l *level) idle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running == 0 && l.waiting == 0 && l.executing == 0
}

// release gives s's seat back at now, and dispatches the requests the
// freed seats (and any the borrowing added) allow.
func (s *seat) release(now time.Time) {
	l := s.l
	l.mu.Lock()
	l.unlink(s.t)
	l.advance(now)
	l.executing -= s.width
	if q := s.q; q != nil {
		q.executing -= s.width
		// The request's real service replaces the estimate.
		q.next += (now.Sub(s.start).Seconds() - serviceEstimate) * float64(s.width)
		l.deactivate(q)
	}
	l.dispatch()
	l.mu.Unlock()
}

// dispatch starts waiting requests while their seats are free: each time
// the head of the queue whose next request starts earliest in virtual
// time, and none while that one does not fit (a wide request is not
// passed by narrow ones of other queues).
func (l *level) dispatch() {
	for l.waiting > 0 {
		var next *queue
		for _, q := range l.queues {
			if len(q.waiters) > 0 && (next == nil || q.next < next.next) {
				next = q
			}
		}
		if next == nil {
			return
		}
		w := next.waiters[0]
		if !l.fits(w.width) {
			return
		}
		next.waiters[0] = nil
		next.waiters = next.waiters[1:]
		next.asked -= w.width
		l.waiting -= w.width
		l.startOn(next, w.width)
		w.from, w.at = next, l.vtAt
		l.link(w.t, next, l.vtAt)
		close(w.ready)
	}
}

// remove takes a waiter that gave up out of its queue.
func (l *level) remove(w *waiter) {
	for _, q := range l.queues {
		for i, x := range q.waiters {
			if x == w {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				q.asked -= w.width
				l.waiting -= w.width
				l.deactivate(q)
				return
			}
		}
	}
}

// choose is the queue a request of flow joins: the least loaded of the
// flow's hand, handSize queues dealt from the deck by the flow's hash
// (shuffle sharding), so that a heavy flow fills few queues and another
// flow rarely has all of its own among them.
func (l *level) choose(flow uint64) *queue {
	n := len(l.queues)
	if n == 1 {
		return l.queues[0]
	}
	var dealt [handSizeMax]int // the cards dealt so far, in order
	h := min(l.handSize, n, handSizeMax)
	var best *queue
	for i := 0; i < h; i++ {
		left := uint64(n - i)
		card := int(flow % left)
		flow /= left
		// The card-th queue not dealt yet: each dealt one at or below it
		// moves it up one.
		at := 0
		for ; at < i && dealt[at] <= card; at++ {
			card++
		}
		copy(dealt[at+1:i+1], dealt[at:i])
		dealt[at] = card
		if q := l.queues[card]; best == nil || q.load() < best.load() {
			best = q
		}
	}
	return best
}

// handSizeMax is validation's bound on a hand.
const handSizeMax = 128
