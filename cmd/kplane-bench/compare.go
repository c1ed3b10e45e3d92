package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// runCompare builds kplane and runs the scenarios against each storage
// mode in turn, each on a fresh server (and a fresh etcd). The kube mode
// runs the upstream kube-apiserver instead of kplane (kube.go).
func runCompare(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane-bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o options
	o.register(fs)
	modesFlag := fs.String("modes", "embedded,memory,etcd", "storage modes to run, in order; kube adds the upstream kube-apiserver with etcd (built from tools/kube-apiserver, minutes the first time) for a measured reference")
	var bins binaries
	fs.StringVar(&bins.kplane, "kplane-bin", "", "a built kplane binary (default: go build ./cmd/kplane)")
	fs.StringVar(&bins.etcd, "etcd-bin", "", "a built tools/etcd binary (default: go build it)")
	fs.StringVar(&bins.kube, "kube-apiserver-bin", "", "a built tools/kube-apiserver binary, for the kube mode (default: go build it)")
	rounds := fs.Int("rounds", 1, "run the modes this many times, in rounds (embedded, memory, etcd, embedded, …), each on fresh servers; the table shows each figure's median over the rounds, and the spread of the ratios to the reference")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	list, err := selectScenarios(o.scenario)
	if err == nil {
		err = o.validate()
	}
	modes := strings.Split(*modesFlag, ",")
	for _, m := range modes {
		if m != "embedded" && m != "memory" && m != "etcd" && m != "kube" {
			err = fmt.Errorf("--modes: unknown mode %q: want embedded, memory, etcd or kube", m)
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
	if err := bins.build(ctx, modes, filepath.Join(tmp, "bin"), stderr); err != nil {
		return fail(err)
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
			fmt.Fprintf(stderr, "kplane-bench compare: %s%s\n", modeTitle(mode), label)
			res, err := compareMode(ctx, mode, dir, bins, o, list, emitRound)
			if err != nil {
				r := Result{Name: "server", Mode: mode, Error: err.Error()}
				emitRound(r)
				res = append(res, r)
			}
			if *rounds > 1 {
				for i := range res { // the table pairs each round with kube's
					res[i].Round = round
				}
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
	if p := protocols(all); p != "" {
		title += "; " + p
	}
	if *rounds > 1 {
		title += fmt.Sprintf("; medians of %d rounds", *rounds)
	}
	fmt.Fprintf(stdout, "\nkplane-bench compare (%s)\nmachine: %d CPUs, load average %s before, %s after; ref: issue 6's kube-apiserver + etcd reference (2 cores, same load)\n",
		title, runtime.NumCPU(), loadBefore, loadAvg())
	if slices.Contains(modes, "kube") {
		fmt.Fprintf(stdout, "kube: kube-apiserver %s + etcd, measured in this run\n", bins.kubeVersion)
	}
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
	return fmt.Sprintf("%s; payload %s; create %d×%d; updates %d×%d; patches %d×%d; objects %d; watch %d×%d",
		enc, o.payload, s.Workers, s.Creates, s.UpdateWorkers, s.Updates, s.PatchWorkers, s.Patches, s.Objects, s.Watchers, s.WatchUpdates)
}

// binaries are the servers compare starts: kplane, etcd and, for the
// kube mode, kube-apiserver (and the version it reports).
type binaries struct {
	kplane, etcd, kube string
	kubeVersion        string
}

// build makes the binaries modes need that were not given, in dir, from
// the repository's ./cmd/kplane, tools/etcd and tools/kube-apiserver.
func (b *binaries) build(ctx context.Context, modes []string, dir string, stderr io.Writer) error {
	kube := slices.Contains(modes, "kube")
	needEtcd := kube || slices.Contains(modes, "etcd")
	needKplane := slices.ContainsFunc(modes, func(m string) bool { return m != "kube" })
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if needKplane {
		var err error
		if b.kplane, err = kplaneFor(ctx, b.kplane, dir); err != nil {
			return err
		}
	}
	if (needEtcd && b.etcd == "") || (kube && b.kube == "") {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		if needEtcd && b.etcd == "" {
			b.etcd = filepath.Join(dir, "etcd")
			if err := goBuild(ctx, filepath.Join(root, "tools", "etcd"), ".", b.etcd); err != nil {
				return err
			}
		}
		if kube && b.kube == "" {
			fmt.Fprintln(stderr, "kplane-bench compare: building tools/kube-apiserver (minutes the first time)")
			b.kube = filepath.Join(dir, "kube-apiserver")
			if err := buildKube(ctx, root, b.kube); err != nil {
				return err
			}
		}
	}
	if kube {
		out, err := exec.CommandContext(ctx, b.kube, "--version").Output()
		if err != nil {
			return fmt.Errorf("%s --version: %v", b.kube, err)
		}
		b.kubeVersion = strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes ")
	}
	return nil
}

// modeTitle names a mode's server in progress lines.
func modeTitle(mode string) string {
	if mode == "kube" {
		return "kube-apiserver + etcd"
	}
	return "--storage " + mode
}

// compareMode runs one mode: (etcd,) the server, start-to-ready, the
// scenarios, memory; then stops the servers.
func compareMode(ctx context.Context, mode, dir string, bins binaries, o options, list []scenario, emit func(Result)) ([]Result, error) {
	var (
		etcd         *process
		etcdEndpoint string
	)
	if mode == "etcd" || mode == "kube" {
		p, endpoint, err := startEtcd(ctx, bins.etcd, filepath.Join(dir, "etcd"))
		if err != nil {
			return nil, err
		}
		etcd, etcdEndpoint = p, endpoint
		defer etcd.stop(30 * time.Second)
	}
	var (
		srv        *process
		kubeconfig string
		ready      time.Duration
		err        error
	)
	if mode == "kube" {
		srv, kubeconfig, ready, err = startKube(ctx, bins.kube, etcdEndpoint, filepath.Join(dir, "kube"))
	} else {
		flags := []string{"--storage", mode}
		if etcd != nil {
			flags = append(flags, "--etcd-endpoints", etcdEndpoint)
		}
		srv, kubeconfig, ready, err = startKplane(ctx, bins.kplane, dir, flags)
	}
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.stop(30 * time.Second)
		}
	}()
	ps := procs{srv.pid()}
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
	addServerRSS(&start, mode, ps)
	add(start)

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return results, err
	}
	r, err := newRunner(cfg, o.protobuf, o.http1)
	if err != nil {
		return results, err
	}
	if err := r.probeProtocol(ctx); err != nil {
		return results, err
	}
	r.sizes, r.payload, r.mode, r.procs, r.timeout = o.sizes, payloadKind(o.payload), mode, ps, o.timeout
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
	addServerRSS(&mem, mode, ps)
	add(mem)

	stopped = true
	if err := srv.stop(30 * time.Second); err != nil {
		return results, fmt.Errorf("%s did not shut down cleanly: %v\n%s", serverName(mode), err, srv.logTail())
	}
	return results, nil
}

// serverName is the API server a mode runs.
func serverName(mode string) string {
	if mode == "kube" {
		return "kube-apiserver"
	}
	return "kplane serve"
}

// addServerRSS notes the API server's own RSS when the server has more
// than one process (etcd and kube modes): kplane_rss_bytes, or
// kube_apiserver_rss_bytes.
func addServerRSS(r *Result, mode string, ps procs) {
	if len(ps) < 2 {
		return
	}
	key := "kplane_rss_bytes"
	if mode == "kube" {
		key = "kube_apiserver_rss_bytes"
	}
	if b, err := ps[:1].rss(); err == nil {
		r.addExtra(map[string]any{key: b})
	}
}
