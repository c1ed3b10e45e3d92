// Package registry turns the object store into Kubernetes resources: it
// knows, for every kind it serves, how objects are named, scoped,
// defaulted, validated and versioned, and applies kube-apiserver's rules
// for every verb on top of storage.Interface:
//
//   - create fills uid, creationTimestamp (and generation for kinds that
//     track it), generates names from generateName, refuses objects in a
//     namespace that does not exist or is terminating;
//   - update is an optimistic-concurrency write: a stale resourceVersion is
//     409 Conflict with the upstream message, an unset one is allowed only
//     for kinds that allow unconditional updates (422 otherwise), an
//     update that changes nothing writes nothing; a PUT of a missing
//     object creates it where the kind allows that;
//   - the status subresource splits writes between the main resource and
//     /status;
//   - patch applies a JSON, merge, strategic merge patch or a server-side
//     apply configuration to the current object and updates with it,
//     conditional only if the patch set a resourceVersion;
//   - every write records field ownership (metadata.managedFields) with
//     apimachinery's field manager (managed.go); a create's come from a
//     memo of object shapes when it can (createmanaged.go), and an
//     update's comparison sees only what differs (managedcompare.go);
//   - delete honours preconditions, finalizers and the propagation
//     policy: an object with finalizers (orphan and foregroundDeletion
//     included) gets a deletionTimestamp and goes away when its last
//     finalizer is removed (package gc removes those two);
//   - every write of a stored kind asks the registry's Admission, if set
//     (admission.go; package webhook calls the admission webhooks users
//     configure): Mutate after the field manager, Validate after the
//     kind's validation, as upstream's admission chain;
//   - a kind whose versions differ in shape (a CRD with a conversion
//     webhook) has the registry's Converter change an object's version
//     (conversion.go; package webhook calls the webhook): writes in
//     another version are converted as they are stored, reads as they are
//     answered;
//   - every error is a *apierrors.StatusError with kube-apiserver's code,
//     reason, details and message.
//
// Kinds are described by Kind values (the per-kind strategy). Built-in
// kinds live in registry/core; kinds defined by CustomResourceDefinitions
// are added and removed at run time by registry/crd. A kind may be served
// over another's objects in a group of its own (Cohabit: events.k8s.io
// Events over core Events), converted on the way in and out.
//
// Authorization's vocabulary is here too (authorize.go): a request's
// Attributes, an Authorizer's Decision (Allow, Deny, NoOpinion), and
// Union, the chain --authorization-mode makes, with the built-in
// AlwaysAllow, AlwaysDeny and system:masters' Privileged; RBAC is in
// registry/core, the Webhook authorizer in registry/webhook.
//
// The registry does not speak HTTP (package apiserver does). A custom
// resource's schema (validation, defaults, pruning, CEL rules) comes from
// registry/crd through its Kind. Package openapi gives the built-in kinds
// the schemas field ownership needs; package gc collects garbage; package
// webhook is the admission, the conversion and the authorization webhook.
package registry
