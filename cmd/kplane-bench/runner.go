package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Sizes bound every scenario. The defaults finish each scenario in well
// under a minute on a 2-core machine.
type Sizes struct {
	Workers       int // create and get clients
	Creates       int // ConfigMaps of 1 KiB created
	Gets          int
	UpdateWorkers int // read-modify-write clients on one ConfigMap
	Updates       int
	PatchWorkers  int // merge-patch clients on one ConfigMap
	Patches       int
	ApplyWorkers  int // server-side apply clients, each on a ConfigMap of its own
	Applies       int
	Objects       int // ConfigMaps in the namespace for list and informer-sync
	ListRepeat    int // lists of each kind
	ListClients   int // lists at once in lists-at-once
	PageSize      int
	Watchers      int
	WatchUpdates  int
	// Custom resources created, then given a status, by Workers clients.
	CustomResources int
}

// DefaultSizes are issue 6's loads.
func DefaultSizes() Sizes {
	return Sizes{
		Workers: 16, Creates: 5000, Gets: 5000,
		UpdateWorkers: 8, Updates: 2000,
		PatchWorkers: 8, Patches: 2000,
		ApplyWorkers: 8, Applies: 2000,
		Objects: 10000, ListRepeat: 5, PageSize: 500, ListClients: 50,
		Watchers: 100, WatchUpdates: 1000,
		CustomResources: 2000,
	}
}

// Validate checks that every size is positive.
func (s Sizes) Validate() error {
	for name, v := range map[string]int{"workers": s.Workers, "creates": s.Creates, "gets": s.Gets,
		"update-workers": s.UpdateWorkers, "updates": s.Updates, "patch-workers": s.PatchWorkers,
		"patches": s.Patches, "apply-workers": s.ApplyWorkers, "applies": s.Applies, "objects": s.Objects, "list-repeat": s.ListRepeat, "list-clients": s.ListClients, "page-size": s.PageSize,
		"watchers": s.Watchers, "watch-updates": s.WatchUpdates, "custom-resources": s.CustomResources} {
		if v <= 0 {
			return fmt.Errorf("--%s must be positive, not %d", name, v)
		}
	}
	return nil
}

// scenario is one load. run returns its results (list gives five).
type scenario struct {
	name string
	run  func(r *runner, ctx context.Context) ([]Result, error)
}

// scenarios, in the order "all" runs them: later ones reuse the
// ConfigMaps of earlier ones (list and informer-sync top them up).
var scenarios = []scenario{
	{"create", (*runner).create},
	{"get", (*runner).get},
	{"update-conflicts", (*runner).updateConflicts},
	{"merge-patch", (*runner).mergePatch},
	{"apply", (*runner).apply},
	{"list", (*runner).list},
	{"watch", (*runner).watch},
	{"informer-sync", (*runner).informerSync},
	{"custom-resources", (*runner).customResources},
}

// optInScenarios run only when --scenario names them, after the others:
// "all" stays the load every earlier figure was measured with.
var optInScenarios = []scenario{
	{"lists-at-once", (*runner).listsAtOnce},
}

// selectScenarios parses --scenario: "all" or a comma-separated list.
func selectScenarios(spec string) ([]scenario, error) {
	if spec == "" || spec == "all" {
		return scenarios, nil
	}
	known := append(slices.Clip(scenarios), optInScenarios...)
	want := map[string]bool{}
	for _, n := range strings.Split(spec, ",") {
		n = strings.TrimSpace(n)
		found := false
		for _, s := range known {
			found = found || s.name == n
		}
		if !found {
			var names []string
			for _, s := range known {
				names = append(names, s.name)
			}
			return nil, fmt.Errorf("unknown scenario %q: want all or some of %s", n, strings.Join(names, ","))
		}
		want[n] = true
	}
	var out []scenario
	for _, s := range known {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// runner runs scenarios in one namespace of one server.
type runner struct {
	cfg     *rest.Config // QPS unlimited
	cs      kubernetes.Interface
	ns      string
	sizes   Sizes
	payload payloadKind
	// protocol is what the server answered the probe in: HTTP/2.0, or
	// HTTP/1.1 with --http1 (or DISABLE_HTTP2 set, which client-go
	// honours), or from a server that does not offer h2.
	protocol string
	mode     string
	procs    procs          // the server's processes; empty: CPU and RSS from metrics, or n/a
	metrics  *serverMetrics // without procs, the server's /metrics; nil: n/a
	timeout  time.Duration  // per scenario
	made     int            // ConfigMaps cm-00000 … cm-<made-1> exist in ns
}

func newRunner(cfg *rest.Config, protobuf, http1 bool) (*runner, error) {
	cfg = rest.CopyConfig(cfg)
	// No client-side rate limit: client-go's default (5 QPS) would be the
	// bottleneck, not the server.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "kplane-bench"
	if !protobuf {
		// JSON both ways, as issue 6's reference was measured: typed
		// clients otherwise ask for protobuf first.
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	if http1 {
		// Offered alone in ALPN, http/1.1 keeps client-go's transport
		// from setting up HTTP/2: the transport then pools connections,
		// one per request in flight (up to 25 kept idle).
		cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &runner{cfg: cfg, cs: cs}, nil
}

// probeProtocol asks the server for its version through the clients'
// transport and keeps the protocol of the answer: the one the scenarios'
// requests use.
func (r *runner) probeProtocol(ctx context.Context) error {
	hc, err := rest.HTTPClientFor(r.cfg)
	if err != nil {
		return err
	}
	u, _, err := rest.DefaultServerUrlFor(r.cfg)
	if err != nil {
		return err
	}
	u.Path = path.Join(u.Path, "/version")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("asking the server for its version: %w", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking the server for its version: %s", resp.Status)
	}
	r.protocol = resp.Proto
	return nil
}

// freshClient returns a client with a connection of its own. client-go
// shares one HTTP/2 connection per config, and a server allows a bounded
// number of streams per connection (Go's default is 250), so watchers
// are spread over several.
func (r *runner) freshClient() (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(r.cfg)
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = d.DialContext // a custom dialer opts out of client-go's transport cache
	return kubernetes.NewForConfig(cfg)
}

// setupNamespace creates name, or a fresh kplane-bench-<random> when name
// is empty. cleanup deletes it if this call created it.
func (r *runner) setupNamespace(ctx context.Context, name string) (cleanup func(), err error) {
	ns := &corev1.Namespace{}
	if name == "" {
		ns.GenerateName = "kplane-bench-"
	} else {
		ns.Name = name
	}
	got, err := r.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err) && name != "":
		r.ns = name
		return func() {}, r.adopt(ctx)
	case err != nil:
		return nil, fmt.Errorf("creating the namespace: %w", err)
	}
	r.ns = got.Name
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.cs.CoreV1().Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{})
	}, nil
}

// run runs each scenario with its own deadline, handing each result to
// emit as it comes.
func (r *runner) run(ctx context.Context, list []scenario, emit func(Result)) []Result {
	var all []Result
	for _, s := range list {
		sctx, cancel := context.WithTimeout(ctx, r.timeout)
		results, err := s.run(r, sctx)
		cancel()
		if err != nil && len(results) == 0 {
			results = []Result{{Name: s.name, Error: err.Error()}}
		} else if err != nil {
			for i := range results {
				results[i].Error = joinErrs(results[i].Error, err.Error())
			}
		}
		for _, res := range results {
			res.Mode, res.Protocol = r.mode, r.protocol
			emit(res)
			all = append(all, res)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return all
}

// span measures the timed part of a scenario: wall time and server CPU.
type span struct {
	r          *runner
	start      time.Time
	cpu, first float64 // all the server's processes; the first (kplane) alone
	cpuOK      bool
	client     float64 // this process's CPU seconds
	machine    machineTicks
	machineOK  bool
	metrics    processSample // from the server's /metrics, when r.metrics is set
	metricsOK  bool
	scrapeCPU  float64 // the server's CPU for one GET of /metrics
}

func (r *runner) begin() span {
	s := span{r: r}
	if len(r.procs) > 0 {
		c, err := r.procs.cpuSeconds()
		f, err2 := r.procs[:1].cpuSeconds()
		s.cpu, s.first, s.cpuOK = c, f, err == nil && err2 == nil
	} else if r.metrics != nil {
		// Before the client's CPU and the clock: the GETs are not the
		// scenario's. Between two readings the server renders its
		// metrics about once (the end of one answer, the start of the
		// next), and does so again between the second and the end's: so
		// two readings here tell what to take off. kube-apiserver's
		// /metrics (2 MB) costs it 30-40 ms, a tenth of a list.
		m0, err0 := r.metrics.sample(context.Background())
		m, err := r.metrics.sample(context.Background())
		s.metrics, s.metricsOK = m, err0 == nil && err == nil && m.start == m0.start
		s.scrapeCPU = max(0, m.cpu-m0.cpu)
	}
	s.client = selfCPUSeconds()
	m, err := readMachineTicks()
	s.machine, s.machineOK = m, err == nil
	s.start = time.Now()
	return s
}

// end closes the span as a Result of ops operations with the given
// latency samples (nil for none).
func (s span) end(name string, ops int, lat []time.Duration) Result {
	d := time.Since(s.start)
	res := Result{Name: name, Ops: ops, Seconds: d.Seconds()}
	if d > 0 {
		res.OpsPerSec = float64(ops) / d.Seconds()
	}
	res.setLatencies(lat)
	if ops > 0 {
		v := (selfCPUSeconds() - s.client) / float64(ops)
		res.ClientCPUPerOp = &v
	}
	if s.machineOK {
		if m, err := readMachineTicks(); err == nil {
			if v, ok := m.idlePercentSince(s.machine); ok {
				res.IdlePercent = &v
			}
		}
	}
	if s.cpuOK && ops > 0 {
		if c, err := s.r.procs.cpuSeconds(); err == nil {
			v := (c - s.cpu) / float64(ops)
			res.ServerCPUPerOp = &v
		}
		if f, err := s.r.procs[:1].cpuSeconds(); err == nil && len(s.r.procs) > 1 {
			res.addExtra(map[string]any{"kplane_cpu_per_op": (f - s.first) / float64(ops)})
		}
	}
	if len(s.r.procs) > 0 {
		if b, err := s.r.procs.rss(); err == nil {
			res.RSSBytes = &b
		}
	}
	if s.metricsOK {
		if m, err := s.r.metrics.sample(context.Background()); err == nil {
			res.RSSBytes = &m.rss
			// The same process at both ends (not a restart, nor another
			// API server behind the address), or no CPU figure.
			if m.start == s.metrics.start && ops > 0 {
				v := max(0, m.cpu-s.metrics.cpu-s.scrapeCPU) / float64(ops)
				res.ServerCPUPerOp = &v
			}
			res.addExtra(map[string]any{"server_figures": "metrics", "metrics_scrape_cpu_seconds": s.scrapeCPU})
		}
	}
	return res
}

// parallel runs op(ctx, worker, i) for i in [0, total) on workers
// goroutines and returns each call's latency. The first error stops it.
func parallel(ctx context.Context, workers, total int, op func(ctx context.Context, worker, i int) error) ([]time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					cancel(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	if err := context.Cause(ctx); err != nil {
		return all, err
	}
	return all, nil
}

// adopt takes over the bulk ConfigMaps an earlier run left in r.ns: they
// count as made, so that scenarios top them up instead of creating names
// that exist. They must be cm-00000 … without a gap (a run that failed
// part way may leave one), or the namespace is refused.
func (r *runner) adopt(ctx context.Context) error {
	mc, err := metadata.NewForConfig(r.cfg)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: bulkLabel, Limit: 500}
	for {
		l, err := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(r.ns).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing the ConfigMaps of an earlier run in %s: %w", r.ns, err)
		}
		for _, cm := range l.Items {
			if i, err := strconv.Atoi(strings.TrimPrefix(cm.Name, "cm-")); err == nil && bulkName(i) == cm.Name {
				have[cm.Name] = true // not the apply scenario's, which have the label too
			}
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	for i := range len(have) {
		if !have[bulkName(i)] {
			return fmt.Errorf("namespace %s holds %d bulk ConfigMaps (%s), but not %s: an earlier run stopped part way; delete them (kubectl delete configmaps -n %s -l %s) or give another --namespace",
				r.ns, len(have), bulkLabel, bulkName(i), r.ns, bulkLabel)
		}
	}
	if len(have) > 0 {
		first, err := r.cs.CoreV1().ConfigMaps(r.ns).Get(ctx, bulkName(0), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s of an earlier run in %s: %w", bulkName(0), r.ns, err)
		}
		if first.Data["payload"] != r.payload.value(0) {
			return fmt.Errorf("namespace %s holds bulk ConfigMaps of another --payload than %s: delete them (kubectl delete configmaps -n %s -l %s) or give another --namespace",
				r.ns, r.payload, r.ns, bulkLabel)
		}
	}
	r.made = len(have)
	return nil
}

// createTarget creates cm, the one object of a scenario, afresh: one an
// earlier run left in a namespace given again is deleted first.
func (r *runner) createTarget(ctx context.Context, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		got, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	return got, err
}
