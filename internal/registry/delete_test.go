package registry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// widgets is a kind as a CRD defines it (it tracks generation).
func newWidgets(t *testing.T) (context.Context, *registry.Resource) {
	t.Helper()
	k := &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Generation: true}
	ctx, reg := runRegistry(t, k)
	res, _ := reg.Get(k.GroupResource())
	return ctx, res
}

// runRegistry serves kinds on a store of its own until the test ends.
func runRegistry(t *testing.T, kinds ...*registry.Kind) (context.Context, *registry.Registry) {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	for _, k := range kinds {
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
	return ctx, reg
}

func createWidget(t *testing.T, ctx context.Context, res *registry.Resource, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.kplane.dev/v1", "kind": "Widget", "spec": map[string]any{"a": "b"}}}
	u.SetName(name)
	u.SetFinalizers(finalizers)
	out, err := res.Create(ctx, "v1", "", u, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func propagation(p metav1.DeletionPropagation) metav1.DeleteOptions {
	return metav1.DeleteOptions{PropagationPolicy: &p}
}

func orphanDependents(b bool) metav1.DeleteOptions {
	//lint:ignore SA1019 the legacy option is what is tested
	return metav1.DeleteOptions{OrphanDependents: &b}
}

func TestDeletePropagationFinalizers(t *testing.T) {
	for _, c := range []struct {
		name       string
		opts       metav1.DeleteOptions
		finalizers []string // nil: deleted at once
	}{
		{"no policy is Background", metav1.DeleteOptions{}, nil},
		{"Background", propagation(metav1.DeletePropagationBackground), nil},
		{"Orphan", propagation(metav1.DeletePropagationOrphan), []string{metav1.FinalizerOrphanDependents}},
		{"Foreground", propagation(metav1.DeletePropagationForeground), []string{metav1.FinalizerDeleteDependents}},
		{"orphanDependents true", orphanDependents(true), []string{metav1.FinalizerOrphanDependents}},
		{"orphanDependents false", orphanDependents(false), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, res := newWidgets(t)
			created := createWidget(t, ctx, res, "w")
			out, deleted, err := res.Delete(ctx, "v1", "", "w", c.opts, registry.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.finalizers == nil {
				if !deleted {
					t.Fatalf("not deleted at once: %v", out)
				}
				if _, err := res.Get(ctx, "v1", "", "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Fatalf("after delete: %v", err)
				}
				return
			}
			// A policy adds its finalizer though nothing depends on the
			// object: the garbage collector removes it.
			kept := out.(*unstructured.Unstructured)
			if deleted || !slices.Equal(kept.GetFinalizers(), c.finalizers) {
				t.Fatalf("deleted %v, finalizers %v, want kept with %v", deleted, kept.GetFinalizers(), c.finalizers)
			}
			if kept.GetDeletionTimestamp() == nil || kept.GetDeletionGracePeriodSeconds() == nil || *kept.GetDeletionGracePeriodSeconds() != 0 {
				t.Fatalf("deletionTimestamp %v, deletionGracePeriodSeconds %v", kept.GetDeletionTimestamp(), kept.GetDeletionGracePeriodSeconds())
			}
			// The first deletion bumps a tracked generation.
			if kept.GetGeneration() != created.GetGeneration()+1 {
				t.Fatalf("generation %d, want %d", kept.GetGeneration(), created.GetGeneration()+1)
			}
		})
	}
}

// A delete of an object already being deleted: an explicit policy
// replaces the garbage collector finalizer, none keeps it, and Background
// removes it, which deletes an object left without finalizers.
func TestDeleteAgainWithAnotherPolicy(t *testing.T) {
	ctx, res := newWidgets(t)
	createWidget(t, ctx, res, "w", "test.kplane.dev/hold")
	first := mustDelete(t, ctx, res, propagation(metav1.DeletePropagationOrphan))
	if !slices.Equal(first.GetFinalizers(), []string{"test.kplane.dev/hold", metav1.FinalizerOrphanDependents}) {
		t.Fatalf("after Orphan: %v", first.GetFinalizers())
	}
	second := mustDelete(t, ctx, res, propagation(metav1.DeletePropagationForeground))
	if !slices.Equal(second.GetFinalizers(), []string{"test.kplane.dev/hold", metav1.FinalizerDeleteDependents}) {
		t.Fatalf("after Foreground: %v", second.GetFinalizers())
	}
	if !second.GetDeletionTimestamp().Equal(first.GetDeletionTimestamp()) || second.GetGeneration() != first.GetGeneration() {
		t.Fatalf("a second delete moved deletionTimestamp (%v → %v) or generation (%d → %d)",
			first.GetDeletionTimestamp(), second.GetDeletionTimestamp(), first.GetGeneration(), second.GetGeneration())
	}
	third := mustDelete(t, ctx, res, metav1.DeleteOptions{})
	if third.GetResourceVersion() != second.GetResourceVersion() {
		t.Fatalf("a delete without a policy wrote: %v", third.GetFinalizers())
	}
	fourth := mustDelete(t, ctx, res, propagation(metav1.DeletePropagationBackground))
	if !slices.Equal(fourth.GetFinalizers(), []string{"test.kplane.dev/hold"}) {
		t.Fatalf("after Background: %v", fourth.GetFinalizers())
	}

	createWidget(t, ctx, res, "v")
	if _, _, err := res.Delete(ctx, "v1", "", "v", propagation(metav1.DeletePropagationForeground), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := res.Delete(ctx, "v1", "", "v", propagation(metav1.DeletePropagationBackground), registry.WriteOptions{}); err != nil || !deleted {
		t.Fatalf("Background on an object held only by foregroundDeletion: deleted %v, %v", deleted, err)
	}
}

func mustDelete(t *testing.T, ctx context.Context, res *registry.Resource, opts metav1.DeleteOptions) *unstructured.Unstructured {
	t.Helper()
	out, deleted, err := res.Delete(ctx, "v1", "", "w", opts, registry.WriteOptions{})
	if err != nil || deleted {
		t.Fatalf("delete: deleted %v, %v", deleted, err)
	}
	return out.(*unstructured.Unstructured)
}

func TestDeleteOptionsValidation(t *testing.T) {
	ctx, res := newWidgets(t)
	createWidget(t, ctx, res, "w")
	both := propagation(metav1.DeletePropagationForeground)
	//lint:ignore SA1019 the legacy option is what is tested
	both.OrphanDependents = new(bool)
	for _, c := range []struct {
		name  string
		opts  metav1.DeleteOptions
		cause string
	}{
		{"both orphanDependents and propagationPolicy", both, "orphanDependents and deletionPropagation cannot be both set"},
		{"unknown policy", propagation("Sideways"), `Unsupported value: "Sideways"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := res.Delete(ctx, "v1", "", "w", c.opts, registry.WriteOptions{})
			var se *apierrors.StatusError
			if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusUnprocessableEntity {
				t.Fatalf("got %v, want 422", err)
			}
			d := se.ErrStatus.Details
			if d == nil || d.Kind != "DeleteOptions" || d.Group != "meta.k8s.io" || len(d.Causes) != 1 ||
				d.Causes[0].Field != "propagationPolicy" || !strings.Contains(d.Causes[0].Message, c.cause) {
				t.Fatalf("details %+v, want DeleteOptions.meta.k8s.io with a propagationPolicy cause %q", d, c.cause)
			}
		})
	}
	if _, err := res.Get(ctx, "v1", "", "w", metav1.GetOptions{}); err != nil {
		t.Fatalf("an invalid delete touched the object: %v", err)
	}
}

func TestDeletePreconditions(t *testing.T) {
	ctx, res := newWidgets(t)
	w := createWidget(t, ctx, res, "w")
	other, stale := types.UID("00000000-0000-4000-8000-000000000000"), "1"
	for _, c := range []struct {
		name string
		pre  metav1.Preconditions
		msg  string
	}{
		{"uid", metav1.Preconditions{UID: &other},
			`Operation cannot be fulfilled on Widget.example.kplane.dev "w": the UID in the precondition (` + string(other) + `) does not match the UID in record (` + string(w.GetUID()) + `). The object might have been deleted and then recreated`},
		{"resourceVersion", metav1.Preconditions{ResourceVersion: &stale},
			`Operation cannot be fulfilled on Widget.example.kplane.dev "w": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (` + w.GetResourceVersion() + `). The object might have been modified`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := res.Delete(ctx, "v1", "", "w", metav1.DeleteOptions{Preconditions: &c.pre}, registry.WriteOptions{})
			if !apierrors.IsConflict(err) || err.Error() != c.msg {
				t.Fatalf("got %v\nwant 409 %s", err, c.msg)
			}
		})
	}
	uid, rv := w.GetUID(), w.GetResourceVersion()
	if _, deleted, err := res.Delete(ctx, "v1", "", "w", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}, registry.WriteOptions{}); err != nil || !deleted {
		t.Fatalf("matching preconditions: deleted %v, %v", deleted, err)
	}
}

func TestDeleteDryRunStoresNothing(t *testing.T) {
	ctx, res := newWidgets(t)
	w := createWidget(t, ctx, res, "w")
	out, deleted, err := res.Delete(ctx, "v1", "", "w", propagation(metav1.DeletePropagationOrphan), registry.WriteOptions{DryRun: true})
	if err != nil || deleted {
		t.Fatalf("dry run: deleted %v, %v", deleted, err)
	}
	if u := out.(*unstructured.Unstructured); u.GetDeletionTimestamp() == nil || !slices.Equal(u.GetFinalizers(), []string{metav1.FinalizerOrphanDependents}) {
		t.Fatalf("dry run answer: %v %v", u.GetDeletionTimestamp(), u.GetFinalizers())
	}
	if _, deleted, err := res.Delete(ctx, "v1", "", "w", metav1.DeleteOptions{}, registry.WriteOptions{DryRun: true}); err != nil || !deleted {
		t.Fatalf("dry run without policy: deleted %v, %v", deleted, err)
	}
	now, err := res.Get(ctx, "v1", "", "w", metav1.GetOptions{})
	if err != nil || now.GetResourceVersion() != w.GetResourceVersion() {
		t.Fatalf("after dry runs: %v, rv %s → %s", err, w.GetResourceVersion(), now.GetResourceVersion())
	}
}

// Watchers see MODIFIED when deletion starts, DELETED when the garbage
// collector's finalizer goes.
func TestDeleteWithPolicyThenFinalizerRemoved(t *testing.T) {
	ctx, res := newWidgets(t)
	w := createWidget(t, ctx, res, "w")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ws, err := res.Watch(wctx, "v1", "", registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: w.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Stop()
	kept := mustDelete(t, ctx, res, propagation(metav1.DeletePropagationForeground))
	kept.SetFinalizers(nil)
	if _, err := res.Update(ctx, "v1", "", "w", kept, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []watch.EventType
	for len(got) < 2 {
		select {
		case ev := <-ws.ResultChan():
			got = append(got, ev.Type)
		case <-wctx.Done():
			t.Fatalf("events %v", got)
		}
	}
	if got[0] != watch.Modified || got[1] != watch.Deleted {
		t.Fatalf("events %v, want MODIFIED, DELETED", got)
	}
}

// DeleteCollection deletes what the list selects with several workers and
// answers in list order: the deleted objects, and those its finalizers
// keep, marked for deletion; the rest of the kind stays. DeleteAll does
// the same without an answer.
func TestDeleteCollection(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(map[bool]string{false: "DeleteCollection", true: "DeleteAll"}[all], func(t *testing.T) {
			ctx, res := newWidgets(t)
			var want []string
			for i := range 60 {
				name := fmt.Sprintf("w-%02d", i)
				var fins []string
				if i%10 == 0 {
					fins = []string{"example.kplane.dev/hold"}
				}
				u := createWidget(t, ctx, res, name, fins...)
				if i%3 != 0 { // the others are left alone
					labels := map[string]string{"batch": "yes"}
					u.SetLabels(labels)
					if _, err := res.Update(ctx, "v1", "", name, u, registry.WriteOptions{}); err != nil {
						t.Fatal(err)
					}
					want = append(want, name)
				}
			}
			sel, _ := labels.Parse("batch=yes")
			opts := registry.ListOptions{ListOptions: storage.ListOptions{Predicate: storage.Predicate{Label: sel}}}
			if all {
				if err := res.DeleteAll(ctx, "v1", "", opts, metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				out, err := res.DeleteCollection(ctx, "v1", "", opts, metav1.DeleteOptions{}, registry.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, it := range out.Items {
					got = append(got, it.GetName())
					held := slices.Contains(it.GetFinalizers(), "example.kplane.dev/hold")
					if held != (it.GetDeletionTimestamp() != nil) {
						t.Errorf("%s: finalizers %v, deletionTimestamp %v", it.GetName(), it.GetFinalizers(), it.GetDeletionTimestamp())
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("answered %v,\nwant %v", got, want)
				}
			}
			left, err := res.List(ctx, "v1", "", registry.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			remaining := 0
			for _, it := range left.Items {
				held := slices.Contains(it.GetFinalizers(), "example.kplane.dev/hold")
				if it.GetLabels()["batch"] == "yes" && !held {
					t.Errorf("%s is still there", it.GetName())
				}
				if marked := it.GetDeletionTimestamp() != nil; marked != (held && it.GetLabels()["batch"] == "yes") {
					t.Errorf("%s: marked for deletion %v", it.GetName(), marked)
				}
				remaining++
			}
			// The 20 not selected, and the four selected ones their finalizer
			// holds (10, 20, 40, 50).
			if remaining != 24 {
				t.Errorf("%d widgets remain, want 24", remaining)
			}
		})
	}
}
