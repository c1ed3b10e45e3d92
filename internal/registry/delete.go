package registry

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// Delete deletes ns/name if it passes opts.Preconditions. An object with
// finalizers is not removed: it gets a deletionTimestamp (once) and stays
// until its last finalizer is removed. Deleted reports which happened;
// the object returned is its last state (the one watchers see).
func (r *Resource) Delete(ctx context.Context, version, ns, name string, opts metav1.DeleteOptions, w WriteOptions) (out runtime.Object, deleted bool, err error) {
	k := r.Kind()
	gr := k.GroupResource()
	key := r.key(k, ns, name)
	pre := &storage.Preconditions{}
	if p := opts.Preconditions; p != nil {
		pre.UID, pre.ResourceVersion = p.UID, p.ResourceVersion
	}
	deferred := func(cur *unstructured.Unstructured) *unstructured.Unstructured {
		next := cur.DeepCopy()
		if k.PrepareForDelete != nil {
			k.PrepareForDelete(next)
		}
		if !pendingFinalizers(k, next) {
			return nil
		}
		if next.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(r.reg.Now().Truncate(1e9))
			zero := int64(0)
			next.SetDeletionTimestamp(&now)
			next.SetDeletionGracePeriodSeconds(&zero)
		}
		return next
	}
	if w.DryRun {
		cur, err := r.store.Get(ctx, key, storage.GetOptions{})
		if err != nil {
			return nil, false, interpret(err, gr, name)
		}
		if err := checkPreconditions(gr, name, pre, cur); err != nil {
			return nil, false, err
		}
		if next := deferred(cur); next != nil {
			return convert(k, version, next), false, nil
		}
		return r.deleted(k, version, cur), true, nil
	}
	for {
		gone, err := r.cache.Delete(ctx, key, pre, func(cur *unstructured.Unstructured) error {
			if deferred(cur) != nil {
				return errFinalizers
			}
			return nil
		})
		if err == nil {
			return r.deleted(k, version, gone), true, nil
		}
		if !errors.Is(err, errFinalizers) {
			return nil, false, interpret(err, gr, name)
		}
		kept, err := r.cache.GuaranteedUpdate(ctx, key, pre, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
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
		return convert(k, version, kept), false, nil
	}
}

// deleted is the answer to an immediate delete: the object for kinds that
// return it, else a Success Status naming it (genericregistry's
// finalizeDelete, which puts the resource in details.kind).
func (r *Resource) deleted(k *Kind, version string, obj *unstructured.Unstructured) runtime.Object {
	if k.ReturnDeletedObject {
		return convert(k, version, obj)
	}
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: obj.GetName(), Group: k.Group, Kind: k.Resource, UID: obj.GetUID()},
	}
}

func checkPreconditions(gr schema.GroupResource, name string, pre *storage.Preconditions, cur *unstructured.Unstructured) error {
	if pre.UID != nil && *pre.UID != cur.GetUID() {
		return apierrors.NewConflict(gr, name, errors.New("Precondition failed: UID in precondition: "+string(*pre.UID)+", UID in object meta: "+string(cur.GetUID())))
	}
	if pre.ResourceVersion != nil && *pre.ResourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(gr, name, errors.New("Precondition failed: ResourceVersion in precondition: "+*pre.ResourceVersion+", ResourceVersion in object meta: "+cur.GetResourceVersion()))
	}
	return nil
}

// DeleteCollection deletes the objects of ns that opts selects, one by
// one, each as Delete would, and returns the list of what it deleted or
// marked for deletion.
func (r *Resource) DeleteCollection(ctx context.Context, version, ns string, opts ListOptions, del metav1.DeleteOptions, w WriteOptions) (*unstructured.UnstructuredList, error) {
	list, err := r.List(ctx, version, ns, opts)
	if err != nil {
		return nil, err
	}
	out := &unstructured.UnstructuredList{Object: list.Object}
	for i := range list.Items {
		item := &list.Items[i]
		obj, _, err := r.Delete(ctx, version, item.GetNamespace(), item.GetName(), del, w)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out.Items = append(out.Items, *u)
		} else {
			out.Items = append(out.Items, *item)
		}
	}
	return out, nil
}
