// Package wal is the embedded engine's persistence: a write-ahead log of
// opaque records split into segment files, and snapshot files.
//
// # Guarantees
//
//   - Durability: once Sync (or Rotate, or Close) returns nil, every record
//     appended before it is on disk (written and fdatasynced; new files are
//     made durable with an fsync of the directory).
//   - Detection: every record is framed with its length and a CRC-32C
//     (Castagnoli) over length and payload, so a torn write, a corrupt
//     payload and a corrupt length are all detected. Replay returns only
//     intact records and stops at the first damaged one: it truncates the
//     segment there, renames later segments to *.corrupt (never deleting
//     them), and logs what it discarded — at Warn for a torn tail, at Error
//     for damage before the end of the log.
//   - Preallocation: the segment being appended to is filled with zeros
//     ahead of its records, so that each fdatasync flushes data only, not a
//     new file size. Replay reads a zero tail as the end of the records;
//     anything else after the last intact record is damage and is cut off,
//     so records written after a cut can never be followed by stale ones.
//     Rotate and Close give the unused zeros back. Preallocation never
//     fails the log: if the zeros cannot be written (a full disk), the
//     segment is appended to without them, with one warning.
//   - Atomic snapshots: a snapshot is written to a temporary file, synced,
//     renamed into place and the directory synced; a snapshot file carries a
//     trailer with its record count, so a partial one is never loaded.
//
// # What it does not do
//
// It does not interpret records, compress, or replicate. Append, Sync and
// Rotate must be called from one goroutine (the engine's flusher);
// WriteSnapshot, Size and SnapshotSize may run concurrently with them.
package wal
