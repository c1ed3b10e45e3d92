package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
)

// list: ListRepeat lists of the namespace's Objects ConfigMaps in each of
// three kinds: consistent (resourceVersion ""), from the cache
// (resourceVersion "0"), and consistent in pages of PageSize. Each
// result's latency is per whole list (all its pages).
func (r *runner) list(ctx context.Context) ([]Result, error) {
	if err := r.ensure(ctx, r.sizes.Objects); err != nil {
		return nil, err
	}
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	// The body's size, once, untimed.
	raw, err := r.cs.CoreV1().RESTClient().Get().Namespace(r.ns).Resource("configmaps").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	kinds := []struct {
		name string
		opts metav1.ListOptions
	}{
		{"list-consistent", metav1.ListOptions{}},
		{"list-rv0", metav1.ListOptions{ResourceVersion: "0"}},
		{"list-paged", metav1.ListOptions{Limit: int64(r.sizes.PageSize)}},
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
				l, err := cms.List(ctx, opts)
				if err != nil {
					return out, fmt.Errorf("%s: %w", k.name, err)
				}
				items += len(l.Items)
				pages++
				if l.Continue == "" {
					break
				}
				opts.Continue = l.Continue
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
