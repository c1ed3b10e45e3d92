package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// modelName is the OpenAPI definition name of named type t: the name the
// type declares through OpenAPIModelName (k8s.io/api, apimachinery and
// apiextensions types generate that method), or else its package path
// with the domain reversed and "/" turned into ".", then the type name,
// as kube-openapi's util.ToRESTFriendlyName spells it:
//
//	k8s.io/api/core/v1.ConfigMap                 → io.k8s.api.core.v1.ConfigMap
//	k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta → io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta
//	example.com/foo/v1.Bar                       → com.example.foo.v1.Bar
func modelName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(interface{ OpenAPIModelName() string }); ok {
		if name := n.OpenAPIModelName(); name != "" {
			return name
		}
	}
	parts := strings.Split(t.PkgPath(), "/")
	if strings.Contains(parts[0], ".") {
		domain := strings.Split(parts[0], ".")
		slices.Reverse(domain)
		parts[0] = strings.Join(domain, ".")
	}
	return strings.Join(append(parts, t.Name()), ".")
}

// ownSchema reports the OpenAPI type and format of a type that declares
// them through OpenAPISchemaType and OpenAPISchemaFormat (metav1.Time,
// MicroTime, Duration, resource.Quantity, intstr.IntOrString,
// apiextensions JSON). A nil type means any JSON value.
func ownSchema(t reflect.Type) (typ []string, format string, ok bool) {
	type schemaTyper interface {
		OpenAPISchemaType() []string
		OpenAPISchemaFormat() string
	}
	v, ok := reflect.Zero(t).Interface().(schemaTyper)
	if !ok {
		if v, ok = reflect.New(t).Interface().(schemaTyper); !ok {
			return nil, "", false
		}
	}
	return v.OpenAPISchemaType(), v.OpenAPISchemaFormat(), true
}

// v3OneOf is the types a value of t may be in OpenAPI v3, for a type
// that declares them (OpenAPIV3OneOfTypes: resource.Quantity,
// intstr.IntOrString); nil for the others.
func v3OneOf(t reflect.Type) []string {
	type oneOfTyper interface{ OpenAPIV3OneOfTypes() []string }
	v, ok := reflect.Zero(t).Interface().(oneOfTyper)
	if !ok {
		if v, ok = reflect.New(t).Interface().(oneOfTyper); !ok {
			return nil
		}
	}
	return v.OpenAPIV3OneOfTypes()
}

// customDecoding reports whether t decodes itself from JSON.
func customDecoding(t reflect.Type) bool {
	unmarshaler := reflect.TypeFor[json.Unmarshaler]()
	return t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)
}
