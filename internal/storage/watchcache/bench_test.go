package watchcache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

// benchObjects is the size of kplane-bench's list scenarios.
const benchObjects = 10000

// benchConfigMap is a ConfigMap as kplane-bench creates them and the API
// stores them: a 1 KiB payload, a label, managedFields; ~1.5 KB of JSON.
func benchConfigMap(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"data":       map[string]any{"payload": strings.Repeat("x", 1024)},
		"metadata": map[string]any{
			"name":              fmt.Sprintf("cm-%05d", i),
			"namespace":         "default",
			"uid":               fmt.Sprintf("cfb99ddf-3bcc-4b58-b0ba-%012d", i),
			"creationTimestamp": "2026-11-23T11:43:28Z",
			"labels":            map[string]any{"app": "kplane-bench"},
			"managedFields": []any{map[string]any{
				"apiVersion": "v1",
				"fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{
					"f:data":     map[string]any{".": map[string]any{}, "f:payload": map[string]any{}},
					"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}}},
				},
				"manager":   "kubectl-create",
				"operation": "Update",
				"time":      "2026-11-23T11:43:28Z",
			}},
		},
	}}
}

// filled runs a cache over a fresh in-memory store and creates n bulk
// ConfigMaps through the store, as the API server does: the cache learns
// them from its watch. It returns once the cache has seen every write.
func filled(b *testing.B, n int, cache bool) (*storage.Store, *watchcache.Cache) {
	b.Helper()
	k, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	s := storage.New(k)
	var c *watchcache.Cache
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if cache {
		c = watchcache.New(watchcache.Config{Store: s, Prefix: prefix})
		go func() { defer close(done); c.Run(rctx) }()
	} else {
		close(done)
	}
	b.Cleanup(func() { cancel(); <-done; k.Close() })
	for i := 0; i < n; i++ {
		if _, err := s.Create(ctx, fmt.Sprintf("%sdefault/cm-%05d", prefix, i), benchConfigMap(i)); err != nil {
			b.Fatal(err)
		}
	}
	if cache {
		if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil { // waits for the cache
			b.Fatal(err)
		}
	}
	return s, c
}

// writeHeapProfile writes the heap profile with the objects in memory to
// $WATCHCACHE_HEAPPROFILE.name, when that is set: -memprofile is written
// after the benchmark has let them go.
func writeHeapProfile(b *testing.B, name string) {
	path := os.Getenv("WATCHCACHE_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path + "." + strings.ReplaceAll(name, "+", "-"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory reports the live heap per stored object, with and
// without a watch cache, next to the object's JSON size: issue 6's target
// is at most 3× the JSON for the whole server.
func BenchmarkMemory(b *testing.B) {
	data, _ := storage.AppendJSON(nil, benchConfigMap(0).Object)
	for _, tc := range []struct {
		name  string
		cache bool
	}{{"store", false}, {"store+cache", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var perObj float64
			for b.Loop() {
				before := heapInuse()
				s, c := filled(b, benchObjects, tc.cache)
				perObj = float64(heapInuse()-before) / benchObjects
				writeHeapProfile(b, tc.name)
				runtime.KeepAlive(s)
				runtime.KeepAlive(c)
			}
			b.ReportMetric(perObj, "heap-B/obj")
			b.ReportMetric(float64(len(data)), "json-B/obj")
		})
	}
}

// BenchmarkList lists 10,000 ConfigMaps through the cache and encodes
// the result as the HTTP layer does, from the records' JSON: a consistent
// list, a resourceVersion="0" list, and a paged one (20 pages of 500); and
// a consistent list decoded into objects, as in-process callers get it.
func BenchmarkList(b *testing.B) {
	_, c := filled(b, benchObjects, true)
	encode := func(l *storage.ListOptions) (string, int) {
		list, err := c.ListRecords(ctx, prefix, *l)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := list.AppendJSON(make([]byte, 0, 2048*(1+len(list.Items))), "v1", "ConfigMapList", true); err != nil {
			b.Fatal(err)
		}
		return list.Continue, len(list.Items)
	}
	b.Run("decoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list, err := c.List(ctx, prefix, storage.ListOptions{})
			if err != nil || len(list.Items) != benchObjects {
				b.Fatalf("%v, %d items", err, len(list.Items))
			}
		}
	})
	b.Run("consistent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, n := encode(&storage.ListOptions{}); n != benchObjects {
				b.Fatalf("%d items", n)
			}
		}
	})
	b.Run("rv=0", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encode(&storage.ListOptions{ResourceVersion: "0"})
		}
	})
	b.Run("paged-500", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			opts := storage.ListOptions{Limit: 500}
			total := 0
			for {
				cont, n := encode(&opts)
				total += n
				if cont == "" {
					break
				}
				opts.Continue = cont
			}
			if total != benchObjects {
				b.Fatalf("%d items over the pages", total)
			}
		}
	})
}

// BenchmarkFanout is the watch fan-out step: one update of a ConfigMap
// delivered to W watchers of its namespace, each of which writes the
// event's JSON as the HTTP layer does. An op is one event, from the write
// until every watcher has written it.
func BenchmarkFanout(b *testing.B) {
	for _, watchers := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			s, c := filled(b, 100, true)
			key := prefix + "default/cm-00000"
			got := make(chan struct{}, watchers)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for range watchers {
				w, err := c.Watch(wctx, prefix+"default/", storage.WatchOptions{
					ResourceVersion: strconv.FormatInt(c.CacheRevision(), 10), Recursive: true})
				if err != nil {
					b.Fatal(err)
				}
				go func() {
					defer w.Stop()
					for ev := range w.ResultChan() {
						var data []byte
						var err error
						if sh, ok := ev.Object.(*storage.Shared); ok {
							data, err = sh.MarshalJSON() // as the HTTP layer writes cache events
						} else {
							data, err = json.Marshal(ev.Object)
						}
						if err != nil || len(data) == 0 {
							panic(fmt.Sprint("encoding a watch event: ", err))
						}
						got <- struct{}{}
					}
				}()
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := s.GuaranteedUpdate(ctx, key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
					cur.SetLabels(map[string]string{"n": strconv.Itoa(i)})
					return cur, nil
				}); err != nil {
					b.Fatal(err)
				}
				for range watchers {
					<-got
				}
			}
		})
	}
}
