package crd

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	vs, err := newVersionSchema(&p, nil)
	if err != nil {
		t.Fatal(err)
	}
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
