package etcdkv_test

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/kvtest"
)

func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	kvtest.Run(t, srv.NewStore)
}
