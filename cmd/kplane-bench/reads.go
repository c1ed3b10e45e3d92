package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
