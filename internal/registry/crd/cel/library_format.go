package cel

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// The Kubernetes format library (kube-apiserver since 1.31), written from
// its documentation (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-format-library):
//
//	format.<name>() Format                 one function per named format below
//	format.named(string) optional(Format)  none for an unknown name
//	<Format>.validate(string) optional(list(string))
//	                                       none when valid, else the error strings
//
// The formats are apimachinery's name and label validations, and the
// OpenAPI uri, uuid, byte, date and datetime formats as kube-openapi checks
// them, so the error strings are those of the API server's own validation.
// Two formats are equal when they are the same format.

var formatType = cel.ObjectType("kubernetes.NamedFormat")

// Cost limits of formats (k8s.io/apiserver/pkg/cel/limits.go): a format's
// regex is estimated at maxNameFormatRegexSize characters for the
// estimate, and a format value at maxFormatSize for equality.
const (
	maxFormatSize          = 64
	maxNameFormatRegexSize = 128
)

// formatVal is a named format. maxRegexSize prices validate at run time:
// the length of the format's regular expression, or of an equivalent one.
type formatVal struct {
	name         string
	validate     func(string) []string
	maxRegexSize int
}

func (v formatVal) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from 'Format' to '%v'", t)
}

func (v formatVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case formatType:
		return v
	case types.TypeType:
		return formatType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", formatType, t)
}

func (v formatVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(formatVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.name == o.name)
}

func (v formatVal) Type() ref.Type { return formatType }
func (v formatVal) Value() any     { return v }

// Regex sizes upstream assumes for the formats not checked by a regular
// expression of known length: govalidator's base64 and URL expressions.
const (
	base64RegexSize = 84
	urlRegexSize    = 1103
)

// namedFormats are the formats by the name format.named takes.
var namedFormats = map[string]formatVal{
	"dns1123Label": {"DNS1123Label", func(s string) []string { return apimachineryvalidation.NameIsDNSLabel(s, false) }, 30},
	"dns1123Subdomain": {"DNS1123Subdomain", func(s string) []string {
		return apimachineryvalidation.NameIsDNSSubdomain(s, false)
	}, 60},
	"dns1035Label":  {"DNS1035Label", func(s string) []string { return apimachineryvalidation.NameIsDNS1035Label(s, false) }, 30},
	"qualifiedName": {"QualifiedName", validation.IsQualifiedName, 60},
	"dns1123LabelPrefix": {"DNS1123LabelPrefix", func(s string) []string {
		return apimachineryvalidation.NameIsDNSLabel(s, true)
	}, 30},
	"dns1123SubdomainPrefix": {"DNS1123SubdomainPrefix", func(s string) []string {
		return apimachineryvalidation.NameIsDNSSubdomain(s, true)
	}, 60},
	"dns1035LabelPrefix": {"DNS1035LabelPrefix", func(s string) []string {
		return apimachineryvalidation.NameIsDNS1035Label(s, true)
	}, 30},
	"labelValue": {"LabelValue", validation.IsValidLabelValue, 40},
	"uri": {"URI", func(s string) []string {
		if _, err := url.ParseRequestURI(s); err != nil {
			return []string{err.Error()}
		}
		return nil
	}, urlRegexSize},
	"uuid":     {"uuid", strfmtCheck("uuid", "does not match the UUID format"), len(strfmt.UUIDPattern)},
	"byte":     {"byte", strfmtCheck("byte", "invalid base64"), base64RegexSize},
	"date":     {"date", strfmtCheck("date", "invalid date"), len(strfmt.DateTimePattern)},
	"datetime": {"datetime", strfmtCheck("datetime", "invalid datetime"), len(strfmt.DateTimePattern)},
}

func strfmtCheck(name, msg string) func(string) []string {
	return func(s string) []string {
		if !strfmt.Default.Validates(name, s) {
			return []string{msg}
		}
		return nil
	}
}

func formatLibrary() []cel.EnvOption {
	opts := []cel.EnvOption{
		cel.Function("validate", cel.MemberOverload("kplane_format_validate",
			[]*cel.Type{formatType, cel.StringType}, cel.OptionalType(cel.ListType(cel.StringType)),
			cel.BinaryBinding(func(f, s ref.Val) ref.Val {
				fv, ok := f.Value().(formatVal)
				if !ok {
					return types.MaybeNoSuchOverloadErr(f)
				}
				str, ok := s.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(s)
				}
				if errs := fv.validate(str); len(errs) > 0 {
					return types.OptionalOf(types.NewStringList(types.DefaultTypeAdapter, errs))
				}
				return types.OptionalNone
			}))),
		cel.Function("format.named", cel.Overload("kplane_format_named",
			[]*cel.Type{cel.StringType}, cel.OptionalType(formatType),
			cel.UnaryBinding(func(n ref.Val) ref.Val {
				s, ok := n.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(n)
				}
				if f, ok := namedFormats[s]; ok {
					return types.OptionalOf(f)
				}
				return types.OptionalNone
			}))),
	}
	names := make([]string, 0, len(namedFormats))
	for n := range namedFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := namedFormats[n]
		fn := "format." + n
		opts = append(opts, cel.Function(fn, cel.Overload("kplane_"+fn, nil, formatType,
			cel.FunctionBinding(func(...ref.Val) ref.Val { return f }))))
	}
	return opts
}
