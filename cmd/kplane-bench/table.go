package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// metrics name the figures a comparison row can show, each read from a
// Result; ok is false when the result lacks it.
var metrics = map[string]func(Result) (v float64, ok bool){
	"ops/s":     func(r Result) (float64, bool) { return r.OpsPerSec, r.Ops > 0 },
	"p50 ms":    func(r Result) (float64, bool) { return deref(r.P50ms) },
	"p99 ms":    func(r Result) (float64, bool) { return deref(r.P99ms) },
	"conflicts": func(r Result) (float64, bool) { return float64(r.Conflicts), true },
	"cpu ms/op": func(r Result) (float64, bool) { v, ok := deref(r.ServerCPUPerOp); return v * 1000, ok },
	"client ms/op": func(r Result) (float64, bool) {
		v, ok := deref(r.ClientCPUPerOp)
		return v * 1000, ok
	},
	"idle %": func(r Result) (float64, bool) { return deref(r.IdlePercent) },
	"ms":     func(r Result) (float64, bool) { return r.Seconds * 1000, true },
	"rss MB": func(r Result) (float64, bool) {
		if r.RSSBytes == nil {
			return 0, false
		}
		return float64(*r.RSSBytes) / (1 << 20), true
	},
	// The server's RSS sampled while the scenario ran (lists-at-once):
	// an int64 as measured, a float64 once read back from JSON.
	"peak rss MB": func(r Result) (float64, bool) {
		switch v := r.Extra["server_rss_peak_bytes"].(type) {
		case int64:
			return float64(v) / (1 << 20), true
		case float64:
			return v / (1 << 20), true
		}
		return 0, false
	},
}

// rowsFor are the metrics compared for each scenario; others get
// defaultRows.
var rowsFor = map[string][]string{
	"start-to-ready":   {"ms", "rss MB"},
	"update-conflicts": {"ops/s", "p50 ms", "p99 ms", "conflicts", "cpu ms/op", "client ms/op", "idle %"},
	"list-consistent":  {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"list-rv0":         {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"list-paged":       {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"list-table":       {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"list-metadata":    {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"list-bytes":       {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"cr-list":          {"p50 ms", "p99 ms", "cpu ms/op", "client ms/op"},
	"watch":            {"p50 ms", "p99 ms", "cpu ms/op"},
	"informer-sync":    {"ms", "ops/s", "cpu ms/op", "client ms/op"},
	"memory":           {"rss MB"},
	"lists-at-once":    {"ops/s", "p50 ms", "p99 ms", "cpu ms/op", "client ms/op", "peak rss MB"},
	"server":           nil, // a mode that failed to start: its error follows the table
}

var defaultRows = []string{"ops/s", "p50 ms", "p99 ms", "cpu ms/op", "client ms/op", "idle %"}

// reference holds issue 6's figures for a real kube-apiserver with etcd
// (fsync on) on a 2-core machine like ours, keyed "scenario metric".
var reference = map[string]float64{
	"start-to-ready ms":          3300,
	"start-to-ready rss MB":      307, // both processes, idle
	"create ops/s":               1090,
	"create p50 ms":              13,
	"create p99 ms":              36,
	"create cpu ms/op":           1.4,
	"update-conflicts ops/s":     160,
	"update-conflicts conflicts": 4300,
	"list-consistent p50 ms":     750,
	"watch p99 ms":               49,
	"memory rss MB":              640, // after 10,000 objects and the runs
}

// compareTable prints one row per (scenario, metric), a column per mode,
// the ratio of each kplane mode to etcd (when etcd is among modes), the
// first kplane mode's ratio to kube (when kube, the upstream
// kube-apiserver, is among modes), and issue 6's reference with the first
// kplane mode's ratio to it. A mode with several results for a scenario
// (compare's rounds) shows their median. The ratios to kube and to the
// reference are followed by their lowest and highest round: to kube,
// each round's figure against kube's in the same round.
func compareTable(w io.Writer, modes []string, byMode map[string][]Result) error {
	var order []string
	seen := map[string]bool{}
	index := map[string]map[string][]Result{}
	for _, m := range modes {
		index[m] = map[string][]Result{}
		for _, r := range byMode[m] {
			index[m][r.Name] = append(index[m][r.Name], r)
			if !seen[r.Name] {
				seen[r.Name] = true
				order = append(order, r.Name)
			}
		}
	}
	var ratios []string
	first := "" // the first kplane mode, compared with kube and the reference
	for _, m := range modes {
		if m == "kube" {
			continue
		}
		if first == "" {
			first = m
		}
		if m != "etcd" && slices.Contains(modes, "etcd") {
			ratios = append(ratios, m)
		}
	}
	kube := first != "" && slices.Contains(modes, "kube")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "scenario\tmetric\t")
	for _, m := range modes {
		fmt.Fprintf(tw, "%s\t", m)
	}
	for _, m := range ratios {
		fmt.Fprintf(tw, "%s/etcd\t", m)
	}
	if kube {
		fmt.Fprintf(tw, "%s/kube\t", first)
	}
	if first != "" {
		fmt.Fprintf(tw, "ref\t%s/ref\t", first)
	}
	fmt.Fprint(tw, "\n")
	for _, name := range order {
		rows, ok := rowsFor[name]
		if !ok {
			rows = defaultRows
		}
		label := name
		for _, m := range modes {
			for _, r := range index[m][name] {
				if r.Error != "" {
					label = name + " (FAILED)"
				}
			}
		}
		for _, metric := range rows {
			get := metrics[metric]
			vals := map[string]float64{}
			var firsts []float64                   // the first kplane mode's figure in each round
			rounds := map[string]map[int]float64{} // each mode's figure by round, to pair with kube's
			fmt.Fprintf(tw, "%s\t%s\t", label, metric)
			for _, m := range modes {
				results := index[m][name]
				if len(results) == 0 {
					fmt.Fprint(tw, "-\t")
					continue
				}
				var got []float64
				rounds[m] = map[int]float64{}
				for _, r := range results {
					if v, ok := get(r); ok {
						got = append(got, v)
						rounds[m][r.Round] = v
					}
				}
				if len(got) == 0 {
					fmt.Fprint(tw, "n/a\t")
					continue
				}
				if m == first {
					firsts = got
				}
				vals[m] = median(got)
				fmt.Fprintf(tw, "%s\t", formatMetric(metric, vals[m]))
			}
			for _, m := range ratios {
				if metric == "idle %" {
					fmt.Fprint(tw, "\t") // a share of the machine: no ratio
					continue
				}
				fmt.Fprintf(tw, "%s\t", ratio(vals, m, "etcd"))
			}
			if kube {
				if metric == "idle %" {
					fmt.Fprint(tw, "\t")
				} else {
					var each []float64
					for round, v := range rounds[first] {
						if k, ok := rounds["kube"][round]; ok && k != 0 {
							each = append(each, v/k)
						}
					}
					fmt.Fprintf(tw, "%s%s\t", ratio(vals, first, "kube"), spread(each))
				}
			}
			if first == "" {
				fmt.Fprint(tw, "\n")
				continue
			}
			ref, ok := reference[name+" "+metric]
			if !ok {
				fmt.Fprint(tw, "\t\t\n")
				continue
			}
			vals["ref"] = ref
			var each []float64
			for _, v := range firsts {
				each = append(each, v/ref)
			}
			fmt.Fprintf(tw, "%s\t%s%s\t\n", formatMetric(metric, ref), ratio(vals, first, "ref"), spread(each))
		}
	}
	return tw.Flush()
}

// spread is " (lowest–highest)" of ratios from more than one round, or
// "" when there are fewer.
func spread(ratios []float64) string {
	if len(ratios) < 2 {
		return ""
	}
	return fmt.Sprintf(" (%.2f–%.2f)", slices.Min(ratios), slices.Max(ratios))
}

// median is the middle of vs (the mean of the two middle ones for an
// even count); vs is not empty.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio formats vals[a]/vals[b], or "-" when either is missing or b is 0.
func ratio(vals map[string]float64, a, b string) string {
	x, ok1 := vals[a]
	y, ok2 := vals[b]
	if !ok1 || !ok2 || y == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x/y)
}

func formatMetric(metric string, v float64) string {
	switch metric {
	case "ops/s", "conflicts":
		return fmt.Sprintf("%.0f", v)
	case "cpu ms/op", "client ms/op":
		return fmt.Sprintf("%.3f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func deref(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}
