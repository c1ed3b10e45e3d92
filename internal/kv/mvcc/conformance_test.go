package mvcc

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/kvtest"
)

func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		kvtest.Run(t, func(t testing.TB) kv.Store { return open(t, Config{InMemory: true}) })
	})
	t.Run("durable", func(t *testing.T) {
		kvtest.Run(t, func(t testing.TB) kv.Store { return open(t, Config{Dir: t.TempDir()}) })
	})
}
