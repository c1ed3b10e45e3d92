// Package e2e drives a real `kplane serve` process with the real clients:
// kubectl, client-go (typed, dynamic, informers) and controller-runtime
// (manager, cached client, leader election, and the Foo operator of seed
// 000). Every test runs once per storage engine: embedded, and a real etcd
// (built from tools/etcd).
package e2e
