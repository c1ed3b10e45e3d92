package openapi

import (
	"reflect"
	"sync"

	extensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// docs are the descriptions of one Go type: the type's own and its
// fields', keyed by JSON name.
type docs struct {
	typ    string
	fields map[string]string
}

// docsOf returns the descriptions of named type t, whose definition is
// name. k8s.io/api and apimachinery types carry them in a generated
// SwaggerDoc method ("" is the type, other keys are JSON field names).
// Types without one (apiextensions.k8s.io/v1, metav1.Time, FieldsV1,
// runtime.RawExtension) take them from the OpenAPI definitions the
// apiextensions-apiserver module publishes for its own types and the
// apimachinery types they use.
func docsOf(t reflect.Type, name string) docs {
	type swaggerDoc interface{ SwaggerDoc() map[string]string }
	if d, ok := reflect.Zero(t).Interface().(swaggerDoc); ok {
		m := d.SwaggerDoc()
		return docs{typ: m[""], fields: m}
	}
	return publishedDocs()[name]
}

// publishedDocs indexes the descriptions in apiextensions-apiserver's
// generated OpenAPI definitions by definition name. It is built once, on
// first use.
var publishedDocs = sync.OnceValue(func() map[string]docs {
	defs := extensionsopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(V2RefPrefix + name)
	})
	out := make(map[string]docs, len(defs))
	for name, def := range defs {
		d := docs{typ: def.Schema.Description, fields: make(map[string]string, len(def.Schema.Properties))}
		for field, prop := range def.Schema.Properties {
			d.fields[field] = prop.Description
		}
		out[name] = d
	}
	return out
})
