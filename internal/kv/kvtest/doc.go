// Package kvtest is the conformance suite of the kv contract: one exported
// suite (Run) that every kv.Store implementation runs, and a differential
// checker (Differential) that drives two stores with the same random
// operations and compares every answer and every event.
//
// The suite checks etcd's revision semantics (seed 002's sequence and its
// four numbers), conditional writes and their lost compares, ranges at past
// revisions with limits and counts, size limits, compaction, and the watch
// guarantees: ordered, complete, resumable from history, every DELETE with
// its previous value (seed 003), ErrCompacted instead of a gap, progress
// notifications that never run ahead of an undelivered event, and writers
// never blocked by a watcher that does not read.
//
// It never assumes a starting revision: a store may share its revision
// counter with others (the etcd engine puts many stores on one etcd with
// separate prefixes), so every number is checked relative to a base read
// at the start of each subtest, and subtests never run in parallel. It does
// not check durability or performance; the engines test those themselves.
package kvtest
