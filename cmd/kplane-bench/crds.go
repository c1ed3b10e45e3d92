package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// runCRDs measures a server holding many CRDs, as large installs bring
// them (Crossplane providers, cert-manager and friends): it starts kplane
// on an empty data dir, creates --count CRDs one after the other (as
// `kubectl apply -f dir/` does) and waits until all are Established, then
// restarts kplane on the same data dir. It reports the creates (time,
// server CPU, RSS after), the restart (start to ready, to every CRD's
// resource served, server CPU, RSS), the first and second create of an
// object of one of the kinds (the first compiles its schema), the first
// /openapi/v3 index (which builds every group's document), and the first
// and second /openapi/v2.
func runCRDs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane-bench crds", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("count", 300, "CRDs to create, spread over groups of ten")
	fields := fs.Int("fields", 40, "string fields in each CRD's spec, besides an integer, an enum, a list-map and a CEL rule")
	kplaneBin := fs.String("kplane-bin", "", "a built kplane binary (default: go build ./cmd/kplane)")
	jsonPath := fs.String("json", "", "write the JSON lines to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kplane-bench crds: %v\n", err)
		return 1
	}
	if *count < 1 || *fields < 0 {
		return fail(fmt.Errorf("--count must be positive and --fields not negative"))
	}
	tmp, err := os.MkdirTemp("", "kplane-bench-crds-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	if *kplaneBin, err = kplaneFor(ctx, *kplaneBin, tmp); err != nil {
		return fail(err)
	}
	out, closeOut, err := (&options{jsonPath: *jsonPath}).jsonOut(stdout)
	if err != nil {
		return fail(err)
	}
	defer closeOut()
	results, err := crdsRun(ctx, *kplaneBin, tmp, *count, *fields)
	for _, r := range results {
		writeJSONLine(out, r)
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, "| step | time | server CPU | RSS after (MB) |")
	fmt.Fprintln(stdout, "|---|---|---|---|")
	for _, r := range results {
		cpu := "n/a"
		if r.ServerCPUPerOp != nil {
			cpu = fmt.Sprintf("%.0f ms", *r.ServerCPUPerOp*float64(r.Ops)*1000)
		}
		fmt.Fprintf(stdout, "| %s | %.0f ms | %s | %s |\n", r.Name, r.Seconds*1000, cpu, optRSS(r.RSSBytes))
	}
	return 0
}

// bulkCRD is CRD number i: Thing<i> in group g<i/10>.bench.kplane.dev.
func bulkCRD(i, fields int) *unstructured.Unstructured {
	props := map[string]any{
		"replicas": map[string]any{"type": "integer", "minimum": int64(0)},
		"mode":     map[string]any{"type": "string", "enum": []any{"a", "b", "c"}},
		"items": map[string]any{"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name"},
			"items": map[string]any{"type": "object", "required": []any{"name"},
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "value": map[string]any{"type": "string"}}}},
	}
	for j := range fields {
		props[fmt.Sprintf("field%d", j)] = map[string]any{"type": "string", "description": "a field of the bench's CRDs"}
	}
	group := fmt.Sprintf("g%d.bench.kplane.dev", i/10)
	plural := fmt.Sprintf("things%d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": fmt.Sprintf("thing%d", i), "kind": fmt.Sprintf("Thing%d", i)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources":             map[string]any{"status": map[string]any{}},
				"additionalPrinterColumns": []any{map[string]any{"name": "Ready", "type": "string", "jsonPath": ".status.ready"}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": props,
						"x-kubernetes-validations": []any{map[string]any{"rule": "self.replicas <= 100", "message": "at most 100"}}},
					"status": map[string]any{"type": "object", "properties": map[string]any{"ready": map[string]any{"type": "string"}}},
				}}},
			}},
		},
	}}
}

func crdsRun(ctx context.Context, bin, dir string, count, fields int) ([]Result, error) {
	var out []Result
	add := func(r Result) { r.Mode = "embedded"; out = append(out, r) }
	p, kubeconfig, ready, err := startKplane(ctx, bin, dir, []string{"--storage", "embedded"})
	if err != nil {
		return nil, err
	}
	defer func() { p.stop(30 * time.Second) }()
	clients := func() (dynamic.Interface, kubernetes.Interface, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, nil, err
		}
		cfg.QPS, cfg.Burst = -1, 0
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		return dc, cs, err
	}
	dc, _, err := clients()
	if err != nil {
		return nil, err
	}
	ps := procs{p.pid()}
	add(Result{Name: "start-to-ready (empty)", Ops: 1, Seconds: ready.Seconds()})

	// Create them all, then wait until each is Established.
	s, cpu0 := time.Now(), ps.cpuOrZero()
	for i := range count {
		if _, err := dc.Resource(crdGVR).Create(ctx, bulkCRD(i, fields), metav1.CreateOptions{}); err != nil {
			return out, fmt.Errorf("CRD %d: %w", i, err)
		}
	}
	if err := allEstablished(ctx, dc, count); err != nil {
		return out, err
	}
	add(measured("create and establish", count, time.Since(s), ps, cpu0))

	// Restart on the same data dir.
	if err := p.stop(30 * time.Second); err != nil {
		return out, fmt.Errorf("stopping kplane: %w", err)
	}
	s = time.Now()
	if p, kubeconfig, ready, err = startKplane(ctx, bin, dir, []string{"--storage", "embedded"}); err != nil {
		return out, err
	}
	ps = procs{p.pid()}
	if dc, _, err = clients(); err != nil {
		return out, err
	}
	add(Result{Name: "restart to ready", Ops: 1, Seconds: ready.Seconds()})
	last := schema.GroupVersionResource{Group: fmt.Sprintf("g%d.bench.kplane.dev", (count-1)/10), Version: "v1", Resource: fmt.Sprintf("things%d", count-1)}
	for {
		if _, err := dc.Resource(last).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Since(s) > time.Minute {
			return out, fmt.Errorf("%s not served a minute after the restart", last)
		}
	}
	served := time.Since(s)
	time.Sleep(2 * time.Second)
	add(measured("restart to every CRD served", 1, served, ps, 0))

	// An object of one kind, twice: the first compiles its schema.
	thing := schema.GroupVersionResource{Group: "g0.bench.kplane.dev", Version: "v1", Resource: "things0"}
	for i, name := range []string{"first create of a kind", "second create"} {
		s, cpu0 := time.Now(), ps.cpuOrZero()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "g0.bench.kplane.dev/v1", "kind": "Thing0",
			"metadata": map[string]any{"name": fmt.Sprintf("t%d", i)}, "spec": map[string]any{"replicas": int64(3), "mode": "a"}}}
		if _, err := dc.Resource(thing).Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		add(measured(name, 1, time.Since(s), ps, cpu0))
	}
	bad := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "g0.bench.kplane.dev/v1", "kind": "Thing0",
		"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"replicas": int64(300)}}}
	if _, err := dc.Resource(thing).Namespace("default").Create(ctx, bad, metav1.CreateOptions{}); err == nil {
		return out, fmt.Errorf("a Thing0 that breaks its CEL rule was created")
	}

	// The first /openapi/v3 index builds every group version's document.
	_, cs, err := clients()
	if err != nil {
		return out, err
	}
	s, cpu0 = time.Now(), ps.cpuOrZero()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(ctx); err != nil {
		return out, fmt.Errorf("/openapi/v3: %w", err)
	}
	add(measured("first /openapi/v3", 1, time.Since(s), ps, cpu0))
	// /openapi/v2, which Helm and Argo CD read, is one document of every
	// kind; the second request is served from what the first built.
	for _, name := range []string{"first /openapi/v2", "second /openapi/v2"} {
		s, cpu0 = time.Now(), ps.cpuOrZero()
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(ctx); err != nil {
			return out, fmt.Errorf("/openapi/v2: %w", err)
		}
		add(measured(name, 1, time.Since(s), ps, cpu0))
	}
	return out, nil
}

// measured is a step of n operations that took d, with the server's CPU
// since cpu0 (0: since it started) and its RSS now.
func measured(name string, n int, d time.Duration, ps procs, cpu0 float64) Result {
	r := Result{Name: name, Ops: n, Seconds: d.Seconds()}
	if cpu, err := ps.cpuSeconds(); err == nil {
		per := (cpu - cpu0) / float64(n)
		r.ServerCPUPerOp = &per
	}
	if rss, err := ps.rss(); err == nil {
		r.RSSBytes = &rss
	}
	return r
}

// cpuOrZero is cpuSeconds, 0 when it cannot be read (measured then
// reports the CPU since the start).
func (p procs) cpuOrZero() float64 {
	s, _ := p.cpuSeconds()
	return s
}

// allEstablished waits until count CRDs are Established.
func allEstablished(ctx context.Context, dc dynamic.Interface, count int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := dc.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, it := range list.Items {
			conds, _, _ := unstructured.NestedSlice(it.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					n++
				}
			}
		}
		if n >= count {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d CRDs Established after two minutes", n, count)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
