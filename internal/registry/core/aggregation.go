package core

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// RoleAggregation keeps the rules of every ClusterRole with an
// aggregationRule, as kube-controller-manager's clusterrole-aggregation
// controller keeps them: the rules of the other ClusterRoles its
// selectors match (each selector's in name order), without repeats. So
// the default roles admin, edit and view grow with the
// aggregate-to-admin, -edit and -view roles an operator installs for its
// custom resources. The rules are written by server-side apply, forced,
// as field manager clusterrole-aggregation-controller, as upstream's.
type RoleAggregation struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how long a failed watch waits before it starts again.
	// Default 1 s.
	Retry time.Duration
}

// aggregationManager is the field manager of the aggregated rules.
const aggregationManager = "clusterrole-aggregation-controller"

// aggregationController is who RoleAggregation writes as: upstream's
// clusterrole aggregation controller.
var aggregationController = registry.ControllerUser("clusterrole-aggregation-controller")

// Run works until ctx ends.
func (c *RoleAggregation) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, aggregationController)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	roles, ok := rbacResource(c.Registry, "clusterroles")
	if !ok {
		<-ctx.Done()
		return nil
	}
	retryFollow(ctx, c.Logger, c.Retry, "clusterrole aggregation", func(ctx context.Context) error { return c.follow(ctx, roles) })
	return nil
}

// follow watches the ClusterRoles, from their initial state, until the
// watch ends: once the initial state is in, and after every change, each
// aggregated role is brought up to date.
func (c *RoleAggregation) follow(ctx context.Context, roles *registry.Resource) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := registry.ListOptions{}
	opts.SendInitialEvents, opts.AllowBookmarks = true, true
	opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	w, err := roles.Watch(wctx, "v1", "", opts)
	if err != nil {
		return err
	}
	defer w.Stop()
	held := map[string]*rbacv1.ClusterRole{}
	synced := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			u, isObj := ev.Object.(runtime.Unstructured)
			if !isObj {
				continue
			}
			switch ev.Type {
			case watch.Bookmark:
				if m, ok := ev.Object.(metav1.Object); ok && m.GetAnnotations()[storage.InitialEventsEndAnnotation] == "true" {
					synced = true
				}
			case watch.Added, watch.Modified, watch.Deleted:
				// The object may be shared with other watchers: the
				// typed copy is ours.
				role := new(rbacv1.ClusterRole)
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), role); err != nil {
					c.Logger.Warn("clusterrole aggregation: reading a role", "err", err)
					continue
				}
				if ev.Type == watch.Deleted {
					delete(held, role.Name)
				} else {
					held[role.Name] = role
				}
			default:
				continue
			}
			if synced {
				c.aggregateAll(ctx, roles, held)
			}
		}
	}
}

// Sync brings every aggregated role up to date once, from the
// ClusterRoles read from the store: for start-up, before the caches run,
// so that the default roles admin, edit and view have their rules when
// the server is ready rather than a moment later (Run keeps them).
func (c *RoleAggregation) Sync(ctx context.Context) error {
	ctx = registry.AsController(ctx, aggregationController)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	roles, ok := rbacResource(c.Registry, "clusterroles")
	if !ok {
		return nil
	}
	list, err := roles.ListFromStore(ctx, "v1", "")
	if err != nil {
		return err
	}
	held := map[string]*rbacv1.ClusterRole{}
	for i := range list.Items {
		role := new(rbacv1.ClusterRole)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, role); err != nil {
			return err
		}
		held[role.Name] = role
	}
	// A role may aggregate one that is aggregated itself (view into edit
	// into admin): the rules are gathered in memory until nothing
	// changes, then each role that changed is written, all at once (one
	// commit).
	names := slices.Sorted(maps.Keys(held))
	changed := map[string]bool{}
	for range 10 {
		again := false
		for _, name := range names {
			role := held[name]
			if role.AggregationRule == nil {
				continue
			}
			rules, err := aggregatedRules(role, names, held)
			if err != nil || sameRules(rules, role.Rules) {
				continue
			}
			held[name] = role.DeepCopy()
			held[name].Rules = rules
			changed[name], again = true, true
		}
		if !again {
			break
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 0, len(changed))
	var mu sync.Mutex
	for name := range changed {
		wg.Go(func() {
			if err := c.apply(ctx, roles, name, held[name].Rules); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// aggregateAll writes the rules of each aggregated role in held whose
// rules are not what its selectors gather. The writes' events bring the
// roles that aggregate those back here.
func (c *RoleAggregation) aggregateAll(ctx context.Context, roles *registry.Resource, held map[string]*rbacv1.ClusterRole) {
	names := slices.Sorted(maps.Keys(held))
	for _, name := range names {
		role := held[name]
		if role.AggregationRule == nil {
			continue
		}
		rules, err := aggregatedRules(role, names, held)
		if err != nil {
			c.Logger.Warn("clusterrole aggregation: a selector", "clusterRole", name, "err", err)
			continue
		}
		if sameRules(rules, role.Rules) {
			continue
		}
		if err := c.apply(ctx, roles, name, rules); err != nil {
			c.Logger.Warn("clusterrole aggregation: writing the rules", "clusterRole", name, "err", err)
		}
	}
}

// aggregatedRules gathers the rules of the roles role's selectors match,
// each selector's matches in name order (names is held's, sorted), the
// role itself left out, each rule once.
func aggregatedRules(role *rbacv1.ClusterRole, names []string, held map[string]*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	seen := map[string]bool{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			other := held[name]
			if name == role.Name || !sel.Matches(labels.Set(other.Labels)) {
				continue
			}
			for _, r := range other.Rules {
				if k := ruleKey(&r); !seen[k] {
					seen[k] = true
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}

// apply writes role name's rules by a forced server-side apply, unless
// the role is gone (an apply would make it again; its delete event
// follows).
func (c *RoleAggregation) apply(ctx context.Context, roles *registry.Resource, name string, rules []rbacv1.PolicyRule) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": rbacv1.SchemeGroupVersion.String(), "kind": "ClusterRole",
		"metadata": map[string]any{"name": name},
		"rules":    rules,
	})
	if err != nil {
		return err
	}
	if _, err := roles.Get(ctx, "v1", "", name, metav1.GetOptions{}); err != nil {
		return nil // gone; its delete event follows
	}
	_, _, err = roles.Patch(ctx, "v1", "", name, body, registry.PatchOptions{
		WriteOptions: registry.WriteOptions{FieldManager: aggregationManager},
		Type:         types.ApplyYAMLPatchType, Force: true,
	})
	return err
}

// ruleKey is a rule written out: equal keys, equal rules (an empty list
// and none alike, as the semantic equality upstream compares with).
func ruleKey(r *rbacv1.PolicyRule) string {
	var b strings.Builder
	for _, list := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames, r.NonResourceURLs} {
		for _, v := range list {
			b.WriteString(v)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// sameRules reports whether a and b are the same rules in the same order.
func sameRules(a, b []rbacv1.PolicyRule) bool {
	return slices.EqualFunc(a, b, func(x, y rbacv1.PolicyRule) bool { return ruleKey(&x) == ruleKey(&y) })
}
