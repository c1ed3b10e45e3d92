package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// finalizerKubernetes is the spec.finalizers entry that keeps a deleted
// namespace until its content is gone.
const finalizerKubernetes = "kubernetes"

// validateNamespace checks spec.finalizers as upstream: qualified names,
// and standard or qualified by a domain.
func validateNamespace(obj *unstructured.Unstructured, indexed bool) field.ErrorList {
	var errs field.ErrorList
	spec, _ := obj.Object["spec"].(map[string]any)
	for i, f := range strs(spec["finalizers"]) {
		path := field.NewPath("spec", "finalizers")
		if indexed {
			path = path.Index(i)
		}
		errs = append(errs, metavalidation.ValidateFinalizerName(f, path)...)
		errs = append(errs, registry.ValidateQualifiedFinalizer(f, path)...)
	}
	return errs
}

// validateNamespacePhase checks an update's status.phase against its
// deletion, as upstream (whose path names the Go field, "Phase").
func validateNamespacePhase(obj *unstructured.Unstructured) field.ErrorList {
	status, _ := obj.Object["status"].(map[string]any)
	phase, _ := status["phase"].(string)
	path := field.NewPath("status", "Phase")
	switch deleting := obj.GetDeletionTimestamp() != nil; {
	case !deleting && phase != string(corev1.NamespaceActive):
		return field.ErrorList{field.Invalid(path, phase, "may only be 'Active' if `deletionTimestamp` is empty")}
	case deleting && phase != string(corev1.NamespaceTerminating):
		return field.ErrorList{field.Invalid(path, phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
	}
	return nil
}

// immortal are the namespaces upstream's NamespaceLifecycle admission
// refuses to delete (kube-node-lease is not one).
var immortal = map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true, metav1.NamespacePublic: true}

// labelName is the immutable label upstream puts on every namespace.
const labelName = "kubernetes.io/metadata.name"

// Namespace is the Namespace kind.
func Namespace() *registry.Kind {
	return &registry.Kind{
		Versions: []string{"v1"}, Kind: "Namespace", ListKind: "NamespaceList", Resource: "namespaces", Singular: "namespace",
		ShortNames: []string{"ns"}, Status: true, UnconditionalUpdate: true, Finalize: true, NoDeleteCollection: true,
		QualifiedFinalizers: true,
		Typed:               func() runtime.Object { return &corev1.Namespace{} },
		ValidateName:        metavalidation.ValidateNamespaceName,
		// Upstream's create names spec.finalizers, its /finalize each one.
		Validate: func(obj *unstructured.Unstructured) field.ErrorList { return validateNamespace(obj, false) },
		ValidateUpdate: func(obj, old *unstructured.Unstructured) field.ErrorList {
			return append(validateNamespace(obj, true), validateNamespacePhase(obj)...)
		},
		// The name label is a default (the creator owns it, as upstream's),
		// set again once a generated name is known.
		Default: func(obj *unstructured.Unstructured) {
			if obj.GetName() != "" {
				setNameLabel(obj)
			}
		},
		PrepareForCreate: func(obj *unstructured.Unstructured) {
			unstructured.SetNestedField(obj.Object, string(corev1.NamespaceActive), "status", "phase")
			// The client's finalizers stay, with kubernetes after them.
			f, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
			if !slices.Contains(f, finalizerKubernetes) {
				f = append(f, finalizerKubernetes)
			}
			unstructured.SetNestedStringSlice(obj.Object, f, "spec", "finalizers")
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
		RefuseDelete: func(name string) error {
			if immortal[name] {
				return errors.New("this namespace may not be deleted")
			}
			return nil
		},
		Pending: func(obj *unstructured.Unstructured) bool {
			f, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
			return len(f) > 0
		},
		Fields: func(obj *unstructured.Unstructured) fields.Set {
			p, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
			return fields.Set{"status.phase": p}
		},
		Columns: namespaceColumns,
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
// (default, kube-system, kube-public, kube-node-lease), if missing, and
// the default RBAC roles and bindings (policy.go), or gives them back
// what they lack.
func Bootstrap(ctx context.Context, reg *registry.Registry) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	// Written at once, so that one commit (one fsync) carries them all.
	do := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	if res, ok := reg.Get(schema.GroupResource{Resource: "namespaces"}); ok {
		for _, name := range systemNamespaces {
			do(func() error { return createSystemNamespace(ctx, res, name) })
		}
	}
	resources, objs, err := policyObjects()
	if err != nil {
		return err
	}
	stored, err := storedPolicy(ctx, reg)
	if err != nil {
		return err
	}
	// The cluster's roles and bindings; a namespace's are written once
	// the registry runs (AuthenticationInfo), as a namespaced write asks
	// the namespaces' cache.
	for i, obj := range objs {
		if res, ok := rbacResource(reg, resources[i]); ok && obj.GetNamespace() == "" {
			do(func() error { return reconcilePolicy(ctx, res, obj, stored[resources[i]]["/"+obj.GetName()]) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// systemNamespaces exist from the first start, and kube-apiserver's
// system namespaces controller makes them again when missing.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// createSystemNamespace creates the system namespace name, as
// kube-apiserver does, unless it exists.
func createSystemNamespace(ctx context.Context, namespaces *registry.Resource, name string) error {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName(name)
	_, err := namespaces.Create(ctx, "v1", "", ns, registry.WriteOptions{FieldManager: "kube-apiserver"})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// NamespaceController finishes namespace deletions: it deletes everything
// in a Terminating namespace (objects with finalizers go when their
// finalizers do), reports what remains in the namespace's status
// conditions (NamespaceContentRemaining, NamespaceFinalizersRemaining and
// the others upstream sets), then clears the namespace's spec.finalizers,
// which removes it.
type NamespaceController struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how often a namespace whose content is not gone yet is
	// looked at again. Default 1 s.
	Retry time.Duration
}

// Run works until ctx ends.
func (c *NamespaceController) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.ControllerUser("namespace-controller"))
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
	var (
		pending = map[string]types.UID{} // terminating, content not gone yet
		// done holds the namespaces finalized, by UID, until they are
		// deleted: the events of the controller's own writes before
		// (the conditions it set) still come, and need no second pass.
		done = map[string]types.UID{}
	)
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
		c.follow(ctx, w, pending, done, retry.C)
		w.Stop()
	}
	return nil
}

func (c *NamespaceController) follow(ctx context.Context, w watch.Interface, pending, done map[string]types.UID, retry <-chan time.Time) {
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
			name := obj.GetName()
			switch {
			case ev.Type == watch.Deleted:
				delete(pending, name)
				delete(done, name)
			case obj.GetDeletionTimestamp() != nil && done[name] != obj.GetUID():
				pending[name] = obj.GetUID()
				if c.finish(ctx, name) {
					delete(pending, name)
					done[name] = obj.GetUID()
				}
			}
		case <-retry:
			for name, uid := range pending {
				if c.finish(ctx, name) {
					delete(pending, name)
					done[name] = uid
				}
			}
		}
	}
}

// finish deletes the content of namespace ns, as kube-controller-manager's
// namespace deleter does: every namespaced resource is deleted with the
// Background policy (so the garbage collector puts no orphan finalizer on
// it), objects with finalizers stay until their finalizers go, and the
// namespace's status conditions say what is left. Once nothing is left it
// finalizes the namespace, and reports true: the namespace needs nothing
// more (or is gone).
func (c *NamespaceController) finish(ctx context.Context, ns string) bool {
	nsr, _ := c.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	live, err := nsr.Get(ctx, "v1", "", ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true // gone already
	case err != nil:
		c.Logger.Warn("namespace controller: reading", "namespace", ns, "err", err)
		return false
	}
	specFinalizers, _, _ := unstructured.NestedStringSlice(live.Object, "spec", "finalizers")
	if !slices.Contains(specFinalizers, finalizerKubernetes) {
		// Finalized: the content is gone, or its deletion is not this
		// controller's (a namespace made without the finalizer), as
		// upstream's deleter leaves it. Other finalizers hold the
		// namespace until their owners remove them.
		return true
	}
	remaining := map[schema.GroupVersionResource]int{}
	finalizers := map[string]int{}
	var errs []error
	background := metav1.DeletePropagationBackground
	for _, res := range c.Registry.Resources() {
		k := res.Kind()
		if !k.Namespaced || !k.OwnsObjects() { // a guest's objects go with its host's
			continue
		}
		v := k.StorageVersion()
		gvr := schema.GroupVersionResource{Group: k.Group, Version: v, Resource: k.Resource}
		if err := res.DeleteAll(ctx, v, ns, registry.ListOptions{}, metav1.DeleteOptions{PropagationPolicy: &background}, registry.WriteOptions{FieldManager: controllerManager}); err != nil {
			c.Logger.Warn("namespace controller: deleting content", "namespace", ns, "resource", k.GroupResource().String(), "err", err)
			errs = append(errs, err)
			continue
		}
		list, err := res.List(ctx, v, ns, registry.ListOptions{})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(list.Items) == 0 {
			continue
		}
		remaining[gvr] = len(list.Items)
		held := false
		for i := range list.Items {
			for _, f := range list.Items[i].GetFinalizers() {
				finalizers[f]++
				held = true
			}
		}
		if !held {
			// Deleted, yet there: upstream reports this as a failure.
			errs = append(errs, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns, gvr))
		}
	}
	c.setConditions(ctx, ns, deletionConditions(remaining, finalizers, errs))
	if len(errs) > 0 || len(remaining) > 0 {
		return false // look again later
	}
	// Finalized as upstream's deleter does it: its own finalizer taken
	// out of spec.finalizers, the others kept (sorted, without repeats),
	// at the resourceVersion read, so a finalizer added meanwhile is not
	// lost. With none left the namespace goes.
	var others []string
	for _, f := range specFinalizers {
		if f != finalizerKubernetes && !slices.Contains(others, f) {
			others = append(others, f)
		}
	}
	slices.Sort(others)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	obj.SetName(ns)
	obj.SetResourceVersion(live.GetResourceVersion())
	if len(others) > 0 {
		unstructured.SetNestedStringSlice(obj.Object, others, "spec", "finalizers")
	}
	_, err = nsr.Update(ctx, "v1", "", ns, obj, registry.WriteOptions{Subresource: "finalize", FieldManager: controllerManager})
	switch {
	case apierrors.IsNotFound(err):
		return true // gone already
	case err != nil:
		if !apierrors.IsConflict(err) {
			c.Logger.Warn("namespace controller: finalizing", "namespace", ns, "err", err)
		}
		return false
	}
	if len(others) > 0 {
		c.Logger.Info("namespace emptied; its other finalizers hold it", "namespace", ns, "finalizers", others)
	} else {
		c.Logger.Info("namespace deleted", "namespace", ns)
	}
	return true
}

// The conditions of a terminating namespace, with the reasons and
// messages of kube-controller-manager's namespace deleter
// (pkg/controller/namespace/deletion/status_condition_utils.go): each is
// True with what went wrong or remains, or False with its "ok" variant.
var deletionConditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

var deletionConditionsOK = map[corev1.NamespaceConditionType]struct{ reason, message string }{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// deletionConditions reports one pass over a namespace's content. kplane
// discovers its resources from its own registry, so discovery and
// group-version parsing cannot fail; those two are always False.
func deletionConditions(remaining map[schema.GroupVersionResource]int, finalizers map[string]int, errs []error) map[corev1.NamespaceConditionType]corev1.NamespaceCondition {
	out := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	for _, t := range deletionConditionTypes {
		ok := deletionConditionsOK[t]
		out[t] = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: ok.reason, Message: ok.message}
	}
	if len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, err := range errs {
			msgs = append(msgs, err.Error())
		}
		sort.Strings(msgs)
		out[corev1.NamespaceDeletionContentFailure] = corev1.NamespaceCondition{
			Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(errs), strings.Join(msgs, ", ")),
		}
	}
	if len(remaining) > 0 {
		var parts []string
		for gvr, n := range remaining {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		sort.Strings(parts)
		out[corev1.NamespaceContentRemaining] = corev1.NamespaceCondition{
			Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: " + strings.Join(parts, ", "),
		}
	}
	if len(finalizers) > 0 {
		var parts []string
		for f, n := range finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		out[corev1.NamespaceFinalizersRemaining] = corev1.NamespaceCondition{
			Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain",
			Message: "Some content in the namespace has finalizers remaining: " + strings.Join(parts, ", "),
		}
	}
	return out
}

// setConditions writes want into namespace ns's status.conditions when
// they differ from what it has. A condition keeps its lastTransitionTime
// unless its status changes. A conflict is left for the next pass.
func (c *NamespaceController) setConditions(ctx context.Context, ns string, want map[corev1.NamespaceConditionType]corev1.NamespaceCondition) {
	nsr, _ := c.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	cur, err := nsr.Get(ctx, "v1", "", ns, metav1.GetOptions{})
	if err != nil {
		return
	}
	var have []corev1.NamespaceCondition
	if raw, ok, _ := unstructured.NestedSlice(cur.Object, "status", "conditions"); ok {
		for _, r := range raw {
			m, ok := r.(map[string]any)
			var cond corev1.NamespaceCondition
			if ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
				have = append(have, cond)
			}
		}
	}
	now := metav1.NewTime(c.Registry.Now().Truncate(time.Second))
	changed := false
	for _, t := range deletionConditionTypes {
		w := want[t]
		i := slices.IndexFunc(have, func(h corev1.NamespaceCondition) bool { return h.Type == t })
		switch {
		case i < 0:
			w.LastTransitionTime = now
			have = append(have, w)
			changed = true
		case have[i].Status != w.Status || have[i].Reason != w.Reason || have[i].Message != w.Message:
			if have[i].Status != w.Status {
				have[i].LastTransitionTime = now
			}
			have[i].Status, have[i].Reason, have[i].Message = w.Status, w.Reason, w.Message
			changed = true
		}
	}
	if !changed {
		return
	}
	raw := make([]any, 0, len(have))
	for i := range have {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&have[i])
		if err != nil {
			return
		}
		raw = append(raw, m)
	}
	next := cur.DeepCopy()
	if err := unstructured.SetNestedSlice(next.Object, raw, "status", "conditions"); err != nil {
		return
	}
	if _, err := nsr.Update(ctx, "v1", "", ns, next, registry.WriteOptions{Subresource: "status", FieldManager: controllerManager}); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		c.Logger.Warn("namespace controller: status conditions", "namespace", ns, "err", err)
	}
}
