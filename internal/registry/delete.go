package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/storage"
)

// errFinalizers refuses an immediate delete of an object with finalizers.
var errFinalizers = errors.New("the object has finalizers")

// pendingFinalizers reports whether anything still defers obj's deletion.
func pendingFinalizers(k *Kind, obj *unstructured.Unstructured) bool {
	return len(obj.GetFinalizers()) > 0 || (k.Pending != nil && k.Pending(obj))
}

// Delete deletes ns/name if it passes opts.Preconditions, as
// kube-apiserver's generic registry (Store.Delete) does:
//
//   - opts is validated first (422 on DeleteOptions, for instance when
//     both orphanDependents and propagationPolicy are set);
//   - the garbage collector's finalizers follow the propagation policy:
//     Orphan adds `orphan`, Foreground adds `foregroundDeletion`,
//     Background (the default of every kind kplane serves) adds neither,
//     and an explicit policy replaces whichever of the two the object
//     already has, even when its deletion has started. No policy keeps
//     them. The finalizer is added whether or not the object has
//     dependents; the collector removes it;
//   - an object that ends up with finalizers is not removed: it gets a
//     deletionTimestamp (the first time, which also bumps a tracked
//     generation), deletionGracePeriodSeconds 0, and stays until its last
//     finalizer is removed. Watchers see MODIFIED, later DELETED.
//
// Deleted reports which happened; the object returned is its last state
// (the one watchers see).
func (r *Resource) Delete(ctx context.Context, version, ns, name string, opts metav1.DeleteOptions, w WriteOptions) (out runtime.Object, deleted bool, err error) {
	k := r.Kind()
	gr := k.GroupResource()
	if errs := metav1validation.ValidateDeleteOptions(&opts); len(errs) > 0 {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	if k.RefuseDelete != nil {
		if err := k.RefuseDelete(name); err != nil {
			return nil, false, apierrors.NewForbidden(gr, name, err)
		}
	}
	key := r.key(k, ns, name)
	pre := &storage.Preconditions{}
	if p := opts.Preconditions; p != nil {
		pre.UID, pre.ResourceVersion = p.UID, p.ResourceVersion
	}
	deferred := func(cur *unstructured.Unstructured) *unstructured.Unstructured {
		return r.prepareDelete(k, cur, &opts)
	}
	// Admission sees the object about to be deleted, each time the delete
	// reads it, as upstream's deleteValidation.
	var admitted string // the resourceVersion admission last allowed
	admit := func(cur *unstructured.Unstructured) error {
		if rv := cur.GetResourceVersion(); rv != admitted {
			if k.ConversionWebhook != nil {
				// Upstream's delete reads the object in the request's
				// version: one its webhook cannot convert stays.
				if _, err := r.convertStoredOne(ctx, k, version, cur); err != nil {
					return readFailed(k, cur, err)
				}
			}
			if err := r.admitDelete(ctx, k, version, ns, name, cur, &opts, w.DryRun); err != nil {
				return err
			}
			admitted = rv
		}
		return nil
	}
	// kube-apiserver reads the object and checks the preconditions before
	// anything else (rest.BeforeDelete); that is the message clients see.
	// The writes below check them again against what they replace. Without
	// preconditions the read would only find what the delete finds, with
	// the same 404.
	if opts.Preconditions != nil || w.DryRun {
		cur, err := r.store.Get(ctx, key, storage.GetOptions{})
		if err != nil {
			return nil, false, interpret(err, gr, name)
		}
		if err := checkPreconditions(k, name, opts.Preconditions, cur); err != nil {
			return nil, false, err
		}
		if err := admit(cur); err != nil {
			return nil, false, err
		}
		if w.DryRun {
			if next := deferred(cur); next != nil {
				out, err := r.convertTo(ctx, k, version, next)
				return out, false, err
			}
			out, err := r.deleted(ctx, k, version, cur)
			return out, true, err
		}
	}
	for {
		gone, err := r.cache.Delete(ctx, key, pre, func(cur *unstructured.Unstructured) error {
			if err := admit(cur); err != nil {
				return err
			}
			if deferred(cur) != nil {
				return errFinalizers
			}
			return nil
		})
		if err == nil {
			if k.Deleted != nil {
				k.Deleted(ctx, gone)
			}
			out, err := r.deleted(ctx, k, version, gone)
			return out, true, err
		}
		if !errors.Is(err, errFinalizers) {
			return nil, false, interpret(err, gr, name)
		}
		kept, err := r.cache.GuaranteedUpdate(ctx, key, pre, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			if err := admit(cur); err != nil {
				return nil, err
			}
			next := deferred(cur)
			if next == nil {
				return nil, errDeleteNow // the finalizers went meanwhile
			}
			next.SetResourceVersion("")
			return next, nil
		})
		if errors.Is(err, errDeleteNow) {
			continue
		}
		if err != nil {
			return nil, false, interpret(err, gr, name)
		}
		out, err := r.convertTo(ctx, k, version, kept)
		return out, false, err
	}
}

// prepareDelete returns the state a delete with opts leaves cur in when
// something defers it (finalizers, the kind's pending work), or nil when
// the object can go at once.
func (r *Resource) prepareDelete(k *Kind, cur *unstructured.Unstructured, opts *metav1.DeleteOptions) *unstructured.Unstructured {
	if k.PrepareForDelete == nil && (k.Pending == nil || !k.Pending(cur)) {
		if fins, _ := gcFinalizers(cur.GetFinalizers(), opts); len(fins) == 0 {
			return nil // the common case, decided without a copy
		}
	}
	next := cur.DeepCopy()
	if k.PrepareForDelete != nil {
		k.PrepareForDelete(next)
	}
	if k.MarkDeleting != nil && next.GetDeletionTimestamp() == nil && len(next.GetFinalizers()) > 0 {
		now := metav1.NewTime(r.reg.Now().Truncate(1e9))
		next.SetDeletionTimestamp(&now)
		k.MarkDeleting(next)
		return next
	}
	if fins, changed := gcFinalizers(next.GetFinalizers(), opts); changed {
		next.SetFinalizers(fins)
	}
	if !pendingFinalizers(k, next) {
		return nil
	}
	// markAsDeleting in kube-apiserver's generic registry: the first
	// deletion sets the timestamp and, for kinds that track it, bumps the
	// generation; the grace period of a kind without graceful deletion
	// is 0. A kind whose own pending work defers its deletion (a
	// namespace) is marked as upstream's REST of its own marks it: the
	// timestamp, and no grace period.
	if next.GetDeletionTimestamp() == nil {
		now := metav1.NewTime(r.reg.Now().Truncate(1e9))
		next.SetDeletionTimestamp(&now)
		if g := next.GetGeneration(); g > 0 {
			next.SetGeneration(g + 1)
		}
	}
	if k.Pending == nil {
		zero := int64(0)
		next.SetDeletionGracePeriodSeconds(&zero)
	}
	return next
}

// gcFinalizers returns the finalizers an object should have after a
// delete with opts, and whether they differ from fins (as a set). This is
// kube-apiserver's deletionFinalizersForGarbageCollection for a kind whose
// default policy is to delete dependents: the options decide first
// (orphanDependents, then propagationPolicy), then the finalizers the
// object already has; by default there is neither.
func gcFinalizers(fins []string, opts *metav1.DeleteOptions) ([]string, bool) {
	had := map[string]bool{}
	for _, f := range fins {
		had[f] = true
	}
	orphan, foreground := had[metav1.FinalizerOrphanDependents], had[metav1.FinalizerDeleteDependents]
	//lint:ignore SA1019 orphanDependents is deprecated but still honoured upstream.
	switch od := opts.OrphanDependents; {
	case od != nil:
		orphan, foreground = *od, false
	case opts.PropagationPolicy != nil:
		p := *opts.PropagationPolicy
		orphan, foreground = p == metav1.DeletePropagationOrphan, p == metav1.DeletePropagationForeground
	case orphan && foreground:
		// Both, set by hand: the first of the two in the list wins, as
		// upstream's checks walk the finalizers in order.
		foreground = false
		for _, f := range fins {
			if f == metav1.FinalizerDeleteDependents {
				orphan, foreground = false, true
				break
			}
			if f == metav1.FinalizerOrphanDependents {
				break
			}
		}
	}
	out := make([]string, 0, len(fins)+1)
	for _, f := range fins {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	changed := orphan != had[metav1.FinalizerOrphanDependents] || foreground != had[metav1.FinalizerDeleteDependents]
	return out, changed
}

// deleted is the answer to an immediate delete: the object for kinds that
// return it, else a Success Status naming it (genericregistry's
// finalizeDelete, which puts the resource in details.kind).
func (r *Resource) deleted(ctx context.Context, k *Kind, version string, obj *unstructured.Unstructured) (runtime.Object, error) {
	if k.ReturnDeletedObject {
		out, err := r.convertTo(ctx, k, version, obj)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: obj.GetName(), Group: k.Group, Kind: k.Resource, UID: obj.GetUID()},
	}, nil
}

// checkPreconditions refuses a delete whose preconditions cur fails, with
// the 409 rest.BeforeDelete gives: it names the kind (not the resource).
func checkPreconditions(k *Kind, name string, p *metav1.Preconditions, cur *unstructured.Unstructured) error {
	if p == nil {
		return nil
	}
	gr := schema.GroupResource{Group: k.Group, Resource: k.Kind}
	if p.UID != nil && *p.UID != cur.GetUID() {
		return apierrors.NewConflict(gr, name, fmt.Errorf(
			"the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, cur.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, fmt.Errorf(
			"the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, cur.GetResourceVersion()))
	}
	return nil
}

// DeleteCollection deletes the objects of ns that opts selects, one by
// one, each as Delete would with del, and returns the list of what it
// deleted or marked for deletion.
func (r *Resource) DeleteCollection(ctx context.Context, version, ns string, opts ListOptions, del metav1.DeleteOptions, w WriteOptions) (*unstructured.UnstructuredList, error) {
	if errs := metav1validation.ValidateDeleteOptions(&del); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	list, err := r.List(ctx, version, ns, opts)
	if err != nil {
		return nil, err
	}
	deleted := make([]runtime.Object, len(list.Items))
	done := make([]bool, len(list.Items)) // deleted here (not gone already)
	err = r.deleteEach(ctx, version, del, w, len(list.Items), func(i int) (string, string) {
		return list.Items[i].GetNamespace(), list.Items[i].GetName()
	}, func(i int, obj runtime.Object) { deleted[i], done[i] = obj, true })
	if err != nil {
		return nil, err
	}
	out := &unstructured.UnstructuredList{Object: list.Object}
	for i, obj := range deleted {
		if !done[i] {
			continue // gone already
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out.Items = append(out.Items, *u)
		} else {
			out.Items = append(out.Items, list.Items[i])
		}
	}
	return out, nil
}

// DeleteAll deletes what DeleteCollection would, for a caller that wants
// no answer (the namespace and CRD controllers): the objects are named
// from the cache's records, never decoded into a list, and each delete's
// answer is dropped, so emptying a namespace of 100,000 objects holds
// none of them decoded.
func (r *Resource) DeleteAll(ctx context.Context, version, ns string, opts ListOptions, del metav1.DeleteOptions, w WriteOptions) error {
	if errs := metav1validation.ValidateDeleteOptions(&del); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	k := r.Kind()
	var failed conversionFailure
	opts.Predicate.Fields = r.fieldSetIn(ctx, k, version, opts.Predicate.Field, &failed)
	recs, err := r.cache.ListRecords(ctx, r.scope(k, ns), opts.ListOptions)
	if err != nil {
		return interpret(err, k.GroupResource(), "")
	}
	if err := failed.err(); err != nil {
		return err
	}
	return r.deleteEach(ctx, version, del, w, len(recs.Items), func(i int) (string, string) {
		return recs.Items[i].Namespace, recs.Items[i].Name
	}, func(int, runtime.Object) {})
}

// deleteEach deletes the n objects that name gives, each as Delete would
// with del, by a few workers at once (kube-apiserver's
// --delete-collection-workers), so that their writes share the engine's
// commits: one at a time, each delete waited for an fsync of its own.
// gone is told of each object deleted or marked for deletion here (not
// gone already). The first error stops the handing out of objects;
// those already deleted stay deleted, as with upstream's workers.
func (r *Resource) deleteEach(ctx context.Context, version string, del metav1.DeleteOptions, w WriteOptions, n int, name func(i int) (ns, name string), gone func(i int, obj runtime.Object)) error {
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
		failed   atomic.Bool
	)
	for range min(deleteCollectionWorkers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				ns, nm := name(i)
				obj, _, err := r.Delete(ctx, version, ns, nm, del, w)
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
				default:
					gone(i, obj)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// deleteCollectionWorkers is how many deletes of a DeleteCollection run
// at once.
const deleteCollectionWorkers = 8

// admitDelete asks the registry's admission about deleting cur (as
// stored), in version, with opts: Mutate, which cannot change anything,
// then Validate, as upstream's deleteValidation calls both.
func (r *Resource) admitDelete(ctx context.Context, k *Kind, version, ns, name string, cur *unstructured.Unstructured, opts *metav1.DeleteOptions, dryRun bool) error {
	adm := r.admitting(k)
	if adm == nil {
		return nil
	}
	sent := opts.DeepCopy()
	sent.APIVersion, sent.Kind = "meta.k8s.io/v1", "DeleteOptions"
	if k.Group == "" && k.Resource == "namespaces" {
		// Upstream's namespace delete makes the uid read a precondition
		// before its store sees the options.
		if sent.Preconditions == nil {
			sent.Preconditions = &metav1.Preconditions{}
		}
		if sent.Preconditions.UID == nil {
			uid := cur.GetUID()
			sent.Preconditions.UID = &uid
		}
	}
	old, err := r.convertStoredOne(ctx, k, version, cur)
	if err != nil {
		return err
	}
	a := &AdmissionAttributes{
		Kind: k, Version: version, Operation: OpDelete, Namespace: ns, Name: name,
		OldObject: old, Options: sent, DryRun: dryRun,
	}
	if _, err := r.mutate(ctx, adm, a); err != nil {
		return err
	}
	return adm.Validate(ctx, a)
}
