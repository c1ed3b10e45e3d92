// Package webhook is the registry's admission (registry.SetAdmission): it
// calls the admission webhooks users configure with
// admissionregistration.k8s.io/v1 MutatingWebhookConfigurations and
// ValidatingWebhookConfigurations, as kube-apiserver's
// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins do, and
// enforces their ValidatingAdmissionPolicies (policy.go), as its
// ValidatingAdmissionPolicy plugin does, before the validating webhooks,
// and their MutatingAdmissionPolicies (mutatingpolicy.go), as its
// MutatingAdmissionPolicy plugin does, before the mutating webhooks.
//
// Webhooks keeps the configurations parsed in memory: it reads them all
// at start-up (Load) and again after every write or delete of one
// (Install hooks the two kinds' Written and Deleted), so a configuration
// applies to the next request once its write has returned. Run follows
// their watches, for the writes of another kplane on the same etcd.
//
// For each write of a stored kind (not the admission configurations
// themselves, which only the files' configurations and the API's
// policies see, nor the reviews, which upstream exempts too):
//
//   - the webhooks are taken in upstream's order: configurations by name,
//     webhooks in their order within;
//   - one is called when a rule matches the operation, group, version,
//     resource (with "*" and "resource/subresource" forms) and scope, and
//     its namespaceSelector (the namespace's labels; a Namespace's own)
//     and objectSelector (the object's or the old object's labels) match;
//     with matchPolicy Equivalent, a rule naming another version of the
//     same kind (or events.k8s.io Events for core Events) also matches,
//     and the webhook gets the object in that version;
//   - the call is an HTTPS POST of an admission.k8s.io/v1 (or v1beta1)
//     AdmissionReview to the webhook's url, or to
//     https://NAME.NAMESPACE.svc:PORT/PATH for a service reference, trusting
//     the caBundle (the system's roots when empty), with timeoutSeconds as
//     the deadline and the ?timeout= parameter upstream's client adds;
//   - mutating webhooks run one after another, each seeing the last one's
//     JSON patch applied; a webhook with reinvocationPolicy IfNeeded runs
//     once more when a later webhook or policy changed the object
//     (upstream's reinvocation, shared with the mutating policies);
//     validating webhooks run in parallel after the kind's own validation;
//   - a refusal is the webhook's status, its message prefixed with
//     `admission webhook "NAME" denied the request`; a failed call is an
//     internal error under failurePolicy Fail and ignored under Ignore; a
//     dry run refuses webhooks whose sideEffects are not None or
//     NoneOnDryRun. Errors and messages are upstream's.
//
// A webhook's matchConditions are CEL (crd/cel.CompileMatchCondition):
// any false one skips it; errors refuse the request under failurePolicy
// Fail and skip the webhook under Ignore.
//
// A ValidatingAdmissionPolicy runs when a binding names it: its
// matchConstraints and the binding's matchResources are matched as
// webhooks' rules and selectors are; its parameters are read from the
// registry (paramRef by name or selector); its expressions
// (crd/cel.CompilePolicy) decide, and the binding's actions make a false
// validation a refusal (Deny) or a Warning header (Warn). Policies and
// bindings are read and followed with the webhook configurations.
//
// A MutatingAdmissionPolicy is matched the same way (policyCalls); its
// mutations (crd/cel's Mutate) give an apply configuration, merged into
// the object by the kind's schema as server-side apply merges (an atomic
// list or struct may not be set), or a JSON Patch; each result is decoded
// and defaulted before the next mutation. Failures are collected and
// refuse the request together under failurePolicy Fail.
//
// Conversions (convert.go) is the registry's Converter: it calls a CRD's
// conversion webhook with a ConversionReview, as apiextensions-apiserver's
// webhook converter does, and checks the answer as it does (objects in
// order and in the version asked for, only labels and annotations of the
// metadata changed).
//
// Both count their calls, the validating policies their failed
// validations, the mutating ones their mutations, and the webhooks and
// policies their matchConditions (policymetrics.go),
// under kube-apiserver's metric names and labels (admitmetrics.go,
// convertmetrics.go, policymetrics.go), which app serves on /metrics.
//
// Webhooks are called with the credentials of the kubeconfig
// --admission-control-config-file names (auth.go; its exec credential
// plugins, exec.go), anonymously without one. The same file may name, for each plugin, a directory of
// configurations read from files (static.go): they run before the
// API's, and only they see writes of the admission configurations (the
// API's policies see the webhook configurations' writes too, as
// upstream's do).
//
// The Audit action and auditAnnotations annotate the request's audit
// event (registry.AddAuditAnnotation).
//
// AuthorizationWebhook (authorizer.go) is a registry.Authorizer that
// asks a webhook, as kube-apiserver's --authorization-mode=Webhook: a
// SubjectAccessReview (v1beta1 or v1) posted to the server its
// kubeconfig's current context names, with that context's user's
// credentials; the answer's allowed or denied decides, neither is no
// opinion; answers are kept for their TTLs; a failed call is retried as
// upstream's (500, 504, 429, a reset connection) and is otherwise no
// opinion with the error, in the REST client's words.
// ParseAuthorizationConfig (authzconfig.go) reads --authorization-config.
// TokenWebhook (authenticator.go) asks a webhook whose a bearer token is,
// by TokenReview; AuditWebhook (auditsink.go) posts audit EventLists.
// All three go through reviewClient (reviewclient.go): a kubeconfig's
// current context, ?timeout=, upstream's retries and answer decoding.
//
// Not done: a webhook
// whose stored matchConditions do not compile counts no evaluation
// errors in the match-condition metrics (upstream counts one per
// condition). Several matching mutating policies run in name order,
// where upstream's order comes from a map.
package webhook
