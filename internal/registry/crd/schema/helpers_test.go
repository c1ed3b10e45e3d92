package schema

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// widgetSchema is the openAPIV3Schema of testdata/widgets.yaml.
func widgetSchema(t testing.TB) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	b, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatal(err)
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

func widget(t testing.TB) *Schema {
	t.Helper()
	s, err := New(widgetSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// parse decodes a YAML or JSON object the way the registry hands objects
// over: integers as int64, other numbers as float64.
func parse(t testing.TB, doc string) map[string]any {
	t.Helper()
	var obj map[string]any
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := utiljsonUnmarshal(j, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// schemaFromYAML decodes one JSONSchemaProps.
func schemaFromYAML(t testing.TB, doc string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func utiljsonUnmarshal(b []byte, v any) error { return utiljson.Unmarshal(b, v) }
