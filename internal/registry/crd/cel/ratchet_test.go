package cel

import (
	"context"
	"testing"
)

// ratchetSchema has rules at every kind of place a value can be
// correlated with its old value, or not: an object field, a map value, an
// item of a list-type=map list (by key), an item of an atomic list and of a
// set (never), and a transition rule, which never ratchets.
const ratchetSchema = `
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
    - rule: "!has(self.min) || !has(self.max) || self.min <= self.max"
      message: min must not exceed max
    properties:
      min: {type: integer}
      max: {type: integer}
      name:
        type: string
        maxLength: 20
        x-kubernetes-validations:
        - rule: "self.startsWith('w-')"
          message: name must start with w-
      owner:
        type: string
        maxLength: 20
        x-kubernetes-validations:
        - rule: "self == oldSelf"
          message: owner is immutable
        - rule: "self.size() > 3"
          message: owner is too short
      labels:
        type: object
        maxProperties: 10
        additionalProperties:
          type: string
          maxLength: 20
          x-kubernetes-validations:
          - rule: "self != 'bad'"
            message: label value is bad
      ports:
        type: array
        maxItems: 10
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          required: [name]
          properties:
            name: {type: string, maxLength: 10}
            port:
              type: integer
              x-kubernetes-validations:
              - rule: "self > 0"
                message: port must be positive
      tags:
        type: array
        maxItems: 10
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations:
          - rule: "self.size() > 1"
            message: tag is too short
      set:
        type: array
        maxItems: 10
        x-kubernetes-list-type: set
        items:
          type: string
          maxLength: 10
          x-kubernetes-validations:
          - rule: "self != 'x'"
            message: x is not allowed
      blob:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          kind: {type: string, maxLength: 10}
        x-kubernetes-validations:
        - rule: "!has(self.kind) || self.kind != 'bad'"
          message: blob must not be bad
`

// TestRatcheting checks CEL validation ratcheting (CRDValidationRatcheting,
// GA): apiextensions-apiserver schema/cel/validation.go ratchetingOptions,
// with apiserver cel/common/equality.go CorrelatedObject deciding what
// correlates and what is unchanged.
func TestRatcheting(t *testing.T) {
	v := mustCompile(t, ratchetSchema)
	tests := []struct {
		name     string
		obj, old string
		want     []string
	}{{
		name: "create reports everything",
		obj:  `{"spec":{"name":"x","labels":{"a":"bad"}}}`,
		want: []string{
			`spec.labels[a]: Invalid value: "bad": label value is bad`,
			`spec.name: Invalid value: "x": name must start with w-`,
		},
	}, {
		name: "unchanged invalid field is let through",
		obj:  `{"spec":{"name":"x","min":1}}`,
		old:  `{"spec":{"name":"x","min":2}}`,
	}, {
		name: "changed invalid field is reported",
		obj:  `{"spec":{"name":"y"}}`,
		old:  `{"spec":{"name":"x"}}`,
		want: []string{`spec.name: Invalid value: "y": name must start with w-`},
	}, {
		name: "invalid field new on update is reported",
		obj:  `{"spec":{"name":"y"}}`,
		old:  `{"spec":{}}`,
		want: []string{`spec.name: Invalid value: "y": name must start with w-`},
	}, {
		// A rule on an object ratchets only if the whole object is unchanged.
		name: "object rule reported when a sibling field changes",
		obj:  `{"spec":{"min":5,"max":1,"name":"w-a"}}`,
		old:  `{"spec":{"min":5,"max":1,"name":"w-b"}}`,
		want: []string{`spec: Invalid value: min must not exceed max`},
	}, {
		name: "object rule let through when the object is unchanged",
		obj:  `{"spec":{"min":5,"max":1}}`,
		old:  `{"spec":{"min":5,"max":1}}`,
	}, {
		name: "map values correlate by key",
		obj:  `{"spec":{"labels":{"a":"bad","b":"bad"}}}`,
		old:  `{"spec":{"labels":{"a":"bad"}}}`,
		want: []string{`spec.labels[b]: Invalid value: "bad": label value is bad`},
	}, {
		name: "map list items correlate by key, whatever their order",
		obj:  `{"spec":{"ports":[{"name":"new","port":0},{"name":"old","port":0}]}}`,
		old:  `{"spec":{"ports":[{"name":"old","port":0}]}}`,
		want: []string{`spec.ports[0].port: Invalid value: 0: port must be positive`},
	}, {
		// Items of an atomic list have no old value of their own: they
		// ratchet with the list, only if the whole list is unchanged.
		name: "atomic list items ratchet only with an unchanged list",
		obj:  `{"spec":{"tags":["a","ok"]}}`,
		old:  `{"spec":{"tags":["a","ok"]}}`,
	}, {
		name: "atomic list items reported when the list changes",
		obj:  `{"spec":{"tags":["a","ok","b"]}}`,
		old:  `{"spec":{"tags":["a","ok"]}}`,
		want: []string{
			`spec.tags[0]: Invalid value: "a": tag is too short`,
			`spec.tags[2]: Invalid value: "b": tag is too short`,
		},
	}, {
		name: "set items do not correlate",
		obj:  `{"spec":{"set":["x","y"]}}`,
		old:  `{"spec":{"set":["x"]}}`,
		want: []string{`spec.set[0]: Invalid value: "x": x is not allowed`},
	}, {
		name: "unchanged set is let through",
		obj:  `{"spec":{"set":["x"]}}`,
		old:  `{"spec":{"set":["x"]}}`,
	}, {
		// Rules using oldSelf never ratchet; the other rules of the same
		// field still do.
		name: "transition rules are not ratcheted",
		obj:  `{"spec":{"owner":"bob"}}`,
		old:  `{"spec":{"owner":"bob"}}`,
	}, {
		name: "transition rule reported on change, other rule too",
		obj:  `{"spec":{"owner":"al"}}`,
		old:  `{"spec":{"owner":"bob"}}`,
		want: []string{
			`spec.owner: Invalid value: "al": owner is immutable`,
			`spec.owner: Invalid value: "al": owner is too short`,
		},
	}, {
		// Fields the schema does not describe never count as unchanged, so a
		// rule on a preserve-unknown-fields object with such fields is
		// always reported.
		name: "unknown fields never compare equal",
		obj:  `{"spec":{"blob":{"kind":"bad","extra":1}}}`,
		old:  `{"spec":{"blob":{"kind":"bad","extra":1}}}`,
		want: []string{`spec.blob: Invalid value: blob must not be bad`},
	}, {
		name: "described fields do",
		obj:  `{"spec":{"blob":{"kind":"bad"}}}`,
		old:  `{"spec":{"blob":{"kind":"bad"}}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkErrs(t, v.Validate(context.Background(), obj(t, tc.obj), obj(t, tc.old)), tc.want)
		})
	}
}

// TestRatchetingRootRule: a rule on the root ratchets only if the whole
// object is unchanged, which the metadata the schema does not describe
// prevents.
func TestRatchetingRootRule(t *testing.T) {
	v := mustCompile(t, `
type: object
x-kubernetes-validations:
- rule: "self.spec.a < 10"
  message: a is too big
properties:
  spec:
    type: object
    properties:
      a: {type: integer}
`)
	// The root correlates with the old root; it is unchanged only if every
	// field is, and metadata (not in the schema) never is.
	got := v.Validate(context.Background(),
		obj(t, `{"metadata":{"name":"w"},"spec":{"a":20}}`),
		obj(t, `{"metadata":{"name":"w"},"spec":{"a":20}}`))
	checkErrs(t, got, []string{`<nil>: Invalid value: a is too big`})
	// Without metadata the roots are equal and the failure ratchets.
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"spec":{"a":20}}`), obj(t, `{"spec":{"a":20}}`)), nil)
}
