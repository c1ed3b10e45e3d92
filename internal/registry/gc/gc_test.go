package gc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

const hold = "test.kplane.dev/hold"

func TestBackgroundDeletesDependentsAcrossKinds(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	e.create(obj{gr: configMaps, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, true)}})
	unrelated := e.create(obj{gr: configMaps, ns: "default", name: "unrelated"})

	if !e.delete(configMaps, "default", "owner", nil) {
		t.Fatal("a delete without a policy (Background) did not delete the owner at once")
	}
	e.untilGone(configMaps, "default", "child")
	e.untilGone(widgets, "default", "child")
	e.assertExists(configMaps, "default", "unrelated", unrelated.GetUID())
}

func TestClusterScopedOwnerOfNamespacedDependents(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	owner := e.create(obj{gr: clusterRoles, name: "owner"})
	e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	e.create(obj{gr: widgets, ns: "kube-system", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	e.delete(clusterRoles, "", "owner", policy(metav1.DeletePropagationBackground))
	e.untilGone(widgets, "default", "child")
	e.untilGone(widgets, "kube-system", "child")
}

// A namespaced owner is looked up in its dependent's namespace: a
// reference to an object of another namespace names nothing.
func TestNamespacedOwnerIsLookedUpInTheDependentsNamespace(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	e.create(obj{gr: configMaps, ns: "kube-system", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	e.untilGone(configMaps, "kube-system", "child")
	e.assertExists(configMaps, "default", "owner", owner.GetUID())
}

// Foreground: the owner stays, with foregroundDeletion, until every
// dependent that blocks it is gone; dependents with dependents of their
// own go in the foreground too, so the deletions happen leaves first.
func TestForegroundDeletesBlockingDependentsFirst(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	child := e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, true)}})
	e.create(obj{gr: configMaps, ns: "default", name: "grandchild", owners: []metav1.OwnerReference{ref(child, true)}, finalizers: []string{hold}})
	e.create(obj{gr: configMaps, ns: "default", name: "loose", owners: []metav1.OwnerReference{ref(owner, false)}})
	deletions := e.recordDeletions(configMaps, widgets)

	if e.delete(configMaps, "default", "owner", policy(metav1.DeletePropagationForeground)) {
		t.Fatal("a Foreground delete removed the owner at once")
	}
	// The grandchild is held by its finalizer: it is being deleted, and
	// the child and the owner wait for it.
	e.until(configMaps, "default", "grandchild", "being deleted", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetDeletionTimestamp() != nil
	})
	e.untilGone(configMaps, "default", "loose") // does not block: it goes without waiting
	for _, o := range []struct {
		gr   schema.GroupResource
		name string
		got  *unstructured.Unstructured
	}{
		{configMaps, "owner", e.mustGet(configMaps, "default", "owner")},
		{widgets, "child", e.mustGet(widgets, "default", "child")},
	} {
		if o.got.GetDeletionTimestamp() == nil || !hasFinalizer(o.got, metav1.FinalizerDeleteDependents) {
			t.Fatalf("%v %s while a blocking dependent remains: deletionTimestamp %v, finalizers %v",
				o.gr, o.name, o.got.GetDeletionTimestamp(), o.got.GetFinalizers())
		}
	}

	e.removeFinalizers(configMaps, "default", "grandchild")
	e.untilGone(configMaps, "default", "owner")
	got := deletions.wait(t, 4)
	want := []string{"configmaps/loose", "configmaps/grandchild", "widgets.example.kplane.dev/child", "configmaps/owner"}
	// loose may go at any point before the owner; the chain is ordered.
	order := map[string]int{}
	for i, d := range got {
		order[d] = i
	}
	for _, w := range want {
		if _, ok := order[w]; !ok {
			t.Fatalf("deletions %v lack %s", got, w)
		}
	}
	if !(order[want[1]] < order[want[2]] && order[want[2]] < order[want[3]] && order[want[0]] < order[want[3]]) {
		t.Fatalf("deletions in revision order %v: want grandchild, child, owner (and loose before owner)", got)
	}
}

func TestOrphanStripsReferencesThenDeletesTheOwner(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	other := e.create(obj{gr: configMaps, ns: "default", name: "other"})
	a := e.create(obj{gr: configMaps, ns: "default", name: "a", owners: []metav1.OwnerReference{ref(owner, true), ref(other, false)}})
	b := e.create(obj{gr: widgets, ns: "default", name: "b", owners: []metav1.OwnerReference{ref(owner, true)}})

	if e.delete(configMaps, "default", "owner", policy(metav1.DeletePropagationOrphan)) {
		t.Fatal("an Orphan delete removed the owner at once")
	}
	e.untilGone(configMaps, "default", "owner")
	gotA := e.assertExists(configMaps, "default", "a", a.GetUID())
	if refs := gotA.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != other.GetUID() {
		t.Fatalf("a's owners after orphaning: %+v, want only %s", refs, other.GetUID())
	}
	if refs := e.assertExists(widgets, "default", "b", b.GetUID()).GetOwnerReferences(); len(refs) != 0 {
		t.Fatalf("b's owners after orphaning: %+v", refs)
	}
}

// A policy adds its finalizer even to an owner without dependents; the
// collector removes it and the owner goes.
func TestPolicyWithoutDependents(t *testing.T) {
	for _, p := range []metav1.DeletionPropagation{metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground} {
		t.Run(string(p), func(t *testing.T) {
			e := newEnv(t)
			e.startGC()
			e.create(obj{gr: widgets, ns: "default", name: "lonely"})
			if e.delete(widgets, "default", "lonely", policy(p)) {
				t.Fatal("deleted at once")
			}
			e.untilGone(widgets, "default", "lonely")
		})
	}
}

// An owner recreated under the same name is another owner: the
// dependent of the first is deleted.
func TestOwnerWithTheSameNameAndAnotherUIDIsGone(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	first := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	e.delete(configMaps, "default", "owner", nil)
	second := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(first, false)}})
	kept := e.create(obj{gr: widgets, ns: "default", name: "kept", owners: []metav1.OwnerReference{ref(second, false)}})
	e.untilGone(widgets, "default", "child")
	e.assertExists(widgets, "default", "kept", kept.GetUID())
	e.assertExists(configMaps, "default", "owner", second.GetUID())
}

// With one owner left, only the reference to the gone one is removed.
func TestOneOwnerLeftKeepsTheDependent(t *testing.T) {
	e := newEnv(t)
	e.startGC()
	o1 := e.create(obj{gr: configMaps, ns: "default", name: "o1"})
	o2 := e.create(obj{gr: widgets, ns: "default", name: "o2"})
	d := e.create(obj{gr: configMaps, ns: "default", name: "d", owners: []metav1.OwnerReference{ref(o1, false), ref(o2, false)}})
	e.delete(configMaps, "default", "o1", nil)
	e.until(configMaps, "default", "d", "down to one owner", func(o *unstructured.Unstructured) bool {
		return o == nil || len(o.GetOwnerReferences()) == 1
	})
	got := e.assertExists(configMaps, "default", "d", d.GetUID())
	if refs := got.GetOwnerReferences(); refs[0].UID != o2.GetUID() {
		t.Fatalf("owners left: %+v, want %s", refs, o2.GetUID())
	}
}

// An owner of a kind not served is not known to be gone: the dependent
// stays. Once the kind is served (a CRD arrives), the owner is looked up
// and, absent, the dependent goes.
func TestOwnerOfAnUnknownKindDoesNotDelete(t *testing.T) {
	e := newEnv(t)
	a, _ := e.startGC()
	ghost := metav1.OwnerReference{APIVersion: "ghosts.example.kplane.dev/v1", Kind: "Ghost", Name: "casper", UID: types.UID("5f3d6c2e-0000-4000-8000-000000000001")}
	d := e.create(obj{gr: configMaps, ns: "default", name: "haunted", owners: []metav1.OwnerReference{ghost}})
	errs := a.wait(t, d.GetUID(), 1)
	if !errors.Is(errs[0], errUnknownKind) {
		t.Fatalf("first attempt: %v, want errUnknownKind", errs[0])
	}
	// Retried with backoff, still kept.
	a.wait(t, d.GetUID(), 2)
	e.assertExists(configMaps, "default", "haunted", d.GetUID())

	if err := e.reg.Add(&registry.Kind{Group: "ghosts.example.kplane.dev", Versions: []string{"v1"}, Kind: "Ghost", ListKind: "GhostList",
		Resource: "ghosts", Singular: "ghost", Namespaced: true}); err != nil {
		t.Fatal(err)
	}
	e.untilGone(configMaps, "default", "haunted")
}

// The collector survives a restart: the owner deleted while it was down
// is found absent from its first list, and the dependent goes.
func TestRestartFindsOwnersDeletedMeanwhile(t *testing.T) {
	e := newEnv(t)
	_, stop := e.startGC()
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	d := e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	// The first collector works: it collects another owner's dependent.
	other := e.create(obj{gr: configMaps, ns: "default", name: "other"})
	e.create(obj{gr: widgets, ns: "default", name: "other-child", owners: []metav1.OwnerReference{ref(other, false)}})
	e.delete(configMaps, "default", "other", nil)
	e.untilGone(widgets, "default", "other-child")
	stop()

	e.delete(configMaps, "default", "owner", nil)
	e.assertExists(widgets, "default", "child", d.GetUID()) // nobody collects now
	e.startGC()
	e.untilGone(widgets, "default", "child")
}

// deletionLog records the deletions in some resources of namespace
// default, to check their order by revision.
type deletionLog struct {
	mu      sync.Mutex
	events  []deletionEvent
	changed chan struct{} // capacity 1
}

type deletionEvent struct {
	rev  int64
	name string // resource/name
}

func (e *env) recordDeletions(grs ...schema.GroupResource) *deletionLog {
	e.t.Helper()
	l := &deletionLog{changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	e.t.Cleanup(func() { cancel(); wg.Wait() })
	for _, gr := range grs {
		res := e.res(gr)
		rev, err := res.StoreRevision(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		w, err := res.Watch(ctx, res.Kind().StorageVersion(), "default", registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: strconv.FormatInt(rev, 10)}})
		if err != nil {
			e.t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Stop()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Deleted {
					continue
				}
				m := ev.Object.(metav1.Object)
				rv, _ := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
				l.mu.Lock()
				l.events = append(l.events, deletionEvent{rev: rv, name: gr.String() + "/" + m.GetName()})
				l.mu.Unlock()
				select {
				case l.changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	return l
}

// wait returns the first n deletions in revision order.
func (l *deletionLog) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		evs := append([]deletionEvent(nil), l.events...)
		l.mu.Unlock()
		if len(evs) >= n {
			sort.Slice(evs, func(i, j int) bool { return evs[i].rev < evs[j].rev })
			out := make([]string, 0, len(evs))
			for _, ev := range evs {
				out = append(out, ev.name)
			}
			return out
		}
		select {
		case <-l.changed:
		case <-deadline.C:
			t.Fatalf("%d deletions seen, want %d: %v", len(evs), n, evs)
		}
	}
}

// Synced is closed once the collector's graph holds what was stored
// before it started, and not before Run; by then the graph is sparse:
// an owner and its dependent (listed in either order) are in it, an
// object in no ownership is not.
func TestSyncedAfterTheFirstLists(t *testing.T) {
	e := newEnv(t)
	cm := e.create(obj{gr: configMaps, ns: "default", name: "before"})
	w := e.create(obj{gr: widgets, ns: "default", name: "before", owners: []metav1.OwnerReference{ref(cm, false)}})
	cm2 := e.create(obj{gr: configMaps, ns: "default", name: "owned", owners: []metav1.OwnerReference{ref(w, false)}})
	alone := e.create(obj{gr: configMaps, ns: "default", name: "alone"})
	c, err := New(Config{Registry: e.reg, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Synced():
		t.Fatal("Synced is closed before Run")
	default:
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-c.Synced():
	case <-time.After(waitLimit):
		t.Fatal("Synced is not closed")
	}
	for _, o := range []*unstructured.Unstructured{cm, w, cm2} {
		if c.graph.get(o.GetUID()) == nil {
			t.Errorf("%s %s is not in the graph at Synced", o.GetKind(), o.GetName())
		}
	}
	if c.graph.get(alone.GetUID()) != nil {
		t.Errorf("ConfigMap alone, in no ownership, is in the graph at Synced")
	}
}

// A resource written faster than its watch cache's history lasts is read
// into the graph once, and then followed: the collector does not read it
// again and again. (A list in pages followed by a watch from the list's
// revision did: by the end of the list the cache's history no longer
// reached that revision, and the watch was refused as too old.)
func TestFollowsAResourceWrittenFasterThanItsCacheRemembers(t *testing.T) {
	// A history of 5 events; a queue long enough that the collector's
	// watch is never ended for falling behind, whatever the machine.
	e := newEnvWithCaches(t, watchcache.Config{Capacity: 5, MaxCapacity: 5, Buffer: 1 << 20})
	for i := range 1200 {
		e.create(obj{gr: configMaps, ns: "default", name: fmt.Sprintf("cm-%04d", i)})
	}
	churn := e.create(obj{gr: configMaps, ns: "default", name: "churn"})
	res := e.res(configMaps)
	ctx, cancel := context.WithCancel(e.ctx)
	var writes struct {
		sync.Mutex
		n    int
		more *sync.Cond // broadcast after each write, and when the writer stops
		done bool
	}
	writes.more = sync.NewCond(&writes.Mutex)
	// waitWrites returns the writes done once there are n, or fewer if
	// the writer stopped.
	waitWrites := func(n int) int {
		writes.Lock()
		defer writes.Unlock()
		for writes.n < n && !writes.done {
			writes.more.Wait()
		}
		return writes.n
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		defer func() {
			writes.Lock()
			writes.done = true
			writes.more.Broadcast()
			writes.Unlock()
		}()
		for i := 0; ctx.Err() == nil; i++ {
			churn.SetLabels(map[string]string{"n": strconv.Itoa(i)})
			out, err := res.Update(ctx, res.Kind().StorageVersion(), "default", "churn", churn, registry.WriteOptions{})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("churn: %v", err)
				}
				return
			}
			churn = out
			writes.Lock()
			writes.n++
			writes.more.Broadcast()
			writes.Unlock()
		}
	}()
	defer func() { cancel(); <-writerDone }()
	waitWrites(100) // the churn is under way

	c, err := New(Config{Registry: e.reg, Resync: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads := map[schema.GroupResource]int{}
	c.read = func(gr schema.GroupResource) {
		mu.Lock()
		reads[gr]++
		mu.Unlock()
	}
	gcCtx, stopGC := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(gcCtx) }()
	defer func() { stopGC(); <-done }()
	select {
	case <-c.Synced():
	case <-time.After(waitLimit):
		t.Fatal("Synced is not closed")
	}

	// It collects while the churn goes on, through what it follows.
	owner := e.create(obj{gr: configMaps, ns: "default", name: "owner"})
	e.create(obj{gr: widgets, ns: "default", name: "child", owners: []metav1.OwnerReference{ref(owner, false)}})
	e.delete(configMaps, "default", "owner", nil)
	e.untilGone(widgets, "default", "child")
	// Many times the history's length after Synced.
	total := waitWrites(waitWrites(0) + 2000)
	if t.Failed() {
		return
	}
	mu.Lock()
	n := reads[configMaps]
	mu.Unlock()
	if n != 1 {
		t.Errorf("ConfigMaps were read into the graph %d times during %d writes, want once", n, total)
	}
}

// uidSet behaves as a map through random adds and removes, across its
// change from a slice to a map.
func TestUIDSet(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var s uidSet
		want := map[types.UID]bool{}
		span := 1 + rnd.IntN(3*fewUIDs)
		for range 500 {
			u := types.UID(strconv.Itoa(rnd.IntN(span)))
			if rnd.IntN(3) == 0 {
				s.remove(u)
				delete(want, u)
			} else {
				s.add(u)
				want[u] = true
			}
			got := s.appendTo(nil)
			if s.len() != len(want) || len(got) != len(want) {
				t.Fatalf("round %d: len %d, %d listed, want %d", round, s.len(), len(got), len(want))
			}
			for _, u := range got {
				if !want[u] {
					t.Fatalf("round %d: %q listed, not in the set", round, u)
				}
			}
		}
	}
}
