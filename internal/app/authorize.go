package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// authorizationModes returns c's modes in order, checked as
// kube-apiserver checks --authorization-mode and the
// --authorization-webhook-* flags, in its words (several errors at once
// as one list).
func (c *Config) authorizationModes() ([]string, error) {
	if c.AuthorizationConfigFile != "" {
		if c.AuthorizationFlagsSet {
			return nil, errors.New("--authorization-config can not be specified when --authorization-mode or --authorization-webhook-* flags are defined")
		}
		// Read now too, so that a bad file stops kplane before it starts.
		_, _, err := webhook.ReadAuthorizationConfig(c.AuthorizationConfigFile)
		return nil, err
	}
	mode := c.AuthorizationMode
	if mode == "" {
		mode = AuthorizeAlways
	}
	modes := strings.Split(mode, ",")
	var errs []error
	for _, m := range modes {
		switch m {
		case AuthorizeAlways, AuthorizeDeny, AuthorizeRBAC:
		case AuthorizeWebhook:
			if c.AuthorizationWebhook.KubeConfigFile == "" {
				errs = append(errs, errors.New("authorization-mode Webhook's authorization config file not passed"))
			}
		case "Node", "ABAC":
			errs = append(errs, fmt.Errorf("authorization-mode %q is not one kplane has: it has %s, %s, %s and %s", m, AuthorizeAlways, AuthorizeDeny, AuthorizeRBAC, AuthorizeWebhook))
		default:
			errs = append(errs, fmt.Errorf("authorization-mode %q is not a valid mode", m))
		}
	}
	if !slices.Contains(modes, AuthorizeWebhook) && c.AuthorizationWebhook.KubeConfigFile != "" {
		errs = append(errs, errors.New("cannot specify --authorization-webhook-config-file without mode Webhook"))
	}
	sorted := slices.Clone(modes)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(modes) {
		errs = append(errs, fmt.Errorf("authorization-mode %q has mode specified more than once", modes))
	}
	if c.AuthorizationWebhook.AuthorizedTTL < 0 || c.AuthorizationWebhook.UnauthorizedTTL < 0 {
		errs = append(errs, errors.New("--authorization-webhook-cache-authorized-ttl and --authorization-webhook-cache-unauthorized-ttl must not be negative"))
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	if v := c.AuthorizationWebhook.Version; v != "" && v != "v1" && v != "v1beta1" {
		return nil, fmt.Errorf("invalid authorization config: unsupported webhook authorizer version %q, supported versions are %q, %q", v, "v1", "v1beta1")
	}
	return modes, nil
}

// authorizers is what --authorization-mode makes.
type authorizers struct {
	// chain is every authorizer, system:masters' first; nil for
	// AlwaysAllow alone, which lets every authenticated client in
	// without asking.
	chain registry.Authorizer
	// rbac, if RBAC is among them.
	rbac *core.RBAC
	// file is the chain of --authorization-config, which follows the
	// file (run).
	file *configAuthorizer
	// metrics count the decisions and the webhooks' calls.
	metrics *webhook.AuthorizationMetrics
}

// counted is an authorizer whose allowances and denials are counted
// under its type and name, as upstream's instrumented authorizers.
type counted struct {
	registry.Authorizer
	counts *webhook.DecisionCounts
}

// count is a counted, its counts those of typ and name in m.
func count(typ, name string, a registry.Authorizer, m *webhook.AuthorizationMetrics) counted {
	return counted{a, m.Decisions(typ, name)}
}

func (c counted) Authorize(ctx context.Context, a registry.Attributes) (registry.Decision, string, error) {
	d, reason, err := c.Authorizer.Authorize(ctx, a)
	c.counts.Count(d)
	return d, reason, err
}

// RulesFor is the rules of the authorizer, if it can list them.
func (c counted) RulesFor(ctx context.Context, u registry.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
	if r, ok := c.Authorizer.(registry.RuleResolver); ok {
		return r.RulesFor(ctx, u, ns)
	}
	return nil, false, nil
}

// Explaining is the authorizer saying why it allows, counted too.
func (c counted) Explaining() registry.Authorizer {
	if e, ok := c.Authorizer.(registry.Explainer); ok {
		return counted{e.Explaining(), c.counts}
	}
	return c
}

// newAuthorizers builds the authorizers cfg's modes name, in order.
func newAuthorizers(cfg *Config, reg *registry.Registry, log *slog.Logger) (*authorizers, error) {
	modes, err := cfg.authorizationModes()
	if err != nil {
		return nil, err
	}
	a := &authorizers{metrics: &webhook.AuthorizationMetrics{}}
	if f := cfg.AuthorizationConfigFile; f != "" {
		entries, data, err := webhook.ReadAuthorizationConfig(f)
		if err != nil {
			return nil, err // upstream's words, without a prefix
		}
		for _, e := range entries {
			if e.Type == AuthorizeRBAC {
				a.rbac = &core.RBAC{Registry: reg, Logger: log}
			}
		}
		if a.file, err = newConfigAuthorizer(f, entries, data, a.rbac, a.metrics, log); err != nil {
			return nil, err
		}
		a.chain = a.file
		if a.rbac != nil {
			a.rbac.Authorizer = a.chain
		}
		return a, nil
	}
	if len(modes) == 1 && modes[0] == AuthorizeAlways {
		return a, nil
	}
	chain := registry.Union{registry.Privileged}
	for _, m := range modes {
		n := registry.Named{Name: strings.ToLower(m)}
		switch m {
		case AuthorizeAlways:
			n.Authorizer = registry.AlwaysAllow{}
		case AuthorizeDeny:
			n.Authorizer = registry.AlwaysDeny{}
		case AuthorizeRBAC:
			a.rbac = &core.RBAC{Registry: reg, Logger: log}
			n.Authorizer = a.rbac
		case AuthorizeWebhook:
			wcfg := cfg.AuthorizationWebhook
			wcfg.Logger, wcfg.Metrics, wcfg.Name = log, a.metrics, "default"
			wh, err := webhook.NewAuthorizationWebhook(wcfg)
			if err != nil {
				return nil, fmt.Errorf("invalid authorization config: %w", err)
			}
			n.Name, n.Authorizer = "default", wh // upstream's name for the flags' webhook
		}
		chain = append(chain, registry.Named{Name: n.Name, Authorizer: count(m, n.Name, n.Authorizer, a.metrics)})
	}
	a.chain = chain
	if a.rbac != nil {
		a.rbac.Authorizer = a.chain
	}
	return a, nil
}

// install makes kinds' reviews answer by the authorizers (RBAC's checks
// of role, binding and policy writes too).
func (a *authorizers) install(kinds []*registry.Kind) []*registry.Kind {
	switch {
	case a.rbac != nil:
		return a.rbac.Install(kinds)
	case a.chain != nil:
		return core.InstallAuthorizer(kinds, a.chain)
	}
	return kinds
}
