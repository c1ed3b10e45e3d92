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
// Before it, an acceptor compiled once per schema (accept.go) walks the
// value without allocating and passes it when it is surely valid (the
// common case), calling kube-openapi's own keyword checks; everything
// else goes to the validator, which writes the errors.
//
// x-kubernetes-validations are refused under allOf, anyOf, oneOf and not,
// with the other extensions and defaults, as upstream refuses them for
// CRDs ("must be empty to be structural"). String formats are those
// upstream supports on CRDs, checked by kube-openapi's strfmt (so a
// duration may be "1d" or "2w"); others are not checked.
//
// CheckEmbedded is what upstream's decoder refuses in a request body's
// embedded resources (an apiVersion or kind that is not a string, metadata
// that does not decode); the registry turns it into a 400, or a 422 for a
// patch. The root's metadata is checked when the registry decodes the body.
//
// What it does not do: CEL rules (x-kubernetes-validations) are ignored
// (package crd/cel evaluates and ratchets them); the root metadata beyond
// name and generateName restrictions, typeMeta (apiVersion and kind of the
// root) and scale paths are checked by the registry. Prune still drops
// metadata fields that do not decode rather than refusing them (upstream
// drops them when reading from storage), for callers that did not check
// first.
package schema
