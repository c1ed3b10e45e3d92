package schema

import (
	"math"
	"reflect"
	"regexp"
	"slices"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// acceptor answers one question about a value: would kube-openapi's
// validator, run with the same spec.Schema, report no error? It answers
// yes only when it is sure; "no" means "ask kube-openapi", which then
// produces the errors (with upstream's messages and paths) or finds the
// value valid after all.
//
// kube-openapi builds a validator for every field it visits, eight
// checkers per schema, on every call: most of a custom resource's
// validation time. The acceptor is compiled once per schema and walks the
// value without allocating. Where it checks a keyword it calls the same
// exported checks kube-openapi's validators call (validate.MaxLength,
// validate.MinimumNativeType, validate.FormatOf ...) with the same
// arguments, so the two agree on every edge the checks have; it mirrors by
// hand only the glue: which checks apply to which kind of value, the type
// rules, enum matching, and how properties, items, allOf and anyOf
// recurse.
//
// Keywords it does not model make their schema opaque (a value reaching
// it is never accepted): $ref, oneOf, not, dependencies,
// patternProperties, tuple items, additionalItems, uniqueItems, types
// other than the six JSON ones. A value of a Go type the registry never
// hands over (anything but nil, string, bool, int64, float64, []any and
// map[string]any) is not accepted either. TestAcceptorAgreesWithOpenAPI
// checks the claim on random schemas and values.
type acceptor struct {
	opaque bool

	types    []string // spec.Schema.Type
	nullable bool
	format   string // after stripUnsupportedFormat
	// formatChecked: format names a checker in strfmt.Default, so
	// kube-openapi's format validator applies to strings.
	formatChecked bool
	enum          []any

	// Numbers: the type and format kube-openapi's number validator gets
	// (set only when the schema names one type).
	numType, numFormat string
	max, min, multiple bound

	// Strings.
	maxLength, minLength *int64
	pattern              *regexp.Regexp

	// Arrays.
	items              *acceptor
	maxItems, minItems *int64

	// Objects.
	props              map[string]*acceptor
	required           []string
	closed             bool      // additionalProperties: false
	addl               *acceptor // additionalProperties' schema
	maxProps, minProps *int64

	allOf, anyOf []*acceptor
}

// bound is a maximum, minimum or multipleOf. inRange is what
// kube-openapi's IsValueValidAgainstRange says of the bound itself for
// the schema's type and format.
type bound struct {
	v         *float64
	exclusive bool
	inRange   bool
}

var jsonTypes = []string{"array", "boolean", "integer", "number", "object", "string"}

func newAcceptor(s *spec.Schema) *acceptor {
	if s == nil {
		return nil
	}
	a := &acceptor{
		types:     s.Type,
		nullable:  s.Nullable,
		format:    s.Format,
		enum:      s.Enum,
		maxLength: s.MaxLength,
		minLength: s.MinLength,
		maxItems:  s.MaxItems,
		minItems:  s.MinItems,
		required:  s.Required,

		maxProps: s.MaxProperties,
		minProps: s.MinProperties,
	}
	if s.Ref.String() != "" || len(s.OneOf) > 0 || s.Not != nil || len(s.Dependencies) > 0 ||
		len(s.PatternProperties) > 0 || s.AdditionalItems != nil || s.UniqueItems ||
		(s.Items != nil && len(s.Items.Schemas) > 0) {
		return &acceptor{opaque: true}
	}
	for _, t := range s.Type {
		if !slices.Contains(jsonTypes, t) {
			return &acceptor{opaque: true}
		}
	}
	a.formatChecked = s.Format != "" && strfmt.Default.ContainsName(s.Format)
	if len(s.Type) == 1 {
		switch s.Type[0] {
		case "integer":
			a.numType = "integer"
			if s.Format == "int32" || s.Format == "int64" {
				a.numFormat = s.Format
			}
		case "number":
			a.numType = "number"
			if s.Format == "float" || s.Format == "double" {
				a.numFormat = s.Format
			}
		}
	}
	a.max = a.newBound(s.Maximum, s.ExclusiveMaximum)
	a.min = a.newBound(s.Minimum, s.ExclusiveMinimum)
	a.multiple = a.newBound(s.MultipleOf, false)
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return &acceptor{opaque: true} // kube-openapi fails every string
		}
		a.pattern = re
	}
	if s.Items != nil {
		a.items = newAcceptor(s.Items.Schema)
	}
	if len(s.Properties) > 0 {
		a.props = make(map[string]*acceptor, len(s.Properties))
		for k, p := range s.Properties {
			a.props[k] = newAcceptor(&p)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		if !ap.Allows {
			a.closed = true
		} else {
			a.addl = newAcceptor(ap.Schema)
		}
	}
	for i := range s.AllOf {
		a.allOf = append(a.allOf, newAcceptor(&s.AllOf[i]))
	}
	for i := range s.AnyOf {
		a.anyOf = append(a.anyOf, newAcceptor(&s.AnyOf[i]))
	}
	return a
}

func (a *acceptor) newBound(v *float64, exclusive bool) bound {
	if v == nil {
		return bound{}
	}
	return bound{v: v, exclusive: exclusive, inRange: validate.IsValueValidAgainstRange(*v, a.numType, a.numFormat, "", "") == nil}
}

// accept reports whether x is surely valid.
func (a *acceptor) accept(x any) bool {
	if a == nil {
		return true // no schema: kube-openapi checks nothing
	}
	if a.opaque {
		return false
	}
	if x == nil {
		// kube-openapi runs only the type and enum checks on null.
		if len(a.types) > 0 && !a.nullable {
			return false
		}
		return len(a.enum) == 0
	}
	if !a.typeOK(x) {
		return false
	}
	for _, s := range a.allOf {
		if !s.accept(x) {
			return false
		}
	}
	if len(a.anyOf) > 0 && !slices.ContainsFunc(a.anyOf, func(s *acceptor) bool { return s.accept(x) }) {
		return false
	}
	switch x := x.(type) {
	case string:
		if !a.stringOK(x) {
			return false
		}
	case int64, float64:
		if !a.numberOK(x) {
			return false
		}
	case []any:
		if !a.arrayOK(x) {
			return false
		}
	case map[string]any:
		if !a.objectOK(x) {
			return false
		}
	}
	return len(a.enum) == 0 || a.inEnum(x)
}

// typeOK is kube-openapi's type validator for the value kinds the
// registry hands over (int64 data reads as integer of format int64,
// float64 as number of format float64). A float64 that only an integer
// type could take (kube-openapi takes integral ones) is left to
// kube-openapi.
func (a *acceptor) typeOK(x any) bool {
	if len(a.types) == 0 && a.format == "" {
		return true // the type validator does not apply
	}
	var typ, format string
	stringOrArray := false
	switch x.(type) {
	case string:
		typ, stringOrArray = "string", true
	case bool:
		typ = "boolean"
	case int64:
		typ, format = "integer", "int64"
	case float64:
		typ, format = "number", "float64"
	case []any:
		typ, stringOrArray = "array", true
	case map[string]any:
		typ = "object"
	default:
		return false
	}
	has := slices.Contains(a.types, typ)
	intAsNumber := typ == "integer" && slices.Contains(a.types, "number")
	if !stringOrArray && a.format != "" && !has && format != a.format && !intAsNumber {
		return false
	}
	if a.format != "" && stringOrArray && !slices.Contains(a.types, "number") && !slices.Contains(a.types, "integer") {
		return true
	}
	return has || intAsNumber
}

func (a *acceptor) stringOK(x string) bool {
	if a.maxLength != nil && validate.MaxLength("", "", x, *a.maxLength) != nil {
		return false
	}
	if a.minLength != nil && validate.MinLength("", "", x, *a.minLength) != nil {
		return false
	}
	if a.pattern != nil && !a.pattern.MatchString(x) {
		return false
	}
	return !a.formatChecked || validate.FormatOf("", "", a.format, x, strfmt.Default) == nil
}

// numberOK is kube-openapi's number validator: the value must fit the
// schema's type and format, and so must each bound (a bound that does not
// is an error in itself), then maximum, minimum and multipleOf.
func (a *acceptor) numberOK(x any) bool {
	if !a.fits(x) {
		return false
	}
	if b := a.max; b.v != nil && (!b.inRange || validate.MaximumNativeType("", "", x, *b.v, b.exclusive) != nil) {
		return false
	}
	if b := a.min; b.v != nil && (!b.inRange || validate.MinimumNativeType("", "", x, *b.v, b.exclusive) != nil) {
		return false
	}
	if b := a.multiple; b.v != nil && (!b.inRange || validate.MultipleOfNativeType("", "", x, *b.v) != nil) {
		return false
	}
	return true
}

// fits is IsValueValidAgainstRange(x, numType, numFormat) == nil, without
// formatting x as a string in the cases that cannot fail.
func (a *acceptor) fits(x any) bool {
	switch a.numType {
	case "integer":
		if i, ok := x.(int64); ok && a.numFormat != "int32" {
			return true
		} else if ok {
			return i >= math.MinInt32 && i <= math.MaxInt32
		}
	default:
		if a.numFormat != "float" {
			return true // no check beyond float64
		}
	}
	return validate.IsValueValidAgainstRange(x, a.numType, a.numFormat, "", "") == nil
}

func (a *acceptor) arrayOK(x []any) bool {
	if a.items != nil {
		for _, v := range x {
			if !a.items.accept(v) {
				return false
			}
		}
	}
	n := int64(len(x))
	return (a.minItems == nil || n >= *a.minItems) && (a.maxItems == nil || n <= *a.maxItems)
}

func (a *acceptor) objectOK(x map[string]any) bool {
	n := int64(len(x))
	if (a.minProps != nil && n < *a.minProps) || (a.maxProps != nil && n > *a.maxProps) {
		return false
	}
	for k, v := range x {
		if p, ok := a.props[k]; ok {
			if !p.accept(v) {
				return false
			}
		} else if a.closed {
			return false
		} else if a.addl != nil && !a.addl.accept(v) {
			return false
		}
	}
	for _, k := range a.required {
		if _, ok := x[k]; !ok {
			return false
		}
	}
	return true
}

// inEnum is kube-openapi's enum check: x matches a value it converts to
// (by reflect's rules) and then equals.
func (a *acceptor) inEnum(x any) bool {
	if s, ok := x.(string); ok {
		// A string converts to no type an enum value can have but string.
		for _, e := range a.enum {
			if es, ok := e.(string); ok && es == s {
				return true
			}
		}
		return false
	}
	xv := reflect.ValueOf(x)
	for _, e := range a.enum {
		t := reflect.TypeOf(e)
		if t != nil && xv.Type().ConvertibleTo(t) && reflect.DeepEqual(xv.Convert(t).Interface(), e) {
			return true
		}
	}
	return false
}
