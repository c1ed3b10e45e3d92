package cel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// schemaPath is where a CRD version's schema sits, as the CRD validation
// passes it to Compile.
var schemaPath = field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")

func mustSchema(t testing.TB, y string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var s apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(y), &s); err != nil {
		t.Fatalf("schema: %v", err)
	}
	return &s
}

func mustCompile(t testing.TB, y string) *Validator {
	t.Helper()
	v, errs := Compile(mustSchema(t, y), schemaPath)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs.ToAggregate())
	}
	return v
}

// obj decodes a JSON object with encoding/json: whole numbers arrive as
// float64, which toVal accepts for integer fields.
func obj(t testing.TB, j string) map[string]any {
	t.Helper()
	if j == "" {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(j))
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("object: %v", err)
	}
	return m
}

// errStrings renders errors as the API server puts them in a Status cause:
// "<field>: <message>".
func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkErrs(t *testing.T, got field.ErrorList, want []string) {
	t.Helper()
	g := errStrings(got)
	if len(g) != len(want) {
		t.Fatalf("errors:\n got  %q\n want %q", g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("error %d:\n got  %q\n want %q", i, g[i], want[i])
		}
	}
}

const widgetSchema = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas"
      message: minReplicas must not exceed maxReplicas
    - rule: "!has(self.labels) || has(self.tags)"
      message: tags are required with labels
      reason: FieldValueRequired
      fieldPath: ".tags"
    properties:
      name:
        type: string
        maxLength: 20
        x-kubernetes-validations:
        - rule: "self.startsWith('w-')"
          messageExpression: "'name ' + self + ' must start with w-'"
      minReplicas: {type: integer}
      maxReplicas:
        type: integer
        x-kubernetes-validations:
        - rule: "self <= 10"
      ports:
        type: array
        maxItems: 10
        items: {type: integer}
        x-kubernetes-validations:
        - rule: "self.isSorted()"
          message: ports must be sorted
        - rule: "self.sum() < 100000"
      labels:
        type: object
        maxProperties: 10
        additionalProperties: {type: string, maxLength: 63}
        x-kubernetes-validations:
        - rule: "self.all(k, k.matches('^[a-z]+$'))"
          message: label keys must be lower case letters
        - rule: "!('forbidden' in self)"
          reason: FieldValueForbidden
      tags:
        type: array
        maxItems: 5
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations:
          - rule: "self.size() > 0"
            message: tag must not be empty
`

func TestRules(t *testing.T) {
	v := mustCompile(t, widgetSchema)
	tests := []struct {
		name string
		obj  string
		want []string
	}{
		{name: "valid object passes", obj: `{"spec":{"name":"w-1","minReplicas":1,"maxReplicas":3,"ports":[80,443],"labels":{"app":"x"},"tags":["a"]}}`},
		{
			// Default message: "failed rule: <rule>" (ruleMessageOrDefault in
			// apiextensions-apiserver pkg/apiserver/schema/cel/validation.go).
			// A scalar's value is shown.
			name: "rule on a scalar",
			obj:  `{"spec":{"maxReplicas":11}}`,
			want: []string{`spec.maxReplicas: Invalid value: 11: failed rule: self <= 10`},
		},
		{
			// Objects and arrays omit the value (field.OmitValueType in
			// validateExpressions upstream).
			name: "rule on an object with message",
			obj:  `{"spec":{"minReplicas":5,"maxReplicas":3}}`,
			want: []string{`spec: Invalid value: minReplicas must not exceed maxReplicas`},
		},
		{
			// messageExpression replaces the message (evalMessageExpression upstream).
			name: "messageExpression",
			obj:  `{"spec":{"name":"x-1"}}`,
			want: []string{`spec.name: Invalid value: "x-1": name x-1 must start with w-`},
		},
		{
			name: "rules on a list use the list library",
			obj:  `{"spec":{"ports":[443,80]}}`,
			want: []string{`spec.ports: Invalid value: ports must be sorted`},
		},
		{
			name: "rule on list items is at the item's index",
			obj:  `{"spec":{"tags":["a",""]}}`,
			want: []string{`spec.tags[1]: Invalid value: "": tag must not be empty`},
		},
		{
			name: "rule on a map",
			obj:  `{"spec":{"labels":{"App":"x"},"tags":["a"]}}`,
			want: []string{`spec.labels: Invalid value: label keys must be lower case letters`},
		},
		{
			// reason FieldValueRequired gives field.Required, at the
			// fieldPath below the node (fieldErrorForReason upstream; a
			// property in fieldPath is a child, ValidFieldPath upstream).
			name: "fieldPath and reason",
			obj:  `{"spec":{"labels":{"app":"x"}}}`,
			want: []string{`spec.tags: Required value: tags are required with labels`},
		},
		{
			// reason FieldValueForbidden gives field.Forbidden.
			name: "reason forbidden",
			obj:  `{"spec":{"labels":{"forbidden":"x"},"tags":["a"]}}`,
			want: []string{`spec.labels: Forbidden: failed rule: !('forbidden' in self)`},
		},
		{
			// Nodes' own rules come before their children's; children in
			// property order.
			name: "several errors in a stable order",
			obj:  `{"spec":{"name":"bad","minReplicas":5,"maxReplicas":3,"ports":[2,1]}}`,
			want: []string{
				`spec: Invalid value: minReplicas must not exceed maxReplicas`,
				`spec.name: Invalid value: "bad": name bad must start with w-`,
				`spec.ports: Invalid value: ports must be sorted`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, v.Validate(context.Background(), obj(t, tc.obj), nil), tc.want)
		})
	}
}

const immutableSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      class:
        type: string
        x-kubernetes-validations:
        - rule: "self == oldSelf"
          message: Value is immutable
      items:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string}
            size:
              type: integer
              x-kubernetes-validations:
              - rule: "self >= oldSelf"
                message: size may only grow
      created:
        type: string
        x-kubernetes-validations:
        - rule: "!oldSelf.hasValue() || self == oldSelf.value()"
          optionalOldSelf: true
          message: created is set once
        - rule: "oldSelf.hasValue() || self == 'now'"
          optionalOldSelf: true
          message: created must be now on create
`

func TestTransitionRules(t *testing.T) {
	v := mustCompile(t, immutableSchema)
	tests := []struct {
		name     string
		obj, old string
		want     []string
	}{
		{
			// Transition rules are evaluated only when there is an old value
			// (validateExpressions upstream: UsesOldSelf && oldObj == nil).
			name: "do not run on create",
			obj:  `{"spec":{"class":"gold","items":[{"name":"a","size":1}],"created":"now"}}`,
		},
		{
			name: "immutability holds when unchanged",
			obj:  `{"spec":{"class":"gold"}}`,
			old:  `{"spec":{"class":"gold"}}`,
		},
		{
			name: "immutability refuses a change",
			obj:  `{"spec":{"class":"silver"}}`,
			old:  `{"spec":{"class":"gold"}}`,
			want: []string{`spec.class: Invalid value: "silver": Value is immutable`},
		},
		{
			name: "do not run when the field is new on update",
			obj:  `{"spec":{"class":"silver"}}`,
			old:  `{"spec":{}}`,
		},
		{
			// Items of x-kubernetes-list-type=map lists pair by key, whatever
			// their order.
			name: "map list items correlate by key",
			obj:  `{"spec":{"items":[{"name":"b","size":1},{"name":"a","size":1}]}}`,
			old:  `{"spec":{"items":[{"name":"a","size":2},{"name":"b","size":1}]}}`,
			want: []string{`spec.items[1].size: Invalid value: 1: size may only grow`},
		},
		{
			name: "new map list items have no old value",
			obj:  `{"spec":{"items":[{"name":"c","size":0}]}}`,
			old:  `{"spec":{"items":[{"name":"a","size":2}]}}`,
		},
		{
			// optionalOldSelf rules run on create with oldSelf = none.
			name: "optionalOldSelf runs on create",
			obj:  `{"spec":{"created":"later"}}`,
			want: []string{`spec.created: Invalid value: "later": created must be now on create`},
		},
		{
			name: "optionalOldSelf sees the old value on update",
			obj:  `{"spec":{"created":"later"}}`,
			old:  `{"spec":{"created":"now"}}`,
			want: []string{`spec.created: Invalid value: "later": created is set once`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, v.Validate(context.Background(), obj(t, tc.obj), obj(t, tc.old)), tc.want)
		})
	}
}

func TestRootSeesTypeAndObjectMeta(t *testing.T) {
	// apiVersion, kind, metadata.name and metadata.generateName are visible
	// at the resource root even when the schema leaves them out
	// (WithTypeAndObjectMeta upstream).
	v := mustCompile(t, `
type: object
x-kubernetes-validations:
- rule: "self.metadata.name.startsWith('w-') && self.kind == 'Widget'"
properties:
  spec: {type: object}
`)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"kind":"Widget","metadata":{"name":"w-1","uid":"x"}}`), nil), nil)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"kind":"Widget","metadata":{"name":"x"}}`), nil),
		[]string{`<nil>: Invalid value: failed rule: self.metadata.name.startsWith('w-') && self.kind == 'Widget'`})
}

func TestLibraries(t *testing.T) {
	v := mustCompile(t, `
type: object
properties:
  s:
    type: string
    maxLength: 64
    x-kubernetes-validations:
    - rule: "self.find('[0-9]+') == '42'"
    - rule: "self.findAll('[a-z]').size() == 3"
    - rule: "self.split('-').size() == 2 && self.lowerAscii() == self"
    - rule: "optional.of(self).orValue('') == self"
  l:
    type: array
    maxItems: 4
    items: {type: integer}
    x-kubernetes-validations:
    - rule: "self.min() == 1 && self.max() == 3 && self.indexOf(2) == 1 && self.lastIndexOf(9) == -1"
    - rule: "self.exists_one(x, x == 2) && self.map(x, x * 2).filter(x, x > 2).size() == 2"
    - rule: "sets.contains(self, [1]) && self.all(i, x, i >= 0)"
`)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"s":"abc-42","l":[1,2,3]}`), nil), nil)
}

func TestIntOrString(t *testing.T) {
	v := mustCompile(t, `
type: object
properties:
  port:
    x-kubernetes-int-or-string: true
    x-kubernetes-validations:
    - rule: "type(self) == int ? self > 0 : self.matches('^[a-z]+$')"
`)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"port":8080}`), nil), nil)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"port":"http"}`), nil), nil)
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"port":"HTTP"}`), nil),
		[]string{`port: Invalid value: "HTTP": failed rule: type(self) == int ? self > 0 : self.matches('^[a-z]+$')`})
}

func TestNilValidator(t *testing.T) {
	v, errs := Compile(mustSchema(t, `{type: object, properties: {spec: {type: object}}}`), schemaPath)
	if v != nil || errs != nil {
		t.Fatalf("schema without rules: got %v, %v", v, errs)
	}
	if errs := v.Validate(context.Background(), map[string]any{"spec": map[string]any{}}, nil); errs != nil {
		t.Fatalf("nil Validator: %v", errs)
	}
}
