package schema

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Expected answers come from kubernetes/kubernetes
// staging/src/k8s.io/apiextensions-apiserver:
//   - [structural]: pkg/apiserver/schema/validation.go (ValidateStructural,
//     its errors sorted by text) and complete.go;
//   - [defaults]: pkg/apiserver/schema/defaulting/validation.go
//     (ValidateDefaults: the default validated by a validator rooted at
//     the default itself, hence the empty name before "in body");
//   - [crd]: pkg/apis/apiextensions/validation/validation.go
//     (ValidateCustomResourceDefinitionOpenAPISchema, validateMapListKeysMapSet,
//     specStandardValidatorV3.validate, the root nullable check).
func TestValidateCRD(t *testing.T) {
	const p = "spec.versions[0].schema.openAPIV3Schema"
	for _, c := range []struct {
		name   string
		schema string
		want   []string
	}{
		{"field without type [structural]",
			`{type: object, properties: {spec: {type: object, properties: {foo: {}}}}}`,
			[]string{p + ".properties[spec].properties[foo].type: Required value: must not be empty for specified object fields"}},
		{"root without type [structural]",
			`{properties: {spec: {type: object}}}`,
			[]string{p + ".type: Required value: must not be empty at the root"}},
		{"items without type [structural]",
			`{type: object, properties: {l: {type: array, items: {}}}}`,
			[]string{p + ".properties[l].items.type: Required value: must not be empty for specified array items"}},
		{"array without items [structural]",
			`{type: object, properties: {l: {type: array}}}`,
			[]string{p + ".properties[l].items: Required value: must be specified"}},
		{"additionalProperties with properties [crd]",
			`{type: object, properties: {spec: {type: object, properties: {a: {type: string}}, additionalProperties: {type: string}}}}`,
			[]string{p + ".properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"}},
		{"additionalProperties at the root [structural]",
			`{type: object, additionalProperties: {type: string}}`,
			[]string{p + ".additionalProperties: Forbidden: must not be used at the root"}},
		{"metadata restricting labels [structural]",
			`{type: object, properties: {metadata: {type: object, properties: {labels: {type: object, additionalProperties: {type: string}}}}}}`,
			[]string{p + ".properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"}},
		{"metadata with a description [structural]",
			`{type: object, properties: {metadata: {type: object, description: meta}}}`,
			[]string{p + ".properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"}},
		{"metadata restricting name is fine",
			`{type: object, properties: {metadata: {type: object, properties: {name: {type: string, maxLength: 5}, generateName: {type: string}}}}}`,
			nil},
		{"default of the wrong type [defaults]",
			`{type: object, properties: {spec: {type: object, properties: {replicas: {type: integer, default: "x"}}}}}`,
			[]string{p + `.properties[spec].properties[replicas].default: Invalid value: "string":  in body must be of type integer: "string"`}},
		{"default outside the enum [defaults]",
			`{type: object, properties: {spec: {type: object, properties: {tier: {type: string, enum: [a, b], default: c}}}}}`,
			[]string{p + `.properties[spec].properties[tier].default: Unsupported value: "c": supported values: "a", "b"`}},
		{"default with unknown fields [defaults]",
			`{type: object, properties: {spec: {type: object, default: {a: 1}, properties: {b: {type: integer}}}}}`,
			[]string{p + `.properties[spec].default: Invalid value: {"a":1}: must not have unknown fields`}},
		{"embedded default without apiVersion [defaults]",
			`{type: object, properties: {spec: {type: object, properties: {t: {type: object, x-kubernetes-embedded-resource: true, properties: {kind: {type: string}, s: {type: string}}, default: {kind: K, s: x}}}}}}`,
			[]string{p + ".properties[spec].properties[t].default.apiVersion: Required value"}},
		{"embedded default with a kind that is not a string [defaults]",
			`{type: object, properties: {spec: {type: object, properties: {t: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true, default: {apiVersion: v1, kind: 5}}}}}}`,
			[]string{p + ".properties[spec].properties[t].default.kind: Invalid value: 5: must be a string"}},
		{"default in top-level metadata [crd]",
			`{type: object, properties: {metadata: {type: object, properties: {name: {type: string, default: x}}}}}`,
			[]string{p + ".properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"}},
		{"type and description inside anyOf [structural]",
			`{type: object, properties: {spec: {type: object, properties: {num: {type: integer, anyOf: [{type: integer, description: d}, {minimum: 1}]}}}}}`,
			[]string{
				p + ".properties[spec].properties[num].anyOf[0].description: Forbidden: must be empty to be structural",
				p + ".properties[spec].properties[num].anyOf[0].type: Forbidden: must be empty to be structural",
			}},
		// CRDs are checked with AllowNestedXValidations false
		// (ValidateStructural): rules are refused under every junctor, the
		// other extensions too, and defaults.
		{"rule inside allOf [structural]",
			`{type: object, properties: {spec: {type: object, properties: {a: {type: integer}}, allOf: [{x-kubernetes-validations: [{rule: "self.a > 0"}]}]}}}`,
			[]string{p + ".properties[spec].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural"}},
		{"rules inside anyOf, oneOf and not [structural]",
			`{type: object, properties: {spec: {type: object, properties: {a: {type: integer}}, anyOf: [{x-kubernetes-validations: [{rule: "true"}]}], oneOf: [{x-kubernetes-validations: [{rule: "true"}]}], not: {x-kubernetes-validations: [{rule: "false"}]}}}}`,
			[]string{
				p + ".properties[spec].anyOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural",
				p + ".properties[spec].not.x-kubernetes-validations: Forbidden: must be empty to be structural",
				p + ".properties[spec].oneOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural",
			}},
		{"rule in a property inside allOf [structural]",
			`{type: object, properties: {spec: {type: object, properties: {a: {type: integer}}, allOf: [{properties: {a: {x-kubernetes-validations: [{rule: "self > 0"}]}}}]}}}`,
			[]string{p + ".properties[spec].allOf[0].properties[a].x-kubernetes-validations: Forbidden: must be empty to be structural"}},
		{"extensions and default inside allOf [structural]",
			`{type: object, properties: {spec: {type: object, properties: {l: {type: array, items: {type: string}}}, allOf: [{default: {}, nullable: true, x-kubernetes-preserve-unknown-fields: true, x-kubernetes-embedded-resource: true, x-kubernetes-int-or-string: true, x-kubernetes-map-type: atomic, properties: {l: {x-kubernetes-list-type: set, x-kubernetes-list-map-keys: [k]}}}]}}}`,
			[]string{
				p + ".properties[spec].allOf[0].default: Forbidden: must be undefined to be structural",
				p + ".properties[spec].allOf[0].nullable: Forbidden: must be false to be structural",
				p + ".properties[spec].allOf[0].properties[l].x-kubernetes-list-map-keys: Forbidden: must be empty to be structural",
				p + ".properties[spec].allOf[0].properties[l].x-kubernetes-list-type: Forbidden: must be undefined to be structural",
				p + ".properties[spec].allOf[0].x-kubernetes-embedded-resource: Forbidden: must be false to be structural",
				p + ".properties[spec].allOf[0].x-kubernetes-int-or-string: Forbidden: must be false to be structural",
				p + ".properties[spec].allOf[0].x-kubernetes-map-type: Forbidden: must be undefined to be structural",
				p + ".properties[spec].allOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
				// [crd]: the extension checks run inside junctors too.
				p + ".properties[spec].allOf[0].properties[l].type: Required value: must be array if x-kubernetes-list-type is specified",
				p + `.properties[spec].allOf[0].properties[l].x-kubernetes-list-type: Invalid value: "set": must be map if x-kubernetes-list-map-keys is non-empty`,
				p + ".properties[spec].allOf[0].type: Required value: must be object if x-kubernetes-map-type is specified",
			}},
		{"int-or-string anyOf is allowed",
			`{type: object, properties: {spec: {type: object, properties: {port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}}}}}`,
			nil},
		{"field defined only in allOf [structural, complete.go]",
			`{type: object, properties: {spec: {type: object}}, allOf: [{properties: {ghost: {maxLength: 3}}}]}`,
			[]string{p + ".properties[ghost]: Required value: because it is defined in " + p + ".allOf[0].properties[ghost]"}},
		{"list-type map without keys [crd]",
			`{type: object, properties: {l: {type: array, items: {type: object, properties: {k: {type: string}}}, x-kubernetes-list-type: map}}}`,
			[]string{p + ".properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"}},
		{"list map key neither required nor defaulted [crd]",
			`{type: object, properties: {l: {type: array, items: {type: object, properties: {k: {type: string}}}, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [k]}}}`,
			[]string{p + ".properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"}},
		{"list map key not an item property [crd]",
			`{type: object, properties: {l: {type: array, items: {type: object, properties: {k: {type: string}}}, x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [z]}}}`,
			[]string{p + `.properties[l].x-kubernetes-list-map-keys: Invalid value: ["z"]: entries must all be names of item properties`}},
		{"list-map-keys without list-type map [crd]",
			`{type: object, properties: {l: {type: array, items: {type: string}, x-kubernetes-list-type: set, x-kubernetes-list-map-keys: [k]}}}`,
			[]string{p + `.properties[l].x-kubernetes-list-type: Invalid value: "set": must be map if x-kubernetes-list-map-keys is non-empty`}},
		{"set of granular objects [crd]",
			`{type: object, properties: {l: {type: array, items: {type: object}, x-kubernetes-list-type: set}}}`,
			[]string{p + ".properties[l].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"}},
		{"unknown list type [crd]",
			`{type: object, properties: {l: {type: array, items: {type: string}, x-kubernetes-list-type: bag}}}`,
			[]string{p + `.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map"`}},
		{"embedded resource of type string [structural]",
			`{type: object, properties: {spec: {type: object, properties: {e: {type: string, x-kubernetes-embedded-resource: true}}}}}`,
			[]string{
				p + ".properties[spec].properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
				p + `.properties[spec].properties[e].type: Invalid value: "string": must be object if x-kubernetes-embedded-resource is true`,
			}},
		{"int-or-string with preserve-unknown-fields [structural]",
			`{type: object, properties: {spec: {type: object, properties: {x: {x-kubernetes-int-or-string: true, x-kubernetes-preserve-unknown-fields: true}}}}}`,
			[]string{p + ".properties[spec].properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"}},
		{"uniqueItems [crd]",
			`{type: object, properties: {u: {type: array, uniqueItems: true, items: {type: string}}}}`,
			[]string{p + ".properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"}},
		{"nullable root [crd]",
			`{type: object, nullable: true}`,
			[]string{p + ".nullable: Forbidden: nullable cannot be true at the root"}},
		{"preserve-unknown-fields false [crd]",
			`{type: object, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: false}}}`,
			[]string{p + ".properties[spec].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"}},
		{"items as a list [crd]",
			`{type: object, properties: {spec: {type: array, items: [{type: string}]}}}`,
			[]string{p + ".properties[spec].items: Forbidden: items must be a schema object and not an array"}},
		{"$ref [crd]",
			`{type: object, properties: {spec: {$ref: "#/definitions/x"}}}`,
			[]string{p + ".properties[spec].$ref: Forbidden: $ref is not supported"}},
		{"bad pattern [structural]",
			`{type: object, properties: {spec: {type: string, pattern: "(("}}}`,
			[]string{p + ".properties[spec].pattern: Invalid value: \"((\": must be a valid regular expression, but isn't: error parsing regexp: missing closing ): `((`"}},
		{"unknown type [crd]",
			`{type: object, properties: {spec: {type: strin}}}`,
			[]string{p + `.properties[spec].type: Unsupported value: "strin": supported values: "array", "boolean", "integer", "number", "object", "string"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := errorStrings(ValidateCRD(schemaFromYAML(t, c.schema), field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestValidateCRDAcceptsControllerGenSchema(t *testing.T) {
	if errs := ValidateCRD(widgetSchema(t), field.NewPath("spec", "versions").Index(0).Child("schema", "openAPIV3Schema")); len(errs) > 0 {
		t.Fatalf("widget schema refused: %q", errorStrings(errs))
	}
}
