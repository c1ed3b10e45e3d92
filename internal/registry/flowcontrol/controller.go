package flowcontrol

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Config configures a Controller.
type Config struct {
	Registry *registry.Registry
	// Seats is the server's concurrency limit, which the limited priority
	// levels share by their nominalConcurrencyShares: kube-apiserver's
	// --max-requests-inflight plus --max-mutating-requests-inflight (400
	// and 200 by default).
	Seats  int
	Logger *slog.Logger
	// Now is the clock (tests); time.Now if nil.
	Now func() time.Time
	// ObjectsOnly, with priority and fairness off, only keeps the
	// bootstrap objects, as kube-apiserver's storage of the kinds does
	// then: no conditions are written and nothing is classified.
	ObjectsOnly bool
}

// Controller is API Priority and Fairness: it keeps the configuration
// objects, classifies each request (Admit) and makes it wait for a seat
// of its priority level.
type Controller struct {
	cfg   Config
	state atomic.Pointer[state]

	mu     sync.Mutex        // guards what follows
	levels map[string]*level // by name, the configured ones
	// quiescing are levels no longer configured whose requests have not
	// all ended, for the debug dumps.
	quiescing map[string]*level
	stats     map[flowKey]*flowStats // by flow schema and level

	synced   chan struct{}
	syncOnce sync.Once

	watches watchCounts // the open watches, for a write's work
}

// state is a configuration as the classifier reads it, replaced whole.
type state struct {
	// schemas in matching order, the dangling ones left out.
	schemas []*classifier
	// catchAll is the catch-all schema, which takes what none matches.
	catchAll *classifier
}

// classifier is a flow schema with its level.
type classifier struct {
	schema
	l       *level
	levelID string      // the level's uid
	headers [2][]string // the uids as header values
	stats   *flowStats
	// Of the level, as configured: whether a request's flow matters
	// (more than one queue), and the most seats a request may take.
	queued bool
	widest int
	exempt bool // never limited: its requests' work is not estimated
}

// New returns a Controller serving the bootstrap configuration until Run
// reads the stored one.
func New(cfg Config) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{cfg: cfg, levels: map[string]*level{}, quiescing: map[string]*level{}, stats: map[flowKey]*flowStats{}, synced: make(chan struct{})}
	schemas := map[string]*flowcontrolv1.FlowSchema{}
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, fs := range append(mandatorySchemas(), suggestedSchemas()...) {
		schemas[fs.Name] = fs
	}
	for _, pl := range append(mandatoryLevels(), suggestedLevels()...) {
		levels[pl.Name] = pl
	}
	c.configure(schemas, levels)
	return c
}

// ErrRejected is the error of a refused request (see Rejection).
var ErrRejected = errors.New("too many requests")

// Ticket is a request's classification and, once admitted, its seat.
type Ticket struct {
	// The uids of the flow schema and priority level that took the
	// request, which the response's headers name.
	FlowSchemaUID, PriorityLevelUID string
	// RetryAfter is the seconds a refused request is told to wait.
	RetryAfter int64
	waited     time.Duration // in a queue, for its seat
	// The uids as header values, shared by every ticket of the schema.
	schemaHeader, levelHeader []string
	seat                      seat // its level nil if refused
	stats                     *flowStats
	done                      atomic.Bool
	// linger is how long the seat is held once the request ends (a write
	// with watchers); forget uncounts a watch.
	linger time.Duration
	forget func()

	// What the debug dumps show of the request: its schema, flow and
	// attributes, when it arrived, and its work (initial seats, and the
	// final seats held for linger once it ends).
	schema, flow   string
	info           requestInfo
	arrived        time.Time
	initial, final int
	// Set under its level's lock while the request executes: the queue
	// that dispatched it (nil for an exempt or Reject level's), when, and
	// its neighbours in the level's list of executing requests.
	running    bool
	runQ       *queue
	started    time.Time
	prev, next *Ticket
}

// requestInfo is what the debug dumps show of a request.
type requestInfo struct {
	user, verb, path, namespace, name, group, version, resource, subresource string
}

// Waited is how long the request waited in a queue for its seat.
func (t *Ticket) Waited() time.Duration {
	if t == nil {
		return 0
	}
	return t.waited
}

// HeaderValues are the uids as the values of the response's headers, one
// slice per schema and level (not to be changed).
func (t *Ticket) HeaderValues() (schema, level []string) { return t.schemaHeader, t.levelHeader }

// Done gives the request's seat back (the request ended, or a watch
// started). Calls after the first do nothing.
func (t *Ticket) Done() {
	if t == nil || t.seat.l == nil || t.done.Swap(true) {
		return
	}
	t.stats.executing.Add(-1)
	if t.linger > 0 {
		l := t.seat.l
		l.mu.Lock()
		l.unlink(t) // it no longer executes; its seats are held on
		l.mu.Unlock()
		time.AfterFunc(t.linger, t.release)
		return
	}
	t.release()
}

func (t *Ticket) release() {
	t.stats.seats.Add(-int64(t.seat.width))
	t.seat.release(time.Now())
}

// Finish is Done, at the end of the request: a watch is no longer
// counted.
func (t *Ticket) Finish() {
	if t == nil {
		return
	}
	t.Done()
	if t.forget != nil {
		t.forget()
	}
}

// Admit classifies request a by the first flow schema that takes it, and
// waits for width seats (the request's estimated work, at most the
// level's widest; at least 1) at the schema's priority level, at most
// wait (or until ctx ends). It returns the ticket, which names the classification, and
// ErrRejected if the request was refused: a full queue, a full Reject
// level, or a wait that ran out.
func (c *Controller) Admit(ctx context.Context, a *registry.Attributes, path string, wait time.Duration, width int) (*Ticket, error) {
	st := c.state.Load()
	var cl *classifier
	for _, s := range st.schemas {
		if s.matches(a) {
			cl = s
			break
		}
	}
	if cl == nil { // the catch-all takes authenticated and unauthenticated users; a user in neither:
		cl = st.catchAll
	}
	now := c.cfg.Now()
	t := &Ticket{FlowSchemaUID: cl.uid, PriorityLevelUID: cl.levelID, schemaHeader: cl.headers[0], levelHeader: cl.headers[1], stats: cl.stats,
		schema: cl.name, flow: distinguish(cl.distinguisher, a), arrived: now,
		info: requestInfo{a.User.Name, a.Verb, path, a.Namespace, a.Name, a.APIGroup, a.APIVersion, a.Resource, a.Subresource}}
	var flow uint64
	if cl.queued {
		flow = flowHash(cl.name, t.flow)
	}
	width = max(1, min(width, cl.widest))
	t.initial = width
	if a.ResourceRequest && !cl.exempt {
		t.final, t.linger = writeWork(a, c.watches.interested(a), cl.widest)
		width = max(width, t.final)
	}
	s, reason := cl.l.enter(ctx, t, wait, flow, width, now, &cl.stats.waiting)
	if reason != "" {
		cl.stats.reject(reason)
		cl.l.mu.Lock()
		t.RetryAfter = cl.l.drops.after()
		cl.l.mu.Unlock()
		return t, ErrRejected
	}
	if s.limited {
		t.waited = s.start.Sub(now) // 0 unless it waited
		cl.stats.observeWait(t.waited)
	}
	cl.stats.dispatched.Add(1)
	cl.stats.executing.Add(1)
	cl.stats.seats.Add(int64(width))
	if a.ResourceRequest && a.Verb == "watch" {
		t.forget = c.watches.started(a)
	}
	t.seat = s
	return t, nil
}

// distinguish is the flow a request is of, within its schema: its user's
// name, its namespace, or one flow for all.
func distinguish(by flowcontrolv1.FlowDistinguisherMethodType, a *registry.Attributes) string {
	switch by {
	case flowcontrolv1.FlowDistinguisherMethodByUserType:
		return a.User.Name
	case flowcontrolv1.FlowDistinguisherMethodByNamespaceType:
		return a.Namespace
	}
	return ""
}

// flowHash is a flow's hash, which deals its hand of queues.
func flowHash(schema, flow string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(flow))
	return h.Sum64()
}

// queued reports whether the level has more than one queue, so that a
// request's flow matters.
func (l *level) queued() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues) > 1
}

// maxListSeats is the most seats any request takes, as upstream's list
// estimate allows (its size-based estimate, on by default in 1.37).
const maxListSeats = 100

// widest is the most seats a request may take at l: for a queuing level,
// 15 % of its nominal seats or its seats over its hand size, whichever is
// fewer, and at least 1, as upstream's; elsewhere maxListSeats.
func (l *level) widest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queues) == 0 || l.handSize == 0 {
		return maxListSeats
	}
	return max(1, min(int(math.Ceil(0.15*float64(l.nominal))), l.nominal/l.handSize))
}

// configure makes the classifier and the levels those of the objects
// given: each level's seats are shared out again, its queues remade if
// their number changed (their requests dealt to the new ones), and the
// flow schemas whose level is missing left out. Missing mandatory objects
// are made up, as upstream. It returns the names of the dangling flow
// schemas.
func (c *Controller) configure(schemaObjs map[string]*flowcontrolv1.FlowSchema, levelObjs map[string]*flowcontrolv1.PriorityLevelConfiguration) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	levelSpecs := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for name, pl := range levelObjs {
		levelSpecs[name] = pl
	}
	for _, pl := range mandatoryLevels() {
		if levelSpecs[pl.Name] == nil {
			levelSpecs[pl.Name] = pl // made up: no uid
		}
	}
	shareSum := 0.0
	for _, pl := range levelSpecs {
		shares, _, _ := commons(pl)
		shareSum += float64(shares)
	}
	now := c.cfg.Now()
	for name, pl := range levelSpecs {
		l := c.levels[name]
		fresh := l == nil
		if fresh {
			l = newLevel(name)
			c.levels[name] = l
			delete(c.quiescing, name)
		}
		l.configure(pl, c.cfg.Seats, shareSum, fresh, now)
	}
	for name, l := range c.levels {
		if levelSpecs[name] == nil {
			delete(c.levels, name) // its requests keep it until they end
			if !l.idle() {
				c.quiescing[name] = l
			}
		}
	}
	dangling := map[string]bool{}
	var schemas []*classifier
	haveExempt, haveCatchAll := false, false
	add := func(fs *flowcontrolv1.FlowSchema) *classifier {
		l := c.levels[fs.Spec.PriorityLevelConfiguration.Name]
		key := flowKey{fs.Name, l.name}
		st := c.stats[key]
		if st == nil {
			st = &flowStats{}
			c.stats[key] = st
		}
		cl := &classifier{schema: schemaOf(fs), l: l, stats: st}
		if pl := levelSpecs[l.name]; pl != nil {
			cl.levelID = string(pl.UID)
		}
		cl.headers = [2][]string{{cl.uid}, {cl.levelID}}
		cl.queued, cl.widest = l.queued(), l.widest()
		l.mu.Lock()
		cl.exempt = l.exempt
		l.mu.Unlock()
		return cl
	}
	for name, fs := range schemaObjs {
		if c.levels[fs.Spec.PriorityLevelConfiguration.Name] == nil {
			dangling[name] = true
			continue
		}
		haveExempt = haveExempt || name == exemptName
		haveCatchAll = haveCatchAll || name == catchAllName
		schemas = append(schemas, add(fs))
	}
	slices.SortFunc(schemas, func(a, b *classifier) int { return before(&a.schema, &b.schema) })
	mandatory := mandatorySchemas()
	if !haveExempt {
		schemas = append([]*classifier{add(mandatory[0])}, schemas...)
	}
	if !haveCatchAll {
		schemas = append(schemas, add(mandatory[1]))
	}
	st := &state{schemas: schemas}
	for _, cl := range schemas {
		if cl.name == catchAllName {
			st.catchAll = cl
		}
	}
	c.state.Store(st)
	c.rebalanceLocked(now, false)
	return dangling
}

// schemaOf is fs as the classifier reads it.
func schemaOf(fs *flowcontrolv1.FlowSchema) schema {
	s := schema{name: fs.Name, uid: string(fs.UID), precedence: fs.Spec.MatchingPrecedence,
		level: fs.Spec.PriorityLevelConfiguration.Name, rules: fs.Spec.Rules}
	if m := fs.Spec.DistinguisherMethod; m != nil {
		s.distinguisher = m.Type
	}
	return s
}

// commons are a level's shares, lendable percent and borrowing limit
// percent (nil: no limit).
func commons(pl *flowcontrolv1.PriorityLevelConfiguration) (shares, lendable int32, borrowing *int32) {
	if e := pl.Spec.Exempt; e != nil {
		return deref(e.NominalConcurrencyShares), deref(e.LendablePercent), nil
	}
	if l := pl.Spec.Limited; l != nil {
		return deref(l.NominalConcurrencyShares), deref(l.LendablePercent), l.BorrowingLimitPercent
	}
	return 0, 0, nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// configure gives l pl's configuration: seats is the server's, of which
// l's shares of shareSum are its nominal seats.
func (l *level) configure(pl *flowcontrolv1.PriorityLevelConfiguration, seats int, shareSum float64, fresh bool, now time.Time) {
	shares, lendable, borrowing := commons(pl)
	nominal := 0
	if shareSum > 0 {
		nominal = int(math.Ceil(float64(seats) * float64(shares) / shareSum))
	}
	lend := int(math.Round(float64(nominal) * float64(lendable) / 100))
	borrow := seats
	if borrowing != nil {
		borrow = int(math.Round(float64(nominal) * float64(*borrowing) / 100))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(now)
	l.uid = string(pl.UID)
	l.exempt = pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
	l.nominal, l.minCL, l.maxCL = nominal, nominal-lend, nominal+borrow
	if fresh {
		l.current = nominal - lend/2
	}
	var q *flowcontrolv1.QueuingConfiguration
	l.reject = false
	if lim := pl.Spec.Limited; lim != nil && !l.exempt {
		q = lim.LimitResponse.Queuing
		l.reject = lim.LimitResponse.Type == flowcontrolv1.LimitResponseTypeReject
	}
	n := 0
	if q != nil && !l.reject {
		n = int(q.Queues)
		l.handSize, l.queueLengthLimit = int(q.HandSize), int(q.QueueLengthLimit)
	}
	if n != len(l.queues) {
		l.requeue(n)
	}
	l.dispatch()
}

// requeue remakes l's queues, n of them, and deals their waiting requests
// to the new ones, by flow; with no queues, they start at once. The old
// queues' executing requests end on them, uncounted.
func (l *level) requeue(n int) {
	var waiters []*waiter
	for _, q := range l.queues {
		waiters = append(waiters, q.waiters...)
		q.waiters, q.asked = nil, 0
		q.detached = true
	}
	l.queues, l.active, l.waiting = nil, 0, 0
	for range n {
		l.queues = append(l.queues, &queue{next: l.vt})
	}
	for _, w := range waiters {
		if n == 0 {
			l.executing += w.width
			w.from, w.at = &queue{detached: true, executing: w.width}, l.vtAt
			l.link(w.t, w.from, l.vtAt)
			close(w.ready)
			continue
		}
		q := l.choose(w.flow)
		l.activate(q)
		q.waiters = append(q.waiters, w)
		q.asked += w.width
		l.waiting += w.width
	}
}

// rebalanceLocked shares the server's seats out among the limited levels
// again (the borrowing); roll ends the demand's period.
func (c *Controller) rebalanceLocked(now time.Time, roll bool) {
	type in struct {
		l                                 *level
		nominal, minCL, maxCL, high, curr int
		smoothed                          float64
		exempt                            bool
	}
	var ins []in
	nominalSum := 0
	for _, l := range c.levels {
		l.mu.Lock()
		l.advance(now)
		if roll {
			l.demand.roll(now)
		}
		high := l.demand.lastHigh
		if !roll {
			high = max(high, l.demand.high)
		}
		ins = append(ins, in{l: l, nominal: l.nominal, minCL: l.minCL, maxCL: l.maxCL, high: high, curr: l.current, smoothed: l.demand.smoothed, exempt: l.exempt})
		l.mu.Unlock()
		nominalSum += l.nominal
	}
	remaining := nominalSum
	minSum, minCurrentSum := 0, 0
	var parts []share
	var limited []int // indexes into ins
	for i, x := range ins {
		if x.exempt {
			remaining -= max(x.minCL, x.high)
			continue
		}
		minCurrent := max(x.minCL, min(x.nominal, x.high))
		parts = append(parts, share{lower: float64(minCurrent), upper: float64(x.maxCL), target: math.Max(float64(minCurrent), x.smoothed)})
		limited = append(limited, i)
		minSum += x.minCL
		minCurrentSum += minCurrent
	}
	set := func(x in, current int) {
		x.l.mu.Lock()
		x.l.current = current
		x.l.dispatch()
		x.l.mu.Unlock()
	}
	switch {
	case remaining <= minSum:
		for _, i := range limited {
			set(ins[i], ins[i].minCL)
		}
	case remaining <= minCurrentSum:
		frac := float64(remaining-minSum) / float64(minCurrentSum-minSum)
		for j, i := range limited {
			set(ins[i], ins[i].minCL+int(math.Round((parts[j].lower-float64(ins[i].minCL))*frac)))
		}
	default:
		allocs := shareOut(float64(nominalSum), parts)
		for j, i := range limited {
			set(ins[i], int(math.Round(allocs[j])))
		}
	}
	for _, x := range ins {
		if x.exempt {
			set(x, max(x.minCL, x.high))
		}
	}
}
