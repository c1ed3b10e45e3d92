// Package schema enforces a CustomResourceDefinition version's
// openAPIV3Schema the way kube-apiserver (k8s.io/apiextensions-apiserver)
// does for apiextensions.k8s.io/v1.
//
// ValidateCRD checks the schema itself when a CRD is written: it must be
// structural (every field typed, value validations free of structural
// keywords, metadata restricted to name and generateName), its defaults
// must validate and survive pruning, and the x-kubernetes-* extensions
// must be consistent. Errors carry upstream's field paths and messages.
//
// New compiles a schema for the objects of one version. The result prunes
// unknown fields, applies defaults and validates objects, in that order
// (the order the custom resource handler uses: decode, prune, default,
// validate). Validation runs k8s.io/kube-openapi's validator, the
// library upstream runs, so keyword messages match byte for byte; the
// list-type, embedded-resource and ratcheting checks are written here.
//
// What it does not do: CEL rules (x-kubernetes-validations) are ignored
// (package crd/cel evaluates them); the root metadata beyond name and
// generateName restrictions, typeMeta (apiVersion and kind of the root)
// and scale paths are checked by the registry; malformed metadata fields
// are dropped by Prune rather than refused (upstream refuses them on a
// request and drops them on a read from storage).
package schema
