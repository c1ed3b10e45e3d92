package crd

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// selectableCRD has fields of every type a selectable field may or may
// not point at. %s is the version's selectableFields.
const selectableCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shirts.test.kplane.dev
spec:
  group: test.kplane.dev
  names: {kind: Shirt, plural: shirts}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: %s
    schema:
      openAPIV3Schema:
        type: object
        properties:
          metadata:
            type: object
            properties:
              name: {type: string}
          spec:
            type: object
            properties:
              color: {type: string, enum: [red, blue]}
              size: {type: integer}
              used: {type: boolean}
              weight: {type: number}
              made: {type: string, format: date-time}
              sleeves:
                type: object
                properties:
                  long: {type: boolean}
              tags:
                type: array
                items: {type: string}
              labels:
                type: object
                additionalProperties: {type: string}
              any:
                x-kubernetes-int-or-string: true
`

func shirtCRD(t *testing.T, selectable string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(selectableCRD, selectable)), &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// TestSelectableFieldsValidation: the CRD's selectableFields are checked
// as apiextensions-apiserver's ValidateCustomResourceSelectableFields
// does, with its messages (apiextensions validation.go and
// schema/cel/validation.go ValidFieldPath).
func TestSelectableFieldsValidation(t *testing.T) {
	const p = "spec.versions[0].selectableFields"
	for _, c := range []struct {
		name, fields string
		want         []string // each error's full text, in order
	}{
		{"scalars", `[{jsonPath: .spec.color}, {jsonPath: .spec.size}, {jsonPath: .spec.used}, {jsonPath: .spec.made}, {jsonPath: .spec.sleeves.long}]`, nil},
		{"a map value", `[{jsonPath: .spec.labels.app}]`, nil},
		{"empty", `[{jsonPath: ""}]`, []string{p + "[0].jsonPath: Required value"}},
		{"no leading dot", `[{jsonPath: spec.color}]`,
			[]string{p + `[0].jsonPath: Invalid value: "spec.color": is an invalid path: expected [ or . but got: spec`}},
		{"unknown field", `[{jsonPath: .spec.colour}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.colour": is an invalid path: does not refer to a valid field`}},
		{"trailing dot", `[{jsonPath: .spec.}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.": is an invalid path: unexpected end of JSON path`}},
		{"array notation", `[{jsonPath: ".spec['color']"}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec['color']": is an invalid path: array notation is not allowed`}},
		{"through a list", `[{jsonPath: .spec.tags.x}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.tags.x": is an invalid path: does not refer to a valid field`}},
		{"metadata", `[{jsonPath: .metadata.name}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".metadata.name": must not point to fields in metadata`}},
		{"a number", `[{jsonPath: .spec.weight}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.weight": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.`}},
		{"an object", `[{jsonPath: .spec.sleeves}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.sleeves": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.`}},
		{"int-or-string", `[{jsonPath: .spec.any}]`,
			[]string{p + `[0].jsonPath: Invalid value: ".spec.any": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.`}},
		{"duplicate", `[{jsonPath: .spec.color}, {jsonPath: .spec.color}]`,
			[]string{p + `[1].jsonPath: Duplicate value: ".spec.color"`}},
		{"too many", `[{jsonPath: .spec.color}, {jsonPath: .spec.size}, {jsonPath: .spec.used}, {jsonPath: .spec.made}, {jsonPath: .spec.sleeves.long},
			{jsonPath: .spec.labels.a}, {jsonPath: .spec.labels.b}, {jsonPath: .spec.labels.c}, {jsonPath: .spec.labels.d}]`,
			[]string{p + `: Too many: 9: must have at most 8 items`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := validateNew(toUnstructured(t, shirtCRD(t, c.fields)))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestSelectableFieldsWithoutSchema: selectableFields need a schema.
func TestSelectableFieldsWithoutSchema(t *testing.T) {
	crd := shirtCRD(t, `[{jsonPath: .spec.color}]`)
	crd.Spec.Versions[0].Schema = nil
	errs := validateSelectableFields(&crd.Spec.Versions[0], nil)
	if len(errs) != 1 || errs[0].Error() != "selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included" {
		t.Errorf("errors = %v", errs)
	}
}

// TestSelectableFieldsValues: the field set of an object, as upstream's
// GetAttrs gives it (values printed, "" when absent), and which fields
// each version accepts.
func TestSelectableFieldsValues(t *testing.T) {
	crd := shirtCRD(t, `[{jsonPath: .spec.color}, {jsonPath: .spec.size}, {jsonPath: .spec.used}]`)
	crd.Spec.Versions = append(crd.Spec.Versions, *crd.Spec.Versions[0].DeepCopy())
	crd.Spec.Versions[1].Name, crd.Spec.Versions[1].Storage = "v2", false
	crd.Spec.Versions[1].SelectableFields = crd.Spec.Versions[1].SelectableFields[:1]
	k := resourceKind(crd)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "s", "namespace": "default"},
		"spec":     map[string]any{"color": "red", "size": int64(3)},
	}}
	got := k.Fields(obj)
	want := map[string]string{"spec.color": "red", "spec.size": "3", "spec.used": ""}
	if len(got) != len(want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	for f, v := range want {
		if got[f] != v {
			t.Errorf("fields[%s] = %q, want %q", f, got[f], v)
		}
	}
	for _, c := range []struct {
		version, field string
		ok             bool
	}{
		{"v1", "spec.color", true}, {"v1", "spec.size", true}, {"v2", "spec.color", true},
		{"v2", "spec.size", false}, {"v1", "spec.weight", false},
		{"v1", "metadata.name", true}, {"v1", "metadata.namespace", true}, {"v1", "metadata.uid", false},
	} {
		if got := k.SupportsField(c.version, c.field); got != c.ok {
			t.Errorf("SupportsField(%s, %s) = %v, want %v", c.version, c.field, got, c.ok)
		}
	}
}
