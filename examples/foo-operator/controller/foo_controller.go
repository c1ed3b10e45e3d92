package controller

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
)

// Mode selects how FooReconciler writes to the object it reconciles.
type Mode string

const (
	// ModeSingle sets spec.foo="Hello" and updates once per pass. Settles.
	ModeSingle Mode = "single"
	// ModeTwoUpdates updates to "Hello" then to "World" on the same
	// (possibly stale) object and returns any error. Never settles and
	// regularly hits 409 Conflict.
	ModeTwoUpdates Mode = "two-updates"
	// ModeRetry makes the same two changes through UpdateFoo
	// (RetryOnConflict around Get+set+Update). Errors are absorbed, but it
	// never settles.
	ModeRetry Mode = "retry"
	// ModeIdempotent writes spec.foo="Hello" only when it differs, with
	// RetryOnConflict. Settles.
	ModeIdempotent Mode = "idempotent"
	// ModeMergePatch makes ModeTwoUpdates' two changes as JSON merge
	// patches (client.MergeFrom) instead of Updates. The patches carry no
	// resourceVersion, so a stale cache cannot make them conflict; like
	// ModeRetry it never settles.
	ModeMergePatch Mode = "merge-patch"
)

// Values written by the reconciler.
const (
	ValueHello = "Hello"
	ValueWorld = "World"
)

// Modes lists all valid modes.
func Modes() []Mode {
	return []Mode{ModeSingle, ModeTwoUpdates, ModeRetry, ModeIdempotent, ModeMergePatch}
}

// Valid reports whether m is one of the known modes.
func (m Mode) Valid() bool {
	for _, k := range Modes() {
		if m == k {
			return true
		}
	}
	return false
}

// ParseMode converts s to a Mode, rejecting unknown values.
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if !m.Valid() {
		return "", fmt.Errorf("unknown mode %q (want one of %v)", s, Modes())
	}
	return m, nil
}

// FooReconciler reconciles webapp.my.domain/v1 Foo objects according to
// Mode. Client is normally the manager's client (reads served from the
// informer cache, writes sent to the API server). Counters may be nil; Log
// may be the zero logr.Logger, in which case the logger from the request
// context is used.
type FooReconciler struct {
	Client   client.Client
	Mode     Mode
	Counters *Counters
	Log      logr.Logger
}

var _ reconcile.Reconciler = (*FooReconciler)(nil)

// Reconcile implements reconcile.Reconciler.
func (r *FooReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, err error) {
	r.Counters.incReconciles()
	defer func() {
		if err != nil {
			r.Counters.incErrors()
		}
	}()

	logger := r.logger(ctx).WithValues("foo", req.NamespacedName, "mode", r.Mode)
	ctx = logr.NewContext(ctx, logger)

	foo := &webappv1.Foo{}
	if err := r.Client.Get(ctx, req.NamespacedName, foo); err != nil {
		// The object may have been deleted after the event was queued.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	switch r.Mode {
	case ModeSingle:
		foo.Spec.Foo = ValueHello
		return ctrl.Result{}, r.update(ctx, foo)

	case ModeTwoUpdates:
		foo.Spec.Foo = ValueHello
		if err := r.update(ctx, foo); err != nil {
			return ctrl.Result{}, err
		}
		foo.Spec.Foo = ValueWorld
		return ctrl.Result{}, r.update(ctx, foo)

	case ModeRetry:
		if err := r.UpdateFoo(ctx, foo, ValueHello); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.UpdateFoo(ctx, foo, ValueWorld)

	case ModeIdempotent:
		return ctrl.Result{}, r.ensureFoo(ctx, foo, ValueHello)

	case ModeMergePatch:
		if err := r.patchFoo(ctx, foo, ValueHello); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.patchFoo(ctx, foo, ValueWorld)

	default:
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("unknown mode %q", r.Mode))
	}
}

// UpdateFoo sets spec.foo to value and updates the object, retrying on 409
// Conflict with retry.DefaultBackoff. Each attempt first re-reads foo (by
// its namespace/name) through r.Client, so with a cached client the read
// may still be stale and the attempt may conflict again. It writes even if
// spec.foo already equals value. On return foo holds the last object read
// or written.
func (r *FooReconciler) UpdateFoo(ctx context.Context, foo *webappv1.Foo, value string) error {
	key := types.NamespacedName{Namespace: foo.Namespace, Name: foo.Name}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := r.Client.Get(ctx, key, foo); err != nil {
			return err
		}
		foo.Spec.Foo = value
		return r.update(ctx, foo)
	})
}

// ensureFoo is the idempotent counterpart of UpdateFoo: it writes only when
// spec.foo differs from value.
func (r *FooReconciler) ensureFoo(ctx context.Context, foo *webappv1.Foo, value string) error {
	key := types.NamespacedName{Namespace: foo.Namespace, Name: foo.Name}
	first := true
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		// The caller has just read foo; re-read only on a retry.
		if !first {
			if err := r.Client.Get(ctx, key, foo); err != nil {
				return err
			}
		}
		first = false
		if foo.Spec.Foo == value {
			return nil
		}
		foo.Spec.Foo = value
		return r.update(ctx, foo)
	})
}

// patchFoo sets spec.foo to value with a JSON merge patch computed from
// foo as it is now: {"spec":{"foo":value}}, or {} when it already holds
// value. The patch carries no metadata.resourceVersion, so the API server
// applies it to whatever version it has and never answers 409, however
// stale foo is (upstream: a patch is only conditional when it sets
// resourceVersion, as client.MergeFromWithOptimisticLock does). On return
// foo holds the object the server stored.
func (r *FooReconciler) patchFoo(ctx context.Context, foo *webappv1.Foo, value string) error {
	logger := logr.FromContextOrDiscard(ctx)
	base := foo.DeepCopy()
	foo.Spec.Foo = value
	logger.V(1).Info("before patch", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo)
	if err := r.Client.Patch(ctx, foo, client.MergeFrom(base)); err != nil {
		if apierrors.IsConflict(err) {
			r.Counters.incConflicts()
		}
		logger.V(1).Info("patch failed", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo, "error", err.Error())
		return err
	}
	r.Counters.incPatches()
	logger.V(1).Info("after patch", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo)
	return nil
}

// update sends foo to the API server and records the outcome in Counters.
func (r *FooReconciler) update(ctx context.Context, foo *webappv1.Foo) error {
	logger := logr.FromContextOrDiscard(ctx)
	logger.V(1).Info("before update", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo)
	if err := r.Client.Update(ctx, foo); err != nil {
		if apierrors.IsConflict(err) {
			r.Counters.incConflicts()
		}
		logger.V(1).Info("update failed", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo, "error", err.Error())
		return err
	}
	r.Counters.incUpdates()
	logger.V(1).Info("after update", "resourceVersion", foo.ResourceVersion, "spec.foo", foo.Spec.Foo)
	return nil
}

func (r *FooReconciler) logger(ctx context.Context) logr.Logger {
	if r.Log.GetSink() != nil {
		return r.Log
	}
	return log.FromContext(ctx)
}

// SetupWithManager registers r with mgr as the controller for Foo.
//
// Controller names must be unique per process unless name validation is
// skipped; a test that starts several managers in one process should set
// ctrl.Options.Controller.SkipNameValidation on each manager.
func (r *FooReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if !r.Mode.Valid() {
		return fmt.Errorf("foo reconciler: unknown mode %q (want one of %v)", r.Mode, Modes())
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&webappv1.Foo{}).
		Complete(r)
}
