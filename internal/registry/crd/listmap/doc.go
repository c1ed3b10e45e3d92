// Package listmap pairs the items of two versions of an
// x-kubernetes-list-type=map list by their keys, as kube-apiserver pairs
// them for transition rules (oldSelf) and for validation ratcheting.
//
// An item pairs with the one item of the other list whose key fields hold
// the same values: the same JSON type and value, so 1 and 1.0 differ.
// Nothing pairs with an item that is not an object, that lacks a key field
// or whose key field is not a scalar (a string, a number or a boolean), or
// whose keys more than one item of the other list share. Validation
// refuses such lists (keys are scalars and unique); they pair with nothing
// so that no rule compares an item with the wrong old one. A missing key
// field is not filled in with its schema's default here, as upstream
// would: objects are defaulted before they are validated, so a key with a
// default is present in both versions.
//
// The cel and schema packages both use it, so that CEL's transition rules
// and both kinds of ratcheting agree on which items correlate.
package listmap
