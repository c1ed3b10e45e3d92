package schema

import (
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fieldErr is one expected cause of a 422: path, type and the whole
// message as kube-apiserver prints it (field.Error.Error()).
type fieldErr struct {
	path string
	typ  field.ErrorType
	msg  string
}

// Where the expected answers come from (kubernetes/kubernetes,
// staging/src/k8s.io/apiextensions-apiserver unless noted):
//
//   - [openapi]: pkg/apiserver/validation/validation.go
//     kubeOpenAPIResultToFieldErrors, which turns kube-openapi's
//     validate.Result into field errors (Required, NotSupported for enum,
//     TooLong, TooMany for maxItems and maxProperties, TypeInvalid for
//     type and format errors (printed "Invalid value"), and
//     Invalid carrying the library's message for everything else, at
//     fldPath "<nil>" when the library error has no name); the texts are
//     those of k8s.io/kube-openapi/pkg/validation/errors/schema.go
//     (e.g. "%s in %s should be less than or equal to %v").
//   - [listtype]: pkg/apiserver/schema/listtype/validation.go
//     (field.Duplicate at the index of the repeat, the key fields as the
//     value for list-type=map; "must be an object for an array of
//     list-type map").
//   - [objectmeta]: pkg/apiserver/schema/objectmeta/validation.go
//     validateEmbeddedResource (apiVersion and kind required, "may have
//     mixed case, but should otherwise match: ", ParseGroupVersion's
//     error, metadata through ValidateObjectMeta with path-segment names).
//   - Docs: https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation
var invalidWidgets = []struct {
	name string
	obj  string
	want []fieldErr
}{
	// [openapi] type
	{"replicas is a string", `{spec: {image: abc, replicas: "3"}}`, []fieldErr{
		{"spec.replicas", field.ErrorTypeTypeInvalid, `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`}}},
	// [openapi] maximum
	{"replicas above maximum", `{spec: {image: abc, replicas: 11}}`, []fieldErr{
		{"spec.replicas", field.ErrorTypeInvalid, `spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`}}},
	// [openapi] minimum
	{"replicas below minimum", `{spec: {image: abc, replicas: -1}}`, []fieldErr{
		{"spec.replicas", field.ErrorTypeInvalid, `spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`}}},
	// [openapi] format int32 is checked by the type validator; its error
	// is not a named Validation error, hence "<nil>".
	{"replicas overflows int32", `{spec: {image: abc, replicas: 3000000000}}`, []fieldErr{
		{"<nil>", field.ErrorTypeInvalid, `<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.replicas`},
		{"spec.replicas", field.ErrorTypeInvalid, `spec.replicas: Invalid value: 3000000000: spec.replicas in body should be less than or equal to 10`}}},
	// [openapi] a fraction for an int32
	{"replicas is a fraction", `{spec: {image: abc, replicas: 1.5}}`, []fieldErr{
		{"spec.replicas", field.ErrorTypeTypeInvalid, `spec.replicas: Invalid value: "float64": spec.replicas in body must be of type int32: "float64"`},
		{"<nil>", field.ErrorTypeInvalid, `<nil>: Invalid value: "": Checked value must be of type integer with format int32 in spec.replicas`}}},
	// [openapi] enum → NotSupported
	{"tier not in enum", `{spec: {image: abc, tier: gpu}}`, []fieldErr{
		{"spec.tier", field.ErrorTypeNotSupported, `spec.tier: Unsupported value: "gpu": supported values: "frontend", "backend", "cache"`}}},
	// [openapi] type and enum both fail
	{"tier is a number", `{spec: {image: abc, tier: 5}}`, []fieldErr{
		{"spec.tier", field.ErrorTypeTypeInvalid, `spec.tier: Invalid value: "integer": spec.tier in body must be of type string: "integer"`},
		{"spec.tier", field.ErrorTypeNotSupported, `spec.tier: Unsupported value: 5: supported values: "frontend", "backend", "cache"`}}},
	// [openapi] required → Required with no detail
	{"image missing", `{spec: {replicas: 1}}`, []fieldErr{
		{"spec.image", field.ErrorTypeRequired, `spec.image: Required value`}}},
	// [openapi] pattern
	{"image breaks pattern", `{spec: {image: "Nginx"}}`, []fieldErr{
		{"spec.image", field.ErrorTypeInvalid, `spec.image: Invalid value: "Nginx": spec.image in body should match '^[a-z0-9./:-]+$'`}}},
	// [openapi] minLength
	{"image too short", `{spec: {image: ab}}`, []fieldErr{
		{"spec.image", field.ErrorTypeInvalid, `spec.image: Invalid value: "ab": spec.image in body should be at least 3 chars long`}}},
	// [openapi] maxLength → TooLong
	{"image too long", `{spec: {image: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}}`, []fieldErr{
		{"spec.image", field.ErrorTypeTooLong, `spec.image: Too long: may not be more than 64 bytes`}}},
	// [openapi] exclusiveMaximum
	{"ratio at exclusive maximum", `{spec: {image: abc, ratio: 1}}`, []fieldErr{
		{"spec.ratio", field.ErrorTypeInvalid, `spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1`}}},
	// [openapi] minimum on a number
	{"ratio negative", `{spec: {image: abc, ratio: -0.5}}`, []fieldErr{
		{"spec.ratio", field.ErrorTypeInvalid, `spec.ratio: Invalid value: -0.5: spec.ratio in body should be greater than or equal to 0`}}},
	// [openapi] multipleOf
	{"batch not a multiple", `{spec: {image: abc, batch: 7}}`, []fieldErr{
		{"spec.batch", field.ErrorTypeInvalid, `spec.batch: Invalid value: 7: spec.batch in body should be a multiple of 5`}}},
	// [openapi] exclusiveMinimum
	{"batch at exclusive minimum", `{spec: {image: abc, batch: 0}}`, []fieldErr{
		{"spec.batch", field.ErrorTypeInvalid, `spec.batch: Invalid value: 0: spec.batch in body should be greater than 0`}}},
	// [openapi] format email (a supported format, apiserver/validation/formats.go)
	{"email malformed", `{spec: {image: abc, email: nobody}}`, []fieldErr{
		{"spec.email", field.ErrorTypeTypeInvalid, `spec.email: Invalid value: "nobody": spec.email in body must be of type email: "nobody"`}}},
	// [openapi] boolean
	{"paused is a string", `{spec: {image: abc, paused: "yes"}}`, []fieldErr{
		{"spec.paused", field.ErrorTypeTypeInvalid, `spec.paused: Invalid value: "string": spec.paused in body must be of type boolean: "string"`}}},
	// [openapi] array type
	{"ports not a list", `{spec: {image: abc, ports: http}}`, []fieldErr{
		{"spec.ports", field.ErrorTypeTypeInvalid, `spec.ports: Invalid value: "string": spec.ports in body must be of type array: "string"`}}},
	// [openapi] maxItems → TooMany
	{"too many ports", `{spec: {image: abc, ports: [{name: a, port: 1}, {name: b, port: 2}, {name: c, port: 3}, {name: d, port: 4}]}}`, []fieldErr{
		{"spec.ports", field.ErrorTypeTooMany, `spec.ports: Too many: 4: must have at most 3 items`}}},
	// [openapi] required inside items
	{"port missing in item", `{spec: {image: abc, ports: [{name: http}]}}`, []fieldErr{
		{"spec.ports[0].port", field.ErrorTypeRequired, `spec.ports[0].port: Required value`}}},
	// [openapi] maximum and enum inside items
	{"port item out of range", `{spec: {image: abc, ports: [{name: a, port: 70000, protocol: SCTP}]}}`, []fieldErr{
		{"spec.ports[0].port", field.ErrorTypeInvalid, `spec.ports[0].port: Invalid value: 70000: spec.ports[0].port in body should be less than or equal to 65535`},
		{"spec.ports[0].protocol", field.ErrorTypeNotSupported, `spec.ports[0].protocol: Unsupported value: "SCTP": supported values: "TCP", "UDP"`}}},
	// [listtype] map keys repeat
	{"ports repeat a key", `{spec: {image: abc, ports: [{name: http, port: 80}, {name: http, port: 8080}]}}`, []fieldErr{
		{"spec.ports[1]", field.ErrorTypeDuplicate, `spec.ports[1]: Duplicate value: {"name":"http"}`}}},
	// [openapi] + [listtype] an item that is not an object
	{"ports item not an object", `{spec: {image: abc, ports: [http]}}`, []fieldErr{
		{"spec.ports[0]", field.ErrorTypeTypeInvalid, `spec.ports[0]: Invalid value: "string": spec.ports[0] in body must be of type object: "string"`},
		{"spec.ports[0]", field.ErrorTypeInvalid, `spec.ports[0]: Invalid value: "http": must be an object for an array of list-type map`}}},
	// [listtype] set
	{"tags repeat", `{spec: {image: abc, tags: [a, b, a]}}`, []fieldErr{
		{"spec.tags[2]", field.ErrorTypeDuplicate, `spec.tags[2]: Duplicate value: "a"`}}},
	// [openapi] minItems
	{"tags empty", `{spec: {image: abc, tags: []}}`, []fieldErr{
		{"spec.tags", field.ErrorTypeInvalid, `spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items`}}},
	// [openapi] maxLength inside items
	{"tag too long", `{spec: {image: abc, tags: [abcdefghijk]}}`, []fieldErr{
		{"spec.tags[0]", field.ErrorTypeTooLong, `spec.tags[0]: Too long: may not be more than 10 bytes`}}},
	// [openapi] maxProperties → TooMany
	{"selector too big", `{spec: {image: abc, selector: {a: p, b: q, c: r}}}`, []fieldErr{
		{"spec.selector", field.ErrorTypeTooMany, `spec.selector: Too many: 3: must have at most 2 items`}}},
	// [openapi] minProperties
	{"selector empty", `{spec: {image: abc, selector: {}}}`, []fieldErr{
		{"spec.selector", field.ErrorTypeInvalid, `spec.selector: Invalid value: 0: spec.selector in body should have at least 1 properties`}}},
	// [openapi] additionalProperties schema; the key is a path segment
	{"selector value not a string", `{spec: {image: abc, selector: {app: 1}}}`, []fieldErr{
		{"spec.selector.app", field.ErrorTypeTypeInvalid, `spec.selector.app: Invalid value: "integer": spec.selector.app in body must be of type string: "integer"`}}},
	// [openapi] properties under additionalProperties
	{"limit max not an integer", `{spec: {image: abc, limits: {cpu: {max: lots}}}}`, []fieldErr{
		{"spec.limits.cpu.max", field.ErrorTypeTypeInvalid, `spec.limits.cpu.max: Invalid value: "string": spec.limits.cpu.max in body must be of type integer: "string"`}}},
	// [openapi] int-or-string: the type list and the anyOf both fail
	{"maxUnavailable is a boolean", `{spec: {image: abc, maxUnavailable: true}}`, []fieldErr{
		{"spec.maxUnavailable", field.ErrorTypeTypeInvalid, `spec.maxUnavailable: Invalid value: "boolean": spec.maxUnavailable in body must be of type integer,string: "boolean"`},
		{"<nil>", field.ErrorTypeInvalid, `<nil>: Invalid value: "": "spec.maxUnavailable" must validate at least one schema (anyOf)`},
		{"spec.maxUnavailable", field.ErrorTypeTypeInvalid, `spec.maxUnavailable: Invalid value: "boolean": spec.maxUnavailable in body must be of type integer: "boolean"`}}},
	// [openapi] int-or-string with a pattern (a resource.Quantity)
	{"cpu not a quantity", `{spec: {image: abc, cpu: lots}}`, []fieldErr{
		{"spec.cpu", field.ErrorTypeInvalid, `spec.cpu: Invalid value: "lots": spec.cpu in body should match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'`}}},
	// [openapi] nullable allows null, not other types
	{"nullable note is a number", `{spec: {image: abc, note: 5}}`, []fieldErr{
		{"spec.note", field.ErrorTypeTypeInvalid, `spec.note: Invalid value: "integer": spec.note in body must be of type string: "integer"`}}},
	// [openapi] null where not nullable (what survives when pruning and
	// defaulting are skipped)
	{"owner null", `{spec: {image: abc, owner: null}}`, []fieldErr{
		{"spec.owner", field.ErrorTypeTypeInvalid, `spec.owner: Invalid value: "null": spec.owner in body must be of type string: "null"`}}},
	// [openapi] format date-time
	{"schedule start not a date-time", `{spec: {image: abc, schedule: {start: yesterday}}}`, []fieldErr{
		{"spec.schedule.start", field.ErrorTypeTypeInvalid, `spec.schedule.start: Invalid value: "yesterday": spec.schedule.start in body must be of type date-time: "yesterday"`}}},
	// [openapi] format duration
	{"schedule timeout not a duration", `{spec: {image: abc, schedule: {timeout: forever}}}`, []fieldErr{
		{"spec.schedule.timeout", field.ErrorTypeTypeInvalid, `spec.schedule.timeout: Invalid value: "forever": spec.schedule.timeout in body must be of type duration: "forever"`}}},
	// [objectmeta] embedded resource needs apiVersion and kind
	{"claim without apiVersion and kind", `{spec: {image: abc, claim: {spec: {size: 1Gi}}}}`, []fieldErr{
		{"spec.claim.apiVersion", field.ErrorTypeRequired, `spec.claim.apiVersion: Required value`},
		{"spec.claim.kind", field.ErrorTypeRequired, `spec.claim.kind: Required value`}}},
	// [objectmeta] kind must be a DNS-1035 label, any case
	{"claim kind malformed", `{spec: {image: abc, claim: {apiVersion: v1, kind: Not_Valid}}}`, []fieldErr{
		{"spec.claim.kind", field.ErrorTypeInvalid, `spec.claim.kind: Invalid value: "Not_Valid": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`}}},
	// [objectmeta] apiVersion must parse as group/version
	{"claim apiVersion malformed", `{spec: {image: abc, claim: {apiVersion: a/b/c, kind: Claim}}}`, []fieldErr{
		{"spec.claim.apiVersion", field.ErrorTypeInvalid, `spec.claim.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c`}}},
	// [objectmeta] embedded metadata.name is a path segment
	{"claim name with a slash", `{spec: {image: abc, claim: {apiVersion: v1, kind: Claim, metadata: {name: a/b}}}}`, []fieldErr{
		{"spec.claim.metadata.name", field.ErrorTypeInvalid, `spec.claim.metadata.name: Invalid value: "a/b": may not contain '/'`}}},
	// [objectmeta] metadata that is not ObjectMeta
	{"claim metadata labels not a map", `{spec: {image: abc, claim: {apiVersion: v1, kind: Claim, metadata: {name: x, labels: a}}}}`, []fieldErr{
		{"spec.claim.metadata", field.ErrorTypeInvalid, `spec.claim.metadata: Invalid value: {"labels":"a","name":"x"}: json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string`}}},
	// [objectmeta] preserve-unknown-fields embedded resource still needs kind
	{"template without kind", `{spec: {image: abc, template: {apiVersion: v1}}}`, []fieldErr{
		{"spec.template.kind", field.ErrorTypeRequired, `spec.template.kind: Required value`}}},
	// [objectmeta] embedded labels are validated
	{"template label key invalid", `{spec: {image: abc, template: {apiVersion: v1, kind: Pod, metadata: {labels: {"a b": c}}}}}`, []fieldErr{
		{"spec.template.metadata.labels", field.ErrorTypeInvalid, `spec.template.metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}}},
	// [openapi] specified fields inside preserve-unknown-fields are checked
	{"config level not an integer", `{spec: {image: abc, config: {level: high, other: kept}}}`, []fieldErr{
		{"spec.config.level", field.ErrorTypeTypeInvalid, `spec.config.level: Invalid value: "string": spec.config.level in body must be of type integer: "string"`}}},
	// [openapi] the schema's metadata.name restriction
	{"name too long for the schema", `{metadata: {name: a-name-longer-than-twenty}, spec: {image: abc}}`, []fieldErr{
		{"metadata.name", field.ErrorTypeTooLong, `metadata.name: Too long: may not be more than 20 bytes`}}},
	// [openapi] status is validated like spec
	{"status phase not in enum", `{spec: {image: abc}, status: {phase: Done}}`, []fieldErr{
		{"status.phase", field.ErrorTypeNotSupported, `status.phase: Unsupported value: "Done": supported values: "Pending", "Running", "Failed"`}}},
	// [listtype] conditions keyed by type
	{"conditions repeat a type", `{spec: {image: abc}, status: {conditions: [{type: Ready, status: "True"}, {type: Ready, status: "False"}]}}`, []fieldErr{
		{"status.conditions[1]", field.ErrorTypeDuplicate, `status.conditions[1]: Duplicate value: {"type":"Ready"}`}}},
	// [openapi] enum of quoted booleans
	{"condition status not in enum", `{spec: {image: abc}, status: {conditions: [{type: Ready, status: Maybe}]}}`, []fieldErr{
		{"status.conditions[0].status", field.ErrorTypeNotSupported, `status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown"`}}},
	// [openapi] required inside a map list item
	{"condition without status", `{spec: {image: abc}, status: {conditions: [{type: Ready}]}}`, []fieldErr{
		{"status.conditions[0].status", field.ErrorTypeRequired, `status.conditions[0].status: Required value`}}},
	// [openapi] object type
	{"spec not an object", `{spec: x}`, []fieldErr{
		{"spec", field.ErrorTypeTypeInvalid, `spec: Invalid value: "string": spec in body must be of type object: "string"`}}},
}

func TestValidateRefusesInvalidWidgets(t *testing.T) {
	s := widget(t)
	if len(invalidWidgets) < 40 {
		t.Fatalf("only %d cases", len(invalidWidgets))
	}
	for _, c := range invalidWidgets {
		t.Run(c.name, func(t *testing.T) {
			errs := s.Validate(context.Background(), parse(t, c.obj), nil)
			if len(errs) != len(c.want) {
				t.Fatalf("got %d errors %q, want %d", len(errs), errorStrings(errs), len(c.want))
			}
			// kube-openapi visits an object's properties in Go map order,
			// so errors of sibling fields come in any order, upstream too.
			for _, w := range c.want {
				if !slices.ContainsFunc(errs, func(e *field.Error) bool {
					return e.Field == w.path && e.Type == w.typ && e.Error() == w.msg
				}) {
					t.Errorf("no error %s %s %q in %q", w.path, w.typ, w.msg, errorStrings(errs))
				}
			}
		})
	}
}

func TestValidateAcceptsValidWidget(t *testing.T) {
	s := widget(t)
	obj := parse(t, validWidget)
	obj["spec"].(map[string]any)["claim"] = parse(t, `{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {}, spec: {size: 1Gi}}`)
	if errs := s.Validate(context.Background(), obj, nil); len(errs) > 0 {
		t.Fatalf("valid widget refused: %q", errorStrings(errs))
	}
}

// TestFormats: string formats are checked by kube-openapi's strfmt.Default,
// the checker upstream runs, for the formats upstream supports on CRDs
// (apiextensions-apiserver pkg/apiserver/validation/formats.go
// supportedVersionedFormats); other formats are not checked at all. The
// duration checker is strfmt.ParseDuration, which takes more than Go's
// time.ParseDuration ("1d", "2w", "3 days").
func TestFormats(t *testing.T) {
	s, err := New(schemaFromYAML(t, `{type: object, properties: {spec: {type: object, properties: {
ttl: {type: string, format: duration}, at: {type: string, format: date-time}, name: {type: string, format: k8s-short-name},
ref: {type: string, format: uri-reference}, n: {type: integer, format: uint8}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec string
		want []string
	}{
		{`{ttl: 1h30m}`, nil},
		{`{ttl: 1d}`, nil},
		{`{ttl: 2w}`, nil},
		{`{ttl: 3 days}`, nil},
		{`{ttl: 10 minutes}`, nil},
		{`{ttl: forever}`, []string{`spec.ttl: Invalid value: "forever": spec.ttl in body must be of type duration: "forever"`}},
		{`{ttl: ""}`, []string{`spec.ttl: Invalid value: "": spec.ttl in body must be of type duration: ""`}},
		{`{at: "2030-01-02T03:04:05Z"}`, nil},
		{`{at: "2030-01-02"}`, []string{`spec.at: Invalid value: "2030-01-02": spec.at in body must be of type date-time: "2030-01-02"`}},
		{`{name: Bad_Name}`, []string{`spec.name: Invalid value: "Bad_Name": spec.name in body must be of type k8s-short-name: "Bad_Name"`}},
		// Not in upstream's list: not checked.
		{`{ref: "::not a uri::", n: 1000}`, nil},
	} {
		t.Run(c.spec, func(t *testing.T) {
			got := errorStrings(s.Validate(context.Background(), parse(t, `{spec: `+c.spec+`}`), nil))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestScalarKeysRepeat: when scalarKeysRepeat says a list-type=map list's
// keys are distinct, the JSON comparison upstream's check uses finds no
// duplicate either (random lists over keys that are absent, null,
// strings, int64s, float64s and bools).
func TestScalarKeysRepeat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []any{"1", int64(1), float64(1), "a", "", true, nil, int64(-2), "a\"b"}
	keys := []string{"name", "port"}
	distinct := 0
	for range 20000 {
		list := make([]any, 2+rng.IntN(3))
		for i := range list {
			m := map[string]any{"other": rng.IntN(2)}
			for _, k := range keys {
				if rng.IntN(5) > 0 {
					m[k] = values[rng.IntN(len(values))]
				}
			}
			list[i] = m
		}
		if scalarKeysRepeat(list, keys) {
			continue
		}
		distinct++
		byJSON := make([]any, len(list))
		for i, x := range list {
			key := map[string]any{}
			for _, k := range keys {
				if v, ok := x.(map[string]any)[k]; ok {
					key[k] = v
				}
			}
			byJSON[i] = key
		}
		if d := duplicates(byJSON); len(d) > 0 {
			t.Fatalf("distinct by scalarKeysRepeat, duplicates by JSON at %v: %v", d, list)
		}
	}
	if distinct < 1000 {
		t.Fatalf("only %d lists judged distinct", distinct)
	}
}
