package quota

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// waitLimit bounds every wait: a failure bound, not a timing assertion.
const waitLimit = 30 * time.Second

var (
	configMaps = schema.GroupResource{Resource: "configmaps"}
	secrets    = schema.GroupResource{Resource: "secrets"}
	events     = schema.GroupResource{Resource: "events"}
	widgets    = schema.GroupResource{Group: "example.kplane.dev", Resource: "widgets"}
)

func widgetKind() *registry.Kind {
	return &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Namespaced: true, Generation: true}
}

// env is a registry with the built-in kinds and Widget over an in-memory
// store, with quota admission, serving until the test ends.
type env struct {
	t     *testing.T
	ctx   context.Context
	reg   *registry.Registry
	q     *Quota
	store *storage.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	e := serve(t, storage.New(kvs))
	if err := core.Bootstrap(e.ctx, e.reg); err != nil {
		t.Fatal(err)
	}
	e.create(schema.GroupResource{Resource: "namespaces"}, "", "q1", nil)
	return e
}

// serve is a registry over store with quota admission, serving until the
// test ends.
func serve(t *testing.T, store *storage.Store) *env {
	reg := registry.New(registry.Config{Store: store})
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
	q, err := New(Config{Registry: reg, Retry: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetQuota(q)
	return &env{t: t, ctx: ctx, reg: reg, q: q, store: store}
}

// replica is another kplane over e's store: its own registry, caches and
// quota admission.
func (e *env) replica() *env { return serve(e.t, e.store) }

// runController runs the quota controller until the test ends.
func (e *env) runController() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.q.Run(ctx)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (e *env) res(gr schema.GroupResource) *registry.Resource {
	e.t.Helper()
	res, ok := e.reg.Get(gr)
	if !ok {
		e.t.Fatalf("%v not served", gr)
	}
	return res
}

func (e *env) object(gr schema.GroupResource, ns, name string, fields map[string]any) *unstructured.Unstructured {
	k := e.res(gr).Kind()
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		obj.Object[k] = v
	}
	obj.SetAPIVersion(k.GroupVersionKind(k.StorageVersion()).GroupVersion().String())
	obj.SetKind(k.Kind)
	obj.SetName(name)
	obj.SetNamespace(ns)
	return obj
}

// tryCreate creates name in ns.
func (e *env) tryCreate(gr schema.GroupResource, ns, name string, fields map[string]any, opts registry.WriteOptions) error {
	res := e.res(gr)
	_, err := res.Create(e.ctx, res.Kind().StorageVersion(), ns, e.object(gr, ns, name, fields), opts)
	return err
}

func (e *env) create(gr schema.GroupResource, ns, name string, fields map[string]any) {
	e.t.Helper()
	if err := e.tryCreate(gr, ns, name, fields, registry.WriteOptions{}); err != nil {
		e.t.Fatalf("creating %s %s/%s: %v", gr, ns, name, err)
	}
}

// quota creates the quota name in q1 with hard as spec.hard; with status,
// it also writes status.hard and status.used as the controller would
// (used: the counts given).
func (e *env) quota(name string, hard, used map[string]any, status bool) {
	e.t.Helper()
	e.create(quotasResource, "q1", name, map[string]any{"spec": map[string]any{"hard": hard}})
	if !status {
		return
	}
	res := e.res(quotasResource)
	cur, err := res.Get(e.ctx, "v1", "q1", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	st := map[string]any{"hard": hard}
	if used != nil {
		st["used"] = used
	}
	cur.Object["status"] = st
	out, err := res.Update(e.ctx, "v1", "q1", name, cur, registry.WriteOptions{Subresource: "status"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.cached(out.GetResourceVersion())
}

// cached waits for the quotas' cache to reach resourceVersion rv: quota
// admission reads which quotas a namespace has from it, as upstream's
// reads its informer's.
func (e *env) cached(rv string) {
	e.t.Helper()
	opts := registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}}
	if _, err := e.res(quotasResource).List(e.ctx, "v1", "q1", opts); err != nil {
		e.t.Fatal(err)
	}
}

// used is quota name's status.used.
func (e *env) used(name string) map[string]any {
	e.t.Helper()
	cur, err := e.res(quotasResource).Get(e.ctx, "v1", "q1", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	u, _, _ := unstructured.NestedMap(cur.Object, "status", "used")
	return u
}

// eventually waits for cond to hold.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func wantForbidden(t *testing.T, err error, msg string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || err.Error() != msg {
		t.Fatalf("got %v, want 403 %q", err, msg)
	}
}

func TestChargeRefusesPastTheLimit(t *testing.T) {
	e := newEnv(t)
	e.quota("q", map[string]any{"count/configmaps": "2", "configmaps": "5", "secrets": "1"},
		map[string]any{"count/configmaps": "0", "configmaps": "0", "secrets": "0"}, true)
	e.create(configMaps, "q1", "a", nil)
	e.create(configMaps, "q1", "b", nil)
	if got := e.used("q"); fmt.Sprint(got) != "map[configmaps:2 count/configmaps:2 secrets:0]" {
		t.Fatalf("used after two creates: %v", got)
	}
	err := e.tryCreate(configMaps, "q1", "c", nil, registry.WriteOptions{})
	wantForbidden(t, err, `configmaps "c" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2`)
	if got := e.used("q"); fmt.Sprint(got) != "map[configmaps:2 count/configmaps:2 secrets:0]" {
		t.Fatalf("used after a refusal: %v", got)
	}
	// Secrets count under their legacy name alone.
	e.create(secrets, "q1", "s", nil)
	err = e.tryCreate(secrets, "q1", "t", nil, registry.WriteOptions{})
	wantForbidden(t, err, `secrets "t" is forbidden: exceeded quota: q, requested: secrets=1, used: secrets=1, limited: secrets=1`)
	// Another namespace has no quota.
	e.create(schema.GroupResource{Resource: "namespaces"}, "", "free", nil)
	for i := range 3 {
		e.create(configMaps, "free", fmt.Sprint("c", i), nil)
	}
}

func TestChargeChecksEveryQuota(t *testing.T) {
	e := newEnv(t)
	e.quota("big", map[string]any{"count/configmaps": "10"}, map[string]any{"count/configmaps": "1"}, true)
	e.quota("small", map[string]any{"configmaps": "1"}, map[string]any{"configmaps": "1"}, true)
	err := e.tryCreate(configMaps, "q1", "c", nil, registry.WriteOptions{})
	wantForbidden(t, err, `configmaps "c" is forbidden: exceeded quota: small, requested: configmaps=1, used: configmaps=1, limited: configmaps=1`)
	// The refusal charged neither.
	if got := e.used("big"); fmt.Sprint(got) != "map[count/configmaps:1]" {
		t.Fatalf("big's used: %v", got)
	}
}

func TestChargeNeedsTheCounts(t *testing.T) {
	e := newEnv(t)
	// Spec alone (the controller has not run): nothing is enforced.
	e.quota("fresh", map[string]any{"count/configmaps": "0"}, nil, false)
	e.create(configMaps, "q1", "a", nil)
	// status.hard without status.used: refused, as upstream.
	e.quota("unknown", map[string]any{"count/configmaps": "5", "configmaps": "5", "cpu": "1"}, nil, true)
	err := e.tryCreate(configMaps, "q1", "b", nil, registry.WriteOptions{})
	wantForbidden(t, err, `configmaps "b" is forbidden: status unknown for quota: unknown, resources: configmaps,count/configmaps`)
}

func TestDryRunIsCheckedNotCharged(t *testing.T) {
	e := newEnv(t)
	e.quota("q", map[string]any{"count/configmaps": "1"}, map[string]any{"count/configmaps": "0"}, true)
	if err := e.tryCreate(configMaps, "q1", "a", nil, registry.WriteOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.used("q"); fmt.Sprint(got) != "map[count/configmaps:0]" {
		t.Fatalf("used after a dry run: %v", got)
	}
	e.create(configMaps, "q1", "a", nil)
	err := e.tryCreate(configMaps, "q1", "b", nil, registry.WriteOptions{DryRun: true})
	wantForbidden(t, err, `configmaps "b" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1`)
}

func TestWhatIsNotCounted(t *testing.T) {
	e := newEnv(t)
	e.quota("q", map[string]any{"count/events": "0", "count/events.events.k8s.io": "0", "count/configmaps": "0"},
		map[string]any{"count/events": "0", "count/events.events.k8s.io": "0", "count/configmaps": "0"}, true)
	// Events (either group) are never counted.
	e.create(events, "q1", "ev", map[string]any{"involvedObject": map[string]any{"kind": "ConfigMap", "name": "x", "namespace": "q1"}})
	// A scoped quota counts no object.
	e.create(quotasResource, "q1", "scoped", map[string]any{"spec": map[string]any{
		"hard": map[string]any{"count/widgets.example.kplane.dev": "0"}, "scopes": []any{"PriorityClass"},
	}})
	res := e.res(quotasResource)
	cur, err := res.Get(e.ctx, "v1", "q1", "scoped", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["status"] = map[string]any{"hard": map[string]any{"count/widgets.example.kplane.dev": "0"}, "used": map[string]any{"count/widgets.example.kplane.dev": "0"}}
	out, err := res.Update(e.ctx, "v1", "q1", "scoped", cur, registry.WriteOptions{Subresource: "status"})
	if err != nil {
		t.Fatal(err)
	}
	e.cached(out.GetResourceVersion())
	e.create(widgets, "q1", "w", nil)
	// Nor are updates: this quota is full, at 0.
	if err := e.tryCreate(configMaps, "q1", "cm", nil, registry.WriteOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("create past a limit of 0: %v", err)
	}
	e.reg.SetQuota(nil)
	e.create(configMaps, "q1", "cm", nil)
	e.reg.SetQuota(e.q)
	cm, err := e.res(configMaps).Get(e.ctx, "v1", "q1", "cm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Object["data"] = map[string]any{"k": "v"}
	if _, err := e.res(configMaps).Update(e.ctx, "v1", "q1", "cm", cm, registry.WriteOptions{}); err != nil {
		t.Fatalf("update in a full quota: %v", err)
	}
}

// TestConcurrentCreatesStopAtTheLimit: creates racing in one namespace,
// through two quota admissions as two kplane replicas would run them,
// never store more objects than the limit, and the count says how many
// there are.
func TestConcurrentCreatesStopAtTheLimit(t *testing.T) {
	e := newEnv(t)
	replicas := []*env{e, e.replica()}
	const limit, workers, each = 40, 8, 10
	e.quota("q", map[string]any{"count/configmaps": fmt.Sprint(limit)}, map[string]any{"count/configmaps": "0"}, true)
	// Each server enforces the quota once its cache holds it (see
	// TestLimitsSettle for a create one admits before).
	replicas[1].cached(e.get("q").GetResourceVersion())
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored, refused, conflicts := 0, 0, 0
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("c-%d-%d", w, i)
				err := replicas[w%2].tryCreate(configMaps, "q1", name, nil, registry.WriteOptions{})
				mu.Lock()
				switch {
				case err == nil:
					stored++
				case apierrors.IsForbidden(err):
					refused++
				case apierrors.IsConflict(err):
					// Three conflicting writes of the quota in a row:
					// upstream gives up too.
					conflicts++
				default:
					t.Errorf("create %s: %v", name, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n, _, err := e.res(configMaps).Count(e.ctx, "q1", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d stored, %d refused, %d gave up on conflicts", stored, refused, conflicts)
	if n != stored || stored > limit || stored+refused+conflicts != workers*each || refused == 0 {
		t.Fatalf("%d stored (%d counted), %d refused, %d conflicts; limit %d", stored, n, refused, conflicts, limit)
	}
	if got := e.used("q"); fmt.Sprint(got) != fmt.Sprintf("map[count/configmaps:%d]", stored) {
		t.Fatalf("used: %v, %d stored", got, stored)
	}
}

func TestControllerCounts(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.create(configMaps, "q1", fmt.Sprint("c", i), nil)
	}
	e.create(widgets, "q1", "w", nil)
	e.runController()
	e.quota("q", map[string]any{"count/configmaps": "4", "configmaps": "9", "count/widgets.example.kplane.dev": "1",
		"count/gadgets.example.kplane.dev": "1", "cpu": "2"}, nil, false)
	statusIs := func(want string) func() bool {
		return func() bool {
			cur, err := e.res(quotasResource).Get(e.ctx, "v1", "q1", "q", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st, _, _ := unstructured.NestedMap(cur.Object, "status")
			return fmt.Sprint(st) == want
		}
	}
	// status.hard is spec.hard; used counts what is served and counted.
	e.eventually("the first count", statusIs("map[hard:map[configmaps:9 count/configmaps:4 count/gadgets.example.kplane.dev:1 count/widgets.example.kplane.dev:1 cpu:2] "+
		"used:map[configmaps:3 count/configmaps:3 count/widgets.example.kplane.dev:1 cpu:0]]"))
	// A delete is counted at once.
	if _, _, err := e.res(configMaps).Delete(e.ctx, "v1", "q1", "c0", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the count after a delete", statusIs("map[hard:map[configmaps:9 count/configmaps:4 count/gadgets.example.kplane.dev:1 count/widgets.example.kplane.dev:1 cpu:2] "+
		"used:map[configmaps:2 count/configmaps:2 count/widgets.example.kplane.dev:1 cpu:0]]"))
	// A create that fails after its charge (the name is taken) is
	// counted again.
	e.cached(e.get("q").GetResourceVersion())
	if err := e.tryCreate(configMaps, "q1", "c1", nil, registry.WriteOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create of a taken name: %v", err)
	}
	e.eventually("the count after a failed create", statusIs("map[hard:map[configmaps:9 count/configmaps:4 count/gadgets.example.kplane.dev:1 count/widgets.example.kplane.dev:1 cpu:2] "+
		"used:map[configmaps:2 count/configmaps:2 count/widgets.example.kplane.dev:1 cpu:0]]"))
	// A resource served later (a CRD's) is counted then.
	if err := e.reg.Add(&registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Gadget", ListKind: "GadgetList",
		Resource: "gadgets", Singular: "gadget", Namespaced: true}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the count of a new resource", statusIs("map[hard:map[configmaps:9 count/configmaps:4 count/gadgets.example.kplane.dev:1 count/widgets.example.kplane.dev:1 cpu:2] "+
		"used:map[configmaps:2 count/configmaps:2 count/gadgets.example.kplane.dev:0 count/widgets.example.kplane.dev:1 cpu:0]]"))
	// A changed spec: status.hard follows, and used drops what is no
	// longer limited.
	cur := e.get("q")
	unstructured.SetNestedField(cur.Object, map[string]any{"count/configmaps": "5"}, "spec", "hard")
	if _, err := e.res(quotasResource).Update(e.ctx, "v1", "q1", "q", cur, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the count after a new spec", statusIs("map[hard:map[count/configmaps:5] used:map[count/configmaps:2]]"))
}

func (e *env) get(name string) *unstructured.Unstructured {
	e.t.Helper()
	cur, err := e.res(quotasResource).Get(e.ctx, "v1", "q1", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cur
}

// TestCountsNeverUndoCharges: the controller counting all the time while
// creates and deletes race never lets more objects in than the limit, and
// its count ends right.
func TestCountsNeverUndoCharges(t *testing.T) {
	e := newEnv(t)
	q, err := New(Config{Registry: e.reg, Resync: time.Millisecond, Retry: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.q = q
	e.reg.SetQuota(q)
	e.runController()
	const limit = 20
	e.quota("q", map[string]any{"count/configmaps": fmt.Sprint(limit)}, nil, false)
	e.eventually("the first count", func() bool { return fmt.Sprint(e.used("q")) == "map[count/configmaps:0]" })
	e.cached(e.get("q").GetResourceVersion())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 60 {
				name := fmt.Sprintf("c-%d-%d", w, i)
				err := e.tryCreate(configMaps, "q1", name, nil, registry.WriteOptions{})
				if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsConflict(err) {
					t.Errorf("create %s: %v", name, err)
				}
				if n, _, err := e.res(configMaps).Count(e.ctx, "q1", false); err != nil || n > limit {
					t.Errorf("%d objects (%v), limit %d", n, err, limit)
					return
				}
				if err == nil && i%3 == 0 {
					if _, _, err := e.res(configMaps).Delete(e.ctx, "v1", "q1", name, metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
						t.Errorf("delete %s: %v", name, err)
					}
				}
			}
		})
	}
	wg.Wait()
	n, _, err := e.res(configMaps).Count(e.ctx, "q1", false)
	if err != nil {
		t.Fatal(err)
	}
	e.eventually("the last count", func() bool { return fmt.Sprint(e.used("q")) == fmt.Sprintf("map[count/configmaps:%d]", n) })
}

// TestLimitsSettle: a create a server admitted before its cache held new
// limits was not counted; the controller counts the namespace again a
// moment after it writes new limits, and finds it.
func TestLimitsSettle(t *testing.T) {
	e := newEnv(t)
	q, err := New(Config{Registry: e.reg, Retry: 5 * time.Millisecond, Settle: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.q = q
	e.reg.SetQuota(q)
	e.runController()
	e.quota("q", map[string]any{"count/configmaps": "5"}, nil, false)
	e.eventually("the first count", func() bool { return fmt.Sprint(e.used("q")) == "map[count/configmaps:0]" })
	// As another server would before its cache has the quota: stored,
	// not counted.
	e.reg.SetQuota(nil)
	e.create(configMaps, "q1", "early", nil)
	e.reg.SetQuota(q)
	e.eventually("the count after the limits settled", func() bool { return fmt.Sprint(e.used("q")) == "map[count/configmaps:1]" })
}

// The names upstream measures with its evaluators of kinds kplane does not
// serve are used 0; others not counted are left out.
func TestUnservedNames(t *testing.T) {
	for name, want := range map[string]bool{
		"pods": true, "count/pods": true, "requests.cpu": true, "limits.memory": true, "cpu": true, "ephemeral-storage": true,
		"hugepages-2Mi": true, "requests.hugepages-1Gi": true, "services": true, "services.loadbalancers": true, "count/services": true,
		"persistentvolumeclaims": true, "requests.storage": true, "gold.storageclass.storage.k8s.io/requests.storage": true,
		"requests.example.com/gpu": true,
		"configmaps":               false, "count/widgets.example.com": false, "requests.kubernetes.io/x": false, "requests.gpu": false,
		"example.com/gpu": false, "storage": false,
	} {
		if got := unserved(corev1.ResourceName(name)); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}
