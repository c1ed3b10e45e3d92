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
