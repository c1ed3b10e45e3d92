package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// kplane serve takes a list of the authorization modes it has, each
// once, and refuses the rest with kube-apiserver's words (v1.37.2's, each
// seen refused there), or says which modes it has.
func TestConfigAuthorizationModes(t *testing.T) {
	base := Config{StoreConfig: StoreConfig{Storage: StorageMemory, DataDir: t.TempDir()}}
	bad := filepath.Join(t.TempDir(), "authz.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, err string
		flagsSet  bool
	}{
		{bad, "authorizers: Required value: at least one authorization mode must be defined", false},
		{bad + ".missing", "open " + bad + ".missing: no such file or directory", false},
		{bad, "--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined", true},
	} {
		cfg := base
		cfg.AuthorizationConfigFile, cfg.AuthorizationFlagsSet = c.file, c.flagsSet
		if err := cfg.Validate(); err == nil || err.Error() != c.err {
			t.Errorf("--authorization-config %s (flags set: %v): %v, want %q", c.file, c.flagsSet, err, c.err)
		}
	}
	for _, c := range []struct {
		mode, webhookConfig, version string
		err                          string // "": valid
	}{
		{"", "", "", ""},
		{AuthorizeAlways, "", "", ""},
		{AuthorizeRBAC, "", "", ""},
		{"RBAC,Webhook", "/authz.kubeconfig", "v1", ""},
		{"Webhook,RBAC,AlwaysDeny", "/authz.kubeconfig", "", ""},
		{"AlwaysDeny", "", "", ""},
		{"Node,RBAC", "", "", `authorization-mode "Node" is not one kplane has: it has AlwaysAllow, AlwaysDeny, RBAC and Webhook`},
		{"rbac", "", "", `authorization-mode "rbac" is not a valid mode`},
		{"Webhook", "", "", "authorization-mode Webhook's authorization config file not passed"},
		{"RBAC", "/authz.kubeconfig", "", "cannot specify --authorization-webhook-config-file without mode Webhook"},
		{"RBAC,RBAC", "", "", `authorization-mode ["RBAC" "RBAC"] has mode specified more than once`},
		{"Webhook", "/authz.kubeconfig", "v2", `invalid authorization config: unsupported webhook authorizer version "v2", supported versions are "v1", "v1beta1"`},
		{"RBAC,Webhook,Bogus,RBAC", "", "", `[authorization-mode Webhook's authorization config file not passed, authorization-mode "Bogus" is not a valid mode, authorization-mode ["RBAC" "Webhook" "Bogus" "RBAC"] has mode specified more than once]`},
	} {
		cfg := base
		cfg.AuthorizationMode = c.mode
		cfg.AuthorizationWebhook.KubeConfigFile, cfg.AuthorizationWebhook.Version = c.webhookConfig, c.version
		err := cfg.Validate()
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("--authorization-mode %q, webhook %q %q: %v, want %q", c.mode, c.webhookConfig, c.version, err, c.err)
		}
	}
}

// The service account flags are checked as kube-apiserver checks them,
// with its words (v1.37.2's, each seen refused there too).
func TestConfigServiceAccountFlags(t *testing.T) {
	base := Config{StoreConfig: StoreConfig{Storage: StorageMemory, DataDir: t.TempDir()}}
	for _, c := range []struct {
		name   string
		change func(*Config)
		err    string
	}{
		{"defaults", func(*Config) {}, ""},
		{"two issuers, audiences, a JWKS URI, a bound", func(c *Config) {
			c.ServiceAccountIssuers = []string{"https://issuer.example.com", "kplane"}
			c.APIAudiences = []string{"api"}
			c.ServiceAccountJWKSURI = "https://keys.example.com/jwks"
			c.ServiceAccountMaxTokenExpiration = 2 * time.Hour
		}, ""},
		{"an empty issuer", func(c *Config) { c.ServiceAccountIssuers = []string{""} },
			"--service-account-issuer should not be an empty string"},
		{"an issuer twice", func(c *Config) { c.ServiceAccountIssuers = []string{"https://a", "https://a"} },
			`--service-account-issuer "https://a" is already specified`},
		{"an issuer with a colon, not a URL", func(c *Config) { c.ServiceAccountIssuers = []string{"https://a/%zz"} },
			`--service-account-issuer "https://a/%zz" contained a ':' but was not a valid URL: parse "https://a/%zz": invalid URL escape "%zz"`},
		{"an empty audience", func(c *Config) { c.APIAudiences = []string{"api", ""} },
			"--api-audiences should not name an empty audience"},
		{"a JWKS URI over http", func(c *Config) { c.ServiceAccountJWKSURI = "http://x/y" },
			"--service-account-jwks-uri requires https scheme, parsed as: http://x/y"},
		{"a bound under an hour", func(c *Config) { c.ServiceAccountMaxTokenExpiration = 30 * time.Minute },
			"--service-account-max-token-expiration 30m0s must be between 1 hour and 2^32 seconds"},
		{"a bound over 2^32 seconds", func(c *Config) { c.ServiceAccountMaxTokenExpiration = (1<<32 + 1) * time.Second },
			"--service-account-max-token-expiration 1193046h28m17s must be between 1 hour and 2^32 seconds"},
	} {
		cfg := base
		c.change(&cfg)
		err := cfg.Validate()
		if got := fmt.Sprint(err); (c.err == "") != (err == nil) || err != nil && got != c.err {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
}
