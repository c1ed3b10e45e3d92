// Package transcode writes the Kubernetes protobuf form of an object of
// a built-in kind straight from its JSON, without decoding it.
//
// kube-apiserver's protobuf answers come from Go types: the object is
// decoded into its k8s.io/api type and that type's generated Marshal
// writes the message. kplane stores JSON, so a protobuf answer that way
// costs a decode into maps, a conversion into the Go type and the
// Marshal, and leaves all three as garbage. A Plan does the same work in
// one pass over the JSON bytes: it is compiled once per Go type from the
// type's struct tags (the json name of each field and its protobuf
// number, wire type and cardinality) and from the generated Marshal of
// the type's zero value (what each field writes when the JSON lacks it),
// and it appends the message the generated Marshal would write for the
// object encoding/json would decode, byte for byte.
//
// A Plan refuses what it cannot transcode exactly, rather than guess:
// keys that only match a field without regard to case, a key given twice,
// a map whose keys are out of order, a value of the wrong JSON type, a
// number out of its field's range, a string that is not valid UTF-8, a
// field of a type with its own JSON form other than the few it knows
// (times, field sets) — those it hands to the type's own UnmarshalJSON
// and Marshal. The caller then takes the long way: decode, convert,
// Marshal. Tests hold the two ways byte-equal over random objects of
// every kind kplane serves in protobuf.
package transcode
