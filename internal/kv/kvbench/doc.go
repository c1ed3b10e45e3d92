// Package kvbench holds the storage benchmarks, run against every engine in
// one process so the figures compare like with like: the embedded engine
// (durable, in a temporary directory on the same disk) and the etcd engine
// against a real etcd server started by the benchmark, with fsync on.
//
// It has no code of its own; see the _test.go files and docs/benchmarks.md
// for the commands and the figures.
package kvbench
