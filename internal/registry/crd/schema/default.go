package schema

import "k8s.io/apimachinery/pkg/runtime"

// Default sets the schema's defaults in obj, as upstream's structural
// defaulting (apiextensions-apiserver pkg/apiserver/schema/defaulting,
// Default): a property missing from an object, or null where the
// property is not nullable, gets a deep copy of its default; so does a
// null array item or additionalProperties value whose schema is not
// nullable and has a default. Defaults are applied top-down, so a
// defaulted object then gets the defaults of its own properties.
//
// A `default: null` is no default (upstream decodes it to nil); a null in
// a nullable field stays null.
func (s *Schema) Default(obj map[string]any) {
	walkDefaults(obj, s.root, true)
}

// NeedsDefaults reports whether Default would change obj: whether any
// default applies anywhere in it. An object written since the schema got
// its defaults has them all, so reads can serve it as stored.
func (s *Schema) NeedsDefaults(obj map[string]any) bool {
	return walkDefaults(obj, s.root, false)
}

func nonNullableNull(x any, s *node) bool {
	return x == nil && s != nil && !s.nullable
}

// walkDefaults walks x along s and reports whether a default applies
// anywhere. With apply it sets each one (top-down, so a defaulted object
// then gets the defaults of its own properties); without, it stops at
// the first.
func walkDefaults(x any, s *node, apply bool) bool {
	if s == nil || !s.hasDefaults {
		return false
	}
	found := false
	// hit notes a default that applies, and says whether to stop.
	hit := func() bool {
		found = true
		return !apply
	}
	switch x := x.(type) {
	case map[string]any:
		for k, p := range s.props {
			if p.def == nil {
				continue
			}
			if v, ok := x[k]; !ok || nonNullableNull(v, p) {
				if hit() {
					return true
				}
				x[k] = runtime.DeepCopyJSONValue(p.def)
			}
		}
		for k, v := range x {
			c, ok := s.props[k]
			if !ok && s.hasAddl {
				c = s.addl
				if nonNullableNull(v, c) && c.def != nil {
					if hit() {
						return true
					}
					v = runtime.DeepCopyJSONValue(c.def)
					x[k] = v
				}
			}
			if c != nil && walkDefaults(v, c, apply) && hit() {
				return true
			}
		}
	case []any:
		for i, v := range x {
			if nonNullableNull(v, s.items) && s.items.def != nil {
				if hit() {
					return true
				}
				v = runtime.DeepCopyJSONValue(s.items.def)
				x[i] = v
			}
			if walkDefaults(v, s.items, apply) && hit() {
				return true
			}
		}
	}
	return found
}
