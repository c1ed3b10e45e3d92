package flowcontrol

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// flowKey names a flow schema's requests at one priority level, as the
// metrics label them.
type flowKey struct{ schema, level string }

// flowStats are the counts of a flow schema's requests at a level.
type flowStats struct {
	dispatched         atomic.Int64
	waiting, executing atomic.Int64    // requests
	seats              atomic.Int64    // held by the executing requests
	rejected           [3]atomic.Int64 // by reasons' index
	waited             [len(waitBuckets) + 1]atomic.Int64
	waitedSum          atomic.Int64 // nanoseconds
}

// reasons are the rejection reasons, in rejected's order.
var reasons = [...]string{reasonConcurrencyLimit, reasonQueueFull, reasonTimeOut}

func (s *flowStats) reject(reason string) {
	s.rejected[slices.Index(reasons[:], reason)].Add(1)
}

// waitBuckets are upstream's for the time a request waited (seconds).
var waitBuckets = [...]float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30}

// observeWait counts a wait of d, of a request that then executed or not.
// (The histogram keeps executed and refused requests apart by its
// "execute" label: refused ones are rare, so they are counted in
// rejected only, and the histogram is of executed requests.)
func (s *flowStats) observeWait(d time.Duration) {
	sec := d.Seconds()
	i := 0
	for i < len(waitBuckets) && sec > waitBuckets[i] {
		i++
	}
	s.waited[i].Add(1)
	s.waitedSum.Add(int64(d))
}

// WriteMetrics appends the priority-and-fairness metrics to b, under
// kube-apiserver's names and labels.
func (c *Controller) WriteMetrics(b *bytes.Buffer) {
	c.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(c.stats), func(a, b flowKey) int {
		if a.schema != b.schema {
			return strings.Compare(a.schema, b.schema)
		}
		return strings.Compare(a.level, b.level)
	})
	stats := make([]*flowStats, len(keys))
	for i, k := range keys {
		stats[i] = c.stats[k]
	}
	names := slices.Sorted(maps.Keys(c.levels))
	type limits struct{ nominal, lower, upper, current int }
	lims := make([]limits, len(names))
	for i, n := range names {
		l := c.levels[n]
		l.mu.Lock()
		lims[i] = limits{l.nominal, l.minCL, l.maxCL, l.current}
		l.mu.Unlock()
	}
	c.mu.Unlock()

	labels := func(k flowKey) string {
		return "flow_schema=" + strconv.Quote(k.schema) + ",priority_level=" + strconv.Quote(k.level)
	}
	family := func(name, typ, help string) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	for _, m := range []struct {
		name, typ, help string
		value           func(*flowStats) int64
	}{
		{"apiserver_flowcontrol_current_executing_requests", "gauge", "[BETA] Requests holding a seat of their priority level now, by flow schema.", func(s *flowStats) int64 { return s.executing.Load() }},
		{"apiserver_flowcontrol_current_executing_seats", "gauge", "[BETA] Seats held now, by flow schema: a request's estimated work, one seat or more.", func(s *flowStats) int64 { return s.seats.Load() }},
		{"apiserver_flowcontrol_current_inqueue_requests", "gauge", "[BETA] Requests waiting for a seat now, by flow schema.", func(s *flowStats) int64 { return s.waiting.Load() }},
		{"apiserver_flowcontrol_dispatched_requests_total", "counter", "[BETA] Requests given a seat, by flow schema.", func(s *flowStats) int64 { return s.dispatched.Load() }},
	} {
		family(m.name, m.typ, m.help)
		for i, k := range keys {
			fmt.Fprintf(b, "%s{%s} %d\n", m.name, labels(k), m.value(stats[i]))
		}
	}
	family("apiserver_flowcontrol_rejected_requests_total", "counter", "[BETA] Requests refused (429), by flow schema and reason.")
	for i, k := range keys {
		for j, r := range reasons {
			if n := stats[i].rejected[j].Load(); n > 0 {
				fmt.Fprintf(b, "apiserver_flowcontrol_rejected_requests_total{%s,reason=%q} %d\n", labels(k), r, n)
			}
		}
	}
	family("apiserver_flowcontrol_request_wait_duration_seconds", "histogram", "[BETA] Time requests of a limited level waited for their seat, by flow schema.")
	for i, k := range keys {
		s := stats[i]
		cum := int64(0)
		for j, le := range waitBuckets {
			cum += s.waited[j].Load()
			fmt.Fprintf(b, "apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute=\"true\",%s,le=%q} %d\n", labels(k), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += s.waited[len(waitBuckets)].Load()
		fmt.Fprintf(b, "apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute=\"true\",%s,le=\"+Inf\"} %d\n", labels(k), cum)
		fmt.Fprintf(b, "apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",%s} %s\n", labels(k), strconv.FormatFloat(time.Duration(s.waitedSum.Load()).Seconds(), 'g', -1, 64))
		fmt.Fprintf(b, "apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",%s} %d\n", labels(k), cum)
	}
	for _, m := range []struct {
		name, help string
		value      func(limits) int
	}{
		{"apiserver_flowcontrol_nominal_limit_seats", "[BETA] Seats of the priority level by its share of the server's.", func(l limits) int { return l.nominal }},
		{"apiserver_flowcontrol_lower_limit_seats", "[ALPHA] The fewest seats the priority level keeps when it lends.", func(l limits) int { return l.lower }},
		{"apiserver_flowcontrol_upper_limit_seats", "[ALPHA] The most seats the priority level may have when it borrows.", func(l limits) int { return l.upper }},
		{"apiserver_flowcontrol_current_limit_seats", "[ALPHA] Seats of the priority level now, after lending and borrowing.", func(l limits) int { return l.current }},
	} {
		family(m.name, "gauge", m.help)
		for i, n := range names {
			fmt.Fprintf(b, "%s{priority_level=%q} %d\n", m.name, n, m.value(lims[i]))
		}
	}
}
