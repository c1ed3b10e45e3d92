package migration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// Upstream's names.
const (
	runnerManager   = "migration-runner-controller"
	migratorManager = "storage-version-migrator-controller"
	statusManager   = "kube-controller-manager"

	runningReason   = "MigrationRunning"
	succeededReason = "StorageVersionMigrationSucceeded"
	failedReason    = "StorageVersionMigrationFailed"
)

var (
	migrations = schema.GroupResource{Group: svmv1.GroupName, Resource: "storageversionmigrations"}
	crds       = schema.GroupResource{Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"}
)

// Controller carries out the StorageVersionMigrations of Registry.
type Controller struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how soon a migration that could not go on (a resource not
	// served yet, an error) is looked at again. Default 1 s.
	Retry time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.KubeControllerManager)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Retry <= 0 {
		c.Retry = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	retry := time.NewTicker(c.Retry)
	defer retry.Stop()
	pending := map[metav1.GroupResource]bool{} // resources to look at again
	for ctx.Err() == nil {
		res, ok := c.Registry.Get(migrations)
		if !ok {
			<-ctx.Done()
			return nil
		}
		w, err := res.Watch(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			c.Logger.Warn("storage version migrator: watch", "err", err)
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

func (c *Controller) follow(ctx context.Context, w watch.Interface, pending map[metav1.GroupResource]bool, retry <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			u, isObj := ev.Object.(runtime.Unstructured)
			if !isObj || ev.Type == watch.Bookmark {
				continue
			}
			svm := core.TypedMigration(&unstructured.Unstructured{Object: u.UnstructuredContent()})
			pending[svm.Spec.Resource] = true
		case <-retry:
		}
		for gr := range pending {
			again, err := c.sync(ctx, gr)
			if err != nil && ctx.Err() == nil {
				c.Logger.Warn("storage version migrator", "resource", gr.String(), "err", err)
				again = true
			}
			if !again {
				delete(pending, gr)
			}
		}
	}
}

func isTrue(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(t))
}

func terminal(svm *svmv1.StorageVersionMigration) bool {
	return isTrue(svm, svmv1.MigrationSucceeded) || isTrue(svm, svmv1.MigrationFailed)
}

// sync takes the migrations of gr one step each, as far as they go now;
// it reports whether gr needs looking at again later.
func (c *Controller) sync(ctx context.Context, gr metav1.GroupResource) (again bool, err error) {
	res, _ := c.Registry.Get(migrations)
	list, err := res.List(ctx, "v1", "", registry.ListOptions{})
	if err != nil {
		return true, err
	}
	var mine []*svmv1.StorageVersionMigration
	for i := range list.Items {
		if svm := core.TypedMigration(&list.Items[i]); svm.Spec.Resource == gr {
			mine = append(mine, svm)
		}
	}
	// The runner: running ones that ended are closed; with none
	// running, the oldest waiting one starts.
	var running, next *svmv1.StorageVersionMigration
	for _, svm := range mine {
		switch {
		case isTrue(svm, svmv1.MigrationRunning) && terminal(svm):
			if err := c.close(ctx, svm); err != nil {
				return true, err
			}
		case isTrue(svm, svmv1.MigrationRunning):
			running = svm
		case !terminal(svm) && (next == nil || older(svm, next)):
			next = svm
		}
	}
	if running == nil {
		if next == nil {
			return false, nil
		}
		if err := c.start(ctx, next); err != nil {
			return true, err
		}
		return false, nil // its update comes back as an event
	}
	return c.migrate(ctx, running)
}

func older(a, b *svmv1.StorageVersionMigration) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// writeStatus stores svm's status.
func (c *Controller) writeStatus(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svm)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(svmv1.SchemeGroupVersion.String())
	u.SetKind("StorageVersionMigration")
	res, _ := c.Registry.Get(migrations)
	_, err = res.Update(ctx, "v1", "", svm.Name, u, registry.WriteOptions{Subresource: "status", FieldManager: statusManager})
	return err
}

// start marks svm Running, and its CRD, if any, StorageMigrating.
func (c *Controller) start(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	err := c.crdStatus(ctx, svm.Spec.Resource, func(crd *apiextensionsv1.CustomResourceDefinition) {
		setCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.StorageMigrating, Status: apiextensionsv1.ConditionTrue, Reason: "MigrationRunning",
			Message: fmt.Sprintf("Migration %s is running", svm.Name), ObservedGeneration: crd.Generation,
		}, c.Now())
	})
	if err != nil {
		return err
	}
	if !addCondition(svm, svmv1.MigrationRunning, runningReason, "The migration is running", c.Now()) {
		return nil
	}
	return c.writeStatus(ctx, svm)
}

// close ends a migration that succeeded or failed: Running goes False,
// and the CRD's StorageMigrating with it; after a success, its stored
// versions become the storage version, if the CRD has not changed since
// the migration started.
func (c *Controller) close(ctx context.Context, svm *svmv1.StorageVersionMigration) error {
	success := isTrue(svm, svmv1.MigrationSucceeded)
	err := c.crdStatus(ctx, svm.Spec.Resource, func(crd *apiextensionsv1.CustomResourceDefinition) {
		var current bool
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.StorageMigrating {
				current = cond.ObservedGeneration == crd.Generation
			}
		}
		reason, msg := "MigrationFailed", "The migration has failed"
		if success {
			reason, msg = "MigrationSucceeded", "The migration has succeeded"
			if current {
				msg += " and the stored versions have been updated"
			} else {
				msg += " but the stored versions have not been updated due to a generation mismatch"
			}
		}
		setCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
			Type: apiextensionsv1.StorageMigrating, Status: apiextensionsv1.ConditionFalse, Reason: reason, Message: msg,
			ObservedGeneration: crd.Generation,
		}, c.Now())
		if success && current {
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					crd.Status.StoredVersions = []string{v.Name}
				}
			}
		}
	})
	if err != nil {
		return err
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{
		Type: string(svmv1.MigrationRunning), Status: metav1.ConditionFalse, Reason: "MigrationCompleted",
		Message: "Migration completed", ObservedGeneration: svm.Generation, LastTransitionTime: metav1.NewTime(c.Now()),
	})
	return c.writeStatus(ctx, svm)
}

// addCondition adds a True condition of type t, unless svm has one of
// that type; it reports whether it did.
func addCondition(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType, reason, msg string, now time.Time) bool {
	if meta.FindStatusCondition(svm.Status.Conditions, string(t)) != nil {
		return false
	}
	svm.Status.Conditions = append(svm.Status.Conditions, metav1.Condition{
		Type: string(t), Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: msg,
	})
	return true
}

// setCRDCondition sets cond on crd, its transition time now if its status
// changes.
func setCRDCondition(crd *apiextensionsv1.CustomResourceDefinition, cond apiextensionsv1.CustomResourceDefinitionCondition, now time.Time) {
	cond.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	for i, have := range crd.Status.Conditions {
		if have.Type == cond.Type {
			if have.Status == cond.Status {
				cond.LastTransitionTime = have.LastTransitionTime
			}
			crd.Status.Conditions[i] = cond
			return
		}
	}
	crd.Status.Conditions = append(crd.Status.Conditions, cond)
}

// crdStatus changes the status of the CRD serving gr, if there is one,
// retrying on conflicts.
func (c *Controller) crdStatus(ctx context.Context, gr metav1.GroupResource, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	res, ok := c.Registry.Get(crds)
	if !ok {
		return nil
	}
	name := gr.Resource + "." + gr.Group
	for attempt := 0; ; attempt++ {
		cur, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(cur.Object, &crd); err != nil {
			return err
		}
		change(&crd)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
		u.SetKind("CustomResourceDefinition")
		_, err = res.Update(ctx, "v1", "", name, u, registry.WriteOptions{Subresource: "status", FieldManager: runnerManager})
		if !apierrors.IsConflict(err) || attempt == 4 {
			return err
		}
	}
}

// grace is how long a migration of a resource not served waits for it.
const grace = time.Minute

// migrate takes a running migration on: its resourceVersion, then the
// objects, then Succeeded. It reports whether to look again later.
func (c *Controller) migrate(ctx context.Context, svm *svmv1.StorageVersionMigration) (bool, error) {
	if terminal(svm) {
		return false, nil
	}
	gr := schema.GroupResource{Group: svm.Spec.Resource.Group, Resource: svm.Spec.Resource.Resource}
	res, served := c.Registry.Get(gr)
	if served && res.Kind().Review != nil {
		// Never stored: it has no list, patch or update to migrate with.
		k := res.Kind()
		msg := fmt.Sprintf("resource %q does not support discovery operations: [update patch list]", k.GroupResource().WithVersion(k.StorageVersion()).String())
		addCondition(svm, svmv1.MigrationFailed, failedReason, msg, c.Now())
		return false, c.writeStatus(ctx, svm)
	}
	if !served {
		if c.Now().Before(svm.CreationTimestamp.Add(grace)) {
			return true, nil
		}
		msg := "resource does not exist in discovery"
		if svm.Status.ResourceVersion != "" {
			msg = "migration encountered unhandled error: unable to obtain GVR from discovery"
		}
		addCondition(svm, svmv1.MigrationFailed, failedReason, msg, c.Now())
		return false, c.writeStatus(ctx, svm)
	}
	if svm.Status.ResourceVersion == "" {
		rev, err := res.StoreRevision(ctx)
		if err != nil {
			return true, err
		}
		svm.Status.ResourceVersion = strconv.FormatInt(rev, 10)
		return false, c.writeStatus(ctx, svm) // its update comes back as an event
	}
	until, err := strconv.ParseInt(svm.Status.ResourceVersion, 10, 64)
	if err != nil {
		addCondition(svm, svmv1.MigrationFailed, failedReason, "migration encountered unhandled error: "+err.Error(), c.Now())
		return false, c.writeStatus(ctx, svm)
	}
	keys, _, err := res.Keys(ctx, "")
	if err != nil {
		return true, err
	}
	k := res.Kind()
	v := k.StorageVersion()
	apiVersion, kind := k.GroupVersionKind(v).ToAPIVersionAndKind()
	total := len(keys)
	left := 0
	for _, key := range keys {
		if key.Rev <= until {
			left++
		}
	}
	for _, key := range keys {
		if key.Rev > until {
			continue // written since: in the storage version already
		}
		patch, _ := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"resourceVersion": strconv.FormatInt(key.Rev, 10)}})
		_, _, err := res.Patch(ctx, v, key.Namespace, key.Name, patch, registry.PatchOptions{Type: types.MergePatchType,
			WriteOptions: registry.WriteOptions{FieldManager: migratorManager}})
		switch {
		case err == nil, apierrors.IsConflict(err), apierrors.IsNotFound(err):
			// Rewritten; or changed or gone meanwhile, which needs none.
			left--
		case retriable(err):
			meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
				Reason: runningReason, Message: runningMessage(left, total, err), LastTransitionTime: metav1.NewTime(c.Now())})
			return true, errors.Join(err, c.writeStatus(ctx, svm))
		default:
			meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
				Reason: runningReason, Message: runningMessage(left, total, nil), LastTransitionTime: metav1.NewTime(c.Now())})
			meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationFailed), Status: metav1.ConditionTrue,
				Reason: failedReason, LastTransitionTime: metav1.NewTime(c.Now()),
				Message: fmt.Sprintf("%d/%d not yet migrated. migration encountered unhandled error: %s", left, total, err)})
			return false, c.writeStatus(ctx, svm)
		}
	}
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
		Reason: runningReason, Message: runningMessage(left, total, nil), LastTransitionTime: metav1.NewTime(c.Now())})
	meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationSucceeded), Status: metav1.ConditionTrue,
		Reason: succeededReason, Message: "Migration completed", LastTransitionTime: metav1.NewTime(c.Now())})
	return false, c.writeStatus(ctx, svm)
}

// runningMessage is upstream's Running message: how many objects are
// left of how many, and a passing error.
func runningMessage(left, total int, transient error) string {
	msg := "The migration is running"
	if total > 0 {
		if left > 0 {
			msg += fmt.Sprintf(", %d/%d objects not yet migrated", left, total)
		} else {
			msg += fmt.Sprintf(", %d objects verified migrated", total)
		}
	}
	if transient != nil {
		msg += "; transient error: " + transient.Error()
	}
	return msg
}

// retriable are the errors upstream tries a migration again after.
func retriable(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || errors.Is(err, context.DeadlineExceeded)
}
