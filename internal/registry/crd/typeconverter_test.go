package crd

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry"
)

// gearCRD has one field of each kind field ownership distinguishes.
const gearCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gears.test.kplane.dev
spec:
  group: test.kplane.dev
  names: {kind: Gear, plural: gears}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              plain:
                type: array
                items: {type: string}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                additionalProperties: {type: string}
              labels:
                type: object
                additionalProperties: {type: string}
              size:
                x-kubernetes-int-or-string: true
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
              template:
                type: object
                x-kubernetes-embedded-resource: true
                properties:
                  data: {type: string}
`

func gearKind(t *testing.T, edit func(string) string) *registry.Kind {
	t.Helper()
	doc := gearCRD
	if edit != nil {
		doc = edit(doc)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(doc), &crd); err != nil {
		t.Fatal(err)
	}
	if errs := validateNew(toUnstructured(t, &crd)); len(errs) > 0 {
		t.Fatalf("test CRD invalid: %v", errs)
	}
	return resourceKind(&crd)
}

func toUnstructured(t *testing.T, v any) *unstructured.Unstructured {
	t.Helper()
	data, err := utiljson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

func gear(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{}}
	doc := "apiVersion: test.kplane.dev/v1\nkind: Gear\nmetadata:\n  name: g\n  namespace: default\nspec:\n" + spec
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

func typedGear(t *testing.T, k *registry.Kind, spec string, opts ...typed.ValidationOptions) *typed.TypedValue {
	t.Helper()
	tv, err := k.TypeConverter.ObjectToTyped(gear(t, spec), opts...)
	if err != nil {
		t.Fatalf("ObjectToTyped(%s): %v", spec, err)
	}
	return tv
}

// merged applies b over a as server-side apply merges two managers'
// configurations, and returns the spec.
func merged(t *testing.T, k *registry.Kind, a, b string) map[string]any {
	t.Helper()
	out, err := typedGear(t, k, a).Merge(typedGear(t, k, b))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := k.TypeConverter.TypedToObject(out)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(obj.(*unstructured.Unstructured).Object, "spec")
	return spec
}

func TestTypeConverterMergesByTheSchema(t *testing.T) {
	k := gearKind(t, nil)
	t.Run("listType map keeps both managers' items", func(t *testing.T) {
		spec := merged(t, k, "  ports: [{name: http, port: 80}]\n", "  ports: [{name: https, port: 443}]\n")
		ports, _ := spec["ports"].([]any)
		if len(ports) != 2 {
			t.Fatalf("ports = %v, want http and https", ports)
		}
		set, err := typedGear(t, k, "  ports: [{name: http, port: 80}]\n").ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		key := fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("name", "http"), "port")
		if !set.Has(key) {
			t.Errorf("field set lacks %v: %v", key, set)
		}
	})
	t.Run("listType set is a union", func(t *testing.T) {
		spec := merged(t, k, "  tags: [a, b]\n", "  tags: [c]\n")
		if got := spec["tags"]; len(got.([]any)) != 3 {
			t.Errorf("tags = %v, want a, b and c", got)
		}
	})
	t.Run("a list without listType is atomic", func(t *testing.T) {
		spec := merged(t, k, "  plain: [a, b]\n", "  plain: [c]\n")
		if got := spec["plain"].([]any); len(got) != 1 || got[0] != "c" {
			t.Errorf("plain = %v, want [c]", got)
		}
	})
	t.Run("mapType atomic is replaced whole", func(t *testing.T) {
		spec := merged(t, k, "  selector: {a: one, b: two}\n", "  selector: {c: z}\n")
		if got := spec["selector"].(map[string]any); len(got) != 1 || got["c"] != "z" {
			t.Errorf("selector = %v, want {c: z}", got)
		}
	})
	t.Run("a granular map merges keys", func(t *testing.T) {
		spec := merged(t, k, "  labels: {a: x}\n", "  labels: {c: z}\n")
		if got := spec["labels"].(map[string]any); len(got) != 2 {
			t.Errorf("labels = %v, want a and c", got)
		}
	})
	t.Run("preserve-unknown-fields, int-or-string and embedded resources fit", func(t *testing.T) {
		typedGear(t, k, "  extra: {anything: [1, {deep: true}]}\n  size: 3\n  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: x, labels: {a: b}}, data: d}\n")
		typedGear(t, k, "  size: 10%\n")
	})
}

// TestTypeConverterUnknownFields: an apply configuration with a field the
// schema does not declare is refused, as upstream; a stored or written
// object with one (stored before the schema dropped it, or sent under
// fieldValidation=Ignore) is judged pruned, as upstream sees it.
func TestTypeConverterUnknownFields(t *testing.T) {
	k := gearKind(t, nil)
	_, err := k.TypeConverter.ObjectToTyped(gear(t, "  bogus: 1\n"))
	if err == nil || !strings.Contains(err.Error(), ".spec.bogus: field not declared in schema") {
		t.Errorf("apply configuration with an unknown field: %v, want field not declared in schema", err)
	}
	tv := typedGear(t, k, "  bogus: 1\n  tags: [a]\n", typed.AllowDuplicates)
	set, err := tv.ToFieldSet()
	if err != nil {
		t.Fatal(err)
	}
	if set.Has(fieldpath.MakePathOrDie("spec", "bogus")) || !set.Has(fieldpath.MakePathOrDie("spec", "tags", valueElement("a"))) {
		t.Errorf("live object's fields = %v, want spec.tags without spec.bogus", set)
	}
}

// TestTypeConverterFollowsSchemaChanges: a changed CRD is a new Kind with
// its own converter; making the ports list atomic makes a merge replace it.
func TestTypeConverterFollowsSchemaChanges(t *testing.T) {
	before := gearKind(t, nil)
	after := gearKind(t, func(doc string) string {
		return strings.Replace(doc, "                x-kubernetes-list-type: map\n                x-kubernetes-list-map-keys: [name]\n", "                x-kubernetes-list-type: atomic\n", 1)
	})
	if before.TypeConverter == after.TypeConverter {
		t.Fatal("a changed CRD kept its type converter")
	}
	spec := merged(t, after, "  ports: [{name: http, port: 80}]\n", "  ports: [{name: https, port: 443}]\n")
	if ports := spec["ports"].([]any); len(ports) != 1 {
		t.Errorf("atomic ports = %v, want only https", ports)
	}
}

// TestTypeConverterModels: the definitions the converter is built from,
// as upstream's builder makes them.
func TestTypeConverterModels(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(gearCRD), &crd); err != nil {
		t.Fatal(err)
	}
	models, err := applyModels(&crd)
	if err != nil {
		t.Fatal(err)
	}
	def := models["dev.kplane.test.v1.Gear"]
	if def == nil {
		t.Fatalf("no dev.kplane.test.v1.Gear among %d models", len(models))
	}
	meta := def.Properties["metadata"]
	if got := meta.Ref.String(); got != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Errorf("metadata $ref = %q", got)
	}
	if models["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] == nil || models["io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"] == nil {
		t.Error("ObjectMeta's definitions are missing")
	}
	tmpl := def.Properties["spec"].Properties["template"]
	if _, ok := tmpl.Properties["metadata"]; !ok || tmpl.Properties["kind"].Type[0] != "string" {
		t.Errorf("embedded resource without apiVersion, kind and metadata: %v", tmpl.Properties)
	}
}

func valueElement(v any) fieldpath.PathElement {
	val := value.NewValueInterface(v)
	return fieldpath.PathElement{Value: &val}
}
