package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplane-dev/kplane/internal/app"
	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

// runScale measures how the embedded store scales with the number of
// objects: for each size, a data dir is seeded with that many small
// ConfigMaps (written straight through the storage layer, as the API
// would store them, which is much faster than creating them over HTTP),
// then kplane serve starts on it. It reports start to ready, RSS once the
// watch caches are filled, the latency of pages of a paged list (limit
// --page-size), the time to walk the whole list in pages, a watch's
// delivery latency, and the RSS after that.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane-bench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizesFlag := fs.String("sizes", "10000,100000", "object counts to measure, comma-separated (1000000 takes minutes)")
	dataBytes := fs.Int("data-bytes", 64, "bytes of data in each ConfigMap")
	pageSize := fs.Int("page-size", 500, "limit of the paged list")
	pages := fs.Int("pages", 20, "first pages timed one by one")
	kplaneBin := fs.String("kplane-bin", "", "a built kplane binary (default: go build ./cmd/kplane)")
	jsonPath := fs.String("json", "", "write the JSON lines to this file instead of stdout")
	keep := fs.String("keep", "", "seed the data dirs under this directory (DIR/N/data) and keep them: a later run with the same DIR starts kplane on them again")
	walks := fs.Int("walks", 1, "walks of the whole paged list (with --protobuf, kplane keeps each object's message from its second read)")
	protobuf := fs.Bool("protobuf", false, "client-go's typed clients as they come (protobuf both ways); without it, JSON, as compare")
	profiles := fs.String("profiles", "", "save the server's heap profile, loaded and at the end, as DIR/heap-N.pb.gz and DIR/heap-after-N.pb.gz (and a CPU profile of the first paged walk as DIR/cpu-walk-N.pb.gz)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *walks < 1 {
		fmt.Fprintln(stderr, "kplane-bench scale: --walks must be at least 1")
		return 2
	}
	var sizes []int
	for _, f := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "kplane-bench scale: --sizes: %q is not a positive count\n", f)
			return 2
		}
		sizes = append(sizes, n)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kplane-bench scale: %v\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "kplane-bench-scale-")
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
	var results []Result
	for _, n := range sizes {
		dir := filepath.Join(tmp, strconv.Itoa(n))
		if *keep != "" {
			dir = filepath.Join(*keep, strconv.Itoa(n))
		}
		res, err := scaleOne(ctx, *kplaneBin, dir, scaleLoad{n, *dataBytes, *pageSize, *pages, *walks, *protobuf}, *profiles, stderr)
		if err != nil {
			return fail(fmt.Errorf("%d objects: %w", n, err))
		}
		for _, r := range res {
			writeJSONLine(out, r)
		}
		results = append(results, res...)
		if *keep == "" {
			os.RemoveAll(dir)
		}
	}
	return writeScaleTable(stdout, results)
}

// seedConfigMap is a small ConfigMap as the API stores one created by
// kubectl: uid, creationTimestamp, a label and managedFields.
func seedConfigMap(i, dataBytes int, now string) *unstructured.Unstructured {
	name := fmt.Sprintf("cm-%07d", i)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"data":       map[string]any{"k": strings.Repeat("x", dataBytes)},
		"metadata": map[string]any{
			"name":              name,
			"namespace":         "default",
			"uid":               string(uuid.NewUUID()),
			"creationTimestamp": now,
			"labels":            map[string]any{"app": "kplane-bench"},
			"managedFields": []any{map[string]any{
				"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl-create", "operation": "Update", "time": now,
				"fieldsV1": map[string]any{
					"f:data":     map[string]any{".": map[string]any{}, "f:k": map[string]any{}},
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}}},
				},
			}},
		},
	}}
}

// seed writes n ConfigMaps into the embedded store at dir/data/kv, with
// enough concurrent writers for group commit to batch them.
func seed(ctx context.Context, dir string, n, dataBytes int) (jsonBytes int, reused bool, err error) {
	k, err := app.OpenStore(app.StoreConfig{Storage: app.StorageEmbedded, DataDir: filepath.Join(dir, "data")})
	if err != nil {
		return 0, false, err
	}
	defer func() {
		if cerr := k.Close(); err == nil {
			err = cerr
		}
	}()
	s := storage.New(k)
	now := time.Now().UTC().Format(time.RFC3339)
	sample, _ := storage.AppendJSON(nil, seedConfigMap(0, dataBytes, now).Object)
	// A data dir kept by an earlier run (--keep) is used again as it is,
	// if it holds the n objects.
	const prefix = "/configmaps/default/cm-"
	have, err := k.Range(ctx, prefix, kv.RangeOptions{End: kv.PrefixEnd(prefix), CountOnly: true})
	if err != nil {
		return 0, false, err
	}
	switch {
	case have.Count == int64(n):
		first, err := s.Get(ctx, prefix+"0000000", storage.GetOptions{})
		if err != nil {
			return 0, false, err
		}
		if data, _, _ := unstructured.NestedString(first.Object, "data", "k"); len(data) != dataBytes {
			return 0, false, fmt.Errorf("%s holds ConfigMaps of %d bytes of data, not %d: remove it, or keep the runs in another directory", dir, len(data), dataBytes)
		}
		return len(sample), true, nil
	case have.Count != 0:
		return 0, false, fmt.Errorf("%s holds %d ConfigMaps, not %d: remove it, or keep the runs in another directory", dir, have.Count, n)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 128 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				obj := seedConfigMap(i, dataBytes, now)
				if _, err := s.Create(ctx, "/configmaps/default/"+obj.GetName(), obj); err != nil {
					select {
					case errs <- err:
					default:
					}
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return 0, false, err
	default:
	}
	return len(sample), false, ctx.Err()
}

// scaleLoad is what scaleOne seeds and reads.
type scaleLoad struct {
	n, dataBytes    int // objects, and bytes of data in each
	pageSize, pages int // the paged list's limit; pages timed one by one
	walks           int // walks of the whole paged list
	protobuf        bool
}

func scaleOne(ctx context.Context, bin, dir string, l scaleLoad, profiles string, log io.Writer) ([]Result, error) {
	n, dataBytes, pageSize, pages := l.n, l.dataBytes, l.pageSize, l.pages
	mode := fmt.Sprintf("embedded-%d", n)
	t0 := time.Now()
	objBytes, reused, err := seed(ctx, dir, n, dataBytes)
	if err != nil {
		return nil, fmt.Errorf("seeding: %w", err)
	}
	seeded := time.Since(t0)
	if reused {
		fmt.Fprintf(log, "kplane-bench scale: %s already holds the %d objects\n", dir, n)
	} else {
		fmt.Fprintf(log, "kplane-bench scale: seeded %d objects in %s\n", n, seeded.Round(time.Millisecond))
	}

	p, kubeconfig, ready, err := startKplane(ctx, bin, dir, []string{"--storage", "embedded"})
	if err != nil {
		return nil, err
	}
	defer p.stop(30 * time.Second)
	ps := procs{p.pid()}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	if !l.protobuf {
		cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json" // as compare, without --protobuf
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cms := cs.CoreV1().ConfigMaps("default")

	var out []Result
	add := func(r Result) {
		r.Mode = mode
		r.addExtra(map[string]any{"objects": n, "object_json_bytes": objBytes})
		out = append(out, r)
	}
	start := Result{Name: "start-to-ready", Ops: 1, Seconds: ready.Seconds()}
	start.addExtra(map[string]any{"seed_seconds": seeded.Seconds()})
	add(start)

	// The first list waits for the ConfigMap cache to fill: time it, then
	// read the RSS of a server holding every object.
	t1 := time.Now()
	first, err := cms.List(ctx, metav1.ListOptions{Limit: int64(pageSize)})
	if err != nil {
		return out, err
	}
	add(Result{Name: "first-page", Ops: 1, Seconds: time.Since(t1).Seconds()})
	// kplane logs when its garbage collector has listed everything and
	// start-up's garbage is returned (a server that does not, an older
	// one, is given the time).
	settled := p.waitLog(ctx, "start-up settled", 2*time.Minute)
	time.Sleep(2 * time.Second) // let the caches and the collector settle
	if rss, err := ps.rss(); err == nil {
		r := Result{Name: "rss-loaded", RSSBytes: &rss}
		r.addExtra(map[string]any{"rss_bytes_per_object": float64(rss) / float64(n), "settled_logged": settled})
		add(r)
	}
	var cpuProfile chan error
	if profiles != "" {
		if err := saveProfile(ctx, cs, "heap", filepath.Join(profiles, fmt.Sprintf("heap-%d.pb.gz", n))); err != nil {
			return out, err
		}
		cpuProfile = make(chan error, 1)
		go func() {
			cpuProfile <- saveProfile(ctx, cs, "profile", filepath.Join(profiles, fmt.Sprintf("cpu-walk-%d.pb.gz", n)))
		}()
	}

	// Pages: the first --pages of the first walk timed one by one, and
	// each whole walk (list-all-paged, then list-all-paged-again).
	var lat []time.Duration
	for i := range l.walks {
		cpu0, _ := ps.cpuSeconds()
		walk := time.Now()
		items, opts := 0, metav1.ListOptions{Limit: int64(pageSize)}
		for {
			t := time.Now()
			list, err := cms.List(ctx, opts)
			if err != nil {
				return out, fmt.Errorf("paged list: %w", err)
			}
			if len(lat) < pages {
				lat = append(lat, time.Since(t))
			}
			items += len(list.Items)
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
		walked := time.Since(walk)
		cpu1, _ := ps.cpuSeconds()
		if i == 0 {
			if cpuProfile != nil {
				if err := <-cpuProfile; err != nil {
					return out, err
				}
			}
			page := Result{Name: "list-page", Ops: len(lat)}
			page.setLatencies(lat)
			add(page)
		}
		all := Result{Name: "list-all-paged", Ops: 1, Seconds: walked.Seconds()}
		if i > 0 {
			all.Name = "list-all-paged-again"
		}
		cpu := (cpu1 - cpu0)
		all.ServerCPUPerOp = &cpu
		all.addExtra(map[string]any{"items": items, "page_size": pageSize, "walk": i + 1, "protobuf": l.protobuf})
		if items != n {
			all.Error = fmt.Sprintf("the pages held %d items, want %d", items, n)
		}
		add(all)
	}

	// A watch from the list's resourceVersion sees an update. (Objects
	// of an earlier run on a kept data dir that stopped half-way go
	// first.)
	if err := deleteScaleWatchObjects(ctx, cms); err != nil {
		return out, err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		return out, err
	}
	var wlat []time.Duration
	for i := range scaleWatchObjects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: scaleWatchName(i)}}
		t := time.Now()
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			w.Stop()
			return out, err
		}
		if err := awaitAdded(ctx, w, cm.Name); err != nil {
			w.Stop()
			return out, err
		}
		wlat = append(wlat, time.Since(t))
	}
	w.Stop()
	wr := Result{Name: "watch-create-to-event", Ops: len(wlat)}
	wr.setLatencies(wlat)
	add(wr)
	if rss, err := ps.rss(); err == nil {
		add(Result{Name: "rss-after", RSSBytes: &rss})
	}
	if profiles != "" {
		if err := saveProfile(ctx, cs, "heap", filepath.Join(profiles, fmt.Sprintf("heap-after-%d.pb.gz", n))); err != nil {
			return out, err
		}
	}
	// The data dir is left as seeded, for another run on it (--keep).
	return out, deleteScaleWatchObjects(ctx, cms)
}

// scaleWatchObjects is how many ConfigMaps the watch step creates.
const scaleWatchObjects = 20

func scaleWatchName(i int) string { return fmt.Sprintf("scale-watch-%d", i) }

// deleteScaleWatchObjects deletes the watch step's ConfigMaps.
func deleteScaleWatchObjects(ctx context.Context, cms typedcorev1.ConfigMapInterface) error {
	for i := range scaleWatchObjects {
		if err := cms.Delete(ctx, scaleWatchName(i), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// saveProfile saves the server's /debug/pprof/<which> to path.
func saveProfile(ctx context.Context, cs kubernetes.Interface, which, path string) error {
	req := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/" + which)
	if which == "profile" {
		req = req.Param("seconds", "3")
	}
	data, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("profile %s: %w", which, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// awaitAdded reads w until the ADDED event of name.
func awaitAdded(ctx context.Context, w watch.Interface, name string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("the watch ended")
			}
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && cm.Name == name {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no ADDED event for %s in 30s", name)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// writeScaleTable prints one row per size.
func writeScaleTable(w io.Writer, results []Result) int {
	type row struct{ start, first, rss, page50, page99, walk, walkAgain, watch50, rssAfter string }
	rows := map[string]*row{}
	var order []string
	code := 0
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s %s: %s\n", r.Mode, r.Name, r.Error)
			code = 1
		}
		x, ok := rows[r.Mode]
		if !ok {
			x = &row{}
			rows[r.Mode] = x
			order = append(order, r.Mode)
		}
		switch r.Name {
		case "start-to-ready":
			x.start = fmt.Sprintf("%.0f ms", r.Seconds*1000)
		case "first-page":
			x.first = fmt.Sprintf("%.0f ms", r.Seconds*1000)
		case "rss-loaded":
			x.rss = optRSS(r.RSSBytes)
		case "list-page":
			x.page50, x.page99 = optFloat(r.P50ms, 1, 1)+" ms", optFloat(r.P99ms, 1, 1)+" ms"
		case "list-all-paged":
			x.walk = fmt.Sprintf("%.2f s", r.Seconds)
		case "list-all-paged-again": // the last walk's
			x.walkAgain = fmt.Sprintf(" (again: %.2f s)", r.Seconds)
		case "watch-create-to-event":
			x.watch50 = optFloat(r.P50ms, 1, 1) + " ms"
		case "rss-after":
			x.rssAfter = optRSS(r.RSSBytes)
		}
	}
	fmt.Fprintln(w, "| objects | start to ready | first page (cache fill) | RSS loaded | page p50 | page p99 | all pages | watch p50 | RSS after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, m := range order {
		x := rows[m]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(m, "embedded-"),
			x.start, x.first, x.rss, x.page50, x.page99, x.walk+x.walkAgain, x.watch50, x.rssAfter)
	}
	return code
}
