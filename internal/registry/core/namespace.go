package core

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// finalizerKubernetes is the spec.finalizers entry that keeps a deleted
// namespace until its content is gone.
const finalizerKubernetes = "kubernetes"

// labelName is the immutable label upstream puts on every namespace.
const labelName = "kubernetes.io/metadata.name"

// Namespace is the Namespace kind.
func Namespace() *registry.Kind {
	return &registry.Kind{
		Versions: []string{"v1"}, Kind: "Namespace", ListKind: "NamespaceList", Resource: "namespaces", Singular: "namespace",
		ShortNames: []string{"ns"}, Status: true, UnconditionalUpdate: true, Finalize: true,
		Typed:        func() runtime.Object { return &corev1.Namespace{} },
		ValidateName: metavalidation.ValidateNamespaceName,
		PrepareForCreate: func(obj *unstructured.Unstructured) {
			unstructured.SetNestedField(obj.Object, string(corev1.NamespaceActive), "status", "phase")
			unstructured.SetNestedStringSlice(obj.Object, []string{finalizerKubernetes}, "spec", "finalizers")
			setNameLabel(obj)
		},
		PrepareForUpdate: func(obj, old *unstructured.Unstructured) {
			// spec.finalizers changes only through /finalize.
			if f, ok, _ := unstructured.NestedStringSlice(old.Object, "spec", "finalizers"); ok {
				unstructured.SetNestedStringSlice(obj.Object, f, "spec", "finalizers")
			} else {
				unstructured.RemoveNestedField(obj.Object, "spec", "finalizers")
			}
			setNameLabel(obj)
		},
		PrepareForDelete: func(obj *unstructured.Unstructured) {
			unstructured.SetNestedField(obj.Object, string(corev1.NamespaceTerminating), "status", "phase")
		},
		Pending: func(obj *unstructured.Unstructured) bool {
			f, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
			return len(f) > 0
		},
		Fields: func(obj *unstructured.Unstructured) fields.Set {
			p, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
			return fields.Set{"status.phase": p}
		},
		Columns: []registry.Column{{Name: "Status", Type: "string", Description: "The status of the namespace", Value: str("status", "phase")}},
	}
}

func setNameLabel(obj *unstructured.Unstructured) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[labelName] = obj.GetName()
	obj.SetLabels(l)
}

// Bootstrap creates the namespaces that exist from the first start
// (default, kube-system, kube-public, kube-node-lease), if missing.
func Bootstrap(ctx context.Context, reg *registry.Registry) error {
	res, ok := reg.Get(schema.GroupResource{Resource: "namespaces"})
	if !ok {
		return nil
	}
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
		ns.SetName(name)
		_, err := res.Create(ctx, "v1", "", ns, registry.WriteOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// NamespaceController finishes namespace deletions: it deletes everything
// in a Terminating namespace (objects with finalizers go when their
// finalizers do), then clears the namespace's spec.finalizers, which
// removes it.
type NamespaceController struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how often a namespace whose content is not gone yet is
	// looked at again. Default 1 s.
	Retry time.Duration
}

// Run works until ctx ends.
func (c *NamespaceController) Run(ctx context.Context) error {
	if c.Retry == 0 {
		c.Retry = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	res, ok := c.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	if !ok {
		<-ctx.Done()
		return nil
	}
	pending := map[string]bool{}
	retry := time.NewTicker(c.Retry)
	defer retry.Stop()
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			c.Logger.Warn("namespace controller: watch", "err", err)
			select {
			case <-ctx.Done():
			case <-retry.C:
			}
			continue
		}
		c.follow(ctx, w, pending, retry.C)
		w.Stop()
	}
	return nil
}

func (c *NamespaceController) follow(ctx context.Context, w watch.Interface, pending map[string]bool, retry <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			obj, ok := ev.Object.(metav1.Object)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(pending, obj.GetName())
			} else if obj.GetDeletionTimestamp() != nil {
				pending[obj.GetName()] = true
				c.finish(ctx, obj.GetName(), pending)
			}
		case <-retry:
			for name := range pending {
				c.finish(ctx, name, pending)
			}
		}
	}
}

// finish deletes the content of namespace ns and, once it is empty,
// finalizes the namespace.
func (c *NamespaceController) finish(ctx context.Context, ns string, pending map[string]bool) {
	left := 0
	for _, res := range c.Registry.Resources() {
		k := res.Kind()
		if !k.Namespaced {
			continue
		}
		v := k.StorageVersion()
		if _, err := res.DeleteCollection(ctx, v, ns, registry.ListOptions{}, metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
			c.Logger.Warn("namespace controller: deleting content", "namespace", ns, "resource", k.GroupResource().String(), "err", err)
			left++
			continue
		}
		list, err := res.List(ctx, v, ns, registry.ListOptions{})
		if err != nil {
			left++
			continue
		}
		left += len(list.Items)
	}
	if left > 0 {
		return // objects with finalizers remain; look again later
	}
	nsr, _ := c.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	obj.SetName(ns)
	_, err := nsr.Update(ctx, "v1", "", ns, obj, registry.WriteOptions{Subresource: "finalize"})
	if err != nil && !apierrors.IsNotFound(err) {
		c.Logger.Warn("namespace controller: finalizing", "namespace", ns, "err", err)
		return
	}
	delete(pending, ns)
	c.Logger.Info("namespace deleted", "namespace", ns)
}
