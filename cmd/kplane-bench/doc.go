// Command kplane-bench is kplane's load generator: it drives a
// Kubernetes API server through client-go, the way operators and
// controllers do, and reports throughput, latency, conflicts and (when it
// can see the server's process) server CPU per operation and memory.
//
//	kplane-bench --kubeconfig FILE [--scenario create,list,...] [sizes]
//	kplane-bench compare [sizes]
//
// The first form runs against any cluster: kplane, or a real
// kube-apiserver, so that the two can be compared on the same machine. It
// works in a namespace of its own (kplane-bench-<random>, or --namespace)
// and deletes it at the end if it created it. In a namespace that was
// there, it takes over the bulk ConfigMaps an earlier run left (topping
// them up, not creating them again). Server CPU and memory come from
// /proc when --server-pid names the server's processes (comma-separate
// several, e.g. kube-apiserver and etcd, to sum them); otherwise from the
// API server's /metrics (process_cpu_seconds_total and
// process_resident_memory_bytes: the process that answered, not etcd;
// less what reading /metrics cost it, metrics.go), and "n/a" with
// --server-metrics=false or a server that does not serve them. The bench's own CPU per
// operation (client ms/op, client_cpu_per_op) is always reported: on one
// machine, what the client uses is not available to the server, and
// throughput is bounded by cores / (server + client CPU per operation).
//
// compare builds ./cmd/kplane, and runs it with --storage embedded, then
// memory, then etcd (a real etcd built from tools/etcd, fsync on, on free
// 127.0.0.1 ports in a temp dir), each fresh, under the same load. It adds
// two figures only a bench that starts the server can take: start to
// ready (exec to the kubeconfig file plus a successful /readyz) and RSS
// (idle, and after the objects of the run). In etcd mode "server" means
// both processes: CPU and RSS are kplane's plus etcd's, as in issue 6's
// kube-apiserver + etcd reference (kplane's own figures are in extra).
// --modes may add kube: the upstream kube-apiserver, built from
// tools/kube-apiserver, on a real etcd (kube.go says how it is set up),
// measured the same way; the table then gives each figure's ratio to it,
// round by round.
//
// The bulk ConfigMaps hold 1 KiB each: of lines of configuration text,
// different in every object (--payload text, the default, payload.go),
// which compresses as configuration files do, or of one letter
// (--payload letters, as the figures of the first nineteen passes were
// measured). A server that compresses its answers gains about 3× on text
// and 37× on the letters.
//
// The clients speak HTTP/2 when the server offers it, as client-go comes:
// one connection, every request multiplexed on it. --http1 offers only
// http/1.1 (as DISABLE_HTTP2=1 does to any client-go program): a
// connection per request in flight, 25 of them kept idle. Each JSON line
// names the protocol the server answered a probe in, and compare's title
// names it too.
//
// Output: one JSON line per scenario (stdout, or --json FILE), then a
// table; compare prints the modes side by side with their ratios and the
// kube-apiserver reference figures of issue 6 ("ref") where a scenario
// matches.
//
// Guarantees: every scenario is bounded in count (the size flags) and in
// time (--scenario-timeout); every check failure (an update lost, a watch
// event lost or duplicated, a conflict on a merge patch) is reported in
// the scenario's "error" field and makes the exit status 1. Not
// guaranteed: figures are from one run on a shared machine, where the
// client competes with the server for the CPU; read them as ratios.
package main
