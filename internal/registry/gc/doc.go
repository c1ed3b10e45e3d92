// Package gc is kplane's garbage collector: it makes ownerReferences
// cascade, across every served kind, custom resources included, the way
// kube-controller-manager's garbage collector does.
//
// It guarantees:
//
//   - An object whose owners are all gone is deleted (in the background,
//     or with the policy its own orphan/foregroundDeletion finalizer asks
//     for). An owner is gone when no object of its kind has its name and
//     uid: an owner recreated under the same name is a different owner.
//     A namespaced owner is looked up in its dependent's namespace.
//   - An object with an owner left keeps existing; references to owners
//     that are gone, or that delete their dependents in the foreground,
//     are removed from it.
//   - An owner deleted with the Orphan policy (finalizer `orphan`) keeps
//     existing until every dependent's reference to it is removed; then
//     the finalizer is removed.
//   - An owner deleted with the Foreground policy (finalizer
//     `foregroundDeletion`) has its dependents deleted, and loses the
//     finalizer once no dependent with blockOwnerDeletion remains.
//   - Every decision is made on the live objects (consistent reads), and
//     a deletion is conditional on the uid and resourceVersion read, so
//     an object whose owner exists is never deleted, whatever the lag of
//     the collector's own view.
//   - It survives restarts: it reads every resource into its graph before
//     working (a watch that starts with the current state), then follows
//     the watches, and reads again after a watch ends; resources that come
//     and go (CRDs) are followed as the registry changes.
//
// It does not:
//
//   - delete anything because of an owner of a kind that is not served:
//     such objects are kept and looked at again, with backoff, and when
//     the set of served resources changes;
//   - act on a cluster-scoped object that names a namespaced owner;
//   - promise anything for a dependent created after its owner's
//     deletion started (as upstream): it may or may not be orphaned or
//     waited for, and is deleted in the background once the owner is
//     gone.
//
// How: a graph of the objects' ownerReferences, built from the initial
// events of every resource's watch and kept by the events after them (sparse once synced: only the
// objects in some ownership), says which objects to look at; a rate-limited queue hands them to workers, one worker per object
// at a time. Before a garbage collector finalizer goes (and before a
// dependent of a foreground deletion is deleted in the background), the
// dependents are also read from the store, so a dependent the graph has
// not seen yet still counts.
package gc
