// Package core describes the built-in kinds kplane serves: Namespace,
// ConfigMap, Secret, Event and ServiceAccount (v1), Event again
// (events.k8s.io/v1, served over the core Events as upstream serves it),
// Lease (coordination.k8s.io/v1), the RBAC kinds
// (rbac.authorization.k8s.io/v1) and the self reviews kubectl auth asks
// (authorization.k8s.io/v1, authentication.k8s.io/v1; never stored),
// each with upstream's scope, short names, validation, defaults and table
// columns. It also runs the namespace lifecycle: a deleted namespace is
// Terminating until everything in it is gone, then it is removed.
//
// RBAC objects are stored and served; kplane does not authorize requests
// with them yet (every authenticated client is an admin).
package core
