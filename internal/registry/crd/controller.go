package crd

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Controller serves the resources CRDs define. Run it after the CRD kind
// has been added to the registry.
type Controller struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how often a CRD whose cleanup is not done is looked at
	// again. Default 1 s.
	Retry time.Duration

	initOnce, syncOnce sync.Once
	synced             chan struct{}

	// applied is the resourceVersion of each CRD the controller has acted
	// on; changed is closed and replaced whenever it grows.
	mu      sync.Mutex
	applied map[string]int64
	changed chan struct{}
}

// controllerWrite marks the context of the controller's own writes.
type controllerWrite struct{}

// noteApplied records that the controller has acted on obj.
func (c *Controller) noteApplied(obj *unstructured.Unstructured) {
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied == nil {
		c.applied = make(map[string]int64)
	}
	if rv > c.applied[obj.GetName()] {
		c.applied[obj.GetName()] = rv
	}
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// Written waits (up to 5 s, or until ctx ends) until the controller has
// acted on the CRD write that produced obj, so that the client that changed
// a CRD sees its resources served by the new definition as soon as the
// write returns, as kube-apiserver's clients do.
func (c *Controller) Written(ctx context.Context, obj *unstructured.Unstructured) {
	if ctx.Value(controllerWrite{}) != nil {
		return // the controller's own write: it can't wait for itself
	}
	rv, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return
	}
	deadline := time.After(5 * time.Second)
	for {
		c.mu.Lock()
		if c.applied[obj.GetName()] >= rv {
			c.mu.Unlock()
			return
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (c *Controller) init() { c.initOnce.Do(func() { c.synced = make(chan struct{}) }) }

// Synced is closed once every CRD that existed when Run started is served.
func (c *Controller) Synced() <-chan struct{} {
	c.init()
	return c.synced
}

var crdResource = schema.GroupResource{Group: Group, Resource: "customresourcedefinitions"}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.init()
	// As apiextensions-apiserver's controllers, through kube-apiserver's
	// loopback client.
	ctx = context.WithValue(registry.AsController(ctx, registry.APIServerUser), controllerWrite{}, true)
	if c.Retry == 0 {
		c.Retry = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	res, ok := c.Registry.Get(crdResource)
	if !ok {
		<-ctx.Done()
		return nil
	}
	served := map[string]schema.GroupResource{} // CRD name → resource it serves
	terminating := map[string]bool{}
	retry := time.NewTicker(c.Retry)
	defer retry.Stop()
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, "v1", "", registry.ListOptions{SendInitialEvents: true, AllowBookmarks: true})
		if err != nil {
			c.Logger.Warn("crd controller: watch", "err", err)
			select {
			case <-ctx.Done():
			case <-retry.C:
			}
			continue
		}
		c.follow(ctx, w, served, terminating, retry.C)
		w.Stop()
	}
	return nil
}

func (c *Controller) follow(ctx context.Context, w watch.Interface, served map[string]schema.GroupResource, terminating map[string]bool, retry <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			if ev.Type == watch.Bookmark {
				if m, ok := ev.Object.(metav1.Object); ok && m.GetAnnotations()[storage.InitialEventsEndAnnotation] == "true" {
					c.syncOnce.Do(func() { close(c.synced) })
				}
				continue
			}
			obj := asUnstructured(ev.Object)
			if obj == nil {
				continue
			}
			name := obj.GetName()
			if ev.Type == watch.Deleted {
				if gr, ok := served[name]; ok {
					c.Registry.Remove(gr)
					delete(served, name)
				}
				delete(terminating, name)
				continue
			}
			crd, err := decode(obj)
			if err != nil {
				c.Logger.Error("crd controller: decoding", "crd", name, "err", err)
				continue
			}
			if crd.DeletionTimestamp != nil {
				terminating[name] = true
				c.cleanup(ctx, crd, served, terminating)
				c.noteApplied(obj)
				continue
			}
			c.serve(ctx, crd, served)
			c.noteApplied(obj)
		case <-retry:
			for name := range terminating {
				res, _ := c.Registry.Get(crdResource)
				obj, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
				if err != nil {
					delete(terminating, name)
					continue
				}
				if crd, err := decode(obj); err == nil {
					c.cleanup(ctx, crd, served, terminating)
				}
			}
		}
	}
}

func asUnstructured(o runtime.Object) *unstructured.Unstructured {
	switch u := o.(type) {
	case *unstructured.Unstructured:
		return u
	case interface {
		DeepCopyObject() runtime.Object
	}:
		if uu, ok := u.DeepCopyObject().(*unstructured.Unstructured); ok {
			return uu
		}
	}
	return nil
}

// serve starts (or updates) serving crd's resource, then marks the CRD
// Established.
func (c *Controller) serve(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, served map[string]schema.GroupResource) {
	k := resourceKind(crd)
	if gr, ok := served[crd.Name]; ok && gr != k.GroupResource() {
		c.Registry.Remove(gr)
	}
	if err := c.Registry.Add(k); err != nil {
		c.Logger.Error("crd controller: serving", "crd", crd.Name, "err", err)
		return
	}
	served[crd.Name] = k.GroupResource()
	c.updateStatus(ctx, crd.Name, func(st *apiextensionsv1.CustomResourceDefinitionStatus, spec *apiextensionsv1.CustomResourceDefinitionSpec) {
		st.AcceptedNames = spec.Names
		st.AcceptedNames.ListKind = k.ListKind
		st.AcceptedNames.Singular = k.Singular
		setCondition(st, apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found")
		setCondition(st, apiextensionsv1.Established, apiextensionsv1.ConditionTrue, "InitialNamesAccepted", "the initial names have been accepted")
		stored := sets.New(st.StoredVersions...)
		if !stored.Has(k.StorageVersion()) {
			st.StoredVersions = append(st.StoredVersions, k.StorageVersion())
		}
	})
}

// cleanup deletes every object of a deleted CRD's resource, stops serving
// it and removes the cleanup finalizer, which lets the CRD go.
func (c *Controller) cleanup(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, served map[string]schema.GroupResource, terminating map[string]bool) {
	c.updateStatus(ctx, crd.Name, func(st *apiextensionsv1.CustomResourceDefinitionStatus, _ *apiextensionsv1.CustomResourceDefinitionSpec) {
		setCondition(st, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
	})
	k := resourceKind(crd)
	if res, ok := c.Registry.Get(k.GroupResource()); ok {
		v := res.Kind().StorageVersion()
		if err := res.DeleteAll(ctx, v, "", registry.ListOptions{}, metav1.DeleteOptions{}, registry.WriteOptions{FieldManager: "kube-apiserver"}); err != nil {
			c.Logger.Warn("crd controller: deleting instances", "crd", crd.Name, "err", err)
			return
		}
		list, err := res.List(ctx, v, "", registry.ListOptions{})
		if err != nil || len(list.Items) > 0 {
			return // instances with finalizers remain; look again later
		}
		c.Registry.Remove(k.GroupResource())
		delete(served, crd.Name)
	}
	res, _ := c.Registry.Get(crdResource)
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := res.Get(ctx, "v1", "", crd.Name, metav1.GetOptions{})
		if err != nil {
			break
		}
		next := cur.DeepCopy()
		var fins []string
		for _, f := range next.GetFinalizers() {
			if f != cleanupFinalizer {
				fins = append(fins, f)
			}
		}
		next.SetFinalizers(fins)
		_, err = res.Update(ctx, "v1", "", crd.Name, next, registry.WriteOptions{FieldManager: "kube-apiserver"})
		if !apierrors.IsConflict(err) {
			if err != nil && !apierrors.IsNotFound(err) {
				c.Logger.Warn("crd controller: removing finalizer", "crd", crd.Name, "err", err)
				return
			}
			break
		}
	}
	delete(terminating, crd.Name)
}

// updateStatus applies change to the CRD's status through /status,
// retrying conflicts.
func (c *Controller) updateStatus(ctx context.Context, name string, change func(*apiextensionsv1.CustomResourceDefinitionStatus, *apiextensionsv1.CustomResourceDefinitionSpec)) {
	res, _ := c.Registry.Get(crdResource)
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
		if err != nil {
			return
		}
		crd, err := decode(cur)
		if err != nil {
			return
		}
		before := crd.Status.DeepCopy()
		change(&crd.Status, &crd.Spec)
		if equality.Semantic.DeepEqual(before, &crd.Status) {
			// Nothing to write: a restart serves every stored CRD again,
			// and each write would also validate the whole CRD.
			return
		}
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd.Status)
		if err != nil {
			return
		}
		next := cur.DeepCopy()
		next.Object["status"] = st
		_, err = res.Update(ctx, "v1", "", name, next, registry.WriteOptions{Subresource: "status", FieldManager: "kube-apiserver"})
		if !apierrors.IsConflict(err) {
			if err != nil {
				c.Logger.Warn("crd controller: status", "crd", name, "err", err)
			}
			return
		}
	}
}

func setCondition(st *apiextensionsv1.CustomResourceDefinitionStatus, t apiextensionsv1.CustomResourceDefinitionConditionType,
	s apiextensionsv1.ConditionStatus, reason, msg string) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			if st.Conditions[i].Status != s {
				st.Conditions[i].LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
			}
			st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].Message = s, reason, msg
			return
		}
	}
	st.Conditions = append(st.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{
		Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	})
}
