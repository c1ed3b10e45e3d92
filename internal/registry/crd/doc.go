// Package crd serves CustomResourceDefinitions and the resources they
// define. The CRD kind is defaulted and validated as kube-apiserver's
// apiextensions strategy and validation do it (validate.go); a controller
// then serves each CRD's resource, sets the CRD's
// acceptedNames, storedVersions and NamesAccepted/Established conditions,
// and on deletion removes every object of the resource before the CRD
// itself goes (the customresourcecleanup.apiextensions.k8s.io finalizer).
//
// Each served version's schema is enforced as kube-apiserver does
// (packages schema and cel: structural checks, pruning, defaulting,
// OpenAPI and CEL validation with ratcheting); server-side apply merges by
// the schema's list and map types (typeconverter.go); selectableFields
// add field selectors. Versions are served with conversion strategy None
// (only apiVersion changes between them); a CRD that asks for a
// conversion webhook is served in its storage version only, as kplane
// calls no webhook. What is expensive about a
// served CRD (its compiled schema and CEL rules, the OpenAPI form of its
// schema, the type converter) is built on first use, so that the many
// CRDs of a large install cost little until they have objects.
package crd
