package flowcontrol

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The bootstrap configuration sorts requests as kube-apiserver's does.
func TestClassifyBootstrap(t *testing.T) {
	c := New(Config{Seats: 600})
	user := func(name string, groups ...string) registry.User { return registry.User{Name: name, Groups: groups} }
	admin := user("kplane-admin", "system:masters", "system:authenticated")
	anonymous := user("system:anonymous", "system:unauthenticated")
	alice := user("alice", "devs", "system:authenticated")
	sa := func(ns, name string) registry.User {
		return user("system:serviceaccount:"+ns+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	}
	node := user("system:node:n1", "system:nodes", "system:authenticated")
	res := func(u registry.User, verb, group, resource, ns string) *registry.Attributes {
		return &registry.Attributes{User: u, Verb: verb, ResourceRequest: true, APIGroup: group, Resource: resource, Namespace: ns}
	}
	path := func(u registry.User, verb, p string) *registry.Attributes {
		return &registry.Attributes{User: u, Verb: verb, Path: p}
	}
	for _, c1 := range []struct {
		a           *registry.Attributes
		schema, lvl string
	}{
		{res(admin, "create", "", "configmaps", "default"), "exempt", "exempt"},
		{path(admin, "get", "/metrics"), "exempt", "exempt"},
		{path(anonymous, "get", "/healthz"), "probes", "exempt"},
		{path(anonymous, "get", "/readyz/etcd"), "probes", "exempt"}, // under /readyz
		{path(anonymous, "post", "/healthz"), "global-default", "global-default"},
		{path(anonymous, "get", "/version"), "global-default", "global-default"},
		{path(alice, "get", "/livez"), "probes", "exempt"},
		{res(alice, "list", "", "configmaps", ""), "global-default", "global-default"},
		{res(sa("team", "ci"), "get", "", "secrets", "team"), "service-accounts", "workload-low"},
		{res(sa("kube-system", "x"), "update", "coordination.k8s.io", "leases", "kube-system"), "system-leader-election", "leader-election"},
		// A cluster-scoped request is not a lease rule's (no clusterScope).
		{res(sa("kube-system", "x"), "list", "coordination.k8s.io", "leases", ""), "kube-system-service-accounts", "workload-high"},
		{res(sa("kube-system", "x"), "delete", "coordination.k8s.io", "leases", "a"), "kube-system-service-accounts", "workload-high"},
		// A namespace that only begins with kube-system's name.
		{res(sa("kube-systems", "x"), "get", "", "secrets", "a"), "service-accounts", "workload-low"},
		{res(user("system:kube-controller-manager", "system:authenticated"), "list", "", "secrets", ""), "kube-controller-manager", "workload-high"},
		{res(node, "patch", "", "nodes", ""), "system-node-high", "node-high"},
		{res(node, "update", "", "nodes/status", ""), "system-node-high", "node-high"},
		{res(node, "get", "", "configmaps", "a"), "system-nodes", "system"},
		// In neither authenticated nor unauthenticated: the catch-all.
		{res(user("odd"), "get", "", "configmaps", "a"), "catch-all", "catch-all"},
	} {
		st := c.state.Load()
		var got *classifier
		for _, s := range st.schemas {
			if s.matches(c1.a) {
				got = s
				break
			}
		}
		if got == nil {
			got = st.catchAll
		}
		if got.name != c1.schema || got.l.name != c1.lvl {
			t.Errorf("%+v: %s at %s, want %s at %s", *c1.a, got.name, got.l.name, c1.schema, c1.lvl)
		}
	}
}

// Each level's seats are its share of the server's, and what it may lend
// and borrow, as upstream computes them (600 seats: kube-apiserver's
// defaults).
func TestNominalSeats(t *testing.T) {
	c := New(Config{Seats: 600})
	// Shares: catch-all 5, exempt 0, system 30, node-high 40,
	// leader-election 10, workload-high 40, workload-low 100,
	// global-default 20: 245 in all.
	for name, want := range map[string][3]int{
		"exempt": {0, 0, 600}, "catch-all": {13, 13, 613}, "system": {74, 50, 674}, "node-high": {98, 73, 698},
		"leader-election": {25, 25, 625}, "workload-high": {98, 49, 698}, "workload-low": {245, 24, 845}, "global-default": {49, 24, 649},
	} {
		l := c.levels[name]
		if got := [3]int{l.nominal, l.minCL, l.maxCL}; got != want {
			t.Errorf("%s: nominal, lower, upper %v, want %v", name, got, want)
		}
	}
}

// limitedLevel is a level with n queues of hand h and length qlen (a
// Reject level if n is 0), and the seats given.
func limitedLevel(seats, n, h, qlen int) *level {
	l := newLevel("t")
	spec := flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr32(1), LendablePercent: ptr32(0),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}
	if n > 0 {
		spec.Limited.LimitResponse = flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
			Queuing: &flowcontrolv1.QueuingConfiguration{Queues: int32(n), HandSize: int32(h), QueueLengthLimit: int32(qlen)}}
	}
	l.configure(&flowcontrolv1.PriorityLevelConfiguration{Spec: spec}, seats, 1, true, time.Unix(1000, 0))
	return l
}

func TestRejectLevel(t *testing.T) {
	l := limitedLevel(2, 0, 0, 0)
	now := time.Unix(1000, 0)
	a, _ := l.enter(context.Background(), &Ticket{}, time.Second, 1, 1, now, &noCount)
	b, _ := l.enter(context.Background(), &Ticket{}, time.Second, 2, 1, now, &noCount)
	if a.l == nil || b.l == nil {
		t.Fatal("refused within the limit")
	}
	if s, reason := l.enter(context.Background(), &Ticket{}, time.Second, 3, 1, now, &noCount); s.l != nil || reason != reasonConcurrencyLimit {
		t.Fatalf("past the limit: %v %q", s, reason)
	}
	a.release(now)
	if s, _ := l.enter(context.Background(), &Ticket{}, time.Second, 3, 1, now, &noCount); s.l == nil {
		t.Fatal("refused after a seat was given back")
	}
}

func TestQueueFullTimeOutAndCancel(t *testing.T) {
	l := limitedLevel(1, 1, 1, 1)
	now := time.Unix(1000, 0)
	holder, _ := l.enter(context.Background(), &Ticket{}, time.Second, 1, 1, now, &noCount)
	if holder.l == nil {
		t.Fatal("the first request waited")
	}
	got := make(chan string, 1)
	go func() {
		_, reason := l.enter(context.Background(), &Ticket{}, 50*time.Millisecond, 2, 1, now, &noCount)
		got <- reason
	}()
	waitFor(t, func() bool { return l.waitingNow() == 1 })
	if s, reason := l.enter(context.Background(), &Ticket{}, time.Second, 3, 1, now, &noCount); s.l != nil || reason != reasonQueueFull {
		t.Fatalf("a full queue took a request: %v %q", s, reason)
	}
	if reason := <-got; reason != reasonTimeOut {
		t.Fatalf("a wait past its limit: %q", reason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, reason := l.enter(ctx, &Ticket{}, time.Minute, 2, 1, now, &noCount)
		got <- reason
	}()
	waitFor(t, func() bool { return l.waitingNow() == 1 })
	cancel()
	if reason := <-got; reason != reasonTimeOut {
		t.Fatalf("a request whose client left: %q", reason)
	}
	if l.waitingNow() != 0 {
		t.Fatal("a request that gave up is still queued")
	}
	// A waiting request gets the seat given back.
	seated := make(chan seat, 1)
	go func() {
		s, _ := l.enter(context.Background(), &Ticket{}, time.Minute, 2, 1, now, &noCount)
		seated <- s
	}()
	waitFor(t, func() bool { return l.waitingNow() == 1 })
	holder.release(now.Add(time.Millisecond))
	if s := <-seated; s.l == nil || s.q == nil {
		t.Fatal("the waiting request was not dispatched")
	}
}

// noCount counts the test's queued requests, unread.
var noCount atomic.Int64

func (l *level) waitingNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// Two flows in two queues share the seat in turn: a flow with many
// requests waiting does not hold back one with few.
func TestFairQueuing(t *testing.T) {
	l := limitedLevel(1, 2, 1, 50)
	now := time.Unix(1000, 0)
	holder, _ := l.enter(context.Background(), &Ticket{}, time.Second, 0, 1, now, &noCount)
	type result struct {
		flow string
		s    seat
	}
	order := make(chan result, 16)
	enqueue := func(flow string, hash uint64) {
		go func() {
			s, _ := l.enter(context.Background(), &Ticket{}, time.Minute, hash, 1, now, &noCount)
			order <- result{flow, s}
		}()
	}
	// Flow a's 6 requests in queue 0 before flow b's 3 in queue 1.
	for i := 0; i < 6; i++ {
		enqueue("a", 0)
		n := i + 1
		waitFor(t, func() bool { return l.waitingNow() == n })
	}
	for i := 0; i < 3; i++ {
		enqueue("b", 1)
		n := 7 + i
		waitFor(t, func() bool { return l.waitingNow() == n })
	}
	// Each request runs 1 ms.
	var got string
	prev := holder
	for i := 0; i < 9; i++ {
		now = now.Add(time.Millisecond)
		prev.release(now)
		r := <-order
		got += r.flow
		prev = r.s
	}
	prev.release(now.Add(time.Millisecond))
	if b := countIn(got[:6], 'b'); b != 3 {
		t.Fatalf("dispatch order %s: flow b's 3 requests should be among the first 6", got)
	}
}

func countIn(s string, c byte) int {
	n := 0
	for i := range len(s) {
		if s[i] == c {
			n++
		}
	}
	return n
}

// A flow's hand holds distinct queues, and requests join the shortest.
func TestShuffleSharding(t *testing.T) {
	l := limitedLevel(1, 8, 3, 50)
	for flow := uint64(0); flow < 2000; flow++ {
		seen := map[*queue]bool{}
		// Each queue chosen is made the longest: the next choice is
		// another of the hand, until the hand is used up.
		for i := 0; i < 3; i++ {
			q := l.choose(flow)
			if seen[q] {
				t.Fatalf("flow %d: queue dealt twice", flow)
			}
			seen[q] = true
			q.executing += 100
		}
		if q := l.choose(flow); !seen[q] {
			t.Fatalf("flow %d: a queue outside its hand of 3", flow)
		}
		for _, q := range l.queues {
			q.executing = 0
		}
	}
}

func TestShareOut(t *testing.T) {
	parts := []share{{lower: 10, upper: 100, target: 50}, {lower: 5, upper: 20, target: 50}, {lower: 0, upper: 300, target: 10}}
	out := shareOut(100, parts)
	sum := 0.0
	for i, v := range out {
		if v < parts[i].lower-1e-9 || v > parts[i].upper+1e-9 {
			t.Errorf("part %d: %v outside [%v, %v]", i, v, parts[i].lower, parts[i].upper)
		}
		sum += v
	}
	if math.Abs(sum-100) > 1e-6 {
		t.Fatalf("shared %v of 100: %v", sum, out)
	}
	// The capped part takes its upper bound; the others share in
	// proportion to their targets (50 to 10).
	if math.Abs(out[1]-20) > 1e-6 || math.Abs(out[0]/out[2]-5) > 1e-6 {
		t.Fatalf("shares %v", out)
	}
}

// A level asked for more than its seats borrows what idle levels lend;
// when it asks for less again, it gives them back.
func TestBorrowing(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	c := New(Config{Seats: 600, Now: func() time.Time { return now }})
	low := c.levels["workload-low"]
	// 400 seats asked for during a whole period, nothing elsewhere.
	low.mu.Lock()
	low.demand.observe(now, 400)
	low.mu.Unlock()
	now = now.Add(borrowingPeriod)
	c.mu.Lock()
	c.rebalanceLocked(now, true)
	c.mu.Unlock()
	if low.current <= 245 {
		t.Fatalf("workload-low, asked for 400 seats, has %d (nominal 245)", low.current)
	}
	total := 0
	for _, l := range c.levels {
		if !l.exempt {
			total += l.current
			if l.current < l.minCL || l.current > l.maxCL {
				t.Errorf("%s: %d seats outside [%d, %d]", l.name, l.current, l.minCL, l.maxCL)
			}
		}
	}
	if total < 600 || total > 610 {
		t.Errorf("the levels share %d seats", total)
	}
	global := c.levels["global-default"]
	if global.current != global.minCL {
		t.Errorf("idle global-default kept %d seats, lends down to %d", global.current, global.minCL)
	}
}

// Retry-After starts at 1 s, doubles while refusals keep coming at three
// or more a second, and comes down when they stop.
func TestRetryAfter(t *testing.T) {
	var d drops
	sec := int64(1000)
	for s := sec; s < sec+20; s++ {
		for range 10 {
			d.record(time.Unix(s, 0))
		}
	}
	if d.after() < 8 {
		t.Fatalf("after 20 s of 10 refusals a second, Retry-After %d", d.after())
	}
	high := d.after()
	for s := sec + 100; s < sec+140; s++ {
		d.record(time.Unix(s, 0)) // one a second
	}
	if d.after() >= high {
		t.Fatalf("Retry-After stayed %d at one refusal a second", d.after())
	}
}

// The bootstrap configuration is kube-apiserver v1.37.2's: the same
// objects, annotations and specs (testdata: read off a running one).
func TestBootstrapAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/bootstrap-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Name        string
		Annotations map[string]string
		Spec        json.RawMessage
	}
	var upstream struct{ FlowSchemas, PriorityLevels []object }
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	mine := map[string]any{}
	for _, fs := range append(mandatorySchemas(), suggestedSchemas()...) {
		mine["fs/"+fs.Name] = fs
	}
	for _, pl := range append(mandatoryLevels(), suggestedLevels()...) {
		mine["pl/"+pl.Name] = pl
	}
	if n := len(upstream.FlowSchemas) + len(upstream.PriorityLevels); n != 19 || len(mine) != n {
		t.Fatalf("upstream has %d objects, kplane %d", n, len(mine))
	}
	check := func(key string, o object, into any, spec func() any, annotations func() map[string]string) {
		if err := json.Unmarshal(o.Spec, into); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(spec(), into) {
			got, _ := json.Marshal(spec())
			t.Errorf("%s: spec %s, upstream's %s", key, got, o.Spec)
		}
		if !reflect.DeepEqual(annotations(), o.Annotations) {
			t.Errorf("%s: annotations %v, upstream's %v", key, annotations(), o.Annotations)
		}
	}
	for _, o := range upstream.FlowSchemas {
		fs, _ := mine["fs/"+o.Name].(*flowcontrolv1.FlowSchema)
		if fs == nil {
			t.Errorf("flow schema %s: not in kplane's configuration", o.Name)
			continue
		}
		check("fs/"+o.Name, o, &flowcontrolv1.FlowSchemaSpec{}, func() any { return &fs.Spec }, fs.GetAnnotations)
	}
	for _, o := range upstream.PriorityLevels {
		pl, _ := mine["pl/"+o.Name].(*flowcontrolv1.PriorityLevelConfiguration)
		if pl == nil {
			t.Errorf("priority level %s: not in kplane's configuration", o.Name)
			continue
		}
		check("pl/"+o.Name, o, &flowcontrolv1.PriorityLevelConfigurationSpec{}, func() any { return &pl.Spec }, pl.GetAnnotations)
	}
}

// A request takes as many seats as its estimated work: it runs when they
// are free, or alone when it is wider than the level; waiting, it is not
// passed by narrower ones.
func TestWideRequests(t *testing.T) {
	now := time.Unix(1000, 0)
	r := limitedLevel(4, 0, 0, 0)
	three, _ := r.enter(context.Background(), &Ticket{}, time.Second, 1, 3, now, &noCount)
	if three.l == nil {
		t.Fatal("3 of 4 seats refused")
	}
	if s, reason := r.enter(context.Background(), &Ticket{}, time.Second, 2, 2, now, &noCount); s.l != nil || reason != reasonConcurrencyLimit {
		t.Fatalf("2 more seats of 4 with 3 held: %v %q", s.l, reason)
	}
	one, _ := r.enter(context.Background(), &Ticket{}, time.Second, 3, 1, now, &noCount)
	if one.l == nil {
		t.Fatal("the fourth seat refused")
	}
	three.release(now)
	one.release(now)
	if s, _ := r.enter(context.Background(), &Ticket{}, time.Second, 4, 10, now, &noCount); s.l == nil || r.executing != 10 {
		t.Fatal("a request wider than an idle level was refused")
	}

	q := limitedLevel(4, 2, 1, 50)
	held, _ := q.enter(context.Background(), &Ticket{}, time.Second, 0, 3, now, &noCount)
	got := make(chan string, 2)
	go func() {
		s, _ := q.enter(context.Background(), &Ticket{}, time.Minute, 0, 2, now, &noCount)
		got <- "wide"
		now := now.Add(time.Millisecond)
		s.release(now)
	}()
	waitFor(t, func() bool { return q.waitingNow() == 2 })
	go func() {
		s, _ := q.enter(context.Background(), &Ticket{}, time.Minute, 1, 1, now, &noCount)
		got <- "narrow"
		s.release(now.Add(time.Millisecond))
	}()
	// One seat is free, which the wide request does not fit in; the
	// narrow one's queue, idle until now, comes first in virtual time:
	// it runs at once.
	if g := <-got; g != "narrow" {
		t.Fatalf("%s dispatched first", g)
	}
	select {
	case g := <-got:
		t.Fatalf("%s dispatched with one seat free", g)
	default:
	}
	held.release(now.Add(time.Millisecond))
	if g := <-got; g != "wide" {
		t.Fatalf("%s dispatched", g)
	}
}

// The most seats a request may take at each default level, as upstream
// computes them: 15 % of a queuing level's nominal seats or its seats
// over its hand size, whichever is fewer; 100 elsewhere.
func TestWidest(t *testing.T) {
	c := New(Config{Seats: 600})
	for _, cl := range c.state.Load().schemas {
		want := map[string]int{"exempt": 100, "catch-all": 100, "global-default": 8, "workload-low": 37, "workload-high": 15,
			"leader-election": 4, "system": 12, "node-high": 15}[cl.l.name]
		if cl.widest != want {
			t.Errorf("%s at %s: %d seats at most, want %d", cl.name, cl.l.name, cl.widest, want)
		}
	}
}

// A request no schema takes goes to the catch-all schema, even when
// another sorts after it.
func TestUnmatchedGoesToTheCatchAll(t *testing.T) {
	c := New(Config{Seats: 600})
	schemas := map[string]*flowcontrolv1.FlowSchema{}
	for _, fs := range append(mandatorySchemas(), suggestedSchemas()...) {
		schemas[fs.Name] = fs
	}
	last := flowSchema("zzz", "global-default", 10000, byUser, everything(groups("nobody")))
	last.UID = "zzz-uid"
	schemas[last.Name] = last
	catchAll := schemas[catchAllName].DeepCopy()
	catchAll.UID = "catch-all-uid"
	schemas[catchAllName] = catchAll
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range append(mandatoryLevels(), suggestedLevels()...) {
		levels[pl.Name] = pl
	}
	c.configure(schemas, levels)
	tk, err := c.Admit(context.Background(), &registry.Attributes{User: registry.User{Name: "odd"}, Verb: "get", Path: "/version"}, "", time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done()
	if tk.FlowSchemaUID != "catch-all-uid" {
		t.Fatalf("an unmatched request went to %q", tk.FlowSchemaUID)
	}
}
