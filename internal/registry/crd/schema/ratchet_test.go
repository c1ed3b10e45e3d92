package schema

import (
	"context"
	"reflect"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Expected answers: kubernetes/kubernetes staging/src/k8s.io/
// apiextensions-apiserver pkg/apiserver/validation/ratcheting.go (an
// error in a value deep-equal to its correlated old value becomes a
// warning), k8s.io/apiserver pkg/cel/common/equality.go (fields
// correlate by name, list-type=map items by key, other list items not
// at all), pkg/registry/customresource/strategy.go ValidateUpdate (list
// set/map checks skipped when the old object fails them) and KEP-4008
// https://github.com/kubernetes/enhancements/tree/master/keps/sig-api-machinery/4008-crd-ratcheting
func TestValidateRatchets(t *testing.T) {
	for _, c := range []struct {
		name, old, new string
		want           []string
	}{
		{"unchanged invalid field allowed",
			`{spec: {image: abc, replicas: 11}}`,
			`{spec: {image: abcd, replicas: 11}}`,
			nil},
		{"changed invalid field refused",
			`{spec: {image: abc, replicas: 11}}`,
			`{spec: {image: abc, replicas: 12}}`,
			[]string{"spec.replicas: Invalid value: 12: spec.replicas in body should be less than or equal to 10"}},
		{"newly invalid field refused",
			`{spec: {image: abc}}`,
			`{spec: {image: abc, tier: gpu}}`,
			[]string{`spec.tier: Unsupported value: "gpu": supported values: "frontend", "backend", "cache"`}},
		{"map list item correlated by key across reordering",
			`{spec: {image: abc, ports: [{name: a, port: 70000}, {name: b, port: 2}]}}`,
			`{spec: {image: abc, ports: [{name: b, port: 3}, {name: a, port: 70000}]}}`,
			nil},
		{"map list item changed refused",
			`{spec: {image: abc, ports: [{name: a, port: 70000}]}}`,
			`{spec: {image: abc, ports: [{name: a, port: 70001}]}}`,
			[]string{"spec.ports[0].port: Invalid value: 70001: spec.ports[0].port in body should be less than or equal to 65535"}},
		{"atomic list items do not correlate",
			`{spec: {image: abc, tags: [abcdefghijkl]}}`,
			`{spec: {image: abc, tags: [abcdefghijkl, b]}}`,
			[]string{"spec.tags[0]: Too long: may not be more than 10 bytes"}},
		{"unchanged missing required field allowed",
			`{spec: {replicas: 1}}`,
			`{spec: {replicas: 1}, status: {phase: Running}}`,
			nil},
		{"duplicates kept when old had them",
			`{spec: {image: abc, tags: [a, a]}}`,
			`{spec: {image: abc, tags: [a, a, b]}}`,
			nil},
		{"duplicates refused when old had none",
			`{spec: {image: abc, tags: [a]}}`,
			`{spec: {image: abc, tags: [a, a]}}`,
			[]string{`spec.tags[1]: Duplicate value: "a"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := errorStrings(widget(t).Validate(context.Background(), parse(t, c.new), parse(t, c.old)))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// kube-openapi validates allOf, anyOf and oneOf branches without the
// ratchet's hooks (upstream's too: SchemaValidatorOptions.Options passes
// none on), so an error inside a branch does not ratchet on its own; the
// value that holds the anyOf ratchets as a whole. Here limits breaks the
// first branch and mode is missing for the second: the update is refused
// unless spec, which holds the anyOf, is unchanged.
func TestRatchetAnyOfRatchetsAsAWhole(t *testing.T) {
	s, err := New(&apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"mode": {Type: "string"},
					"note": {Type: "string"},
					"limits": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"cpu":    {Type: "integer"},
						"memory": {Type: "integer"},
					}},
				},
				AnyOf: []apiextensionsv1.JSONSchemaProps{
					{Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"limits": {Properties: map[string]apiextensionsv1.JSONSchemaProps{"cpu": {Maximum: ptr(4.0)}}},
					}},
					{Required: []string{"mode"}},
				},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	old := `{spec: {note: a, limits: {cpu: 8, memory: 1}}}`
	for _, c := range []struct {
		name, new string
		valid     bool
	}{
		{"spec unchanged", `{spec: {note: a, limits: {cpu: 8, memory: 1}}, status: {x: 1}}`, true},
		{"limits unchanged, spec changed", `{spec: {note: b, limits: {cpu: 8, memory: 1}}}`, false},
		{"limits changed", `{spec: {note: a, limits: {cpu: 8, memory: 2}}}`, false},
		{"mode set", `{spec: {note: b, mode: m, limits: {cpu: 8, memory: 1}}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := s.Validate(context.Background(), parse(t, c.new), parse(t, old))
			if valid := len(errs) == 0; valid != c.valid {
				t.Errorf("errors %q; want valid %v", errorStrings(errs), c.valid)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An update through /status is checked as kube-apiserver v1.37.2's
// status strategy checked the same patches: the status alone, by the
// status property's schema, so a message names the path from the status
// while the field is from the root; ratcheting against the old status;
// the spec not at all. Expected answers: the messages a kube-apiserver
// gave for these statuses (kubectl patch --subresource=status).
func TestValidateStatus(t *testing.T) {
	s, err := New(schemaFromYAML(t, `
type: object
properties:
  spec:
    type: object
    required: [size]
    properties:
      size: {type: integer, minimum: 1}
  status:
    type: object
    properties:
      ready: {type: boolean}
      sub:
        type: object
        properties:
          m: {type: string, maxLength: 2, pattern: "^a"}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, old, new string
		want           []string
	}{
		{"a field of the wrong type", `{spec: {size: 1}}`, `{spec: {size: 1}, status: {ready: "no"}}`,
			[]string{`status.ready: Invalid value: "string": ready in body must be of type boolean: "string"`}},
		{"the status of the wrong type", `{spec: {size: 1}}`, `{spec: {size: 1}, status: x}`,
			[]string{`status: Invalid value: "string":  in body must be of type object: "string"`}},
		{"a nested field", `{spec: {size: 1}}`, `{spec: {size: 1}, status: {sub: {m: b}}}`,
			[]string{`status.sub.m: Invalid value: "b": sub.m in body should match '^a'`}},
		{"an invalid spec is not the status's business", `{spec: {size: 0}}`, `{spec: {size: 0}, status: {ready: true}}`, nil},
		{"an unchanged invalid status ratchets", `{status: {sub: {m: b}}}`, `{status: {sub: {m: b}, ready: true}}`, nil},
		{"no status", `{}`, `{spec: {}}`, nil},
	} {
		got := errorStrings(s.ValidateStatus(context.Background(), parse(t, c.new), parse(t, c.old)))
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	// The same statuses through the main resource: paths from the root.
	got := errorStrings(s.Validate(context.Background(), parse(t, `{spec: {size: 1}, status: {ready: "no"}}`), nil))
	if want := []string{`status.ready: Invalid value: "string": status.ready in body must be of type boolean: "string"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("through the resource:\n got %q\nwant %q", got, want)
	}
}
