// Package migration carries out StorageVersionMigrations
// (storagemigration.k8s.io/v1), as kube-controller-manager's
// storage-version-migrator controllers do in Kubernetes 1.37: it rewrites
// every object of a resource in the resource's storage version, so that a
// CRD whose storage version changed can drop the old one from
// status.storedVersions.
//
// For each resource, one migration runs at a time, the oldest first
// (upstream's migration runner):
//   - it is marked Running, and a CRD serving the resource gets the
//     StorageMigrating condition;
//   - its status.resourceVersion is set to the store's revision (a
//     resource not served fails it, after a minute's grace);
//   - each object written at or before that revision gets an empty merge
//     patch conditional on its resourceVersion, which stores it again in
//     the storage version (one written, changed or deleted meanwhile
//     needs none);
//   - it is marked Succeeded (or Failed, with the error), then Running
//     goes False, and the CRD's StorageMigrating condition with it; after
//     a success the CRD's status.storedVersions becomes its storage
//     version alone.
//
// The conditions, reasons, messages and field managers are upstream's.
package migration
