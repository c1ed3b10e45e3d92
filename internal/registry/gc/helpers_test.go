package gc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

// waitLimit bounds every wait: a failure bound, not a timing assertion.
const waitLimit = 30 * time.Second

var (
	configMaps   = schema.GroupResource{Resource: "configmaps"}
	clusterRoles = schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}
	widgets      = schema.GroupResource{Group: "example.kplane.dev", Resource: "widgets"}
)

// widgetKind is a kind as a CRD would define it: namespaced, in its own
// group, tracking generation, no unconditional updates.
func widgetKind() *registry.Kind {
	return &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Namespaced: true, Generation: true}
}

// env is a registry with the built-in kinds and Widget over an in-memory
// store, serving until the test ends.
type env struct {
	t   *testing.T
	ctx context.Context
	reg *registry.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWithCaches(t, watchcache.Config{})
}

// newEnvWithCaches is newEnv with cache as the resources' watch caches'
// settings.
func newEnvWithCaches(t *testing.T, cache watchcache.Config) *env {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs), Cache: cache})
	for _, k := range append(core.Kinds(), widgetKind()) {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, reg: reg}
}

// attempts records the collector's attempts per object.
type attempts struct {
	mu      sync.Mutex
	errs    map[types.UID][]error
	changed chan struct{} // capacity 1
}

func (a *attempts) record(u types.UID, err error) {
	a.mu.Lock()
	a.errs[u] = append(a.errs[u], err)
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// wait returns the results of u's first attempts once there are n.
func (a *attempts) wait(t *testing.T, u types.UID, n int) []error {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		errs := append([]error(nil), a.errs[u]...)
		a.mu.Unlock()
		if len(errs) >= n {
			return errs
		}
		select {
		case <-a.changed:
		case <-deadline.C:
			t.Fatalf("the collector did not look at %s %d times", u, n)
		}
	}
}

// startGC runs a collector until the returned stop is called or the test
// ends; attempts records what it does.
func (e *env) startGC() (*attempts, func()) {
	e.t.Helper()
	c, err := New(Config{Registry: e.reg, Resync: time.Hour})
	if err != nil {
		e.t.Fatal(err)
	}
	a := &attempts{errs: map[types.UID][]error{}, changed: make(chan struct{}, 1)}
	c.processed = a.record
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("collector: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return a, stop
}

func (e *env) res(gr schema.GroupResource) *registry.Resource {
	e.t.Helper()
	res, ok := e.reg.Get(gr)
	if !ok {
		e.t.Fatalf("%s is not served", gr)
	}
	return res
}

// obj is an object of resource gr to create.
type obj struct {
	gr         schema.GroupResource
	ns, name   string
	owners     []metav1.OwnerReference
	finalizers []string
}

func (e *env) create(o obj) *unstructured.Unstructured {
	e.t.Helper()
	res := e.res(o.gr)
	k := res.Kind()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(k.GroupVersionKind(k.StorageVersion()).GroupVersion().String())
	u.SetKind(k.Kind)
	u.SetName(o.name)
	u.SetOwnerReferences(o.owners)
	u.SetFinalizers(o.finalizers)
	out, err := res.Create(e.ctx, k.StorageVersion(), o.ns, u, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("creating %s %s/%s: %v", o.gr, o.ns, o.name, err)
	}
	return out
}

// ref is an ownerReference to owner.
func ref(owner *unstructured.Unstructured, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &block}
}

func (e *env) get(gr schema.GroupResource, ns, name string) (*unstructured.Unstructured, error) {
	res := e.res(gr)
	return res.Get(e.ctx, res.Kind().StorageVersion(), ns, name, metav1.GetOptions{})
}

func (e *env) mustGet(gr schema.GroupResource, ns, name string) *unstructured.Unstructured {
	e.t.Helper()
	o, err := e.get(gr, ns, name)
	if err != nil {
		e.t.Fatalf("get %s %s/%s: %v", gr, ns, name, err)
	}
	return o
}

func (e *env) delete(gr schema.GroupResource, ns, name string, policy *metav1.DeletionPropagation) (deleted bool) {
	e.t.Helper()
	res := e.res(gr)
	_, deleted, err := res.Delete(e.ctx, res.Kind().StorageVersion(), ns, name, metav1.DeleteOptions{PropagationPolicy: policy}, registry.WriteOptions{})
	if err != nil {
		e.t.Fatalf("delete %s %s/%s: %v", gr, ns, name, err)
	}
	return deleted
}

// removeFinalizers clears the object's finalizers with an update.
func (e *env) removeFinalizers(gr schema.GroupResource, ns, name string) {
	e.t.Helper()
	res := e.res(gr)
	o := e.mustGet(gr, ns, name)
	o.SetFinalizers(nil)
	if _, err := res.Update(e.ctx, res.Kind().StorageVersion(), ns, name, o, registry.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// until waits for cond to hold for ns/name (nil: the object is gone),
// following the resource's watch: no polling.
func (e *env) until(gr schema.GroupResource, ns, name, what string, cond func(*unstructured.Unstructured) bool) {
	e.t.Helper()
	res := e.res(gr)
	v := res.Kind().StorageVersion()
	list, err := res.List(e.ctx, v, ns, registry.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var cur *unstructured.Unstructured
	for i := range list.Items {
		if list.Items[i].GetName() == name {
			cur = &list.Items[i]
		}
	}
	if cond(cur) {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx, waitLimit)
	defer cancel()
	w, err := res.Watch(ctx, v, ns, registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	if err != nil {
		e.t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				e.t.Fatalf("%s %s/%s: %s: the watch ended (%v)", gr, ns, name, what, ev.Object)
			}
			m, ok := ev.Object.(metav1.Object)
			if !ok || m.GetName() != name || ev.Type == watch.Bookmark {
				continue
			}
			var o *unstructured.Unstructured
			if ev.Type != watch.Deleted {
				o = asUnstructured(ev.Object)
			}
			if cond(o) {
				return
			}
		case <-ctx.Done():
			cur, err := e.get(gr, ns, name)
			e.t.Fatalf("%s %s/%s: %s: not after %v; now %v %v", gr, ns, name, what, waitLimit, cur, err)
		}
	}
}

func asUnstructured(o any) *unstructured.Unstructured {
	switch u := o.(type) {
	case *unstructured.Unstructured:
		return u
	case *storage.Shared:
		return u.Unstructured
	}
	panic(fmt.Sprintf("unexpected watch object %T", o))
}

func gone(o *unstructured.Unstructured) bool { return o == nil }

func (e *env) untilGone(gr schema.GroupResource, ns, name string) {
	e.t.Helper()
	e.until(gr, ns, name, "deleted", gone)
}

// assertExists fails unless ns/name exists with uid.
func (e *env) assertExists(gr schema.GroupResource, ns, name string, uid types.UID) *unstructured.Unstructured {
	e.t.Helper()
	o, err := e.get(gr, ns, name)
	if apierrors.IsNotFound(err) {
		e.t.Fatalf("%s %s/%s was deleted", gr, ns, name)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if o.GetUID() != uid {
		e.t.Fatalf("%s %s/%s has uid %s, want %s", gr, ns, name, o.GetUID(), uid)
	}
	return o
}

func hasFinalizer(o *unstructured.Unstructured, f string) bool {
	for _, x := range o.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func policy(p metav1.DeletionPropagation) *metav1.DeletionPropagation { return &p }
