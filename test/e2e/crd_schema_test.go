package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	widgetop "github.com/kplane-dev/kplane/examples/widget-operator"
)

// TestCRDSchema applies the controller-gen CRD of the widget-operator
// example and checks that kplane enforces it as kube-apiserver does:
// validation (a table of invalid Widgets with upstream's exact causes),
// pruning and fieldValidation, defaulting, versions, /scale, kubectl
// explain and apply, and schema changes.
func TestCRDSchema(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installWidgetCRD(t, s)
		t.Run("CRD status", func(t *testing.T) { checkWidgetCRDStatus(t, s) })
		t.Run("invalid widgets", func(t *testing.T) { checkInvalidWidgets(t, s) })
		t.Run("valid widgets and defaults", func(t *testing.T) { checkValidWidgets(t, s) })
		t.Run("field validation", func(t *testing.T) { checkFieldValidation(t, s) })
		t.Run("status subresource", func(t *testing.T) { checkWidgetStatus(t, s) })
		t.Run("invalid CRD", func(t *testing.T) { checkInvalidCRD(t, s) })
		t.Run("scale", func(t *testing.T) { checkWidgetScale(t, s) })
		t.Run("printer columns", func(t *testing.T) { checkWidgetColumns(t, s) })
		t.Run("explain", func(t *testing.T) { checkWidgetExplain(t, s) })
		t.Run("kubectl apply invalid", func(t *testing.T) { checkApplyInvalidWidget(t, s) })
		t.Run("versions", func(t *testing.T) { checkWidgetVersions(t, s) })
		// Last: it changes the CRD.
		t.Run("schema change", func(t *testing.T) { checkWidgetSchemaChange(t, s) })
	})
}

const widgetsPath = "/apis/example.kplane.dev/v1/namespaces/default/widgets"

// installWidgetCRD applies the generated Widget CRD with kubectl and waits
// until it is Established.
func installWidgetCRD(t *testing.T, s *server) {
	t.Helper()
	s.mustKubectl(t, "apply", "-f", writeFile(t, "widget-crd.yaml", string(widgetop.CRD)))
	s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/widgets.example.kplane.dev")
}

func checkWidgetCRDStatus(t *testing.T, s *server) {
	code, _, data := s.call(t, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.kplane.dev", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET crd: %d %s", code, data)
	}
	var crd struct {
		Status struct {
			Conditions    []struct{ Type, Status string }
			AcceptedNames struct {
				Kind, Plural string
				ShortNames   []string
			}
			StoredVersions []string
		}
	}
	if err := json.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	conds := map[string]string{}
	for _, c := range crd.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if conds["NamesAccepted"] != "True" || conds["Established"] != "True" {
		t.Errorf("conditions = %v", crd.Status.Conditions)
	}
	n := crd.Status.AcceptedNames
	if n.Kind != "Widget" || n.Plural != "widgets" || len(n.ShortNames) != 1 || n.ShortNames[0] != "wd" {
		t.Errorf("acceptedNames = %+v", n)
	}
	if v := crd.Status.StoredVersions; len(v) != 1 || v[0] != "v1" {
		t.Errorf("storedVersions = %v", v)
	}
}

// cause is one expected metav1.StatusCause: its type and field exactly,
// and a substring of its message.
type cause struct{ typ, field, message string }

type widgetOp int

const (
	create     widgetOp = iota // POST body
	update                     // POST old, then PUT body with old's resourceVersion
	mergePatch                 // POST old, then PATCH body as a merge patch
)

// Where each expected answer comes from. Every row's causes were also
// produced by running upstream's own pipeline on the same objects:
// apiextensions-apiserver v0.37.2 pkg/apiserver/customresource_handler.go
// (pruning.PruneWithOptions, defaulting.PruneNonNullableNullsWithoutDefaults,
// defaulting.Default) followed by pkg/registry/customresource/strategy.go
// Validate / ValidateUpdate, with the CRD of examples/widget-operator.
// See also
// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation
const (
	// OpenAPI keywords: messages of k8s.io/kube-openapi
	// pkg/validation/errors/schema.go ("%s in body should be ...",
	// "must be of type %s: %q"), turned into causes by apiextensions-apiserver
	// pkg/apiserver/validation/validation.go kubeOpenAPIResultToFieldErrors
	// (type and format failures → FieldValueTypeInvalid, enum →
	// field.NotSupported, maxLength → field.TooLong, maxItems and
	// maxProperties → field.TooMany, required → field.Required, the rest
	// field.Invalid). Also test/integration/validation_test.go.
	srcKeyword = "kube-openapi validate via kubeOpenAPIResultToFieldErrors"
	// x-kubernetes-list-type map and set: apiextensions-apiserver
	// pkg/apiserver/schema/listtype/validation.go (field.Duplicate on the
	// later element, keyed by the map keys); test/integration/listtype_test.go.
	srcListType = "apiextensions-apiserver schema/listtype/validation.go"
	// x-kubernetes-embedded-resource: apiextensions-apiserver
	// pkg/apiserver/schema/objectmeta/validation.go (field.Required on
	// apiVersion and kind).
	srcEmbedded = "apiextensions-apiserver schema/objectmeta/validation.go"
	// x-kubernetes-validations: apiextensions-apiserver
	// pkg/apiserver/schema/cel/validation.go (message, messageExpression,
	// fieldPath and reason); docs #validation-rules.
	srcCEL = "apiextensions-apiserver schema/cel/validation.go"
	// Transition rules (oldSelf) run only when both the old and the new
	// value exist: docs #transition-rules and schema/cel/validation.go.
	srcCELTransition = "apiextensions-apiserver schema/cel/validation.go, transition rules"
	// A null list item is not pruned (only non-nullable null object fields
	// without a default are: schema/defaulting/prunenulls.go), so it fails
	// the item's type.
	srcNulls = "apiextensions-apiserver schema/defaulting/prunenulls.go + kube-openapi type check"
	// The root metadata: apimachinery pkg/api/validation/objectmeta.go
	// ValidateObjectMetaAccessor with NameIsDNSSubdomain, called from
	// apiextensions-apiserver pkg/registry/customresource/validator.go.
	srcObjectMeta = "apimachinery api/validation/objectmeta.go"
	// The scale subresource's spec path: apiextensions-apiserver
	// pkg/registry/customresource/validator.go ValidateScaleSpec, with the
	// field written as the specReplicasPath (".spec.replicas").
	srcScale = "apiextensions-apiserver registry/customresource/validator.go ValidateScaleSpec"
)

// invalidWidgets are objects kube-apiserver refuses, with its answer.
var invalidWidgets = []struct {
	name   string
	op     widgetOp
	src    string
	old    string // for update and mergePatch
	body   string
	code   int
	causes []cause
}{
	{name: "replicas string", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-01"},"spec":{"image":"nginx","replicas":"3"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.replicas", `Invalid value: "string": spec.replicas in body must be of type integer: "string"`},
		}},
	{name: "replicas float", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-02"},"spec":{"image":"nginx","replicas":2.5}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.replicas", `Invalid value: "float64": spec.replicas in body must be of type int32: "float64"`},
		}},
	{name: "replicas above max", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-03"},"spec":{"image":"nginx","replicas":11}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.replicas", `Invalid value: 11: spec.replicas in body should be less than or equal to 10`},
		}},
	{name: "replicas below min", op: create, src: srcKeyword + "; " + srcScale,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-04"},"spec":{"image":"nginx","replicas":-1}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.replicas", `Invalid value: -1: spec.replicas in body should be greater than or equal to 0`},
			{"FieldValueInvalid", ".spec.replicas", `Invalid value: -1: should be a non-negative integer`},
		}},
	{name: "minReplicas below min", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-05"},"spec":{"image":"nginx","replicas":1,"minReplicas":-1}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.minReplicas", `Invalid value: -1: spec.minReplicas in body should be greater than or equal to 0`},
		}},
	{name: "image missing", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-06"},"spec":{"replicas":1}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec.image", `Required value`},
		}},
	{name: "image empty", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-07"},"spec":{"image":""}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.image", `Invalid value: "": spec.image in body should be at least 1 chars long`},
		}},
	{name: "image too long", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-08"},"spec":{"image":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooLong", "spec.image", `Too long: may not be more than 64 bytes`},
		}},
	{name: "image pattern", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-09"},"spec":{"image":"Nginx!"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.image", `Invalid value: "Nginx!": spec.image in body should match '^[a-z0-9][a-z0-9./:-]*$'`},
		}},
	{name: "image number", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-10"},"spec":{"image":5}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.image", `Invalid value: "integer": spec.image in body must be of type string: "integer"`},
		}},
	{name: "size enum", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-11"},"spec":{"image":"nginx","size":"huge"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueNotSupported", "spec.size", `Unsupported value: "huge": supported values: "small", "medium", "large"`},
		}},
	{name: "host format", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-12"},"spec":{"image":"nginx","host":"not_a_host!"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.host", `Invalid value: "not_a_host!": spec.host in body must be of type hostname: "not_a_host!"`},
		}},
	{name: "host too long", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-13"},"spec":{"image":"nginx","host":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooLong", "spec.host", `Too long: may not be more than 253 bytes`},
		}},
	{name: "expiresAt format", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-14"},"spec":{"image":"nginx","expiresAt":"tomorrow"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.expiresAt", `Invalid value: "tomorrow": spec.expiresAt in body must be of type date-time: "tomorrow"`},
		}},
	{name: "ports dup key", op: create, src: srcListType,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-15"},"spec":{"image":"nginx","ports":[{"name":"http","port":80},{"name":"http","port":8080}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueDuplicate", "spec.ports[1]", `Duplicate value: {"name":"http"}`},
		}},
	{name: "ports maxItems", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-16"},"spec":{"image":"nginx","ports":[{"name":"p0","port":80},{"name":"p1","port":81},{"name":"p2","port":82},{"name":"p3","port":83},{"name":"p4","port":84}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooMany", "spec.ports", `Too many: 5: must have at most 4 items`},
		}},
	{name: "ports port min", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-17"},"spec":{"image":"nginx","ports":[{"name":"http","port":0}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.ports[0].port", `Invalid value: 0: spec.ports[0].port in body should be greater than or equal to 1`},
		}},
	{name: "ports port max", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-18"},"spec":{"image":"nginx","ports":[{"name":"http","port":70000}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.ports[0].port", `Invalid value: 70000: spec.ports[0].port in body should be less than or equal to 65535`},
		}},
	{name: "ports port missing", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-19"},"spec":{"image":"nginx","ports":[{"name":"http"}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec.ports[0].port", `Required value`},
		}},
	{name: "ports name missing", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-20"},"spec":{"image":"nginx","ports":[{"port":80}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec.ports[0].name", `Required value`},
		}},
	{name: "ports protocol enum", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-21"},"spec":{"image":"nginx","ports":[{"name":"http","port":80,"protocol":"SCTP"}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueNotSupported", "spec.ports[0].protocol", `Unsupported value: "SCTP": supported values: "TCP", "UDP"`},
		}},
	{name: "ports name too long", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-22"},"spec":{"image":"nginx","ports":[{"name":"aaaaaaaaaaaaaaaa","port":80}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooLong", "spec.ports[0].name", `Too long: may not be more than 15 bytes`},
		}},
	{name: "ports not array", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-23"},"spec":{"image":"nginx","ports":{"name":"http"}}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.ports", `Invalid value: "object": spec.ports in body must be of type array: "object"`},
		}},
	{name: "tags dup", op: create, src: srcListType,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-24"},"spec":{"image":"nginx","tags":["a","b","a"]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueDuplicate", "spec.tags[2]", `Duplicate value: "a"`},
		}},
	{name: "tags maxItems", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-25"},"spec":{"image":"nginx","tags":["a","b","c","d","e","f"]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooMany", "spec.tags", `Too many: 6: must have at most 5 items`},
		}},
	{name: "tags null item", op: create, src: srcNulls,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-26"},"spec":{"image":"nginx","tags":["a",null]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.tags[1]", `Invalid value: "null": spec.tags[1] in body must be of type string: "null"`},
		}},
	{name: "tags string", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-27"},"spec":{"image":"nginx","tags":"a"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.tags", `Invalid value: "string": spec.tags in body must be of type array: "string"`},
		}},
	{name: "params maxProperties", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-28"},"spec":{"image":"nginx","params":{"a":"1","b":"2","c":"3","d":"4"}}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooMany", "spec.params", `Too many: 4: must have at most 3 items`},
		}},
	{name: "params int value", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-29"},"spec":{"image":"nginx","params":{"a":1}}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.params.a", `Invalid value: "integer": spec.params.a in body must be of type string: "integer"`},
		}},
	{name: "maxUnavailable bool", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-30"},"spec":{"image":"nginx","maxUnavailable":true}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.maxUnavailable", `Invalid value: "boolean": spec.maxUnavailable in body must be of type integer,string: "boolean"`},
		}},
	{name: "maxUnavailable float", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-31"},"spec":{"image":"nginx","maxUnavailable":1.5}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.maxUnavailable", `Invalid value: "number": spec.maxUnavailable in body must be of type integer,string: "number"`},
		}},
	{name: "template no kind", op: create, src: srcEmbedded,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-32"},"spec":{"image":"nginx","template":{"apiVersion":"v1"}}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec.template.kind", `Required value`},
		}},
	{name: "template no apiVersion", op: create, src: srcEmbedded,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-33"},"spec":{"image":"nginx","template":{"kind":"ConfigMap"}}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec.template.apiVersion", `Required value`},
		}},
	{name: "template string", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-34"},"spec":{"image":"nginx","template":"x"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.template", `Invalid value: "string": spec.template in body must be of type object: "string"`},
		}},
	{name: "config string", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-35"},"spec":{"image":"nginx","config":"x"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.config", `Invalid value: "string": spec.config in body must be of type object: "string"`},
		}},
	{name: "note number", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-36"},"spec":{"image":"nginx","note":5}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec.note", `Invalid value: "integer": spec.note in body must be of type string: "integer"`},
		}},
	{name: "storageClass too long", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-37"},"spec":{"image":"nginx","storageClass":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTooLong", "spec.storageClass", `Too long: may not be more than 63 bytes`},
		}},
	{name: "cel messageExpression", op: create, src: srcCEL,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-38"},"spec":{"image":"nginx","host":"printer.local"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.host", `Invalid value: "printer.local": host printer.local must not end in .local`},
		}},
	{name: "cel fieldPath", op: create, src: srcCEL,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-39"},"spec":{"image":"nginx","replicas":2,"minReplicas":3}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.minReplicas", `Invalid value: minReplicas must not exceed replicas`},
		}},
	{name: "spec missing", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-40"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueRequired", "spec", `Required value`},
		}},
	{name: "spec string", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-41"},"spec":"x"}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueTypeInvalid", "spec", `Invalid value: "string": spec in body must be of type object: "string"`},
		}},
	{name: "metadata name invalid", op: create, src: srcObjectMeta,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"Bad_Name"},"spec":{"image":"nginx"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "metadata.name", `Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		}},
	{name: "many errors", op: create, src: srcKeyword,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-43"},"spec":{"image":"","replicas":99,"size":"huge"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.image", `Invalid value: "": spec.image in body should be at least 1 chars long`},
			{"FieldValueInvalid", "spec.replicas", `Invalid value: 99: spec.replicas in body should be less than or equal to 10`},
			{"FieldValueNotSupported", "spec.size", `Unsupported value: "huge": supported values: "small", "medium", "large"`},
		}},
	{name: "upd storageClass change", op: update, src: srcCEL,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-44"},"spec":{"image":"nginx","storageClass":"fast"}}`,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-44"},"spec":{"image":"nginx","storageClass":"slow"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.storageClass", `Invalid value: "slow": storageClass is immutable`},
		}},
	{name: "upd storageClass remove", op: update, src: srcCELTransition,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-45"},"spec":{"image":"nginx","storageClass":"fast"}}`,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-45"},"spec":{"image":"nginx"}}`,
		code: http.StatusOK},
	{name: "upd storageClass add", op: update, src: srcCELTransition,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-46"},"spec":{"image":"nginx"}}`,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-46"},"spec":{"image":"nginx","storageClass":"slow"}}`,
		code: http.StatusOK},
	{name: "upd replicas max", op: mergePatch, src: srcKeyword,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-47"},"spec":{"image":"nginx"}}`,
		body: `{"spec":{"replicas":20}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.replicas", `Invalid value: 20: spec.replicas in body should be less than or equal to 10`},
		}},
	{name: "upd ports dup", op: mergePatch, src: srcListType,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-48"},"spec":{"image":"nginx","ports":[{"name":"http","port":80}]}}`,
		body: `{"spec":{"ports":[{"name":"http","port":80},{"name":"http","port":81}]}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueDuplicate", "spec.ports[1]", `Duplicate value: {"name":"http"}`},
		}},
	{name: "upd image empty", op: update, src: srcKeyword,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-49"},"spec":{"image":"nginx"}}`,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-49"},"spec":{"image":""}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.image", `Invalid value: "": spec.image in body should be at least 1 chars long`},
		}},
	{name: "upd cel fieldPath", op: mergePatch, src: srcCEL,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-50"},"spec":{"image":"nginx","replicas":5}}`,
		body: `{"spec":{"minReplicas":6}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.minReplicas", `Invalid value: minReplicas must not exceed replicas`},
		}},
	// CEL rules are not evaluated once a blocking error (unsupported,
	// required, too long, too many, wrong type) was found: apiextensions-apiserver
	// pkg/registry/customresource/strategy.go hasBlockingErr, whose cause has
	// a nil path ("<nil>").
	{name: "cel skipped after enum error", op: create, src: "apiextensions-apiserver registry/customresource/strategy.go hasBlockingErr",
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-blocked"},"spec":{"image":"nginx","size":"huge","host":"printer.local"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueNotSupported", "spec.size", `Unsupported value: "huge": supported values: "small", "medium", "large"`},
			{"FieldValueInvalid", "<nil>", `Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`},
		}},
	// The quantity CEL library (k8s.io/apiserver pkg/cel/library/quantity.go):
	// a rule's false result, and a runtime error of quantity() reported as
	// "<error> evaluating rule: <message>".
	{name: "cel quantity over the limit", op: create, src: srcCEL,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-51"},"spec":{"image":"nginx","memory":"128Gi"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.memory", `Invalid value: "128Gi": memory must be at most 64Gi`},
		}},
	{name: "cel quantity malformed", op: create, src: srcCEL,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-52"},"spec":{"image":"nginx","memory":"lots"}}`,
		code: http.StatusUnprocessableEntity, causes: []cause{
			{"FieldValueInvalid", "spec.memory", `Invalid value: "string": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory must be at most 64Gi`},
		}},
	{name: "upd cel quantity at the limit", op: update, src: srcCEL,
		old:  `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-53"},"spec":{"image":"nginx","memory":"1Gi"}}`,
		body: `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-53"},"spec":{"image":"nginx","memory":"64Gi"}}`,
		code: http.StatusOK},
}

func checkInvalidWidgets(t *testing.T, s *server) {
	invalid := 0
	for _, c := range invalidWidgets {
		if c.code != http.StatusOK {
			invalid++
		}
		t.Run(c.name, func(t *testing.T) {
			name := object(t, []byte(c.body)).GetName()
			if c.old != "" {
				name = object(t, []byte(c.old)).GetName()
			}
			var code int
			var data []byte
			switch c.op {
			case create:
				code, _, data = s.call(t, "POST", widgetsPath, "application/json", []byte(c.body))
			case update:
				old := createWidget(t, s, c.old)
				u := object(t, []byte(c.body))
				u.SetResourceVersion(old.GetResourceVersion())
				body, _ := u.MarshalJSON()
				code, _, data = s.call(t, "PUT", widgetsPath+"/"+name, "application/json", body)
			case mergePatch:
				createWidget(t, s, c.old)
				code, _, data = s.call(t, "PATCH", widgetsPath+"/"+name, "application/merge-patch+json", []byte(c.body))
			}
			if code != c.code {
				t.Fatalf("[%s] got %d, want %d: %s", c.src, code, c.code, data)
			}
			if c.code == http.StatusOK {
				return
			}
			st := status(t, data)
			if st.Reason != metav1.StatusReasonInvalid || st.Details == nil ||
				st.Details.Group != "example.kplane.dev" || st.Details.Kind != "Widget" || st.Details.Name != name {
				t.Errorf("[%s] status = %s %+v", c.src, st.Reason, st.Details)
			}
			if want := fmt.Sprintf("Widget.example.kplane.dev %q is invalid: ", name); !strings.HasPrefix(st.Message, want) {
				t.Errorf("[%s] message %q lacks prefix %q", c.src, st.Message, want)
			}
			for _, want := range c.causes {
				if !hasCause(st, want) {
					t.Errorf("[%s] no cause {%s %s %q} in %s", c.src, want.typ, want.field, want.message, data)
				}
			}
		})
	}
	if invalid < 40 {
		t.Errorf("only %d invalid cases", invalid)
	}
}

func hasCause(st metav1.Status, want cause) bool {
	if st.Details == nil {
		return false
	}
	for _, got := range st.Details.Causes {
		if string(got.Type) == want.typ && got.Field == want.field && strings.Contains(got.Message, want.message) {
			return true
		}
	}
	return false
}

// createWidget POSTs a v1 Widget and returns the server's answer.
func createWidget(t *testing.T, s *server, body string) *unstructured.Unstructured {
	t.Helper()
	code, _, data := s.call(t, "POST", widgetsPath, "application/json", []byte(body))
	if code != http.StatusCreated {
		t.Fatalf("create %s: %d %s", body, code, data)
	}
	return object(t, data)
}

// checkValidWidgets: a Widget using every field goes in; defaults are
// applied on create (replicas, size, a port's protocol) as
// schema/defaulting/algorithm.go does; a null in a nullable field is kept
// and a null in a non-nullable field without a default is dropped
// (schema/defaulting/prunenulls.go); the embedded resource and the
// preserve-unknown-fields subtree keep their unknown fields.
func checkValidWidgets(t *testing.T, s *server) {
	full := createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"full"},"spec":{`+
		`"image":"registry.example.com/widget:1.0","replicas":3,"minReplicas":1,"size":"small","host":"w.example.com",`+
		`"expiresAt":"2030-01-02T03:04:05Z","storageClass":"fast","ports":[{"name":"http","port":80},{"name":"dns","port":53,"protocol":"UDP"}],`+
		`"tags":["a","b"],"params":{"a":"b"},"maxUnavailable":"25%","note":null,`+
		`"template":{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"},"x":{"y":1}},"config":{"any":{"thing":[1,"two"]}}}}`)
	spec := full.Object["spec"].(map[string]any)
	for _, c := range []struct {
		path string
		want any
	}{
		{"ports.0.protocol", "TCP"},
		{"ports.1.protocol", "UDP"},
		{"maxUnavailable", "25%"},
		{"note", nil},
		{"template.x.y", int64(1)},
		{"config.any.thing.1", "two"},
	} {
		if got, ok := lookup(spec, c.path); !ok || got != c.want {
			t.Errorf("spec.%s = %v (present %v), want %v", c.path, got, ok, c.want)
		}
	}
	if _, ok := spec["note"]; !ok {
		t.Error("the nullable spec.note: null was dropped")
	}

	minimal := createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"minimal"},"spec":{"image":"nginx","host":null,"maxUnavailable":2}}`)
	spec = minimal.Object["spec"].(map[string]any)
	if spec["replicas"] != int64(1) || spec["size"] != "medium" || spec["maxUnavailable"] != int64(2) {
		t.Errorf("defaults not applied on create: %v", spec)
	}
	if _, ok := spec["host"]; ok {
		t.Errorf("the non-nullable spec.host: null was kept: %v", spec)
	}
	// Defaults hold on read too.
	code, _, data := s.call(t, "GET", widgetsPath+"/minimal", "", nil)
	if got := object(t, data).Object["spec"].(map[string]any); code != http.StatusOK || got["replicas"] != int64(1) || got["size"] != "medium" {
		t.Errorf("GET minimal: %d %s", code, data)
	}
}

// lookup follows a dotted path through maps and (numeric) list indexes.
func lookup(v any, path string) (any, bool) {
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// checkFieldValidation: unknown fields are refused with 400 under
// fieldValidation=Strict and pruned with a Warning header under Warn (the
// default) — apiextensions-apiserver customresource_handler.go collects
// the pruned paths as `unknown field "%s"` and apiserver
// pkg/endpoints/handlers/create.go returns them as a BadRequest (Strict)
// or warnings (Warn). Docs:
// https://kubernetes.io/docs/reference/using-api/api-concepts/#field-validation
func checkFieldValidation(t *testing.T, s *server) {
	body := func(name string) []byte {
		return []byte(`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"` + name + `"},"spec":{"image":"nginx","bogus":1,"ports":[{"name":"http","port":80,"extra":true}]}}`)
	}
	code, _, data := s.call(t, "POST", widgetsPath+"?fieldValidation=Strict", "application/json", body("strict"))
	if code != http.StatusBadRequest {
		t.Fatalf("Strict: %d %s", code, data)
	}
	st := status(t, data)
	for _, want := range []string{`strict decoding error: `, `unknown field "spec.bogus"`, `unknown field "spec.ports[0].extra"`} {
		if st.Reason != metav1.StatusReasonBadRequest || !strings.Contains(st.Message, want) {
			t.Errorf("Strict: %s %q lacks %q", st.Reason, st.Message, want)
		}
	}

	for _, mode := range []string{"?fieldValidation=Warn", ""} {
		name := "warn"
		if mode == "" {
			name = "default"
		}
		code, hdr, data := s.call(t, "POST", widgetsPath+mode, "application/json", body(name))
		if code != http.StatusCreated {
			t.Fatalf("%s: %d %s", name, code, data)
		}
		warnings := strings.Join(hdr.Values("Warning"), "\n")
		for _, want := range []string{`299 - "unknown field \"spec.bogus\""`, `299 - "unknown field \"spec.ports[0].extra\""`} {
			if !strings.Contains(warnings, want) {
				t.Errorf("%s: Warning headers %q lack %s", name, warnings, want)
			}
		}
		spec := object(t, data).Object["spec"].(map[string]any)
		if _, ok := spec["bogus"]; ok {
			t.Errorf("%s: spec.bogus not pruned: %s", name, data)
		}
		if _, ok := lookup(spec, "ports.0.extra"); ok {
			t.Errorf("%s: spec.ports[0].extra not pruned: %s", name, data)
		}
	}

	code, hdr, data := s.call(t, "POST", widgetsPath+"?fieldValidation=Ignore", "application/json", body("ignore"))
	if code != http.StatusCreated || len(hdr.Values("Warning")) != 0 {
		t.Errorf("Ignore: %d warnings=%q %s", code, hdr.Values("Warning"), data)
	}
}

// checkWidgetStatus: the status subresource validates against the
// schema's status part (an unsupported condition status is refused as
// field.NotSupported, kubeOpenAPIResultToFieldErrors), and status sent on
// create is dropped (registry/customresource/strategy.go PrepareForCreate).
func checkWidgetStatus(t *testing.T, s *server) {
	w := createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"st"},"spec":{"image":"nginx"},"status":{"replicas":4}}`)
	if st, ok := w.Object["status"]; ok {
		t.Errorf("status kept on create: %v", st)
	}
	w.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "Maybe", "reason": "Testing", "message": "", "lastTransitionTime": "2030-01-02T03:04:05Z"}}}
	body, _ := w.MarshalJSON()
	code, _, data := s.call(t, "PUT", widgetsPath+"/st/status", "application/json", body)
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("PUT status: %d %s", code, data)
	}
	want := cause{"FieldValueNotSupported", "status.conditions[0].status", `Unsupported value: "Maybe": supported values: "True", "False", "Unknown"`}
	if st := status(t, data); !hasCause(st, want) {
		t.Errorf("no cause %+v in %s", want, data)
	}
}

// checkInvalidCRD: a schema that is not structural (a property without a
// type) is refused with 422 naming the field, as
// apiextensions-apiserver pkg/apis/apiextensions/validation/validation.go
// does through schema.ValidateStructural (test/integration/validation_test.go:
// "properties[a].type: Required value: must not be empty for specified
// object fields").
func checkInvalidCRD(t *testing.T, s *server) {
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"blobs.example.kplane.dev"},
"spec":{"group":"example.kplane.dev","scope":"Namespaced","names":{"plural":"blobs","kind":"Blob"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
"properties":{"spec":{"type":"object","properties":{"size":{"minimum":1}}}}}}}]}}`
	code, _, data := s.call(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", []byte(crd))
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("non-structural CRD: %d %s", code, data)
	}
	st := status(t, data)
	want := cause{"FieldValueRequired", "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type", "Required value: must not be empty for specified object fields"}
	if st.Reason != metav1.StatusReasonInvalid || !hasCause(st, want) {
		t.Errorf("no cause %+v in %s", want, data)
	}
	if !strings.HasPrefix(st.Message, `CustomResourceDefinition.apiextensions.k8s.io "blobs.example.kplane.dev" is invalid: `) {
		t.Errorf("message = %q", st.Message)
	}
}

// checkWidgetScale: kubectl scale writes .spec.replicas through /scale,
// and GET /scale answers an autoscaling/v1 Scale built from the CRD's
// specReplicasPath, statusReplicasPath and labelSelectorPath
// (apiextensions-apiserver pkg/registry/customresource/etcd.go
// scaleFromCustomResource).
func checkWidgetScale(t *testing.T, s *server) {
	w := createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"sc"},"spec":{"image":"nginx"}}`)
	w.Object["status"] = map[string]any{"replicas": int64(2), "selector": "app=sc"}
	body, _ := w.MarshalJSON()
	if code, _, data := s.call(t, "PUT", widgetsPath+"/sc/status", "application/json", body); code != http.StatusOK {
		t.Fatalf("PUT status: %d %s", code, data)
	}
	if out := s.mustKubectl(t, "scale", "widget/sc", "--replicas=3"); !strings.Contains(out, "widget.example.kplane.dev/sc scaled") {
		t.Errorf("kubectl scale: %s", out)
	}
	if out := s.mustKubectl(t, "get", "widget", "sc", "-o", "jsonpath={.spec.replicas}"); out != "3" {
		t.Errorf("spec.replicas after scale = %q", out)
	}
	code, _, data := s.call(t, "GET", widgetsPath+"/sc/scale", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET scale: %d %s", code, data)
	}
	sc := object(t, data)
	if sc.GetAPIVersion() != "autoscaling/v1" || sc.GetKind() != "Scale" || sc.GetName() != "sc" {
		t.Errorf("scale = %s", data)
	}
	for path, want := range map[string]any{"spec.replicas": int64(3), "status.replicas": int64(2), "status.selector": "app=sc"} {
		if got, _ := lookup(sc.Object, path); got != want {
			t.Errorf("scale %s = %v, want %v: %s", path, got, want, data)
		}
	}
	// Over the schema's maximum through /scale: the Widget's own
	// validation refuses it.
	if _, errOut, err := s.kubectl("scale", "widget/sc", "--replicas=11"); err == nil ||
		!strings.Contains(errOut, "spec.replicas in body should be less than or equal to 10") {
		t.Errorf("kubectl scale --replicas=11: %v %s", err, errOut)
	}
	checkWidgetScaleManagedFields(t, s)
}

// checkWidgetScaleManagedFields: writes through /scale are recorded as
// upstream's scale handler records them (apiserver's
// fieldmanager.ScaleHandler): under the writer's name with subresource
// "scale", owning the replicas path of the object's own apiVersion; a
// server-side apply of a Scale conflicts with the replicas' owner unless
// forced, and then takes them.
func checkWidgetScaleManagedFields(t *testing.T, s *server) {
	scaleEntries := func() map[string]map[string]any {
		t.Helper()
		code, _, data := s.call(t, "GET", widgetsPath+"/sc", "", nil)
		if code != http.StatusOK {
			t.Fatalf("GET sc: %d %s", code, data)
		}
		out := map[string]map[string]any{}
		mf, _ := lookup(object(t, data).Object, "metadata.managedFields")
		for _, e := range mf.([]any) {
			e := e.(map[string]any)
			if e["subresource"] == "scale" {
				out[e["manager"].(string)+"/"+e["operation"].(string)] = e
			}
		}
		return out
	}
	replicasOnly := func(e map[string]any) bool {
		fields, _ := json.Marshal(e["fieldsV1"])
		return e["apiVersion"] == "example.kplane.dev/v1" && string(fields) == `{"f:spec":{"f:replicas":{}}}`
	}
	// kubectl scale above (a merge patch of the Scale).
	entries := scaleEntries()
	if len(entries) != 1 {
		t.Fatalf("managedFields with subresource scale after kubectl scale: %v", entries)
	}
	var scaler string
	for m, e := range entries {
		scaler = m
		if !strings.HasSuffix(m, "/Update") || !replicasOnly(e) {
			t.Errorf("kubectl scale's entry: %v", e)
		}
	}

	// A PUT of the Scale by another manager takes the replicas.
	code, _, data := s.call(t, "GET", widgetsPath+"/sc/scale", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET scale: %d %s", code, data)
	}
	sc := object(t, data)
	if err := unstructured.SetNestedField(sc.Object, int64(4), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	body, _ := sc.MarshalJSON()
	if code, _, data := s.call(t, "PUT", widgetsPath+"/sc/scale?fieldManager=hpa", "application/json", body); code != http.StatusOK {
		t.Fatalf("PUT scale: %d %s", code, data)
	}
	entries = scaleEntries()
	if e := entries["hpa/Update"]; e == nil || !replicasOnly(e) || len(entries) != 1 {
		t.Errorf("after the hpa's PUT, %s's entry should be gone and hpa's own the replicas: %v", scaler, entries)
	}

	// Server-side apply of a Scale: a conflict with hpa, then forced.
	apply := func(query, config string) (int, []byte) {
		t.Helper()
		code, _, data := s.call(t, "PATCH", widgetsPath+"/sc/scale?"+query, "application/apply-patch+yaml", []byte(config))
		return code, data
	}
	config := "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: sc\nspec:\n  replicas: 5\n"
	if code, data := apply("fieldManager=autoscaler", config); code != http.StatusConflict ||
		!strings.Contains(string(data), `conflict with \"hpa\" with subresource \"scale\"`) {
		t.Errorf("apply of a Scale over hpa's replicas: %d %s", code, data)
	}
	code, data = apply("fieldManager=autoscaler&force=true", config)
	if code != http.StatusOK {
		t.Fatalf("forced apply of a Scale: %d %s", code, data)
	}
	if got, _ := lookup(object(t, data).Object, "spec.replicas"); got != int64(5) {
		t.Errorf("forced apply answered %s", data)
	}
	entries = scaleEntries()
	if e := entries["autoscaler/Apply"]; e == nil || !replicasOnly(e) || len(entries) != 1 {
		t.Errorf("after the forced apply, autoscaler's Apply entry should own the replicas alone: %v", entries)
	}
	if out := s.mustKubectl(t, "get", "widget", "sc", "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("spec.replicas after the apply = %q", out)
	}
	// A configuration that leaves out the replicas its manager owned gives
	// them up; the Scale's int32 then writes 0 into the Widget, as
	// upstream's, where a removed field would have read as the default, 1.
	if code, data := apply("fieldManager=autoscaler", "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: sc\n"); code != http.StatusOK {
		t.Fatalf("apply of a Scale without replicas: %d %s", code, data)
	}
	if out := s.mustKubectl(t, "get", "widget", "sc", "-o", "jsonpath={.spec.replicas}"); out != "0" {
		t.Errorf("spec.replicas after an apply that gave them up = %q, want 0", out)
	}
	if entries = scaleEntries(); len(entries) != 0 {
		t.Errorf("after the apply without replicas no scale entry should own anything: %v", entries)
	}
	// Bad configurations: the wrong kind, no fieldManager, a stale
	// resourceVersion.
	if code, data := apply("fieldManager=autoscaler", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sc\n"); code != http.StatusBadRequest {
		t.Errorf("apply of a ConfigMap to /scale: %d %s", code, data)
	}
	if code, data := apply("", config); code != http.StatusUnprocessableEntity {
		t.Errorf("apply to /scale without a fieldManager: %d %s", code, data)
	}
	stale := "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: sc\n  resourceVersion: \"1\"\nspec:\n  replicas: 6\n"
	if code, data := apply("fieldManager=autoscaler", stale); code != http.StatusConflict {
		t.Errorf("apply to /scale with a stale resourceVersion: %d %s", code, data)
	}
	// An update takes the replicas back from the applier.
	s.mustKubectl(t, "scale", "widget/sc", "--replicas=3")
	entries = scaleEntries()
	if e := entries[scaler]; e == nil || !replicasOnly(e) || len(entries) != 1 {
		t.Errorf("after kubectl scale again, %s's entry should own the replicas alone: %v", scaler, entries)
	}
}

// checkWidgetColumns: kubectl get prints the CRD's additionalPrinterColumns.
func checkWidgetColumns(t *testing.T, s *server) {
	out := s.mustKubectl(t, "get", "widgets", "sc")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^NAME\s+REPLICAS\s+READY\s+SIZE\s+AGE$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^sc\s+3\s+2\s+medium\s+\d+s$`).MatchString(lines[1]) {
		t.Errorf("kubectl get widgets sc:\n%s", out)
	}
}

// checkWidgetExplain: kubectl explain reads the CRD's schema from the
// published OpenAPI.
func checkWidgetExplain(t *testing.T, s *server) {
	var out string
	eventually(t, 10*time.Second, "kubectl explain widget.spec.replicas", func() (bool, string) {
		o, e, err := s.kubectl("explain", "widget.spec.replicas")
		out = o
		return err == nil, o + e
	})
	for _, re := range []string{`(?m)^GROUP:\s+example\.kplane\.dev$`, `(?m)^KIND:\s+Widget$`, `(?m)^VERSION:\s+v1$`,
		`(?m)^FIELD:\s+replicas <integer>$`, `Replicas is the number of widget pods to run\.`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl explain widget.spec.replicas lacks %s:\n%s", re, out)
		}
	}
}

// checkApplyInvalidWidget: kubectl apply of an invalid Widget fails with
// the server's cause, which names the field ("The Widget ... is invalid:"
// is kubectl's rendering of a 422, k8s.io/kubectl/pkg/cmd/util/helpers.go).
func checkApplyInvalidWidget(t *testing.T, s *server) {
	path := writeFile(t, "bad-widget.yaml", "apiVersion: example.kplane.dev/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  image: nginx\n  replicas: 11\n  size: huge\n")
	out, errOut, err := s.kubectl("apply", "-f", path)
	if err == nil {
		t.Fatalf("apply of an invalid Widget succeeded: %s", out)
	}
	for _, want := range []string{`The Widget "bad" is invalid: `,
		`spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10`,
		`spec.size: Unsupported value: "huge": supported values: "small", "medium", "large"`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("kubectl apply error lacks %q:\n%s", want, errOut)
		}
	}
}

// checkWidgetVersions: v1alpha1 and v1 are both served; with conversion
// strategy None an object written in either is stored in the storage
// version (v1) and served in whichever version is asked for.
func checkWidgetVersions(t *testing.T, s *server) {
	alpha := "/apis/example.kplane.dev/v1alpha1/namespaces/default/widgets"
	code, _, data := s.call(t, "POST", alpha, "application/json",
		[]byte(`{"apiVersion":"example.kplane.dev/v1alpha1","kind":"Widget","metadata":{"name":"old"},"spec":{"image":"nginx","replicas":2}}`))
	if code != http.StatusCreated || object(t, data).GetAPIVersion() != "example.kplane.dev/v1alpha1" {
		t.Fatalf("POST v1alpha1: %d %s", code, data)
	}
	// The v1alpha1 schema is enforced too.
	code, _, data = s.call(t, "POST", alpha, "application/json",
		[]byte(`{"apiVersion":"example.kplane.dev/v1alpha1","kind":"Widget","metadata":{"name":"old-bad"},"spec":{"image":"nginx","replicas":11}}`))
	if st := status(t, data); code != http.StatusUnprocessableEntity ||
		!hasCause(st, cause{"FieldValueInvalid", "spec.replicas", "spec.replicas in body should be less than or equal to 10"}) {
		t.Errorf("POST invalid v1alpha1: %d %s", code, data)
	}
	createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"new"},"spec":{"image":"nginx"}}`)
	for _, name := range []string{"old", "new"} {
		for _, v := range []string{"v1", "v1alpha1"} {
			code, _, data := s.call(t, "GET", "/apis/example.kplane.dev/"+v+"/namespaces/default/widgets/"+name, "", nil)
			if code != http.StatusOK || object(t, data).GetAPIVersion() != "example.kplane.dev/"+v {
				t.Errorf("GET %s in %s: %d %s", name, v, code, data)
			}
		}
	}
	stored := s.storedObjects(t, "/widgets/default/")
	for _, name := range []string{"old", "new"} {
		if got := stored[name]; object(t, []byte(got)).GetAPIVersion() != "example.kplane.dev/v1" {
			t.Errorf("%s stored as %s", name, got)
		}
	}
}

// checkWidgetSchemaChange: lowering a Maximum applies to the next write at
// once; objects already stored are not rewritten, and an update that
// leaves the now-invalid field alone is allowed (validation ratcheting,
// GA in 1.33: apiextensions-apiserver pkg/apiserver/validation/ratcheting.go;
// docs #validation-ratcheting).
func checkWidgetSchemaChange(t *testing.T, s *server) {
	createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"eight"},"spec":{"image":"nginx","replicas":8}}`)
	before := s.storedObjects(t, "/widgets/default/")["eight"]

	var patch []map[string]any
	for i := range 2 {
		patch = append(patch, map[string]any{"op": "replace", "value": 5,
			"path": fmt.Sprintf("/spec/versions/%d/schema/openAPIV3Schema/properties/spec/properties/replicas/maximum", i)})
	}
	body, _ := json.Marshal(patch)
	if code, _, data := s.call(t, "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.kplane.dev",
		"application/json-patch+json", body); code != http.StatusOK {
		t.Fatalf("patch CRD: %d %s", code, data)
	}

	code, _, data := s.call(t, "POST", widgetsPath, "application/json",
		[]byte(`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"eight-more"},"spec":{"image":"nginx","replicas":8}}`))
	if code != http.StatusUnprocessableEntity {
		t.Errorf("create over the new maximum: %d %s", code, data)
	} else if st := status(t, data); !hasCause(st, cause{"FieldValueInvalid", "spec.replicas", "Invalid value: 8: spec.replicas in body should be less than or equal to 5"}) {
		t.Errorf("create over the new maximum: %d %s", code, data)
	}
	code, _, data = s.call(t, "PATCH", widgetsPath+"/eight", "application/merge-patch+json", []byte(`{"spec":{"replicas":7}}`))
	if code != http.StatusUnprocessableEntity {
		t.Errorf("update to another value over the new maximum: %d %s", code, data)
	} else if st := status(t, data); !hasCause(st, cause{"FieldValueInvalid", "spec.replicas", "Invalid value: 7: spec.replicas in body should be less than or equal to 5"}) {
		t.Errorf("update to another value over the new maximum: %d %s", code, data)
	}

	if got := s.storedObjects(t, "/widgets/default/")["eight"]; got != before {
		t.Errorf("stored object rewritten by the CRD change:\nbefore %s\nafter  %s", before, got)
	}
	code, _, data = s.call(t, "GET", widgetsPath+"/eight", "", nil)
	if got, _ := lookup(object(t, data).Object, "spec.replicas"); code != http.StatusOK || got != int64(8) {
		t.Errorf("GET eight: %d %s", code, data)
	}
	code, _, data = s.call(t, "PATCH", widgetsPath+"/eight", "application/merge-patch+json", []byte(`{"spec":{"tags":["x"]}}`))
	if code != http.StatusOK {
		t.Errorf("update leaving the ratcheted replicas alone: %d %s", code, data)
	}
}

// storedObjects stops the server, reads the values under keys containing
// infix with `kplane kv get --prefix /` (the embedded store is locked
// while the server runs), starts the server again on the same port and
// returns the values by the key's last segment.
func (s *server) storedObjects(t *testing.T, infix string) map[string]string {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("stopping: %v\n%s", err, s.log.String())
	}
	defer s.start(s.addr)
	args := []string{"kv", "--data-dir", s.dir}
	for i := 0; i+1 < len(s.flags); i += 2 {
		switch s.flags[i] {
		case "--storage", "--etcd-endpoints", "--etcd-prefix":
			args = append(args, s.flags[i], s.flags[i+1])
		}
	}
	cmd := exec.Command(kplaneBinary(t), append(args, "get", "/", "--prefix")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kplane kv get: %v\n%s", err, stderr.String())
	}
	var r struct{ KVs []struct{ Key, Value string } }
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("kplane kv get: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, kv := range r.KVs {
		if i := strings.Index(kv.Key, infix); i >= 0 {
			got[kv.Key[i+len(infix):]] = kv.Value
		}
	}
	return got
}
