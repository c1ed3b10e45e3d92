package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Expected answers in this file come from apiextensions-apiserver v0.37.2
// (vendored in the module cache): the structural schema checks
// (pkg/apiserver/schema/validation.go, AllowNestedXValidations false for
// CRDs), the custom resource decoder (pkg/apiserver/customresource_handler.go
// unstructuredSchemaCoercer.apply and schema/objectmeta: malformed metadata
// is a decoding error, turned into 400 by apiserver
// pkg/endpoints/handlers/rest.go transformDecodeError, or into a 422 on
// "patch" by handlers/patch.go), the strategy (pkg/registry/customresource/
// strategy.go: CEL rules skipped after blocking errors, CEL ratcheting with
// CRDValidationRatcheting) and kube-openapi strfmt's duration checker.

const probesPath = "/apis/e2e.kplane.dev/v1/namespaces/default/probes"

// probeCRD is a CRD with a duration, an enum, an embedded resource and,
// if rule, a CEL rule on spec.name.
func probeCRD(rule bool) string {
	rules := ""
	if rule {
		rules = `
                x-kubernetes-validations:
                - rule: "self.startsWith('g-')"
                  message: name must start with g-`
	}
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: probes.e2e.kplane.dev
spec:
  group: e2e.kplane.dev
  names: {kind: Probe, plural: probes, singular: probe, listKind: ProbeList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              ttl: {type: string, format: duration}
              size: {type: string, enum: [small, large]}
              name:
                type: string
                maxLength: 20` + rules + `
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
`
}

func probe(name, spec string) []byte {
	return []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Probe","metadata":{"name":"` + name + `"},"spec":` + spec + `}`)
}

func TestCRDValidationGaps(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		t.Run("rules under junctors refused", func(t *testing.T) { checkJunctorRules(t, s) })
		s.mustKubectl(t, "apply", "-f", writeFile(t, "probe.yaml", probeCRD(false)))
		s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/probes.e2e.kplane.dev")
		t.Run("duration format", func(t *testing.T) { checkDurationFormat(t, s) })
		t.Run("malformed metadata", func(t *testing.T) { checkMalformedMetadata(t, s) })
		t.Run("malformed embedded resource", func(t *testing.T) { checkMalformedEmbedded(t, s) })
		// Last: they add the rule to the CRD.
		t.Run("cel ratcheting", func(t *testing.T) { checkCELRatcheting(t, s) })
		t.Run("rules skipped after blocking errors", func(t *testing.T) { checkBlockingErrors(t, s) })
	})
}

// checkJunctorRules: x-kubernetes-validations under allOf (or anyOf, oneOf,
// not) make a schema non-structural; the CRD is refused with 422.
func checkJunctorRules(t *testing.T, s *server) {
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"junctors.e2e.kplane.dev"},
"spec":{"group":"e2e.kplane.dev","scope":"Namespaced","names":{"plural":"junctors","kind":"Junctor"},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
"properties":{"spec":{"type":"object","properties":{"a":{"type":"integer"}},"allOf":[{"x-kubernetes-validations":[{"rule":"self.a > 0"}]}]}}}}}]}}`
	code, _, data := s.call(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", []byte(crd))
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("rule in allOf: %d %s", code, data)
	}
	want := cause{"FieldValueForbidden", "spec.versions[0].schema.openAPIV3Schema.properties[spec].allOf[0].x-kubernetes-validations", "Forbidden: must be empty to be structural"}
	if st := status(t, data); st.Reason != metav1.StatusReasonInvalid || !hasCause(st, want) {
		t.Errorf("no cause %+v in %s", want, data)
	}
}

// checkDurationFormat: format duration is kube-openapi's strfmt
// ParseDuration, which takes days and weeks.
func checkDurationFormat(t *testing.T, s *server) {
	for i, ttl := range []string{"90s", "1h30m", "1d", "2w", "3 days"} {
		name := "ttl-" + string(rune('a'+i))
		if code, _, data := s.call(t, "POST", probesPath, "application/json", probe(name, `{"ttl":"`+ttl+`"}`)); code != http.StatusCreated {
			t.Errorf("ttl %q: %d %s", ttl, code, data)
		}
	}
	code, _, data := s.call(t, "POST", probesPath, "application/json", probe("ttl-bad", `{"ttl":"forever"}`))
	want := cause{"FieldValueTypeInvalid", "spec.ttl", `Invalid value: "forever": spec.ttl in body must be of type duration: "forever"`}
	if st := status(t, data); code != http.StatusUnprocessableEntity || !hasCause(st, want) {
		t.Errorf("ttl forever: %d %s", code, data)
	}
}

// checkMalformedMetadata: metadata that does not decode as ObjectMeta is a
// 400 on create and update, and a 422 on "patch" for a patch; unknown
// metadata fields are pruned (Strict: 400).
func checkMalformedMetadata(t *testing.T, s *server) {
	const prefix = `Probe in version "v1" cannot be handled as a Probe: `
	for _, c := range []struct{ name, metadata, msg string }{
		{"name a number", `{"name":5}`, "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"generateName a number", `{"generateName":5}`, "json: cannot unmarshal number into Go struct field ObjectMeta.generateName of type string"},
		{"labels a string", `{"name":"m-labels","labels":"x"}`, "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"},
		{"annotation a number", `{"name":"m-annotations","annotations":{"a":1}}`, "json: cannot unmarshal number into Go struct field ObjectMeta.annotations of type string"},
		{"metadata a list", `[{"name":"m-list"}]`, "json: cannot unmarshal array into Go value of type v1.ObjectMeta"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Probe","metadata":` + c.metadata + `,"spec":{}}`)
			code, _, data := s.call(t, "POST", probesPath, "application/json", body)
			st := status(t, data)
			if code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || st.Message != prefix+c.msg {
				t.Errorf("POST: %d %s", code, data)
			}
		})
	}

	if code, _, data := s.call(t, "POST", probesPath, "application/json", probe("meta", `{}`)); code != http.StatusCreated {
		t.Fatalf("POST meta: %d %s", code, data)
	}
	code, _, data := s.call(t, "PUT", probesPath+"/meta", "application/json",
		[]byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Probe","metadata":{"name":7},"spec":{}}`))
	if st := status(t, data); code != http.StatusBadRequest || st.Message != prefix+"json: cannot unmarshal number into Go struct field ObjectMeta.name of type string" {
		t.Errorf("PUT name a number: %d %s", code, data)
	}
	code, _, data = s.call(t, "PATCH", probesPath+"/meta", "application/merge-patch+json", []byte(`{"metadata":{"labels":"x"}}`))
	st := status(t, data)
	if code != http.StatusUnprocessableEntity || st.Reason != metav1.StatusReasonInvalid ||
		!hasCause(st, cause{"FieldValueInvalid", "patch", "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"}) {
		t.Errorf("PATCH labels a string: %d %s", code, data)
	}

	// Unknown metadata fields: pruned with a warning, refused under Strict.
	body := []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Probe","metadata":{"name":"meta-unknown","bogus":1},"spec":{}}`)
	code, _, data = s.call(t, "POST", probesPath+"?fieldValidation=Strict", "application/json", body)
	if st := status(t, data); code != http.StatusBadRequest || !strings.Contains(st.Message, `strict decoding error: unknown field "metadata.bogus"`) {
		t.Errorf("Strict unknown metadata field: %d %s", code, data)
	}
	code, hdr, data := s.call(t, "POST", probesPath, "application/json", body)
	if code != http.StatusCreated || !strings.Contains(strings.Join(hdr.Values("Warning"), "\n"), `unknown field \"metadata.bogus\"`) {
		t.Errorf("unknown metadata field: %d %q %s", code, hdr.Values("Warning"), data)
	}
	var got struct{ Metadata map[string]any }
	if err := json.Unmarshal(data, &got); err != nil || got.Metadata["bogus"] != nil {
		t.Errorf("metadata.bogus not pruned: %s", data)
	}
}

// checkMalformedEmbedded: an embedded resource's kind must be a string and
// its metadata must decode; otherwise the body does not decode (400).
func checkMalformedEmbedded(t *testing.T, s *server) {
	const prefix = `Probe in version "v1" cannot be handled as a Probe: `
	for _, c := range []struct{ name, template, msg string }{
		{"kind a number", `{"apiVersion":"v1","kind":5}`, "spec.template.kind: Invalid value: 5: must be a string"},
		{"metadata name a number", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":5}}`,
			`spec.template.metadata: Invalid value: {"name":5}: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, data := s.call(t, "POST", probesPath, "application/json", probe("emb", `{"template":`+c.template+`}`))
			if st := status(t, data); code != http.StatusBadRequest || st.Message != prefix+c.msg {
				t.Errorf("%d %s", code, data)
			}
		})
	}
}

// checkCELRatcheting: after a rule is added, an update that leaves a value
// failing it unchanged is allowed; one that changes it, or a create, is not.
func checkCELRatcheting(t *testing.T, s *server) {
	if code, _, data := s.call(t, "POST", probesPath, "application/json", probe("old", `{"name":"x"}`)); code != http.StatusCreated {
		t.Fatalf("POST old: %d %s", code, data)
	}
	s.mustKubectl(t, "apply", "-f", writeFile(t, "probe-rule.yaml", probeCRD(true)))
	want := cause{"FieldValueInvalid", "spec.name", `Invalid value: "y": name must start with g-`}
	code, _, data := s.call(t, "POST", probesPath, "application/json", probe("new", `{"name":"y"}`))
	if st := status(t, data); code != http.StatusUnprocessableEntity || !hasCause(st, want) {
		t.Errorf("create failing the new rule: %d %s", code, data)
	}
	if code, _, data := s.call(t, "PATCH", probesPath+"/old", "application/merge-patch+json", []byte(`{"spec":{"ttl":"1d"}}`)); code != http.StatusOK {
		t.Errorf("update leaving the failing name alone: %d %s", code, data)
	}
	code, _, data = s.call(t, "PATCH", probesPath+"/old", "application/merge-patch+json", []byte(`{"spec":{"name":"y"}}`))
	if st := status(t, data); code != http.StatusUnprocessableEntity || !hasCause(st, want) {
		t.Errorf("update changing the failing name: %d %s", code, data)
	}
}

// checkBlockingErrors: a value of the wrong type or outside its enum keeps
// the CEL rules from running, with one cause saying so.
func checkBlockingErrors(t *testing.T, s *server) {
	code, _, data := s.call(t, "POST", probesPath, "application/json", probe("blocked", `{"name":"y","size":"huge"}`))
	st := status(t, data)
	if code != http.StatusUnprocessableEntity ||
		!hasCause(st, cause{"FieldValueNotSupported", "spec.size", `Unsupported value: "huge": supported values: "small", "large"`}) ||
		// field.Invalid(nil, nil, ...) upstream: a nil path prints "<nil>".
		!hasCause(st, cause{"FieldValueInvalid", "<nil>", "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"}) ||
		hasCause(st, cause{"FieldValueInvalid", "spec.name", "name must start with g-"}) {
		t.Errorf("%d %s", code, data)
	}
}
