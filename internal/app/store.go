package app

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

// Storage engines, as named by --storage.
const (
	StorageEmbedded = "embedded"
	StorageMemory   = "memory"
	StorageEtcd     = "etcd"
)

// StoreConfig selects and configures the kv engine.
type StoreConfig struct {
	// Storage is StorageEmbedded (default), StorageMemory or StorageEtcd.
	Storage string
	// DataDir holds kplane's state; the embedded engine keeps its log and
	// snapshots in DataDir/kv.
	DataDir string
	// EtcdEndpoints and EtcdPrefix configure StorageEtcd.
	EtcdEndpoints []string
	EtcdPrefix    string
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
}

// Validate reports a configuration that cannot work.
func (c StoreConfig) Validate() error {
	switch c.Storage {
	case "", StorageEmbedded:
		if c.DataDir == "" {
			return errors.New("the embedded store needs a data directory (--data-dir)")
		}
	case StorageMemory:
	case StorageEtcd:
		if len(c.EtcdEndpoints) == 0 {
			return errors.New("--storage etcd needs --etcd-endpoints")
		}
		if c.EtcdPrefix != "" && !strings.HasPrefix(c.EtcdPrefix, "/") {
			return fmt.Errorf("--etcd-prefix %q must start with /", c.EtcdPrefix)
		}
	default:
		return fmt.Errorf("unknown storage %q: want embedded, memory or etcd", c.Storage)
	}
	return nil
}

// OpenStore opens the configured kv engine. The caller closes it.
func OpenStore(c StoreConfig) (kv.Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.Storage {
	case StorageMemory:
		return mvcc.Open(mvcc.Config{InMemory: true, Logger: c.Logger})
	case StorageEtcd:
		return etcdkv.New(etcdkv.Config{Endpoints: c.EtcdEndpoints, Prefix: c.EtcdPrefix, Logger: c.Logger})
	default:
		return mvcc.Open(mvcc.Config{Dir: filepath.Join(c.DataDir, "kv"), Logger: c.Logger})
	}
}
