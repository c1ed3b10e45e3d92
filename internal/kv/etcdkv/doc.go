// Package etcdkv is the kv.Store over a real etcd cluster, through etcd's
// own client (go.etcd.io/etcd/client/v3). It is what `kplane serve
// --storage etcd` uses when one machine is not enough.
//
// # Guarantees
//
//   - Every key lives under Config.Prefix; answers and events carry keys
//     without it. Revisions are etcd's own: shared by everything in the
//     cluster, so they are not contiguous per prefix.
//   - Each conditional write is one etcd transaction whose else-branch
//     reads the key, so a lost compare returns the current value in the
//     same round trip.
//   - Watches always start at an explicit revision (a watch "from now"
//     first reads the current revision), so the client's transparent
//     reconnects resume exactly where they were and never skip events.
//   - A watch event that arrives without the previous value it needs (etcd
//     sends those when compaction overtakes a watcher, seed 003) ends the
//     watch with kv.ErrCompacted instead of being delivered.
//   - When the connection to etcd is lost, open watches end with
//     kv.ErrUnavailable, and requests fail with it after
//     Config.RequestTimeout; nothing is silently missed.
//
// # What it does not do
//
// Compact compacts the whole etcd cluster, as kube-apiserver does, not
// just this prefix. CompactInTurn is the compaction of a server among
// several on one cluster: they take turns through kube-apiserver's
// compact_rev_key, the one key written outside the prefix. The store does not run etcd, manage its members or
// defragment it.
package etcdkv
