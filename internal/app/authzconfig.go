package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// configAuthorizer is the chain --authorization-config makes, made again
// when the file changes, as kube-apiserver's reloadable authorizer: the
// file is read again on every change it is told of and every minute; a
// reading that fails (the file, its checks, a webhook's kubeconfig)
// leaves the chain in force and is logged and counted.
type configAuthorizer struct {
	path    string
	rbac    *core.RBAC
	log     *slog.Logger
	metrics *webhook.AuthorizationMetrics
	// required are the types but Webhook of the first reading: a later
	// one must keep them, and may add none of RBAC (its state is built
	// at start).
	required map[string]bool
	// Interval is how often the file is read without being told of a
	// change (0: a minute).
	interval time.Duration

	current atomic.Pointer[chains]

	mu         sync.Mutex // held by the one reading the file
	lastData   []byte
	lastConfig []webhook.AuthorizerConfig
	reloads    reloadMetrics
}

// chains are a configuration's authorizers, and the same saying why they
// allow.
type chains struct{ plain, explaining registry.Union }

// newConfigAuthorizer reads path and builds its chain, with rbac's
// authorizer for an RBAC entry (nil: none may name RBAC). An error is
// upstream's, after "invalid authorization config: ".
func newConfigAuthorizer(path string, entries []webhook.AuthorizerConfig, data []byte, rbac *core.RBAC, metrics *webhook.AuthorizationMetrics, log *slog.Logger) (*configAuthorizer, error) {
	c := &configAuthorizer{path: path, rbac: rbac, log: log, metrics: metrics, required: map[string]bool{}, lastData: data, lastConfig: entries}
	for _, e := range entries {
		if e.Type != AuthorizeWebhook {
			c.required[e.Type] = true
		}
	}
	chain, err := c.build(entries)
	if err != nil {
		return nil, err
	}
	c.current.Store(&chains{chain, chain.Explaining().(registry.Union)})
	c.reloads.hash = configHash(data)
	return c, nil
}

// build makes the chain of entries, system:masters' first.
func (c *configAuthorizer) build(entries []webhook.AuthorizerConfig) (registry.Union, error) {
	chain := registry.Union{registry.Privileged}
	for _, e := range entries {
		n := registry.Named{Name: e.Name}
		switch e.Type {
		case AuthorizeAlways:
			n.Authorizer = registry.AlwaysAllow{}
		case AuthorizeDeny:
			n.Authorizer = registry.AlwaysDeny{}
		case AuthorizeRBAC:
			if c.rbac == nil {
				return nil, fmt.Errorf("authorizer type RBAC is not allowed if it was not enabled at initial server startup")
			}
			n.Authorizer = c.rbac
		case AuthorizeWebhook:
			wcfg := *e.Webhook
			wcfg.Logger, wcfg.Metrics = c.log, c.metrics
			wh, err := webhook.NewAuthorizationWebhook(wcfg)
			if err != nil {
				return nil, err
			}
			n.Authorizer = wh
		default:
			return nil, fmt.Errorf("unknown authorization mode %s specified", e.Type)
		}
		n.Authorizer = count(e.Type, e.Name, n.Authorizer, c.metrics)
		chain = append(chain, n)
	}
	return chain, nil
}

func (c *configAuthorizer) Authorize(ctx context.Context, a registry.Attributes) (registry.Decision, string, error) {
	return c.current.Load().plain.Authorize(ctx, a)
}

func (c *configAuthorizer) RulesFor(ctx context.Context, u registry.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
	return c.current.Load().plain.RulesFor(ctx, u, ns)
}

// Explaining is the chain in force saying why it allows.
func (c *configAuthorizer) Explaining() registry.Authorizer { return explainingConfig{c} }

type explainingConfig struct{ c *configAuthorizer }

func (e explainingConfig) Authorize(ctx context.Context, a registry.Attributes) (registry.Decision, string, error) {
	return e.c.current.Load().explaining.Authorize(ctx, a)
}

func (e explainingConfig) RulesFor(ctx context.Context, u registry.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
	return e.c.current.Load().explaining.RulesFor(ctx, u, ns)
}

// run reads the file again when it changes and every interval, until
// ctx ends.
func (c *configAuthorizer) run(ctx context.Context) error {
	interval := c.interval
	if interval <= 0 {
		interval = time.Minute
	}
	watchFile(ctx, interval, c.path, c.reload, func(err error) {
		c.log.Error("watching the authorization config file", "err", err)
	})
	return nil
}

// reload reads the file and, if it changed and is good, puts its chain
// in force.
func (c *configAuthorizer) reload() {
	c.mu.Lock()
	defer c.mu.Unlock()
	failed := func(err error) {
		c.log.Error("reloading the authorization config", "file", c.path, "err", err)
		c.reloads.count("failure")
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		failed(err)
		return
	}
	if bytes.Equal(data, c.lastData) {
		return
	}
	c.lastData = data
	entries, err := webhook.ParseAuthorizationConfig(data)
	if err == nil {
		err = c.checkRequired(entries)
	}
	if err != nil {
		failed(err)
		return
	}
	if webhook.SameAuthorizers(entries, c.lastConfig) {
		return
	}
	c.lastConfig = entries
	chain, err := c.build(entries)
	if err != nil {
		failed(err)
		return
	}
	c.current.Store(&chains{chain, chain.Explaining().(registry.Union)})
	c.log.Info("reloaded the authorization config", "file", c.path)
	c.reloads.count("success")
	c.reloads.mu.Lock()
	c.reloads.hash = configHash(data)
	c.reloads.mu.Unlock()
}

// checkRequired refuses a configuration without a type but Webhook that
// the first one had, as upstream's reload.
func (c *configAuthorizer) checkRequired(entries []webhook.AuthorizerConfig) error {
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Type] = true
	}
	var missing []string
	for t := range c.required {
		if !seen[t] {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	return fmt.Errorf("missing required types: [%s]", strings.Join(missing, " "))
}

// configHash is upstream's hash of a configuration file's bytes.
func configHash(data []byte) string {
	if len(data) == 0 {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

// reloadMetrics are the reloads' figures, as upstream's
// apiserver_authorization_config_controller_* metrics.
type reloadMetrics struct {
	mu     sync.Mutex
	counts map[string]uint64
	last   map[string]time.Time
	hash   string
}

func (m *reloadMetrics) count(status string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts, m.last = map[string]uint64{}, map[string]time.Time{}
	}
	m.counts[status]++
	m.last[status] = time.Now()
}

// authorizationConfigMetrics are upstream's metrics of the
// authorization configuration's reloads, by apiserver identity (idHash).
func authorizationConfigMetrics(c *configAuthorizer, idHash string) []apiserver.Metric {
	if c == nil {
		return nil
	}
	return reloadConfigMetrics("apiserver_authorization_config_controller_", "--authorization-config", true, &c.reloads, idHash)
}

// reloadConfigMetrics are upstream's metrics of a configuration file's
// reloads (under prefix; flag names the file in their help): how many,
// when, and the file in force (if there is one).
func reloadConfigMetrics(prefix, flag string, hasFile bool, reloads *reloadMetrics, idHash string) []apiserver.Metric {
	if !hasFile {
		return nil
	}
	series := func(value func(status string) float64) []apiserver.Sample {
		reloads.mu.Lock()
		defer reloads.mu.Unlock()
		var out []apiserver.Sample
		for _, status := range []string{"failure", "success"} {
			if _, ok := reloads.counts[status]; ok {
				out = append(out, apiserver.Sample{Labels: []string{"apiserver_id_hash", idHash, "status", status}, Value: value(status)})
			}
		}
		return out
	}
	return []apiserver.Metric{
		{
			Name: prefix + "automatic_reloads_total", Type: "counter",
			Help: "Reloads of the " + flag + " file that found it changed, or failed, by status and apiserver identity.",
			Read: func() []apiserver.Sample {
				return series(func(s string) float64 { return float64(reloads.counts[s]) })
			},
		},
		{
			Name: prefix + "automatic_reload_last_timestamp_seconds", Type: "gauge",
			Help: "When the last reload of the " + flag + " file of each status happened (Unix seconds), by status and apiserver identity.",
			Read: func() []apiserver.Sample {
				return series(func(s string) float64 { return float64(reloads.last[s].UnixNano()) / 1e9 })
			},
		},
		{
			Name: prefix + "last_config_info", Type: "gauge",
			Help: "The " + flag + " file in force: 1, with the SHA-256 of its bytes, by apiserver identity.",
			Read: func() []apiserver.Sample {
				reloads.mu.Lock()
				defer reloads.mu.Unlock()
				if idHash == "" {
					return nil
				}
				return []apiserver.Sample{{Labels: []string{"apiserver_id_hash", idHash, "hash", reloads.hash}, Value: 1}}
			},
		},
	}
}

// watchFile calls changed when the file at path is written, replaced or
// removed, and every interval in any case, until ctx ends, as upstream's
// filesystem.WatchUntil: a watch the file's replacement dropped is made
// again, and while the file cannot be watched it is only polled. changed
// is called once at the start if the watch is made.
func watchFile(ctx context.Context, interval time.Duration, path string, changed func(), watchErr func(error)) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		watchErr(fmt.Errorf("error creating file watcher, falling back to poll at interval %s: %w", interval, err))
	} else {
		defer watcher.Close()
		events, errs = watcher.Events, watcher.Errors
	}
	add := func() bool {
		if watcher == nil {
			return true
		}
		_ = watcher.Remove(path)
		if err := watcher.Add(path); err != nil {
			watchErr(err)
			return false
		}
		return true
	}
	rewatch := !add()
	if !rewatch {
		changed()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if rewatch {
				rewatch = !add()
			}
			changed()
		case e := <-events:
			if e.Name == path && (e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename)) {
				rewatch = !add()
			}
			changed()
		case err := <-errs:
			watchErr(err)
			rewatch = true
		}
	}
}
