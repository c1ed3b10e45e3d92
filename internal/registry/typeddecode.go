package registry

import (
	"reflect"

	"github.com/kplane-dev/kplane/internal/registry/plain"
	"github.com/kplane-dev/kplane/internal/storage"
)

// A body of a kind with a Go type is decoded through that type, strictly,
// and converted back to a map (Decode): unknown fields are refused or
// dropped, values of the wrong type refused, and the map holds what the
// type would write. For most bodies that map is the body's JSON as it
// stands: every member names a field, every value is of the field's type
// and would be written back the same. plainDecode decodes such a body in
// one pass into a map and checks it against the Go type's fields
// (package plain), and
// leaves anything else to the full decode; that was a tenth of the
// server's CPU under creates. A test holds the two equal.

// plainDecode returns Decode's object map for data, a body of Go type t,
// when it can vouch for it: false leaves data to the full decode.
func plainDecode(t reflect.Type, data []byte) (map[string]any, bool) {
	m, ok := storage.DecodeObjectNoDuplicates(data)
	if !ok {
		return nil, false
	}
	if !plain.Of(t).Plain(m) {
		return nil, false
	}
	return m, true
}
