// Package registry turns the object store into Kubernetes resources: it
// knows, for every kind it serves, how objects are named, scoped,
// defaulted, validated and versioned, and applies kube-apiserver's rules
// for every verb on top of storage.Interface:
//
//   - create fills uid, creationTimestamp (and generation for kinds that
//     track it), generates names from generateName, refuses objects in a
//     namespace that does not exist or is terminating;
//   - update is an optimistic-concurrency write: a stale resourceVersion is
//     409 Conflict with the upstream message, an unset one is allowed only
//     for kinds that allow unconditional updates (422 otherwise), an
//     update that changes nothing writes nothing;
//   - the status subresource splits writes between the main resource and
//     /status;
//   - delete honours preconditions and finalizers: an object with
//     finalizers gets a deletionTimestamp and goes away when its last
//     finalizer is removed;
//   - every error is a *apierrors.StatusError with kube-apiserver's code,
//     reason, details and message.
//
// Kinds are described by Kind values (the per-kind strategy). Built-in
// kinds live in registry/core; kinds defined by CustomResourceDefinitions
// are added and removed at run time by registry/crd.
//
// The registry does not speak HTTP (package apiserver does) and does not
// enforce CRD schemas yet.
package registry
