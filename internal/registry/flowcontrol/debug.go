package flowcontrol

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The debug dumps are kube-apiserver's /debug/api_priority_and_fairness/
// dump_priority_levels, dump_queues and dump_requests: a row per level,
// per queue and per request, their columns separated by a comma and
// aligned, in upstream's columns and forms.

// DumpPriorityLevels writes a row per priority level, by name: its active
// queues (with waiting requests), whether it is idle and quiescing (no
// longer configured, with requests still executing), its waiting and
// executing requests, and the requests it dispatched, refused, and refused
// after a wait (cancelled) since it was made.
func (c *Controller) DumpPriorityLevels(w io.Writer) error {
	tw := newDumpWriter(w)
	tw.row("PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests",
		"DispatchedRequests", "RejectedRequests", "TimedoutRequests", "CancelledRequests")
	for _, e := range c.dumpLevels() {
		l := e.l
		l.mu.Lock()
		active, waiting := 0, 0
		for _, q := range l.queues {
			if len(q.waiters) > 0 {
				active++
			}
			waiting += len(q.waiters)
		}
		idle := waiting == 0 && l.running == 0
		tw.row(l.name, strconv.Itoa(active), strconv.FormatBool(idle), strconv.FormatBool(e.quiescing),
			strconv.Itoa(waiting), strconv.Itoa(l.running), strconv.Itoa(l.dispatched), strconv.Itoa(l.rejected),
			"0", strconv.Itoa(l.cancelled)) // a wait that runs out is cancelled, as upstream counts it
		l.mu.Unlock()
	}
	return tw.Flush()
}

// DumpQueues writes a row per queue of each level with queues: its
// waiting and executing requests, the seats it holds, the virtual time
// its next request starts at, and its waiting requests' initial seats,
// widest seats and work, in seat-seconds.
func (c *Controller) DumpQueues(w io.Writer) error {
	tw := newDumpWriter(w)
	tw.row("PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR",
		"InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum")
	for _, e := range c.dumpLevels() {
		l := e.l
		l.mu.Lock()
		for i, q := range l.queues {
			initial, widest, work := 0, 0, 0.0
			for _, wt := range q.waiters {
				initial += wt.t.initial
				widest += wt.width
				work += wt.t.work()
			}
			tw.row(l.name, strconv.Itoa(i), strconv.Itoa(len(q.waiters)), strconv.Itoa(q.running), strconv.Itoa(q.executing),
				seatSeconds(q.next), strconv.Itoa(initial), strconv.Itoa(widest), seatSeconds(work))
		}
		l.mu.Unlock()
	}
	return tw.Flush()
}

// DumpRequests writes a row per waiting or executing request of each
// level: its schema, queue (-1 for none), place in the queue (-1 once
// executing), flow, arrival, work and start; with details, also its user,
// verb, path, namespace, name, group version, resource and subresource.
func (c *Controller) DumpRequests(w io.Writer, details bool) error {
	tw := newDumpWriter(w)
	head := []string{"PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
		"ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"}
	if details {
		head = append(head, "UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource")
	}
	tw.row(head...)
	for _, e := range c.dumpLevels() {
		l := e.l
		l.mu.Lock()
		var queueless []*Ticket
		byQueue := map[*queue][]*Ticket{}
		for t := l.runHead; t != nil; t = t.next {
			if slices.Contains(l.queues, t.runQ) {
				byQueue[t.runQ] = append(byQueue[t.runQ], t)
			} else {
				queueless = append(queueless, t)
			}
		}
		for i, q := range l.queues {
			for j, wt := range q.waiters {
				tw.request(l.name, i, j, wt.t, time.Time{}, details)
			}
			for _, t := range byQueue[q] {
				tw.request(l.name, i, -1, t, t.started, details)
			}
		}
		for _, t := range queueless {
			tw.request(l.name, -1, -1, t, t.started, details)
		}
		l.mu.Unlock()
	}
	return tw.Flush()
}

// dumpLevel is a level as the dumps list it.
type dumpLevel struct {
	l         *level
	quiescing bool
}

// dumpLevels are the configured levels and the quiescing ones, by name.
// Quiescing levels that have become idle are forgotten.
func (c *Controller) dumpLevels() []dumpLevel {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []dumpLevel
	for _, name := range slices.Sorted(maps.Keys(c.levels)) {
		out = append(out, dumpLevel{l: c.levels[name]})
	}
	for name, l := range c.quiescing {
		if l.idle() {
			delete(c.quiescing, name)
			continue
		}
		out = append(out, dumpLevel{l: l, quiescing: true})
	}
	slices.SortStableFunc(out, func(a, b dumpLevel) int { return strings.Compare(a.l.name, b.l.name) })
	return out
}

// work is t's estimated work in seat-seconds, as upstream's: its initial
// seats for the estimated service time, and its final seats for the time
// they are held after it ends.
func (t *Ticket) work() float64 {
	return float64(t.initial)*serviceEstimate + float64(t.final)*t.linger.Seconds()
}

// seatSeconds is upstream's form of a quantity of seat-seconds.
func seatSeconds(v float64) string { return fmt.Sprintf("%.8fss", v) }

// dumpWriter aligns the dumps' columns as upstream's: each cell ends in a
// comma and a tab, the tabs aligned with a space of padding.
type dumpWriter struct{ *tabwriter.Writer }

func newDumpWriter(w io.Writer) dumpWriter {
	return dumpWriter{tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)}
}

func (w dumpWriter) row(cells ...string) {
	io.WriteString(w, strings.Join(cells, ",\t")+"\n")
}

// request writes t's row: its level, queue index i and place j.
func (w dumpWriter) request(level string, i, j int, t *Ticket, started time.Time, details bool) {
	cells := []string{level, t.schema, strconv.Itoa(i), strconv.Itoa(j), t.flow,
		t.arrived.UTC().Format(time.RFC3339Nano), strconv.Itoa(t.initial), strconv.Itoa(t.final), t.linger.String(),
		started.UTC().Format(time.RFC3339Nano)}
	if details {
		gv := t.info.version
		if t.info.group != "" {
			gv = t.info.group + "/" + gv
		}
		cells = append(cells, t.info.user, t.info.verb, t.info.path, t.info.namespace, t.info.name, gv, t.info.resource, t.info.subresource)
	}
	w.row(cells...)
}
