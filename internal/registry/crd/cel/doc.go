// Package cel compiles and evaluates the CEL validation rules of a
// CustomResourceDefinition (the x-kubernetes-validations extension) the way
// kube-apiserver does.
//
// Compile runs once per CRD version when the CRD is created or updated. It
// types `self` (and `oldSelf`) from the schema node each rule sits on, checks
// every rule, and estimates its worst-case cost from the schema's maxItems,
// maxProperties and maxLength bounds. A rule whose estimate is over the
// per-expression limit, or a CRD whose rules together are over the total
// limit, is refused with kube-apiserver's messages.
//
// Validate runs on every create and update of a custom resource. It walks the
// object alongside the schema, evaluates each node's rules against the
// node's value, and returns field errors in kube-apiserver's form. Evaluation
// has a cost limit per rule call and a total budget per object; running out
// fails closed: the object is refused.
//
// Guarantees:
//   - A rule never runs longer than its cost limit: cel-go interrupts it.
//   - Transition rules (rules that use oldSelf) run only on update, and only
//     where the old value can be correlated with the new one (object
//     properties, map keys, and items of x-kubernetes-list-type=map lists by
//     key), unless the rule sets optionalOldSelf.
//   - Errors come in a stable order: a node's rules in declaration order,
//     then its children by property name, map key or list index.
//   - Validation ratcheting, as upstream: on update, a failing rule that
//     does not use oldSelf is not reported when its value is unchanged from
//     the stored object (correlated by property, map key, or the keys of a
//     map-type list); rules using oldSelf never ratchet.
//   - Rules under allOf/anyOf/oneOf/not never run: the CRD that has them is
//     refused when it is written, as upstream does for structural schemas.
//   - Duration and date-time strings are parsed with kube-openapi's strfmt,
//     as upstream, so rules and the format check agree ("1d" is a duration).
//
// Rules have the environment of kube-apiserver's CRD validation for new
// expressions at compatibility version 1.36: the CEL standard library with
// optional types, cel-go's strings (version 2), sets, lists (version 3) and
// two-variable comprehensions, and the Kubernetes list, regex, url,
// quantity, ip, cidr, format and semver (version 1) libraries, with
// upstream's function names, signatures, runtime errors and costs
// (library_*.go; equality of their types included). The authorizer
// library's functions are declared, as upstream's base environment has
// them, but CRD rules have no authorizer to call them on (admission
// policies do); the jsonpatch library belongs to mutating admission
// policies' mutations and is absent from rules.
//
// CheckMatchCondition compiles the matchConditions of admission webhook
// configurations, in the same base environment with admission's
// variables (object, oldObject, request, namespaceObject, authorizer,
// authorizer.requestResource), as their validation does upstream.
//
// policy.go does the same for ValidatingAdmissionPolicies: PolicyChecker
// checks a policy's expressions as its validation does (variables typed
// into `variables` in order), and CompilePolicy compiles them for
// evaluation: matchConditions, validations with their messages, and
// audit annotations, with variables evaluated lazily and the
// authorizer library's checks asking the server's authorizer
// (library_authz.go). For MutatingAdmissionPolicies it also checks and
// compiles mutations (mutation.go), in an environment with the patch
// types (patchtypes.go: Object and the types under it, JSONPatch, and
// jsonpatch.escapeKey); Mutate evaluates one into a patch (an apply
// configuration's object, or a JSON Patch document) that the caller
// applies by the resource's schema.
//
// Not done (differences from kube-apiserver):
//   - A ratcheted failure is dropped silently; upstream also returns it as
//     a Warning header.
//   - Every rule is compiled in the new-expressions environment. On a CRD
//     update kube-apiserver compiles unchanged rules in its stored-expressions
//     environment, which also has what 1.37 added (the list library's
//     includes), so such a rule stored by a 1.37 server compiles there and
//     not here.
//   - Values are converted to CEL eagerly at each node that has rules.
//     kube-apiserver converts lazily.
package cel
