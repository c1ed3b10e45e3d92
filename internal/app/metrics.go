package app

import (
	"context"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/kv"
)

// diskSizer is implemented by the engines that can say how much disk
// their data takes: the embedded one (its files) and etcd (its database).
type diskSizer interface {
	DiskBytes(ctx context.Context) (int64, error)
}

// diskSizeTimeout bounds the read of the store's size on disk at a
// scrape: an etcd that does not answer leaves the metric out, not the
// scrape hanging.
const diskSizeTimeout = 2 * time.Second

// storeMetrics are the store's figures for /metrics: the compactor's, and
// the size on disk under kube-apiserver's stable
// apiserver_storage_size_bytes{storage_cluster_id}, which it reads from
// etcd's Status (storage_cluster_id "etcd-0", the first storage
// backend). The embedded engine reports its files, as "embedded"; the
// memory engine has none.
func storeMetrics(storage string, kvs kv.Store, c *compactor) []apiserver.Metric {
	ms := c.metrics()
	ds, ok := kvs.(diskSizer)
	if !ok || storage == StorageMemory {
		return ms
	}
	id := "embedded"
	if storage == StorageEtcd {
		id = "etcd-0"
	}
	return append(ms, apiserver.Metric{
		Name: "apiserver_storage_size_bytes",
		Type: "gauge",
		Help: "Size of the store's data on disk, as the file system allocated it: etcd's database file, or the embedded engine's log and snapshots.",
		Read: func() []apiserver.Sample {
			ctx, cancel := context.WithTimeout(context.Background(), diskSizeTimeout)
			defer cancel()
			n, err := ds.DiskBytes(ctx)
			if err != nil {
				return nil
			}
			return []apiserver.Sample{{Labels: []string{"storage_cluster_id", id}, Value: float64(n)}}
		},
	})
}
