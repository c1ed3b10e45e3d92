// Package mvcc is kplane's embedded engine: a kv.Store that keeps its whole
// state in memory and makes every acknowledged write durable on local disk.
//
// # State
//
// A B-tree maps each key to its retained versions (see keyIndex), and a
// history slice maps each revision at or above the compaction point to the
// key written at it. Reads at any retained revision walk the tree; watchers
// read the history. Values are stored as given, never copied: callers must
// not modify a value after handing it over or after receiving it.
//
// # Durability
//
// Writes go to a write-ahead log (package wal: checksummed records, fdatasync)
// through group commit: one flusher goroutine writes and syncs whatever has
// been queued while the previous sync ran. A write's answer is returned
// only after its record is synced, and a revision becomes visible to reads
// and watchers only then, so nothing anybody has seen can be lost by a
// crash. If a write or sync fails the store stops serving (every call gets a
// wrapped ErrClosed): memory is then ahead of disk and the only safe course
// is to recover from disk by reopening.
//
// Once the log holds Config.SnapshotBytes, or as much as the last snapshot
// if that is more, the flusher rotates the log and a background goroutine
// writes a snapshot of every retained version, after which older log
// segments are deleted. Open loads the newest snapshot,
// replays the log after it, and stops at the last intact record if the tail
// is torn or corrupt (the wal package logs what it discarded). Revisions,
// the compaction point and all retained history survive a restart.
//
// # Compaction
//
// Compact records the new point durably, drops the history below it, then
// trims the tree a batch of keys at a time, so a compaction of a large
// store never holds the lock for more than one batch.
//
// # Watchers
//
// See watch.go: watchers pull from the history with their own cursor, so
// writers never wait for them and they never skip; a watcher whose cursor
// falls below the compaction point ends with ErrCompacted.
//
// # What it does not do
//
// It is one process's store: no replication, no multi-key transactions, no
// leases. It does not bound memory: every retained version is in RAM, so
// run compaction (kplane serve does, every --compaction-interval).
package mvcc
