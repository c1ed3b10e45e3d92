// Package app is kplane's composition root: the only package that picks
// concrete engines and the owner of every long-running goroutine. cmd/kplane
// turns flags into a Config and calls it.
//
// Run opens the kv store for the configured engine, creates or loads the
// credentials (package pki), builds the registry with the built-in kinds
// and the CRD controller, serves the API, compacts the store every
// CompactionInterval, writes the kubeconfig once the server is ready, and
// on cancellation makes /readyz fail, keeps serving for ShutdownDelay, then
// shuts everything down in reverse order. It gives the API server what only
// it knows: the store's metrics and its health check (etcd's, or the
// embedded engine's).
package app
