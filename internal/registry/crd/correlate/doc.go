// Package correlate pairs each value of an updated custom resource with
// the value at the same place in the stored object, as kube-apiserver's
// common.CorrelatedObject does, for the two things that compare a value
// with its old one: CEL's transition rules (oldSelf) and validation
// ratcheting, both of the OpenAPI checks and of CEL rules.
//
// Pairing follows the schema, never the data alone:
//   - an object's field (or a map's value) pairs with the old field of the
//     same name, if both objects have it and the schema describes it (a
//     property, else additionalProperties);
//   - an item of an x-kubernetes-list-type=map list pairs with the one old
//     item whose key fields hold the same values: the same JSON type and
//     value, so 1 and 1.0 differ;
//   - nothing else pairs: not an item of another kind of list, not an item
//     that is not an object, lacks a key field or has a key field that is
//     not a scalar, and not an item whose keys two old items share.
//     Validation refuses such lists (keys are scalars, required or
//     defaulted, and unique); they pair with nothing so that no rule
//     compares an item with the wrong old one. A missing key field is not
//     filled in with its schema's default, as upstream would: objects are
//     defaulted before they are validated, so a key with a default is
//     present in both versions.
//
// A Pair is unchanged when its value equals the old one: objects field by
// paired field, list-type=map lists item by paired item, other lists and
// scalars by reflect.DeepEqual. A field the schema does not describe (kept
// by x-kubernetes-preserve-unknown-fields) never counts as unchanged, as
// upstream.
//
// A Pair caches its children and its equality, and is not safe for
// concurrent use: make one per validation.
package correlate
