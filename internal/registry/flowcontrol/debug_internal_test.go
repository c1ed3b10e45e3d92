package flowcontrol

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// dumpRows is a dump's rows, each cell trimmed, the header row first.
func dumpRows(t *testing.T, dump func(*bytes.Buffer) error) [][]string {
	t.Helper()
	var b bytes.Buffer
	if err := dump(&b); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		cells := strings.Split(line, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// rowsOf are the rows whose first cell is name.
func rowsOf(rows [][]string, name string) [][]string {
	var out [][]string
	for _, r := range rows[1:] {
		if r[0] == name {
			out = append(out, r)
		}
	}
	return out
}

// The dumps show a level with one seat: one request executing, two
// waiting in the queues of their flows, then one giving up; and a level
// deleted while its request executes, quiescing until the request ends.
func TestDumps(t *testing.T) {
	c := New(Config{Seats: 6}) // tiny's one share of six: one seat
	schemas := map[string]*flowcontrolv1.FlowSchema{}
	for _, fs := range mandatorySchemas() {
		schemas[fs.Name] = fs
	}
	schemas["tiny"] = flowSchema("tiny", "tiny", 100, byUser, everything(groups("tiny")))
	tinyLevel := queuing("tiny", 1, 0, 4, 2)
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{"tiny": tinyLevel}
	for _, pl := range mandatoryLevels() {
		levels[pl.Name] = pl
	}
	c.configure(schemas, levels)
	request := func(user string) *registry.Attributes {
		return &registry.Attributes{User: registry.User{Name: user, Groups: []string{"tiny"}}, Verb: "list", ResourceRequest: true,
			APIGroup: "coordination.k8s.io", APIVersion: "v1", Resource: "leases", Namespace: "ns"}
	}
	running, err := c.Admit(context.Background(), request("ann"), "/apis/coordination.k8s.io/v1/namespaces/ns/leases", time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, user := range []string{"bob", "cy"} {
		go func() {
			tk, err := c.Admit(ctx, request(user), "/apis/coordination.k8s.io/v1/namespaces/ns/leases", time.Minute, 1)
			if err == nil {
				tk.Done()
			}
			done <- err
		}()
	}
	l := c.levels["tiny"]
	waitFor(t, func() bool { return l.waitingNow() == 2 })

	levelRows := dumpRows(t, func(b *bytes.Buffer) error { return c.DumpPriorityLevels(b) })
	if got := strings.Join(levelRows[0], " "); got != "PriorityLevelName ActiveQueues IsIdle IsQuiescing WaitingRequests ExecutingRequests DispatchedRequests RejectedRequests TimedoutRequests CancelledRequests" {
		t.Fatalf("header %q", got)
	}
	tiny := rowsOf(levelRows, "tiny")
	if len(tiny) != 1 || tiny[0][2] != "false" || tiny[0][4] != "2" || tiny[0][5] != "1" || tiny[0][6] != "1" || tiny[0][7] != "0" {
		t.Fatalf("tiny's row %q", tiny)
	}
	if active := tiny[0][1]; active != "1" && active != "2" { // the two flows' hands may share a queue
		t.Fatalf("%s active queues", active)
	}
	if names := []string{levelRows[1][0], levelRows[2][0], levelRows[3][0]}; strings.Join(names, " ") != "catch-all exempt tiny" {
		t.Fatalf("levels %q, want them by name", names)
	}

	queueRows := rowsOf(dumpRows(t, func(b *bytes.Buffer) error { return c.DumpQueues(b) }), "tiny")
	if len(queueRows) != 4 {
		t.Fatalf("%d queues of tiny", len(queueRows))
	}
	pending, executing, seats := 0, 0, 0
	for i, r := range queueRows {
		if r[1] != itoa(i) || !strings.HasSuffix(r[5], "ss") || !strings.HasSuffix(r[8], "ss") {
			t.Fatalf("queue row %q", r)
		}
		pending += atoi(t, r[2])
		executing += atoi(t, r[3])
		seats += atoi(t, r[4])
		if n := atoi(t, r[2]); r[6] != itoa(n) || r[7] != itoa(n) || n > 0 && r[8] == "0.00000000ss" {
			t.Fatalf("queue %d: %d waiting, sums %q %q %q", i, n, r[6], r[7], r[8])
		}
	}
	if pending != 2 || executing != 1 || seats != 1 {
		t.Fatalf("queues: %d pending, %d executing, %d seats", pending, executing, seats)
	}

	reqRows := dumpRows(t, func(b *bytes.Buffer) error { return c.DumpRequests(b, true) })
	if len(reqRows[0]) != 18 || reqRows[0][10] != "UserName" || reqRows[0][17] != "SubResource" {
		t.Fatalf("header %q", reqRows[0])
	}
	var users []string
	for _, r := range rowsOf(reqRows, "tiny") {
		users = append(users, r[10])
		if r[1] != "tiny" || r[4] != r[10] || r[6] != "1" || r[7] != "0" || r[8] != "0s" || r[11] != "list" ||
			r[12] != "/apis/coordination.k8s.io/v1/namespaces/ns/leases" || r[13] != "ns" || r[15] != "coordination.k8s.io/v1" || r[16] != "leases" {
			t.Fatalf("request row %q", r)
		}
		if _, err := time.Parse(time.RFC3339Nano, r[5]); err != nil {
			t.Fatal(err)
		}
		switch {
		case r[10] == "ann" && r[3] == "-1" && r[2] != "-1" && !strings.HasPrefix(r[9], "0001-"):
		case r[10] != "ann" && r[2] != "-1" && (r[3] == "0" || r[3] == "1") && r[9] == "0001-01-01T00:00:00Z":
		default:
			t.Fatalf("request row %q: executing ann, waiting the others", r)
		}
	}
	if slices.Sort(users); strings.Join(users, " ") != "ann bob cy" {
		t.Fatalf("requests of %q", users)
	}
	if short := dumpRows(t, func(b *bytes.Buffer) error { return c.DumpRequests(b, false) }); len(short[0]) != 10 {
		t.Fatalf("without details: %q", short[0])
	}

	cancel() // both waiters give up
	for range 2 {
		if err := <-done; err != ErrRejected {
			t.Fatalf("a cancelled wait: %v", err)
		}
	}
	tiny = rowsOf(dumpRows(t, func(b *bytes.Buffer) error { return c.DumpPriorityLevels(b) }), "tiny")
	if tiny[0][4] != "0" || tiny[0][7] != "2" || tiny[0][9] != "2" || tiny[0][1] != "0" {
		t.Fatalf("after the waits: %q", tiny)
	}

	// tiny deleted while ann's request runs: quiescing, then gone.
	delete(schemas, "tiny")
	delete(levels, "tiny")
	c.configure(schemas, levels)
	tiny = rowsOf(dumpRows(t, func(b *bytes.Buffer) error { return c.DumpPriorityLevels(b) }), "tiny")
	if len(tiny) != 1 || tiny[0][3] != "true" || tiny[0][5] != "1" {
		t.Fatalf("deleted level: %q", tiny)
	}
	running.Done()
	if tiny = rowsOf(dumpRows(t, func(b *bytes.Buffer) error { return c.DumpPriorityLevels(b) }), "tiny"); len(tiny) != 0 {
		t.Fatalf("an idle deleted level is still dumped: %q", tiny)
	}
}

// A write with watchers shows its final seats and their extra time, and
// is no longer executing once it ends, though its seats are still held.
func TestDumpWriteWork(t *testing.T) {
	c := New(Config{Seats: 600})
	user := registry.User{Name: "alice", Groups: []string{"system:authenticated"}}
	attrs := func(verb string) *registry.Attributes {
		return &registry.Attributes{User: user, Verb: verb, ResourceRequest: true, APIVersion: "v1", Resource: "configmaps", Namespace: "a"}
	}
	for range 25 {
		tk, err := c.Admit(context.Background(), attrs("watch"), "/api/v1/namespaces/a/configmaps", time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done()
	}
	write, err := c.Admit(context.Background(), attrs("create"), "/api/v1/namespaces/a/configmaps", time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	var row []string
	for _, r := range rowsOf(dumpRows(t, func(b *bytes.Buffer) error { return c.DumpRequests(b, true) }), "global-default") {
		if r[11] == "create" {
			row = r
		}
	}
	// 25 watchers: 3 seats, 15 ms of events spread over them.
	if row == nil || row[6] != "1" || row[7] != "3" || row[8] != "5ms" || row[15] != "v1" {
		t.Fatalf("the write's row %q", row)
	}
	write.Done()
	l := c.levels["global-default"]
	l.mu.Lock()
	running, held := l.running, l.executing
	l.mu.Unlock()
	if running != 0 || held != 3 {
		t.Fatalf("after the write: %d executing, %d seats held", running, held)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Waited is the time a request waited in its queue: at least from when
// it was seen waiting until the seat it waited for was given back.
func TestWaited(t *testing.T) {
	c := New(Config{Seats: 6})
	schemas := map[string]*flowcontrolv1.FlowSchema{"tiny": flowSchema("tiny", "tiny", 100, byUser, everything(groups("tiny")))}
	levels := map[string]*flowcontrolv1.PriorityLevelConfiguration{"tiny": queuing("tiny", 1, 0, 4, 2)}
	for _, fs := range mandatorySchemas() {
		schemas[fs.Name] = fs
	}
	for _, pl := range mandatoryLevels() {
		levels[pl.Name] = pl
	}
	c.configure(schemas, levels)
	a := &registry.Attributes{User: registry.User{Name: "u", Groups: []string{"tiny"}}, Verb: "get", Path: "/version"}
	first, err := c.Admit(context.Background(), a, "/version", time.Minute, 1)
	if err != nil || first.Waited() != 0 {
		t.Fatalf("the first request: %v, waited %v", err, first.Waited())
	}
	got := make(chan *Ticket)
	go func() {
		tk, err := c.Admit(context.Background(), a, "/version", time.Minute, 1)
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	waitFor(t, func() bool { return c.levels["tiny"].waitingNow() == 1 })
	time.Sleep(20 * time.Millisecond)
	first.Done()
	second := <-got
	defer second.Done()
	if second.Waited() < 20*time.Millisecond {
		t.Fatalf("waited %v, want 20 ms at least", second.Waited())
	}
	if (*Ticket)(nil).Waited() != 0 {
		t.Fatal("a nil ticket waited")
	}
}
