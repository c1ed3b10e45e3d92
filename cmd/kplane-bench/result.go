package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is one scenario's outcome: one JSON line.
//
// Pointers are null when the figure is unknown: server CPU and RSS when
// the bench cannot see the server's process, latencies for scenarios
// that time one thing (informer sync, start to ready).
type Result struct {
	Name string `json:"name"`
	Mode string `json:"mode"` // embedded, memory, etcd, or external (--mode)
	// Round numbers compare's rounds (--rounds) from 1; 0 (left out) in a
	// single run.
	Round int `json:"round,omitempty"`
	// Protocol is the HTTP version the server answered the bench's
	// clients in (HTTP/2.0 or HTTP/1.1), probed before the scenarios.
	Protocol  string   `json:"protocol,omitempty"`
	Ops       int      `json:"ops"`
	Seconds   float64  `json:"seconds"`
	OpsPerSec float64  `json:"ops_per_s"`
	P50ms     *float64 `json:"p50_ms"`
	P99ms     *float64 `json:"p99_ms"`
	Conflicts int64    `json:"conflicts"`
	// ServerCPUPerOp is the server's user+system CPU seconds over the
	// scenario's timed part, divided by Ops.
	ServerCPUPerOp *float64 `json:"server_cpu_per_op"`
	// ClientCPUPerOp is the load generator's own user+system CPU seconds
	// over the same span, divided by Ops: on a machine shared with the
	// server, what the client takes is not left for the server.
	ClientCPUPerOp *float64 `json:"client_cpu_per_op"`
	// IdlePercent is the share of the bench machine's CPU time, all cores
	// together, left idle (idle and iowait in /proc/stat) over the same
	// span; null where the bench cannot read it. With the server on the
	// same machine, a throughput scenario that leaves the cores idle is
	// held back by its clients' round trips, not by CPU alone.
	IdlePercent *float64 `json:"idle_percent"`
	// RSSBytes is the server's resident set at the scenario's end.
	RSSBytes *int64         `json:"rss_bytes"`
	Extra    map[string]any `json:"extra,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// addExtra adds kv to r.Extra.
func (r *Result) addExtra(kv map[string]any) {
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	for k, v := range kv {
		r.Extra[k] = v
	}
}

// setLatencies fills P50ms and P99ms from lat (which it sorts); no
// samples leave them null.
func (r *Result) setLatencies(lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	p50, p99 := ms(percentile(lat, 50)), ms(percentile(lat, 99))
	r.P50ms, r.P99ms = &p50, &p99
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted: the smallest sample with at least p% of the samples at or
// below it. An empty slice gives 0.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeJSONLine writes r as one line of JSON.
func writeJSONLine(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// protocols names the HTTP versions results were measured over, in the
// order first seen: "over HTTP/2.0", or empty when none is known.
func protocols(results []Result) string {
	var seen []string
	for _, r := range results {
		if r.Protocol != "" && !slices.Contains(seen, r.Protocol) {
			seen = append(seen, r.Protocol)
		}
	}
	if len(seen) == 0 {
		return ""
	}
	return "over " + strings.Join(seen, " and ")
}

// writeTable prints results as a table, one row per scenario.
func writeTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmode\tops\tseconds\tops/s\tp50 ms\tp99 ms\tconflicts\tcpu ms/op\tclient ms/op\tidle %\trss MB\t")
	for _, r := range results {
		name := r.Name
		if r.Error != "" {
			name += " (FAILED)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.0f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", name, r.Mode, r.Ops, r.Seconds, r.OpsPerSec,
			optFloat(r.P50ms, 1, 1), optFloat(r.P99ms, 1, 1), r.Conflicts, optFloat(r.ServerCPUPerOp, 1000, 3),
			optFloat(r.ClientCPUPerOp, 1000, 3), optFloat(r.IdlePercent, 1, 0), optRSS(r.RSSBytes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s (%s): %s\n", r.Name, r.Mode, r.Error)
		}
	}
	return nil
}

func optFloat(v *float64, scale float64, prec int) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, *v*scale)
}

func optRSS(v *int64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(*v)/(1<<20))
}

// failed lists the results that carry an error.
func failed(results []Result) []string {
	var names []string
	for _, r := range results {
		if r.Error != "" {
			names = append(names, r.Mode+"/"+r.Name)
		}
	}
	return names
}

// joinErrs joins non-empty messages with "; ".
func joinErrs(msgs ...string) string {
	var out []string
	for _, m := range msgs {
		if m != "" {
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
}
