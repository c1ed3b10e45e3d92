// Package kv is the contract between kplane's object storage and the
// key-value engines under it: an MVCC store with etcd's revision semantics.
//
// # Revisions
//
// Every successful write bumps one global revision by exactly one. A fresh
// store is at revision 1, as etcd is, so the first write gets revision 2.
// Each key carries three numbers:
//
//   - CreateRevision: the revision that created the current generation of the
//     key.
//   - ModRevision: the revision of the key's last write. kplane's object layer
//     uses it as the object's resourceVersion.
//   - Version: the number of writes since the generation began, starting at 1.
//
// A delete ends the key's generation. Creating the key again starts a new
// one: Version is 1 again and CreateRevision is the new revision. Worked
// example (seed 002), on a fresh store:
//
//	put k1 v1     -> rev 2  k1{create 2, mod 2, version 1}
//	put k2 v2     -> rev 3  k2{create 3, mod 3, version 1}
//	put k1 nv1    -> rev 4  k1{create 2, mod 4, version 2}
//	del k1        -> rev 5  k1 absent
//	get k1 @rev 2 ->        k1{create 2, mod 2, version 1, value v1}
//	put k1 dnv1   -> rev 6  k1{create 6, mod 6, version 1}
//
// # Guarantees
//
// Writes are conditional (create-if-absent, update or delete if ModRevision
// equals an expected value). A lost compare is an ordinary result with
// Succeeded false and the key's current value; it is not an error.
//
// Reads can be served at any revision between the compaction point and the
// current revision. Below the compaction point they fail with ErrCompacted,
// above the current revision with ErrFutureRevision.
//
// Watches deliver every matching event in revision order, each response
// holding whole revisions. Every DELETE event and every non-create PUT event
// carries the previous value of its key. When an engine cannot deliver an
// event with its previous value, because history was compacted under a
// watcher, the watch ends with ErrCompacted instead: it never delivers a gap,
// and never a DELETE without the deleted value (seed 003).
//
// # What this package does not do
//
// It knows nothing of objects, JSON, namespaces or HTTP. It has no multi-key
// transactions, no leases and no range deletes: kube-apiserver's storage
// layer needs none of them.
package kv
