package storage_test

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/storagetest"
)

func TestConformance(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		storagetest.Run(t, func(t testing.TB) kv.Store {
			s, err := mvcc.Open(mvcc.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("etcd", func(t *testing.T) {
		storagetest.Run(t, etcdtest.Start(t).NewStore)
	})
}

// BenchmarkListSelectiveFromStore is a page of a selective list read from
// the store (as a continue is once the watch cache no longer reaches its
// revision): 100,000 ConfigMaps, 1 in 1,000 matching, a limit of 500. The
// store reads the keys in batches of 256; each batch once counted every
// key after it.
func BenchmarkListSelectiveFromStore(b *testing.B) {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer kvs.Close()
	s := storage.New(kvs)
	const n = 100000
	for i := range n {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"data": map[string]any{"k": "v"}}}
		u.SetName(fmt.Sprintf("cm-%06d", i))
		u.SetNamespace("default")
		if i%1000 == 0 {
			u.SetLabels(map[string]string{"rare": "yes"})
		}
		if _, err := s.Create(context.Background(), "/configmaps/default/"+u.GetName(), u); err != nil {
			b.Fatal(err)
		}
	}
	opts := storage.ListOptions{Limit: 500, Predicate: storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"rare": "yes"})}}
	b.ReportAllocs()
	for b.Loop() {
		l, err := s.ListRecords(context.Background(), "/configmaps/default/", opts)
		if err != nil || len(l.Items) != n/1000 {
			b.Fatalf("%d items, %v", len(l.Items), err)
		}
	}
}
