package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

const usage = `kplane-bench: load a Kubernetes API server through client-go.

Usage:
  kplane-bench [flags]           run the scenarios against --kubeconfig (any cluster)
  kplane-bench compare [flags]   build ./cmd/kplane and run the scenarios against it with
                                 --storage embedded, memory and etcd in turn, side by side
                                 (--modes …,kube adds the upstream kube-apiserver on etcd)
  kplane-bench scale [flags]     seed the embedded store with --sizes objects each, start kplane
                                 on it, and report start-up, RSS, list pages and watch delivery
  kplane-bench crds [flags]      create --count CRDs in kplane, restart it, and report the creates,
                                 the restart, RSS, the first object of a kind and the first OpenAPI

Scenarios (--scenario, comma-separated; default all):
  create, get, update-conflicts, merge-patch, apply (and apply-unchanged), list (consistent, rv0, paged, table, metadata, bytes),
  watch, informer-sync, custom-resources (cr-create, cr-status, cr-status-unchanged, cr-list). compare adds
  start-to-ready and memory. Only when named: lists-at-once (--list-clients consistent JSON lists of the
  --objects ConfigMaps at the same time, read and thrown away; the server's peak RSS when the bench sees it).

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the flags both forms share.
type options struct {
	sizes     Sizes
	scenario  string
	namespace string
	jsonPath  string
	protobuf  bool
	http1     bool
	payload   string
	timeout   time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	d := DefaultSizes()
	s := &o.sizes
	fs.IntVar(&s.Workers, "workers", d.Workers, "clients of create and get")
	fs.IntVar(&s.Creates, "creates", d.Creates, "ConfigMaps of 1 KiB to create")
	fs.IntVar(&s.Gets, "gets", d.Gets, "gets")
	fs.IntVar(&s.UpdateWorkers, "update-workers", d.UpdateWorkers, "clients updating one ConfigMap")
	fs.IntVar(&s.Updates, "updates", d.Updates, "read-modify-write updates in all")
	fs.IntVar(&s.PatchWorkers, "patch-workers", d.PatchWorkers, "clients merge-patching one ConfigMap")
	fs.IntVar(&s.Patches, "patches", d.Patches, "merge patches in all")
	fs.IntVar(&s.ApplyWorkers, "apply-workers", d.ApplyWorkers, "server-side apply clients, each on a ConfigMap of its own")
	fs.IntVar(&s.Applies, "applies", d.Applies, "server-side applies in all")
	fs.IntVar(&s.Objects, "objects", d.Objects, "ConfigMaps listed and synced by an informer (topped up to this)")
	fs.IntVar(&s.ListRepeat, "list-repeat", d.ListRepeat, "lists of each kind")
	fs.IntVar(&s.ListClients, "list-clients", d.ListClients, "clients listing at once in lists-at-once")
	fs.IntVar(&s.PageSize, "page-size", d.PageSize, "limit of the paged list")
	fs.IntVar(&s.Watchers, "watchers", d.Watchers, "watchers of one ConfigMap")
	fs.IntVar(&s.WatchUpdates, "watch-updates", d.WatchUpdates, "updates the watchers receive")
	fs.IntVar(&s.CustomResources, "custom-resources", d.CustomResources, "custom resources (Widgets of a CRD the bench creates) created, then given a status")
	fs.StringVar(&o.scenario, "scenario", "all", "scenarios to run, comma-separated")
	fs.StringVar(&o.namespace, "namespace", "", "namespace to use (default: a fresh kplane-bench-<random>); deleted at the end if the run created it, and an existing one's bulk ConfigMaps from an earlier run are reused")
	fs.StringVar(&o.jsonPath, "json", "", "write the JSON lines to this file instead of stdout")
	fs.BoolVar(&o.protobuf, "protobuf", false, "client-go's typed clients as they come: built-in kinds in protobuf both ways (Accept: protobuf, then JSON), watches included; without it, JSON both ways, as issue 6's reference was measured")
	fs.BoolVar(&o.http1, "http1", false, "client-go over HTTP/1.1, a connection for each request in flight, as DISABLE_HTTP2=1 makes it; without it, one multiplexed HTTP/2 connection when the server offers h2, as client-go comes (the JSON lines name the protocol the server answered in)")
	fs.StringVar(&o.payload, "payload", string(payloadText), "what each bulk ConfigMap's 1 KiB holds: text (configuration-like text, different in every object: a list gzips ~3×, as config files do) or letters (one letter, the same in every object: ~37×; the default before the twenty-second pass, to repeat earlier figures)")
	fs.DurationVar(&o.timeout, "scenario-timeout", 2*time.Minute, "deadline of each scenario")
}

// validate checks the sizes and the payload.
func (o *options) validate() error {
	if err := o.sizes.Validate(); err != nil {
		return err
	}
	_, err := parsePayload(o.payload)
	return err
}

// jsonOut opens where the JSON lines go.
func (o *options) jsonOut(stdout io.Writer) (io.Writer, func() error, error) {
	if o.jsonPath == "" {
		return stdout, func() error { return nil }, nil
	}
	f, err := os.Create(o.jsonPath)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return runCompare(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale" {
		return runScale(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "crds" {
		return runCRDs(ctx, args[1:], stdout, stderr)
	}
	return runLoad(ctx, args, stdout, stderr)
}

// runLoad runs the scenarios against --kubeconfig.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o options
	o.register(fs)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	mode := fs.String("mode", "external", "label of the run in the output")
	pids := fs.String("server-pid", "", "the server's process ids, comma-separated, for server CPU and RSS (default: from --server-metrics)")
	useMetrics := fs.Bool("server-metrics", true, "without --server-pid, read server CPU and RSS from the API server's /metrics (process_cpu_seconds_total, process_resident_memory_bytes): the one API server process, not etcd; false, or a server without them: n/a")
	cpuProfile := fs.String("cpuprofile", "", "write the bench's own CPU profile (client-go and the load loops) over the scenarios to this file, for go tool pprof")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kplane-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	list, err := selectScenarios(o.scenario)
	if err == nil {
		err = o.validate()
	}
	var ps procs
	for _, f := range strings.Split(*pids, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, perr := strconv.Atoi(f)
		if perr != nil {
			err = fmt.Errorf("--server-pid %q: %v", f, perr)
		}
		ps = append(ps, pid)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 2
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	r, err := newRunner(cfg, o.protobuf, o.http1)
	if err == nil {
		err = r.probeProtocol(ctx)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	r.sizes, r.payload, r.mode, r.procs, r.timeout = o.sizes, payloadKind(o.payload), *mode, ps, o.timeout
	if len(ps) == 0 && *useMetrics {
		m := &serverMetrics{rc: r.cs.Discovery().RESTClient()}
		if _, err := m.sample(ctx); err != nil {
			fmt.Fprintf(stderr, "kplane-bench: server CPU and RSS are n/a: %v\n", err)
		} else {
			r.metrics = m
			fmt.Fprintln(stderr, "kplane-bench: server CPU and RSS from the API server's /metrics: that process alone (not etcd)")
		}
	}
	out, closeOut, err := o.jsonOut(stdout)
	if err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	cleanup, err := r.setupNamespace(ctx, o.namespace)
	if err != nil {
		closeOut()
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		cleanup()
		closeOut()
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	results := r.run(ctx, list, func(res Result) { writeJSONLine(out, res) })
	if err := stopProfile(); err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
	}
	cleanup()
	if err := closeOut(); err != nil {
		fmt.Fprintf(stderr, "kplane-bench: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout)
	writeTable(stdout, results)
	if f := failed(results); len(f) > 0 || ctx.Err() != nil {
		fmt.Fprintf(stderr, "kplane-bench: failed: %s %v\n", strings.Join(f, ", "), ctxNote(ctx))
		return 1
	}
	return 0
}

// startCPUProfile profiles this process into path until stop; an empty
// path profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}

// ctxNote says why ctx ended, or nothing.
func ctxNote(ctx context.Context) string {
	if err := context.Cause(ctx); err != nil {
		return "(" + err.Error() + ")"
	}
	return ""
}
