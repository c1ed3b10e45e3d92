package gc

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
)

var (
	// errUnknownKind: an ownerReference names a kind no served resource
	// has. Such an owner is not known to be gone: the object is kept and
	// looked at again later (a CRD may come).
	errUnknownKind = errors.New("the owner's kind is not served")
	// errNamespacedOwner: a cluster-scoped object names a namespaced
	// owner, which cannot be; upstream leaves such objects alone.
	errNamespacedOwner = errors.New("a cluster-scoped object cannot have a namespaced owner")
)

// conflictRetries bounds the read-modify-write attempts of one update
// before the object goes back to the queue.
const conflictRetries = 5

// process looks at the object u and does what its state asks for. It
// reads the object and its owners from the store (consistent reads), so
// the graph deciding what to look at may lag without a wrong deletion:
//
//   - being deleted with `orphan`: strip the references to it from its
//     dependents, then remove the finalizer;
//   - being deleted with `foregroundDeletion`: have its dependents
//     deleted, and remove the finalizer once none blocks it;
//   - otherwise being deleted: nothing; its dependents are looked at once
//     it is gone;
//   - not being deleted, with owners: classify them (upstream's
//     attemptToDeleteItem) and delete the object, or strip references, or
//     leave it.
func (c *Collector) process(ctx context.Context, u types.UID) error {
	n := c.graph.get(u)
	if n == nil {
		return nil // gone since it was queued
	}
	res, obj, err := c.live(ctx, n.id)
	if err != nil || obj == nil {
		return err
	}
	if obj.GetDeletionTimestamp() != nil {
		fins := finalizerSet(obj)
		if fins[metav1.FinalizerOrphanDependents] {
			return c.orphan(ctx, n)
		}
		if fins[metav1.FinalizerDeleteDependents] {
			return c.deleteDependents(ctx, n)
		}
		return nil
	}
	owners := obj.GetOwnerReferences()
	if len(owners) == 0 {
		return nil
	}
	solid, dangling, waiting, err := c.classify(ctx, obj, owners)
	if err != nil {
		return err
	}
	switch {
	case len(solid) > 0:
		// An owner remains: the object stays. References to owners that
		// are gone, or that wait for their dependents to go, are removed
		// (the latter would otherwise keep those owners forever).
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		gone := append(dangling, waiting...)
		drop := map[types.UID]bool{}
		for _, r := range gone {
			drop[r.UID] = true
		}
		c.log.Debug("garbage collector: removing references to owners that are gone or being deleted",
			"object", describe(n.id), "owners", refsString(gone))
		return c.update(ctx, n.id, func(obj *unstructured.Unstructured) bool { return removeOwners(obj, drop) })
	case len(waiting) > 0 && c.hasDependents(ctx, n):
		// An owner deletes its dependents in the foreground and this
		// object has dependents of its own: it goes in the foreground too.
		// If one of those is itself waiting, the chain may be a cycle:
		// unblock this object's references first, as upstream does.
		for _, d := range c.graph.dependentsOf(n) {
			if d.node.deletingDependents() {
				if err := c.update(ctx, n.id, unblockOwners); err != nil {
					return err
				}
				if res, obj, err = c.live(ctx, n.id); err != nil || obj == nil {
					return err
				}
				break
			}
		}
		return c.delete(ctx, res, n.id, obj, metav1.DeletePropagationForeground)
	default:
		// Every owner is gone or waiting: delete, with the policy the
		// object's own finalizers ask for, else in the background.
		policy := metav1.DeletePropagationBackground
		fins := finalizerSet(obj)
		switch {
		case fins[metav1.FinalizerOrphanDependents]:
			policy = metav1.DeletePropagationOrphan
		case fins[metav1.FinalizerDeleteDependents]:
			policy = metav1.DeletePropagationForeground
		}
		return c.delete(ctx, res, n.id, obj, policy)
	}
}

// hasDependents reports whether n has dependents: in the graph, or, if
// the graph knows none, in the store (one created just before may not
// be in the graph yet, and deleting n in the background would then let
// its owner go before it). An error reads as true: the foreground is
// the careful choice.
func (c *Collector) hasDependents(ctx context.Context, n *node) bool {
	if len(c.graph.dependentsOf(n)) > 0 {
		return true
	}
	deps, err := c.liveDependents(ctx, n.id)
	return err != nil || len(deps) > 0
}

// classify sorts obj's owner references (upstream's classifyReferences):
// solid, the owner exists and is not waiting for its dependents; dangling,
// no object with that name and uid exists; waiting, the owner is being
// deleted with foregroundDeletion.
func (c *Collector) classify(ctx context.Context, obj *unstructured.Unstructured, refs []metav1.OwnerReference) (solid, dangling, waiting []metav1.OwnerReference, err error) {
	for _, ref := range refs {
		owner, err := c.owner(ctx, obj, ref)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case owner == nil:
			dangling = append(dangling, ref)
		case owner.GetDeletionTimestamp() != nil && finalizerSet(owner)[metav1.FinalizerDeleteDependents]:
			waiting = append(waiting, ref)
		default:
			solid = append(solid, ref)
		}
	}
	return solid, dangling, waiting, nil
}

// owner reads the owner ref names for dependent obj: nil if it does not
// exist, which includes an object with that name and another uid. A
// namespaced owner is looked up in the dependent's namespace. An owner of
// a kind not served is errUnknownKind, never absent.
func (c *Collector) owner(ctx context.Context, obj *unstructured.Unstructured, ref metav1.OwnerReference) (*unstructured.Unstructured, error) {
	res, err := c.resolve(ref.APIVersion, ref.Kind)
	if err != nil {
		return nil, err
	}
	k := res.Kind()
	ns := ""
	if k.Namespaced {
		if obj.GetNamespace() == "" {
			return nil, fmt.Errorf("%w: %s %s", errNamespacedOwner, ref.Kind, ref.Name)
		}
		ns = obj.GetNamespace()
	}
	epoch := c.graph.epochNow()
	owner, err := res.Get(ctx, k.StorageVersion(), ns, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if owner.GetUID() != ref.UID {
		return nil, nil
	}
	// The graph may not hold the owner (it keeps only the nodes
	// ownership needs): now that a dependent names it, it does.
	c.graph.learn(newNode(k, owner), epoch)
	return owner, nil
}

// resolve finds the resource serving apiVersion/kind.
func (c *Collector) resolve(apiVersion, kind string) (*registry.Resource, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: apiVersion %q: %v", errUnknownKind, apiVersion, err)
	}
	for _, res := range c.cfg.Registry.Resources() {
		if k := res.Kind(); k.Review == nil && k.Group == gv.Group && k.Kind == kind && k.Serves(gv.Version) {
			return res, nil
		}
	}
	return nil, fmt.Errorf("%w: %s, Kind=%s", errUnknownKind, gv, kind)
}

// orphan removes owner's references from its dependents, then its
// `orphan` finalizer (upstream's attemptToOrphanWorker). The dependents
// are read from the store, not from the graph: one created just before
// the owner's deletion may not be in the graph yet, and once the
// finalizer is gone a reference left behind would get it deleted.
func (c *Collector) orphan(ctx context.Context, owner *node) error {
	deps, err := c.liveDependents(ctx, owner.id)
	if err != nil {
		return err
	}
	drop := map[types.UID]bool{owner.id.uid: true}
	for _, d := range deps {
		c.log.Debug("garbage collector: orphaning", "object", describe(d.id), "owner", describe(owner.id))
		if err := c.update(ctx, d.id, func(obj *unstructured.Unstructured) bool { return removeOwners(obj, drop) }); err != nil {
			return fmt.Errorf("orphaning %s: %w", describe(d.id), err)
		}
	}
	return c.removeFinalizer(ctx, owner.id, metav1.FinalizerOrphanDependents)
}

// errUnobserved: the store holds a dependent the graph has not seen yet;
// the owner is looked at again once it has.
var errUnobserved = errors.New("a dependent is not in the graph yet")

// deleteDependents handles an owner deleted in the foreground (upstream's
// processDeletingDependentsItem): its dependents are queued, to be
// deleted, and once none of them blocks it (blockOwnerDeletion) its
// `foregroundDeletion` finalizer goes. A dependent's deletion queues the
// owner again. Before the finalizer goes, the store is asked too, so that
// a blocking dependent the graph has not seen yet still holds the owner.
func (c *Collector) deleteDependents(ctx context.Context, owner *node) error {
	blocking := 0
	for _, d := range c.graph.dependentsOf(owner) {
		if blocks(d.ref) {
			blocking++
		}
		if !d.node.deleting {
			c.queue.add(d.node.id.uid)
		}
	}
	if blocking > 0 {
		return nil
	}
	deps, err := c.liveDependents(ctx, owner.id)
	if err != nil {
		return err
	}
	for _, d := range deps {
		if blocks(d.ref) {
			return fmt.Errorf("%w: %s", errUnobserved, describe(d.id))
		}
	}
	return c.removeFinalizer(ctx, owner.id, metav1.FinalizerDeleteDependents)
}

func blocks(ref metav1.OwnerReference) bool {
	return ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
}

// liveDependent is an object read from the store that names some owner.
type liveDependent struct {
	id  identity
	ref metav1.OwnerReference
}

// liveDependents reads, from the store, the objects whose ownerReferences
// name owner, where such a reference is valid: for a namespaced owner,
// the namespaced objects of its namespace; for a cluster-scoped one,
// every object. It lists whole resources, so it is used only where the
// graph's lag would matter: before a garbage collector finalizer goes.
func (c *Collector) liveDependents(ctx context.Context, owner identity) ([]liveDependent, error) {
	ownerNode := &node{id: owner}
	var out []liveDependent
	for _, res := range c.cfg.Registry.Resources() {
		k := res.Kind()
		if owner.namespace() != "" && !k.Namespaced || !k.OwnsObjects() {
			continue
		}
		list, err := res.List(ctx, k.StorageVersion(), owner.namespace(), registry.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			dep := newNode(k, &list.Items[i])
			for _, ref := range dep.owners {
				if owns(ownerNode, dep, ref) {
					out = append(out, liveDependent{id: dep.id, ref: ref})
					break
				}
			}
		}
	}
	return out, nil
}

// delete deletes obj (as read) with policy. Its uid and resourceVersion
// are preconditions, so an object whose owners changed since they were
// classified is not deleted; if only something else changed, the delete
// is retried on the uid alone (as upstream's deleteObject does).
func (c *Collector) delete(ctx context.Context, res *registry.Resource, id identity, obj *unstructured.Unstructured, policy metav1.DeletionPropagation) error {
	c.log.Debug("garbage collector: deleting", "object", describe(id), "propagationPolicy", string(policy), "owners", refsString(obj.GetOwnerReferences()))
	v := res.Kind().StorageVersion()
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &policy}
	_, _, err := res.Delete(ctx, v, id.namespace(), id.name, opts, registry.WriteOptions{FieldManager: "kube-controller-manager"})
	if apierrors.IsConflict(err) {
		now, gerr := res.Get(ctx, v, id.namespace(), id.name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			return nil
		}
		if gerr == nil && now.GetUID() == uid && reflect.DeepEqual(now.GetOwnerReferences(), obj.GetOwnerReferences()) {
			opts.Preconditions.ResourceVersion = nil
			_, _, err = res.Delete(ctx, v, id.namespace(), id.name, opts, registry.WriteOptions{FieldManager: "kube-controller-manager"})
		}
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Collector) removeFinalizer(ctx context.Context, id identity, finalizer string) error {
	c.log.Debug("garbage collector: removing finalizer", "object", describe(id), "finalizer", finalizer)
	return c.update(ctx, id, func(obj *unstructured.Unstructured) bool {
		fins := obj.GetFinalizers()
		kept := fins[:0:0]
		for _, f := range fins {
			if f != finalizer {
				kept = append(kept, f)
			}
		}
		if len(kept) == len(fins) {
			return false
		}
		obj.SetFinalizers(kept)
		return true
	})
}

// live reads the object id names, with its resource; nil if it is gone
// (or is another object by now).
func (c *Collector) live(ctx context.Context, id identity) (*registry.Resource, *unstructured.Unstructured, error) {
	res, ok := c.cfg.Registry.Get(id.gr())
	if !ok {
		return nil, nil, nil
	}
	obj, err := res.Get(ctx, res.Kind().StorageVersion(), id.namespace(), id.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if obj.GetUID() != id.uid {
		return nil, nil, nil
	}
	return res, obj, nil
}

// update applies change to the object id names and writes it, conditional
// on the version read, retrying on conflicts. change returns false when
// there is nothing to write. An object that is gone is not an error.
func (c *Collector) update(ctx context.Context, id identity, change func(*unstructured.Unstructured) bool) error {
	var err error
	for attempt := 0; attempt < conflictRetries; attempt++ {
		var res *registry.Resource
		var obj *unstructured.Unstructured
		res, obj, err = c.live(ctx, id)
		if err != nil || obj == nil {
			return err
		}
		next := obj.DeepCopy()
		if !change(next) {
			return nil
		}
		_, err = res.Update(ctx, res.Kind().StorageVersion(), id.namespace(), id.name, next, registry.WriteOptions{FieldManager: "kube-controller-manager"})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return err
		}
	}
	return err
}

// removeOwners drops the references to the uids in drop.
func removeOwners(obj *unstructured.Unstructured, drop map[types.UID]bool) bool {
	refs := obj.GetOwnerReferences()
	kept := refs[:0:0]
	for _, r := range refs {
		if !drop[r.UID] {
			kept = append(kept, r)
		}
	}
	if len(kept) == len(refs) {
		return false
	}
	obj.SetOwnerReferences(kept)
	return true
}

// unblockOwners sets blockOwnerDeletion to false on every reference.
func unblockOwners(obj *unstructured.Unstructured) bool {
	refs := obj.GetOwnerReferences()
	changed := false
	for i := range refs {
		if refs[i].BlockOwnerDeletion != nil && *refs[i].BlockOwnerDeletion {
			f := false
			refs[i].BlockOwnerDeletion = &f
			changed = true
		}
	}
	if changed {
		obj.SetOwnerReferences(refs)
	}
	return changed
}

func finalizerSet(obj metav1.Object) map[string]bool {
	m := map[string]bool{}
	for _, f := range obj.GetFinalizers() {
		m[f] = true
	}
	return m
}

func describe(id identity) string {
	s := id.gr().String() + " "
	if ns := id.namespace(); ns != "" {
		s += ns + "/"
	}
	return s + id.name + " (uid " + string(id.uid) + ")"
}

func refsString(refs []metav1.OwnerReference) string {
	s := ""
	for i, r := range refs {
		if i > 0 {
			s += ", "
		}
		s += r.Kind + "/" + r.Name + " (uid " + string(r.UID) + ")"
	}
	return s
}
