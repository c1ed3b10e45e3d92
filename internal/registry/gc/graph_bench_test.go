package gc

import (
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kplane-dev/kplane/internal/registry/core"
)

// BenchmarkGraphMemory reports the live heap the graph holds per object,
// the strings it keeps included, once synced (swept): objects without
// owners, and objects each owned by the one before it (one
// ownerReference).
func BenchmarkGraphMemory(b *testing.B) {
	const n = 100_000
	var cm = core.Kinds()[0]
	for _, k := range core.Kinds() {
		if k.Resource == "configmaps" {
			cm = k
		}
	}
	for _, owned := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "owned"}[owned], func(b *testing.B) {
			var perObj float64
			for b.Loop() {
				before := heapAlloc()
				// The objects as the collector's lists decode them: fresh
				// strings each, garbage once the graph has what it keeps.
				objs := make([]*unstructured.Unstructured, n)
				for i := range objs {
					o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
					o.SetName(fmt.Sprintf("cm-%07d", i))
					o.SetNamespace("default")
					o.SetUID(uuid.NewUUID())
					if owned && i > 0 {
						p := objs[i-1]
						o.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
							"apiVersion": "v1", "kind": "ConfigMap", "name": p.GetName(), "uid": string(p.GetUID())}}
					}
					objs[i] = o
				}
				g := newGraph()
				for _, o := range objs {
					g.observe(newNode(cm, o))
				}
				g.sweep() // as the collector does once synced
				objs = nil
				after := heapAlloc()
				perObj = (float64(after) - float64(before)) / n
				runtime.KeepAlive(g)
			}
			b.ReportMetric(perObj, "heap-B/obj")
		})
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGraphObserveCreate is the graph's part of a create: observing
// a new object without owners, in a graph already holding 100,000
// (dense, as every graph did before it was sparse, and as it is while
// the first lists come in; and sparse, once synced).
func BenchmarkGraphObserveCreate(b *testing.B) {
	cm := core.Kinds()[0]
	newObj := func(i int) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": cm.Kind}}
		o.SetName(fmt.Sprintf("cm-%07d", i))
		o.SetNamespace("default")
		o.SetUID(uuid.NewUUID())
		return o
	}
	for _, sparse := range []bool{false, true} {
		b.Run(map[bool]string{false: "dense", true: "sparse"}[sparse], func(b *testing.B) {
			g := newGraph()
			for i := range 100_000 {
				g.observe(newNode(cm, newObj(i)))
			}
			if sparse {
				g.sweep()
			}
			objs := make([]*unstructured.Unstructured, 4096)
			for i := range objs {
				objs[i] = newObj(100_000 + i)
			}
			i := 0
			for b.Loop() {
				g.observe(newNode(cm, objs[i%len(objs)]))
				i++
			}
		})
	}
}
