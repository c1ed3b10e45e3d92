// Package storage keeps Kubernetes objects in a kv.Store with
// kube-apiserver's resourceVersion contract: an object's resourceVersion is
// the decimal ModRevision of its key, and a list's is the store revision it
// was read at.
//
// It provides what the registry needs and no more: Create, Get, List with
// limit/continue pages that are one consistent snapshot, GuaranteedUpdate
// (optimistic concurrency with preconditions, retrying lost compares, and
// writing nothing for an update that changes nothing), and Delete with
// preconditions, returning the object's last state; and Watch, which
// turns kv events into ADDED/MODIFIED/DELETED events as seen through a
// label/field predicate and ends with a 410 Gone ERROR event when its
// history was compacted. Errors are *Error
// values with a Code the API layer turns into metav1.Status (404, 409, 410,
// 504 ...).
//
// Objects are *unstructured.Unstructured, stored as JSON without their
// resourceVersion (it is the key's ModRevision, set on the way out).
//
// Interface is what the registry stores objects through; *Store
// implements it over kv, and the watch cache (package watchcache)
// implements it in memory in front of a Store. Shared wraps an event's
// object so that its JSON is encoded once for all watchers; RecordJSON is
// an event's object for watchers that only write JSON, never decoded.
//
// It does not validate objects or set uid and timestamps (the registry's
// strategies do). Its watch is one kv watch per call: serving many
// clients, bookmarks and consistent reads from memory are the watch
// cache's job.
package storage
