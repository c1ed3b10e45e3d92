package controller

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
)

var key = types.NamespacedName{Namespace: "default", Name: "sample"}

// harness wraps a fake client whose reads can be made to lag (returning a
// saved older copy, like an informer cache that has not caught up) and
// whose writes can be made to fail with 409 Conflict.
type harness struct {
	client.WithWatch
	stale          *webappv1.Foo // returned by the next staleReads Gets
	staleReads     int
	forceConflicts int // the next forceConflicts Updates fail with 409
}

func newHarness(t *testing.T, spec string) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := webappv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &harness{}
	h.WithWatch = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(&webappv1.Foo{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec:       webappv1.FooSpec{Foo: spec},
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if h.staleReads > 0 && h.stale != nil {
					h.staleReads--
					h.stale.DeepCopyInto(obj.(*webappv1.Foo))
					return nil
				}
				return c.Get(ctx, k, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if h.forceConflicts > 0 {
					h.forceConflicts--
					return apierrors.NewConflict(webappv1.Resource("foos"), obj.GetName(),
						errors.New("the object has been modified"))
				}
				return c.Update(ctx, obj, opts...)
			},
		}).
		Build()
	return h
}

func (h *harness) current(t *testing.T) *webappv1.Foo {
	t.Helper()
	foo := &webappv1.Foo{}
	if err := h.WithWatch.Get(context.Background(), key, foo); err != nil {
		t.Fatal(err)
	}
	return foo
}

func reconcileOnce(t *testing.T, r *FooReconciler) error {
	t.Helper()
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	return err
}

func TestSingle(t *testing.T) {
	h := newHarness(t, "")
	r := &FooReconciler{Client: h, Mode: ModeSingle, Counters: &Counters{}}
	for range 3 {
		if err := reconcileOnce(t, r); err != nil {
			t.Fatal(err)
		}
	}
	want := CountersSnapshot{Reconciles: 3, Updates: 3}
	if got := r.Counters.Snapshot(); got != want {
		t.Fatalf("counters = %+v, want %+v", got, want)
	}
	if got := h.current(t).Spec.Foo; got != ValueHello {
		t.Fatalf("spec.foo = %q", got)
	}
}

func TestTwoUpdatesConflictOnStaleRead(t *testing.T) {
	h := newHarness(t, "")
	r := &FooReconciler{Client: h, Mode: ModeTwoUpdates, Counters: &Counters{}}

	h.stale = h.current(t) // what the "cache" will still show next pass
	if err := reconcileOnce(t, r); err != nil {
		t.Fatalf("first pass: %v", err)
	}
	if got := h.current(t).Spec.Foo; got != ValueWorld {
		t.Fatalf("after first pass spec.foo = %q", got)
	}

	h.staleReads = 1
	err := reconcileOnce(t, r)
	if !apierrors.IsConflict(err) {
		t.Fatalf("second pass error = %v, want a conflict", err)
	}
	want := CountersSnapshot{Reconciles: 2, Conflicts: 1, Updates: 2, Errors: 1}
	if got := r.Counters.Snapshot(); got != want {
		t.Fatalf("counters = %+v, want %+v", got, want)
	}
}

func TestRetryAbsorbsConflicts(t *testing.T) {
	h := newHarness(t, "")
	r := &FooReconciler{Client: h, Mode: ModeRetry, Counters: &Counters{}}

	h.stale = h.current(t)
	if err := reconcileOnce(t, r); err != nil {
		t.Fatal(err)
	}
	// Next pass: the first fresh read inside UpdateFoo is still stale, so
	// the first Update conflicts; the retry re-reads and succeeds.
	h.staleReads = 2 // one for Reconcile's Get, one for UpdateFoo's
	if err := reconcileOnce(t, r); err != nil {
		t.Fatalf("second pass: %v", err)
	}
	want := CountersSnapshot{Reconciles: 2, Conflicts: 1, Updates: 4}
	if got := r.Counters.Snapshot(); got != want {
		t.Fatalf("counters = %+v, want %+v", got, want)
	}
	if got := h.current(t).Spec.Foo; got != ValueWorld {
		t.Fatalf("spec.foo = %q", got)
	}
}

func TestRetryGivesUpEventually(t *testing.T) {
	h := newHarness(t, "")
	r := &FooReconciler{Client: h, Mode: ModeRetry, Counters: &Counters{}}
	h.forceConflicts = 100
	err := reconcileOnce(t, r)
	if !apierrors.IsConflict(err) {
		t.Fatalf("error = %v, want a conflict", err)
	}
	got := r.Counters.Snapshot()
	if got.Conflicts != 4 || got.Updates != 0 || got.Errors != 1 {
		t.Fatalf("counters = %+v", got)
	}
}

func TestIdempotentSettles(t *testing.T) {
	h := newHarness(t, "World")
	r := &FooReconciler{Client: h, Mode: ModeIdempotent, Counters: &Counters{}}
	h.forceConflicts = 1
	for range 3 {
		if err := reconcileOnce(t, r); err != nil {
			t.Fatal(err)
		}
	}
	want := CountersSnapshot{Reconciles: 3, Conflicts: 1, Updates: 1}
	if got := r.Counters.Snapshot(); got != want {
		t.Fatalf("counters = %+v, want %+v", got, want)
	}
	if got := h.current(t).Spec.Foo; got != ValueHello {
		t.Fatalf("spec.foo = %q", got)
	}
}

func TestNotFoundAndBadMode(t *testing.T) {
	h := newHarness(t, "")
	r := &FooReconciler{Client: h, Mode: ModeSingle} // nil Counters is allowed
	_, err := r.Reconcile(context.Background(), ctrl.Request{
		NamespacedName: types.NamespacedName{Namespace: "default", Name: "missing"},
	})
	if err != nil {
		t.Fatalf("missing object: %v", err)
	}

	r = &FooReconciler{Client: h, Mode: "bogus", Counters: &Counters{}}
	err = reconcileOnce(t, r)
	if !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Fatalf("bad mode error = %v, want terminal", err)
	}
	if got := r.Counters.Snapshot(); got.Errors != 1 {
		t.Fatalf("counters = %+v", got)
	}
}

func TestParseMode(t *testing.T) {
	for _, m := range Modes() {
		got, err := ParseMode(string(m))
		if err != nil || got != m {
			t.Fatalf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMode("nope"); err == nil {
		t.Fatal("ParseMode accepted an unknown mode")
	}
}
