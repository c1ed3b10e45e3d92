package fooop

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func TestCRDManifest(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(CRD, &crd); err != nil {
		t.Fatalf("decoding config/crd.yaml: %v", err)
	}

	if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
		t.Errorf("type = %s %s", crd.APIVersion, crd.Kind)
	}
	if crd.Name != "foos.webapp.my.domain" {
		t.Errorf("name = %q", crd.Name)
	}
	if crd.Spec.Group != "webapp.my.domain" {
		t.Errorf("group = %q", crd.Spec.Group)
	}
	n := crd.Spec.Names
	if n.Kind != "Foo" || n.ListKind != "FooList" || n.Plural != "foos" || n.Singular != "foo" {
		t.Errorf("names = %+v", n)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope = %q", crd.Spec.Scope)
	}

	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("got %d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || !v.Served || !v.Storage {
		t.Errorf("version = %q served=%v storage=%v", v.Name, v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("status subresource not enabled")
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		t.Error("unexpected scale subresource")
	}

	if len(v.AdditionalPrinterColumns) != 1 {
		t.Fatalf("got %d printer columns, want 1", len(v.AdditionalPrinterColumns))
	}
	col := v.AdditionalPrinterColumns[0]
	if col.Name != "Foo" || col.Type != "string" || col.JSONPath != ".spec.foo" {
		t.Errorf("printer column = %+v", col)
	}

	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		t.Fatal("missing openAPIV3Schema")
	}
	root := v.Schema.OpenAPIV3Schema
	if root.Type != "object" {
		t.Errorf("root type = %q", root.Type)
	}
	spec, ok := root.Properties["spec"]
	if !ok || spec.Type != "object" {
		t.Fatalf("spec schema = %+v", spec)
	}
	if foo, ok := spec.Properties["foo"]; !ok || foo.Type != "string" {
		t.Errorf("spec.foo schema = %+v", foo)
	}
	if status, ok := root.Properties["status"]; !ok || status.Type != "object" {
		t.Errorf("status schema = %+v", status)
	}
}
