// Package watchcache keeps one resource's objects in memory, fed by one
// storage watch, and serves lists and watches from there, so that many
// clients cost one watch on the store (kube-apiserver's cacher).
//
// # Guarantees
//
//   - Consistent lists (no resourceVersion) are served from the cache only
//     after it has caught up with the store's current revision, which it
//     learns by asking its store watch for progress; NotOlderThan waits for
//     the requested revision. Either falls back to the store when the cache
//     can't catch up in time. Continued pages and Exact lists are served
//     from the cache's history while it reaches back to their revision
//     and the store has not compacted it, and by the store otherwise; the
//     continue tokens are the store's. The writes a page has to undo cost
//     it once, when it first meets them, not on every later page: the
//     cache keeps each list's changed keys between its pages (list.go).
//   - Watches start from any resourceVersion still in the cache's event
//     history (at least Capacity events while the old states they hold fit
//     in MaxBytes, and those of the last FreshFor up to MaxCapacity and
//     MaxFreshBytes), from
//     "now" with the current state as
//     ADDED events, or fail with an ERROR event carrying 410 Gone when the
//     history no longer reaches back.
//   - A watcher that doesn't keep up (its buffer of Buffer events is full)
//     is ended with an ERROR event saying so; it never blocks the others and
//     never silently misses an event. Events are otherwise delivered in
//     order, each exactly once.
//   - Bookmarks: watchers that allow them get a BOOKMARK with the cache's
//     revision every BookmarkInterval, and sendInitialEvents watches end
//     their initial ADDED events with a BOOKMARK annotated
//     "k8s.io/initial-events-end".
//
// # What it does not do
//
// It keeps no decoded objects: it holds storage.Records (the stored JSON
// and what selectors need) and makes an event's objects once for the
// watchers that get them, in the form each asked for (decoded, metadata
// only, or the stored JSON undecoded); a watch that starts with the
// current state makes them a batch at a time as they are taken. It does
// not write: writes go to the store, and come back through the watch.
package watchcache
