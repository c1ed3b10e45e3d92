// Package crd serves CustomResourceDefinitions and the resources they
// define. The CRD kind is validated for its names, scope and versions;
// a controller then serves each CRD's resource, sets the CRD's
// acceptedNames, storedVersions and NamesAccepted/Established conditions,
// and on deletion removes every object of the resource before the CRD
// itself goes (the customresourcecleanup.apiextensions.k8s.io finalizer).
//
// Schemas are stored and served but not enforced yet: custom resources
// are accepted as any JSON object. Versions are served with conversion
// strategy None (only apiVersion changes between them).
package crd
