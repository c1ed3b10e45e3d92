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
	applyDefaults(obj, s.root)
}

func nonNullableNull(x any, s *node) bool {
	return x == nil && s != nil && !s.nullable
}

func applyDefaults(x any, s *node) {
	if s == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, p := range s.props {
			if p.def == nil {
				continue
			}
			if v, found := x[k]; !found || nonNullableNull(v, p) {
				x[k] = runtime.DeepCopyJSONValue(p.def)
			}
		}
		for k, v := range x {
			if p, ok := s.props[k]; ok {
				applyDefaults(v, p)
			} else if s.hasAddl {
				if nonNullableNull(v, s.addl) && s.addl.def != nil {
					x[k] = runtime.DeepCopyJSONValue(s.addl.def)
				}
				applyDefaults(x[k], s.addl)
			}
		}
	case []any:
		for i := range x {
			if nonNullableNull(x[i], s.items) && s.items.def != nil {
				x[i] = runtime.DeepCopyJSONValue(s.items.def)
			}
			applyDefaults(x[i], s.items)
		}
	}
}

// NeedsDefaults reports whether Default would change obj: whether any
// default applies anywhere in it. An object written since the schema got
// its defaults has them all, so reads can serve it as stored.
func (s *Schema) NeedsDefaults(obj map[string]any) bool {
	return needsDefaults(obj, s.root)
}

// needsDefaults is applyDefaults without the writes: true where it would
// set a value.
func needsDefaults(x any, s *node) bool {
	if s == nil || !s.hasDefaults {
		return false
	}
	switch x := x.(type) {
	case map[string]any:
		for k, p := range s.props {
			if p.def == nil {
				continue
			}
			if v, found := x[k]; !found || nonNullableNull(v, p) {
				return true
			}
		}
		for k, v := range x {
			if p, ok := s.props[k]; ok {
				if needsDefaults(v, p) {
					return true
				}
			} else if s.hasAddl {
				if nonNullableNull(v, s.addl) && s.addl.def != nil || needsDefaults(v, s.addl) {
					return true
				}
			}
		}
	case []any:
		for _, v := range x {
			if nonNullableNull(v, s.items) && s.items.def != nil || needsDefaults(v, s.items) {
				return true
			}
		}
	}
	return false
}
