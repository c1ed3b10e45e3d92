package app

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

// The store's size on disk is served for the embedded engine, labelled
// as its own, and for etcd, labelled as kube-apiserver labels it; it is
// left out for the memory engine, which has no disk.
func TestStoreMetricsServeTheSizeOnDisk(t *testing.T) {
	read := func(storage string, s kv.Store) map[string]float64 {
		got := map[string]float64{}
		for _, m := range storeMetrics(storage, s, newCompactor(s, 1<<20, slog.New(slog.DiscardHandler))) {
			for _, smp := range m.Read() {
				got[m.Name+fmt.Sprint(smp.Labels)] = smp.Value
			}
		}
		return got
	}
	dir := t.TempDir()
	embedded, err := mvcc.Open(mvcc.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close()
	rewrite(t, embedded, "/a", "1")
	got := read(StorageEmbedded, embedded)
	if n, ok := got["apiserver_storage_size_bytes[storage_cluster_id embedded]"]; !ok || n <= 0 {
		t.Errorf("embedded: %v", got)
	}
	if _, ok := got["kplane_storage_history_bytes[]"]; !ok {
		t.Errorf("embedded: the compactor's metrics are missing: %v", got)
	}
	got = read(StorageMemory, memoryStore(t))
	for k := range got {
		if strings.HasPrefix(k, "apiserver_storage_size_bytes") {
			t.Errorf("memory: %s served", k)
		}
	}
	if _, ok := got["kplane_storage_history_bytes[]"]; !ok {
		t.Errorf("memory: the compactor's metrics are missing: %v", got)
	}
	// etcd's database, as kube-apiserver labels its first storage backend;
	// the history is etcd's to keep.
	got = read(StorageEtcd, etcdtest.Start(t).NewStore(t))
	if n, ok := got["apiserver_storage_size_bytes[storage_cluster_id etcd-0]"]; !ok || n <= 0 {
		t.Errorf("etcd: %v", got)
	}
	if _, ok := got["kplane_storage_history_bytes[]"]; ok {
		t.Errorf("etcd: the history's bytes served: %v", got)
	}
}
