// Package core describes the built-in kinds kplane serves: Namespace,
// ConfigMap, Secret, Event and ServiceAccount (v1), Event again
// (events.k8s.io/v1, served over the core Events as upstream serves it),
// Lease (coordination.k8s.io/v1), the RBAC kinds
// (rbac.authorization.k8s.io/v1), the admission webhook configurations
// (admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration and
// MutatingWebhookConfiguration, their matchConditions compiled as
// upstream compiles them), the admission policies
// (ValidatingAdmissionPolicy with its /status,
// ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy and
// MutatingAdmissionPolicyBinding, their expressions type-checked as
// upstream's validation does; stored only, not enforced here), API
// Priority and Fairness's configuration (flowcontrol.apiserver.k8s.io/v1
// FlowSchema and PriorityLevelConfiguration with their /status, the
// mandatory objects' fixed specs; served only, their bootstrap objects
// and the dispatching by them are package flowcontrol's) and the
// reviews (authorization.k8s.io/v1,
// authentication.k8s.io/v1; never stored): the access reviews of kubectl
// auth and of metrics auth filters, whoami's, and TokenReview. Each has
// upstream's scope, short names, validation, defaults and table columns.
// Tokens issues service account tokens (serviceaccounts/token) and checks
// them for the API server; TokenSecrets fills the Secrets of type
// kubernetes.io/service-account-token with long-lived ones. The package
// also runs the namespace lifecycle (a deleted namespace is Terminating
// until everything in it is gone, then it is removed) and keeps every
// namespace's default ServiceAccount.
//
// RBAC authorizes requests by the Roles, ClusterRoles and their bindings
// (kplane serve --authorization-mode=RBAC), answers the access and rules
// reviews by them, and refuses a role or binding that grants more than
// its writer holds. The default roles and bindings upstream's bootstrap
// policy keeps for such a control plane (cluster-admin bound to
// system:masters, discovery and the self reviews for every authenticated
// user, ...) exist from the first start, in either mode (policy.go).
package core
