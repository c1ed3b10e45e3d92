package core

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// NamespaceDefaults keeps in every active namespace the ServiceAccount
// "default", as kube-controller-manager's service account controller
// does: made for every namespace, and made again when deleted. Tools and
// test frameworks that wait for a namespace's default ServiceAccount
// before they use it find it as in a cluster. It also makes a deleted
// system namespace (kube-node-lease, the one that may be deleted) again
// once it is gone, as kube-apiserver's system namespaces controller does.
type NamespaceDefaults struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how long a failed watch waits before it starts again.
	// Default 1 s.
	Retry time.Duration
}

// controllerManager is the field manager of what this package's
// controllers write, as upstream's are written by kube-controller-manager.
const controllerManager = "kube-controller-manager"

// Run works until ctx ends: it watches namespaces and their default
// ServiceAccounts, and makes those missing.
func (c *NamespaceDefaults) Run(ctx context.Context) error {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	// As upstream's service account controller; system namespaces are
	// made as kube-apiserver makes them (createSystemNamespace).
	ctx = registry.AsController(ctx, registry.ControllerUser("service-account-controller"))
	return followAgain(ctx, c.Registry, c.Logger, c.Retry, "namespace defaults", "namespaces", "serviceaccounts", c.follow)
}

// followAgain runs follow, which watches the two core resources named
// until a watch ends, again and again until ctx ends (retryFollow). A
// registry that serves neither has nothing to follow: it waits for ctx.
func followAgain(ctx context.Context, reg *registry.Registry, log *slog.Logger, retry time.Duration, what, first, second string,
	follow func(ctx context.Context, first, second *registry.Resource) error) error {
	a, okA := reg.Get(schema.GroupResource{Resource: first})
	b, okB := reg.Get(schema.GroupResource{Resource: second})
	if !okA || !okB {
		<-ctx.Done()
		return nil
	}
	retryFollow(ctx, log, retry, what, func(ctx context.Context) error { return follow(ctx, a, b) })
	return nil
}

// retryFollow runs follow, which follows watches until one ends, again
// and again until ctx ends, waiting retry (default 1 s) after a watch
// that failed.
func retryFollow(ctx context.Context, log *slog.Logger, retry time.Duration, what string, follow func(ctx context.Context) error) {
	if retry == 0 {
		retry = time.Second
	}
	for ctx.Err() == nil {
		if err := follow(ctx); err != nil && ctx.Err() == nil {
			log.Warn(what+": watch", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
		}
	}
}

// follow watches the namespaces and the default ServiceAccounts until a
// watch ends. The namespaces' initial events make every namespace's
// account once.
func (c *NamespaceDefaults) follow(ctx context.Context, namespaces, accounts *registry.Resource) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nsw, err := namespaces.Watch(wctx, "v1", "", registry.ListOptions{})
	if err != nil {
		return err
	}
	defer nsw.Stop()
	opts := registry.ListOptions{}
	opts.Predicate.Field = fields.OneTermEqualSelector("metadata.name", "default")
	saw, err := accounts.Watch(wctx, "v1", "", opts)
	if err != nil {
		return err
	}
	defer saw.Stop()
	active := map[string]bool{}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-nsw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			obj, isObj := ev.Object.(metav1.Object)
			if !isObj || ev.Type == watch.Bookmark {
				continue
			}
			ns := obj.GetName()
			if ev.Type == watch.Deleted && slices.Contains(systemNamespaces, ns) {
				if err := createSystemNamespace(registry.AsController(ctx, registry.APIServerUser), namespaces, ns); err != nil {
					c.Logger.Warn("namespace defaults: creating a system namespace", "namespace", ns, "err", err)
				}
			}
			if ev.Type == watch.Deleted || obj.GetDeletionTimestamp() != nil {
				delete(active, ns)
				continue
			}
			if !active[ns] {
				active[ns] = true
				c.ensureAccount(ctx, accounts, ns)
			}
		case ev, ok = <-saw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			if obj, isObj := ev.Object.(metav1.Object); isObj && ev.Type == watch.Deleted && active[obj.GetNamespace()] {
				c.ensureAccount(ctx, accounts, obj.GetNamespace())
			}
		}
	}
}

func watchEnded(ev watch.Event) error {
	if st, ok := ev.Object.(*metav1.Status); ok {
		return apierrors.FromObject(st)
	}
	return errWatchEnded
}

var errWatchEnded = errors.New("the watch ended")

// ensureAccount creates namespace ns's ServiceAccount "default" if it
// has none. A namespace that went away or is terminating meanwhile is
// left alone.
func (c *NamespaceDefaults) ensureAccount(ctx context.Context, accounts *registry.Resource, ns string) {
	if _, err := accounts.Get(ctx, "v1", ns, "default", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return
	}
	sa := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": ns}}}
	if _, err := accounts.Create(ctx, "v1", ns, sa, registry.WriteOptions{FieldManager: controllerManager}); err != nil && !ignorable(err) {
		c.Logger.Warn("namespace defaults: creating the default ServiceAccount", "namespace", ns, "err", err)
	}
}

// ignorable are the errors of a write that lost a race: the object is
// there already, or its namespace is gone or going.
func ignorable(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) || apierrors.IsForbidden(err)
}
