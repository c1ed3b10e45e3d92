package app

import (
	"context"
	"strings"
	"testing"
)

func TestOpenStorePicksTheEngine(t *testing.T) {
	for _, c := range []StoreConfig{
		{Storage: StorageMemory},
		{Storage: StorageEmbedded, DataDir: t.TempDir()},
		{DataDir: t.TempDir()}, // embedded is the default
	} {
		s, err := OpenStore(c)
		if err != nil {
			t.Fatalf("OpenStore(%+v): %v", c, err)
		}
		r, err := s.Create(context.Background(), "/k", []byte("v"))
		if err != nil || !r.Succeeded || r.Revision != 2 {
			t.Fatalf("first write on %+v: %+v, %v", c, r, err)
		}
		s.Close()
	}
}

func TestStoreConfigRefusesWhatCannotWork(t *testing.T) {
	for _, c := range []struct {
		cfg  StoreConfig
		want string
	}{
		{StoreConfig{Storage: "embedded"}, "data directory"},
		{StoreConfig{Storage: "etcd"}, "--etcd-endpoints"},
		{StoreConfig{Storage: "etcd", EtcdEndpoints: []string{"127.0.0.1:2379"}, EtcdPrefix: "registry"}, "must start with /"},
		{StoreConfig{Storage: "sqlite"}, "unknown storage"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error mentioning %q", c.cfg, err, c.want)
		}
	}
}

// kplane serve refuses an authorization mode it does not serve (upstream's
// Node, Webhook, ABAC, or a list of modes) and takes its two.
func TestConfigAuthorizationModes(t *testing.T) {
	base := Config{StoreConfig: StoreConfig{Storage: StorageMemory, DataDir: t.TempDir()}}
	for mode, ok := range map[string]bool{"": true, AuthorizeAlways: true, AuthorizeRBAC: true, "Node,RBAC": false, "rbac": false, "Webhook": false} {
		c := base
		c.AuthorizationMode = mode
		err := c.Validate()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--authorization-mode")) {
			t.Errorf("--authorization-mode %q: %v", mode, err)
		}
	}
}
