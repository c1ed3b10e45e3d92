package storage_test

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
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
