package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// Over etcd the health endpoints check that etcd answers a linearizable
// read, within healthCheckTimeout: the check passes while etcd runs, fails
// once it is killed, and passes again once it is back. The other engines
// have no check.
func TestStoreHealthChecksAskEtcd(t *testing.T) {
	if c := storeHealthChecks(StorageMemory, nil); len(c) != 0 {
		t.Errorf("memory: %d checks", len(c))
	}
	srv := etcdtest.Start(t)
	check := passingStoreCheck(t, StorageEtcd, "etcd", srv.NewStore(t))
	srv.Kill()
	// Without its own bound the check would wait for etcd for ever.
	ctx := context.Background()
	err := check(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "error getting data from etcd: ") {
		t.Fatalf("etcd killed: %v", err)
	}
	srv.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for err = check(ctx); err != nil && time.Now().Before(deadline); err = check(ctx) {
	}
	if err != nil {
		t.Errorf("etcd restarted: %v", err)
	}
}

// On the embedded engine the health endpoints check that the store still
// serves: once it has stopped (its log failed, which mvcc's
// TestLogFailureStopsTheStore brings about; or here, closed) the check
// fails and says why.
func TestStoreHealthCheckOfTheEmbeddedEngine(t *testing.T) {
	s, err := mvcc.Open(mvcc.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	check := passingStoreCheck(t, StorageEmbedded, "embedded-store", s)
	s.Close()
	err = check(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "error getting data from the embedded store: ") || !errors.Is(err, kv.ErrClosed) {
		t.Errorf("store closed: %v", err)
	}
}

// passingStoreCheck returns the one health check storeHealthChecks gives
// the engine, after checking its name, that it passes, and that it bounds
// its read as kube-apiserver bounds its own, whatever the store's default.
func passingStoreCheck(t *testing.T, storage, name string, kvs kv.Store) func(context.Context) error {
	t.Helper()
	store := &deadlineRecorder{Store: kvs}
	checks := storeHealthChecks(storage, store)
	if len(checks) != 1 || checks[0].Name != name {
		t.Fatalf("%s: checks %+v, want one named %s", storage, checks, name)
	}
	if err := checks[0].Check(context.Background()); err != nil {
		t.Fatalf("%s: %v", storage, err)
	}
	if !store.set || store.left > healthCheckTimeout {
		t.Errorf("%s: the read's deadline: set %v, %v ahead", storage, store.set, store.left)
	}
	return checks[0].Check
}

// deadlineRecorder notes the deadline of the last read's context.
type deadlineRecorder struct {
	kv.Store
	set  bool
	left time.Duration
}

func (d *deadlineRecorder) Range(ctx context.Context, key string, opts kv.RangeOptions) (kv.RangeResponse, error) {
	dl, ok := ctx.Deadline()
	d.set, d.left = ok, time.Until(dl)
	return d.Store.Range(ctx, key, opts)
}
