// Package storagetest is the conformance suite of package storage, run over
// every kv engine (and, once it exists, over the watch cache): the
// resourceVersion contract of create, get, guaranteed update, delete and
// paged lists. Like kvtest it assumes no starting revision.
package storagetest
