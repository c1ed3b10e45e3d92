package crd

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apischema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/openapi"
)

// Field ownership of custom resources follows their CRD's schema, as
// apiextensions-apiserver's buildOpenAPIModelsForApply and
// managedfields.NewTypeConverter give it upstream: every version's schema
// becomes an OpenAPI definition (metadata a $ref to ObjectMeta, apiVersion
// and kind added, x-kubernetes-group-version-kind set), merged with
// ObjectMeta's own definitions. So x-kubernetes-list-type map and set,
// x-kubernetes-list-map-keys, x-kubernetes-map-type and
// x-kubernetes-preserve-unknown-fields decide how applies merge and who
// owns what, where a deduced schema would make every list atomic.

// metaDefinitions are ObjectMeta and the definitions it refers to, built
// once from apimachinery's Go types (upstream takes them from its static
// OpenAPI spec), without descriptions, which the converter does not read.
var metaDefinitions = sync.OnceValues(func() (map[string]*spec.Schema, error) {
	return openapi.DefinitionsWithoutDocs(map[apischema.GroupVersionKind]runtime.Object{
		metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"): &metav1.PartialObjectMetadata{},
	}, openapi.V3RefPrefix)
})

// objectMetaRef is the $ref of ObjectMeta in the definitions above.
const objectMetaRef = openapi.V3RefPrefix + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// typeConverter is the type converter of crd's resource, built on the
// first write that needs it. A CRD change builds a new Kind, and with it
// a new converter. schemas are the served versions' schemas, by version.
// crd must not change afterwards.
func typeConverter(crd *apiextensionsv1.CustomResourceDefinition, schemas map[string]registry.Schema) managedfields.TypeConverter {
	return &pruningTypeConverter{
		TypeConverter: registry.LazyTypeConverter(func() (managedfields.TypeConverter, error) {
			models, err := applyModels(crd)
			if err == nil {
				var tc managedfields.TypeConverter
				if tc, err = managedfields.NewTypeConverter(models, crd.Spec.PreserveUnknownFields); err == nil {
					return tc, nil
				}
			}
			// A schema the conversion refuses (admission should make that
			// impossible) merges as a schemaless one, as upstream falls
			// back when it cannot build the models.
			return managedfields.NewDeducedTypeConverter(), nil
		}),
		schemas: schemas,
	}
}

// applyModels are the OpenAPI definitions of crd's kind in each of its
// versions, with ObjectMeta's.
func applyModels(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*spec.Schema, error) {
	meta, err := metaDefinitions()
	if err != nil {
		return nil, fmt.Errorf("building ObjectMeta's schema: %w", err)
	}
	models := make(map[string]*spec.Schema, len(meta)+len(crd.Spec.Versions))
	for name, def := range meta {
		models[name] = def
	}
	for _, v := range crd.Spec.Versions {
		var s *spec.Schema
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			s = openAPISchema(v.Schema.OpenAPIV3Schema)
			withObjectMeta(s, true)
		} else {
			s = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
		}
		s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{
			"group": crd.Spec.Group, "version": v.Name, "kind": crd.Spec.Names.Kind,
		}})
		models[modelName(crd.Spec.Group, v.Name, crd.Spec.Names.Kind)] = s
	}
	return models, nil
}

// withObjectMeta gives the resource schema s, and each embedded resource
// in it, apiVersion, kind and a metadata that refers to ObjectMeta, as
// upstream's builder (buildKubeNative, addEmbeddedProperties) does.
func withObjectMeta(s *spec.Schema, root bool) {
	for name, p := range s.Properties {
		withObjectMeta(&p, false)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		withObjectMeta(s.Items.Schema, false)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		withObjectMeta(s.AdditionalProperties.Schema, false)
	}
	if embedded, _ := s.Extensions.GetBool("x-kubernetes-embedded-resource"); !root && !embedded {
		return
	}
	str := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"string"}}}
	s.SetProperty("apiVersion", str)
	s.SetProperty("kind", str)
	s.SetProperty("metadata", spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(objectMetaRef)}})
}

// modelName is upstream's definition name of a custom kind: the group
// reversed, then version and kind ("my.domain.webapp.v1.Foo").
func modelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	slices.Reverse(parts)
	return strings.Join(append(parts, version, kind), ".")
}

// pruningTypeConverter converts stored and written objects as upstream
// sees them: pruned by their version's schema. Upstream prunes a custom
// resource when it decodes a request body and when it reads one from
// storage, before field ownership is computed; kplane prunes later in the
// write, and never on read, so an object stored before its CRD dropped a
// field, or a body with unknown fields under fieldValidation=Ignore or
// Warn, would otherwise not fit the schema. An apply configuration is not
// pruned: upstream refuses one with a field the schema does not declare.
//
// managedfields converts live and new objects with typed.AllowDuplicates
// and an apply configuration without it (internal/structuredmerge.go);
// that option is what tells them apart here.
type pruningTypeConverter struct {
	managedfields.TypeConverter
	schemas map[string]registry.Schema
}

func (c *pruningTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	tv, err := c.TypeConverter.ObjectToTyped(obj, opts...)
	if err == nil || !slices.Contains(opts, typed.AllowDuplicates) {
		return tv, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return tv, err
	}
	s := c.schemas[u.GroupVersionKind().Version]
	if s == nil {
		return tv, err
	}
	pruned := u.DeepCopy()
	s.Prune(pruned.Object)
	return c.TypeConverter.ObjectToTyped(pruned, opts...)
}
