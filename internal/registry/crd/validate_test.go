package crd

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// TestRulesSkippedAfterBlockingErrors: the CEL rules run only when the
// schema checks found no error of a blocking type, as upstream's custom
// resource strategy (registry/customresource/strategy.go hasBlockingErr).
func TestRulesSkippedAfterBlockingErrors(t *testing.T) {
	var p apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(`
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "self.replicas <= 5"
      message: too many replicas
    properties:
      replicas: {type: integer, maximum: 100}
      size: {type: string, enum: [small, large]}
`), &p); err != nil {
		t.Fatal(err)
	}
	vs := newVersionSchema(&p, nil)
	tests := []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"rules run when the rest is valid",
			map[string]any{"spec": map[string]any{"replicas": int64(6)}},
			[]string{`spec: Invalid value: too many replicas`}},
		{"rules run after a non-blocking error",
			map[string]any{"spec": map[string]any{"replicas": int64(200)}},
			[]string{`spec.replicas: Invalid value: 200: spec.replicas in body should be less than or equal to 100`, `spec: Invalid value: too many replicas`}},
		{"rules skipped after an unsupported value",
			map[string]any{"spec": map[string]any{"replicas": int64(6), "size": "huge"}},
			[]string{`spec.size: Unsupported value: "huge": supported values: "small", "large"`,
				`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`}},
		{"rules skipped after a type error",
			map[string]any{"spec": map[string]any{"replicas": "six"}},
			[]string{`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`,
				`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := vs.Validate(context.Background(), tc.obj, nil)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors = %v, want %q", errs, tc.want)
			}
			for i, e := range errs {
				if e.Error() != tc.want[i] {
					t.Errorf("error %d = %q, want %q", i, e.Error(), tc.want[i])
				}
			}
		})
	}
}

// A version's schema, compiled on its first use, prunes, defaults and
// validates; one that does not compile (a CRD stored under other rules:
// validation refuses such a rule now) serves its version as one without
// a schema, as the eager build did by leaving the version out.
func TestVersionSchemaCompiledOnUse(t *testing.T) {
	schemaOf := func(rule string) *apiextensionsv1.JSONSchemaProps {
		var p apiextensionsv1.JSONSchemaProps
		if err := yaml.Unmarshal([]byte(`
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations: [{rule: "`+rule+`"}]
    properties:
      replicas: {type: integer, default: 1}
`), &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	good := newVersionSchema(schemaOf("self.replicas <= 5"), nil)
	obj := map[string]any{"spec": map[string]any{"replicas": int64(6)}, "extra": true}
	if !good.HasDefaults() || !good.NeedsDefaults(map[string]any{"spec": map[string]any{}}) {
		t.Error("the defaults are not seen")
	}
	if pruned := good.Prune(obj); len(pruned) != 1 || pruned[0] != "extra" {
		t.Errorf("pruned %v, want [extra]", pruned)
	}
	if errs := good.Validate(context.Background(), obj, nil); len(errs) != 1 {
		t.Errorf("the rule gave %v, want one error", errs)
	}

	bad := newVersionSchema(schemaOf("self.nosuchfield <"), nil) // does not compile
	obj = map[string]any{"spec": map[string]any{"replicas": int64(6)}, "extra": true}
	if pruned := bad.Prune(obj); pruned != nil || obj["extra"] != true {
		t.Errorf("a schema that does not compile pruned %v", pruned)
	}
	bad.Default(obj)
	if errs := bad.Validate(context.Background(), obj, nil); errs != nil || bad.NeedsDefaults(obj) || bad.CheckEmbedded(obj) != nil {
		t.Errorf("a schema that does not compile checked %v", errs)
	}
}

// An update that leaves a CRD's spec as it was passes without checking
// the spec again (a status write, a label); one that changes it is
// checked whole.
func TestValidateUpdateChecksAChangedSpec(t *testing.T) {
	var crd map[string]any
	if err := yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gizmos, kind: Gizmo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations: [{rule: "self.nosuchfield <"}]
`), &crd); err != nil {
		t.Fatal(err)
	}
	old := &unstructured.Unstructured{Object: crd}
	if errs := validate(old); len(errs) == 0 {
		t.Fatal("the stored spec's rule does not compile, yet it validates")
	}
	next := old.DeepCopy()
	next.SetLabels(map[string]string{"a": "b"})
	next.Object["status"] = map[string]any{"storedVersions": []any{"v1"}}
	if errs := validateUpdate(next, old); errs != nil {
		t.Errorf("an update leaving the spec alone: %v", errs)
	}
	unstructured.SetNestedField(next.Object, "Cluster", "spec", "scope")
	if errs := validateUpdate(next, old); len(errs) == 0 {
		t.Error("an update of the spec passed unchecked")
	}
}

// validateNew checks obj as a create does: defaulted first.
func validateNew(obj *unstructured.Unstructured) field.ErrorList {
	prepareForCreate(obj)
	return validate(obj)
}
