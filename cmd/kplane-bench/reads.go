package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
)

// list: ListRepeat lists of the namespace's Objects ConfigMaps in each of
// six kinds: consistent (resourceVersion ""), from the cache
// (resourceVersion "0"), consistent in pages of PageSize, as `kubectl
// get` asks for them (a Table with each row's metadata, in pages of 500),
// as the metadata client does (PartialObjectMetadataList), and consistent
// in JSON read whole but not decoded (the server and the transfer without
// client-go's decode, which is most of list-consistent's time in JSON).
// Each result's latency is per whole list (all its pages).
func (r *runner) list(ctx context.Context) ([]Result, error) {
	if err := r.ensure(ctx, r.sizes.Objects); err != nil {
		return nil, err
	}
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	mc, err := metadata.NewForConfig(r.cfg)
	if err != nil {
		return nil, err
	}
	metas := mc.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace(r.ns)
	// The body's size, once, untimed.
	raw, err := r.cs.CoreV1().RESTClient().Get().Namespace(r.ns).Resource("configmaps").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	// page lists one page: its items and the continue token.
	type page func(opts metav1.ListOptions) (items int, cont string, err error)
	typed := func(opts metav1.ListOptions) (int, string, error) {
		l, err := cms.List(ctx, opts)
		if err != nil {
			return 0, "", err
		}
		return len(l.Items), l.Continue, nil
	}
	kinds := []struct {
		name string
		opts metav1.ListOptions
		page page
	}{
		{"list-consistent", metav1.ListOptions{}, typed},
		{"list-rv0", metav1.ListOptions{ResourceVersion: "0"}, typed},
		{"list-paged", metav1.ListOptions{Limit: int64(r.sizes.PageSize)}, typed},
		{"list-table", metav1.ListOptions{Limit: 500}, func(opts metav1.ListOptions) (int, string, error) {
			req := r.cs.CoreV1().RESTClient().Get().Namespace(r.ns).Resource("configmaps").
				SetHeader("Accept", kubectlTable).Param("limit", strconv.FormatInt(opts.Limit, 10))
			if opts.Continue != "" {
				req = req.Param("continue", opts.Continue)
			}
			data, err := req.DoRaw(ctx)
			if err != nil {
				return 0, "", err
			}
			var t metav1.Table
			if err := json.Unmarshal(data, &t); err != nil {
				return 0, "", err
			}
			if t.Kind != "Table" {
				return 0, "", fmt.Errorf("asked for a Table, got a %q", t.Kind)
			}
			return len(t.Rows), t.Continue, nil
		}},
		{"list-metadata", metav1.ListOptions{}, func(opts metav1.ListOptions) (int, string, error) {
			l, err := metas.List(ctx, opts)
			if err != nil {
				return 0, "", err
			}
			return len(l.Items), l.Continue, nil
		}},
		{"list-bytes", metav1.ListOptions{}, func(metav1.ListOptions) (int, string, error) {
			data, err := r.cs.CoreV1().RESTClient().Get().Namespace(r.ns).Resource("configmaps").
				SetHeader("Accept", runtime.ContentTypeJSON).DoRaw(ctx)
			if err != nil {
				return 0, "", err
			}
			// Not decoded: count the bulk items by their names' prefix
			// (a few ms over 15 MB), so that a short answer still fails.
			return bytes.Count(data, bulkNamePrefix), "", nil
		}},
	}
	var out []Result
	for _, k := range kinds {
		var lat []time.Duration
		items, pages := 0, 0
		s := r.begin()
		for range r.sizes.ListRepeat {
			t0 := time.Now()
			opts := k.opts
			items, pages = 0, 0
			for {
				n, cont, err := k.page(opts)
				if err != nil {
					return out, fmt.Errorf("%s: %w", k.name, err)
				}
				items += n
				pages++
				if cont == "" {
					break
				}
				opts.Continue = cont
			}
			lat = append(lat, time.Since(t0))
		}
		res := s.end(k.name, len(lat), lat)
		res.addExtra(map[string]any{"items": items, "pages": pages, "bytes": len(raw)})
		if items < r.sizes.Objects {
			res.Error = fmt.Sprintf("listed %d items, want at least %d", items, r.sizes.Objects)
		}
		out = append(out, res)
	}
	return out, nil
}

// kubectlTable is the Accept header of `kubectl get` with its default
// output: a Table, in either version, else the object list.
const kubectlTable = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

// informerSync: a ConfigMap informer on the namespace (Objects of them);
// the time from Start to HasSynced. ops is the objects in its store.
func (r *runner) informerSync(ctx context.Context) ([]Result, error) {
	if err := r.ensure(ctx, r.sizes.Objects); err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithNamespace(r.ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	stop := make(chan struct{})
	defer func() { close(stop); f.Shutdown() }()
	s := r.begin()
	f.Start(stop)
	// Poll tightly: cache.WaitForCacheSync polls every 100 ms.
	for !inf.HasSynced() {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("informer not synced: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	n := len(inf.GetStore().ListKeys())
	res := s.end("informer-sync", n, nil)
	res.addExtra(map[string]any{"objects": n})
	if n < r.sizes.Objects {
		res.Error = fmt.Sprintf("synced %d objects, want at least %d", n, r.sizes.Objects)
	}
	return []Result{res}, nil
}

// listsAtOnce: ListClients clients each list the namespace's Objects
// ConfigMaps once, all at the same time, consistent, in JSON whatever
// --protobuf says (the largest body), each read as it comes and thrown
// away, not decoded: what many controllers starting at once, or a fleet
// of scripts, ask of the server. Latency is per list; ops/s is lists per
// second. When the bench sees the server's processes it samples their
// RSS every 20 ms and reports the most seen (server_rss_peak_bytes): what
// the lists in flight held. Not in "all".
func (r *runner) listsAtOnce(ctx context.Context) ([]Result, error) {
	if err := r.ensure(ctx, r.sizes.Objects); err != nil {
		return nil, err
	}
	peak := r.samplePeakRSS(20 * time.Millisecond)
	s := r.begin()
	var bytesPerList atomic.Int64
	lat, err := parallel(ctx, r.sizes.ListClients, r.sizes.ListClients, func(ctx context.Context, _, _ int) error {
		body, err := r.cs.CoreV1().RESTClient().Get().Namespace(r.ns).Resource("configmaps").
			SetHeader("Accept", runtime.ContentTypeJSON).Stream(ctx)
		if err != nil {
			return err
		}
		defer body.Close()
		c := &prefixCounter{prefix: bulkNamePrefix}
		n, err := io.Copy(c, body)
		if err != nil {
			return err
		}
		if c.n < r.sizes.Objects {
			return fmt.Errorf("a list held %d bulk ConfigMaps, want at least %d", c.n, r.sizes.Objects)
		}
		bytesPerList.Store(n)
		return nil
	})
	res := s.end("lists-at-once", len(lat), lat)
	res.addExtra(map[string]any{"clients": r.sizes.ListClients, "bytes": bytesPerList.Load()})
	if p, ok := peak(); ok {
		res.addExtra(map[string]any{"server_rss_peak_bytes": p})
	}
	if err != nil {
		return []Result{res}, fmt.Errorf("lists-at-once: %w", err)
	}
	return []Result{res}, nil
}

// samplePeakRSS samples the server's RSS every period until the returned
// function is called, which reports the most seen; false when the bench
// does not see the server's processes.
func (r *runner) samplePeakRSS(period time.Duration) func() (int64, bool) {
	if len(r.procs) == 0 {
		return func() (int64, bool) { return 0, false }
	}
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var most int64
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			if b, err := r.procs.rss(); err == nil {
				most = max(most, b)
			}
			select {
			case <-done:
				if b, err := r.procs.rss(); err == nil {
					most = max(most, b)
				}
				result <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() (int64, bool) {
		close(done)
		return <-result, true
	}
}

// prefixCounter is an io.Writer that counts the occurrences of prefix in
// what is written through it, across the writes' boundaries.
type prefixCounter struct {
	prefix []byte
	tail   []byte // the last len(prefix)-1 bytes written
	n      int
}

func (c *prefixCounter) Write(p []byte) (int, error) {
	k := len(c.prefix) - 1
	// Neither the tail nor p's first k bytes can hold a whole prefix:
	// what edge holds spans the two writes.
	edge := append(c.tail, p[:min(k, len(p))]...)
	c.n += bytes.Count(edge, c.prefix) + bytes.Count(p, c.prefix)
	if len(p) >= k {
		c.tail = append(c.tail[:0], p[len(p)-k:]...)
	} else {
		c.tail = append(c.tail[:0], edge[max(0, len(edge)-k):]...)
	}
	return len(p), nil
}
