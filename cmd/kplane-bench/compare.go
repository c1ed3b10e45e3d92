package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// runCompare builds kplane and runs the scenarios against each storage
// mode in turn, each on a fresh server (and a fresh etcd).
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane-bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o options
	o.register(fs)
	modesFlag := fs.String("modes", "embedded,memory,etcd", "storage modes to run, in order")
	kplaneBin := fs.String("kplane-bin", "", "a built kplane binary (default: go build ./cmd/kplane)")
	etcdBin := fs.String("etcd-bin", "", "a built tools/etcd binary (default: go build it)")
	rounds := fs.Int("rounds", 1, "run the modes this many times, in rounds (embedded, memory, etcd, embedded, …), each on fresh servers; the table shows each figure's median over the rounds, and the spread of the ratios to the reference")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	list, err := selectScenarios(o.scenario)
	if err == nil {
		err = o.sizes.Validate()
	}
	modes := strings.Split(*modesFlag, ",")
	for _, m := range modes {
		if m != "embedded" && m != "memory" && m != "etcd" {
			err = fmt.Errorf("--modes: unknown mode %q: want embedded, memory or etcd", m)
		}
	}
	if *rounds < 1 {
		err = fmt.Errorf("--rounds: %d: want 1 or more", *rounds)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kplane-bench compare: %v\n", err)
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kplane-bench compare: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "kplane-bench-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	if *kplaneBin == "" || (*etcdBin == "" && strings.Contains(*modesFlag, "etcd")) {
		root, err := repoRoot()
		if err != nil {
			return fail(err)
		}
		if err := os.Mkdir(filepath.Join(tmp, "bin"), 0o755); err != nil {
			return fail(err)
		}
		if *kplaneBin == "" {
			*kplaneBin = filepath.Join(tmp, "bin", "kplane")
			if err := goBuild(ctx, root, "./cmd/kplane", *kplaneBin); err != nil {
				return fail(err)
			}
		}
		if *etcdBin == "" && strings.Contains(*modesFlag, "etcd") {
			*etcdBin = filepath.Join(tmp, "bin", "etcd")
			if err := goBuild(ctx, filepath.Join(root, "tools", "etcd"), ".", *etcdBin); err != nil {
				return fail(err)
			}
		}
	}
	out, closeOut, err := o.jsonOut(stdout)
	if err != nil {
		return fail(err)
	}
	loadBefore := loadAvg()
	byMode := map[string][]Result{}
	var all []Result
	emit := func(r Result) { writeJSONLine(out, r); all = append(all, r) }
	// Rounds interleave the modes, so that a drift in the machine's speed
	// (a shared VM's, say) falls on every mode alike.
rounds:
	for round := 1; round <= *rounds; round++ {
		for _, mode := range modes {
			dir := filepath.Join(tmp, fmt.Sprintf("run-%s-%d", mode, round))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fail(err)
			}
			label, emitRound := "", emit
			if *rounds > 1 {
				label = fmt.Sprintf(" (round %d of %d)", round, *rounds)
				emitRound = func(r Result) { r.Round = round; emit(r) }
			}
			fmt.Fprintf(stderr, "kplane-bench compare: --storage %s%s\n", mode, label)
			res, err := compareMode(ctx, mode, dir, *kplaneBin, *etcdBin, o, list, emitRound)
			if err != nil {
				r := Result{Name: "server", Mode: mode, Error: err.Error()}
				emitRound(r)
				res = append(res, r)
			}
			byMode[mode] = append(byMode[mode], res...)
			// A round's data is not needed once its table rows are read.
			os.RemoveAll(dir)
			if ctx.Err() != nil {
				break rounds
			}
		}
	}
	if err := closeOut(); err != nil {
		return fail(err)
	}
	title := o.describe()
	if *rounds > 1 {
		title += fmt.Sprintf("; medians of %d rounds", *rounds)
	}
	fmt.Fprintf(stdout, "\nkplane-bench compare (%s)\nmachine: %d CPUs, load average %s before, %s after; kube-apiserver+etcd: issue 6's reference (2 cores, same load)\n",
		title, runtime.NumCPU(), loadBefore, loadAvg())
	compareTable(stdout, modes, byMode)
	for _, r := range all {
		if r.Error != "" {
			fmt.Fprintf(stdout, "%s (%s): %s\n", r.Name, r.Mode, r.Error)
		}
	}
	if f := failed(all); len(f) > 0 || ctx.Err() != nil {
		fmt.Fprintf(stderr, "kplane-bench compare: failed: %s %v\n", strings.Join(f, ", "), ctxNote(ctx))
		return 1
	}
	return 0
}

// loadAvg is the 1-minute load average, which says how much else the
// machine was doing: on 2 cores it moves the figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "n/a"
}

// describe summarizes the sizes and encoding for the table's title.
func (o *options) describe() string {
	s := o.sizes
	enc := "JSON"
	if o.protobuf {
		enc = "protobuf"
	}
	return fmt.Sprintf("%s; create %d×%d; updates %d×%d; patches %d×%d; objects %d; watch %d×%d",
		enc, s.Workers, s.Creates, s.UpdateWorkers, s.Updates, s.PatchWorkers, s.Patches, s.Objects, s.Watchers, s.WatchUpdates)
}

// compareMode runs one mode: (etcd,) kplane, start-to-ready, the
// scenarios, memory; then stops the servers.
func compareMode(ctx context.Context, mode, dir, kplaneBin, etcdBin string, o options, list []scenario, emit func(Result)) ([]Result, error) {
	flags := []string{"--storage", mode}
	var etcd *process
	if mode == "etcd" {
		p, endpoint, err := startEtcd(ctx, etcdBin, filepath.Join(dir, "etcd"))
		if err != nil {
			return nil, err
		}
		etcd = p
		defer etcd.stop(30 * time.Second)
		flags = append(flags, "--etcd-endpoints", endpoint)
	}
	kp, kubeconfig, ready, err := startKplane(ctx, kplaneBin, dir, flags)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			kp.stop(30 * time.Second)
		}
	}()
	ps := procs{kp.pid()}
	if etcd != nil {
		ps = append(ps, etcd.pid())
	}
	var results []Result
	add := func(r Result) { r.Mode = mode; emit(r); results = append(results, r) }

	idle, idleErr := ps.rss()
	start := Result{Name: "start-to-ready", Ops: 1, Seconds: ready.Seconds(), OpsPerSec: 1 / ready.Seconds()}
	if idleErr == nil {
		start.RSSBytes = &idle
	}
	addKplaneRSS(&start, ps)
	add(start)

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return results, err
	}
	r, err := newRunner(cfg, o.protobuf)
	if err != nil {
		return results, err
	}
	r.sizes, r.mode, r.procs, r.timeout = o.sizes, mode, ps, o.timeout
	// The server is thrown away after the run: no namespace cleanup.
	if _, err := r.setupNamespace(ctx, o.namespace); err != nil {
		return results, err
	}
	results = append(results, r.run(ctx, list, emit)...)

	mem := Result{Name: "memory", Ops: r.made}
	if b, err := ps.rss(); err == nil {
		mem.RSSBytes = &b
		mem.addExtra(map[string]any{"objects": r.made})
		if idleErr == nil {
			mem.addExtra(map[string]any{"idle_rss_bytes": idle})
			if r.made > 0 {
				mem.addExtra(map[string]any{"bytes_per_object": (b - idle) / int64(r.made)})
			}
		}
	} else {
		mem.Error = err.Error()
	}
	addKplaneRSS(&mem, ps)
	add(mem)

	stopped = true
	if err := kp.stop(30 * time.Second); err != nil {
		return results, fmt.Errorf("kplane serve did not shut down cleanly: %v\n%s", err, kp.logTail())
	}
	return results, nil
}

// addKplaneRSS notes kplane's own RSS when the server has more than one
// process (etcd mode).
func addKplaneRSS(r *Result, ps procs) {
	if len(ps) < 2 {
		return
	}
	if b, err := ps[:1].rss(); err == nil {
		r.addExtra(map[string]any{"kplane_rss_bytes": b})
	}
}
