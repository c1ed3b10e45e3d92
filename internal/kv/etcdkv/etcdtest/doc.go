// Package etcdtest runs a real etcd server for tests: the reference the
// embedded engine is checked against, and the backend of the etcd
// engine's own tests.
//
// The server is built from tools/etcd, a separate module that wraps etcd's
// embed package, once per test process (Go's build cache makes later builds
// fast). It listens on 127.0.0.1 only, with its data in a temporary
// directory and its logs in a file, and is killed when the test ends.
// Building it needs the Go module proxy; a failure to build fails the test,
// it never skips, so CI always runs the etcd-backed tests.
package etcdtest
