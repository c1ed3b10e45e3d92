// Package app is kplane's composition root: the only package that picks
// concrete engines and the owner of every long-running goroutine. cmd/kplane
// turns flags into a Config and calls it.
//
// Today it opens the kv store for the configured engine; the API server
// joins it here as it is built.
package app
