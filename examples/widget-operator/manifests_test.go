package widgetop

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDManifest checks that the committed YAML is the CRD the markers
// in api/ describe: if a marker is changed without regenerating, or the
// generator drops one, this fails.
func TestCRDManifest(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(CRD, &crd); err != nil {
		t.Fatalf("decoding the CRD: %v", err)
	}
	if crd.Name != "widgets.example.kplane.dev" || crd.Spec.Group != "example.kplane.dev" || crd.Spec.Names.Kind != "Widget" {
		t.Errorf("names = %s %s %+v", crd.Name, crd.Spec.Group, crd.Spec.Names)
	}
	if len(crd.Spec.Versions) != 2 {
		t.Fatalf("got %d versions, want 2", len(crd.Spec.Versions))
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Storage != (v.Name == "v1") {
			t.Errorf("%s: served=%v storage=%v", v.Name, v.Served, v.Storage)
		}
		sc := v.Subresources.Scale
		if v.Subresources.Status == nil || sc == nil || sc.SpecReplicasPath != ".spec.replicas" ||
			sc.StatusReplicasPath != ".status.replicas" || sc.LabelSelectorPath == nil || *sc.LabelSelectorPath != ".status.selector" {
			t.Errorf("%s: subresources = %+v", v.Name, v.Subresources)
		}
		if len(v.AdditionalPrinterColumns) != 4 {
			t.Errorf("%s: %d printer columns, want 4", v.Name, len(v.AdditionalPrinterColumns))
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		p := spec.Properties
		if r := p["replicas"]; r.Maximum == nil || *r.Maximum != 10 || r.Default == nil || string(r.Default.Raw) != "1" {
			t.Errorf("%s: replicas = %+v", v.Name, r)
		}
		if p["ports"].XListType == nil || *p["ports"].XListType != "map" || p["tags"].XListType == nil || *p["tags"].XListType != "set" {
			t.Errorf("%s: list types ports=%v tags=%v", v.Name, p["ports"].XListType, p["tags"].XListType)
		}
		if !p["maxUnavailable"].XIntOrString || !p["note"].Nullable || !p["template"].XEmbeddedResource ||
			p["config"].XPreserveUnknownFields == nil || !*p["config"].XPreserveUnknownFields {
			t.Errorf("%s: extensions missing", v.Name)
		}
		if r := p["storageClass"].XValidations; len(r) != 1 || r[0].Rule != "self == oldSelf" {
			t.Errorf("%s: storageClass rules = %+v", v.Name, r)
		}
		if r := p["host"].XValidations; len(r) != 1 || r[0].MessageExpression == "" {
			t.Errorf("%s: host rules = %+v", v.Name, r)
		}
		if r := spec.XValidations; len(r) != 1 || r[0].FieldPath != ".minReplicas" {
			t.Errorf("%s: spec rules = %+v", v.Name, r)
		}
	}
}
