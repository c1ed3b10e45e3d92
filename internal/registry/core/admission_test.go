package core

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kplane-dev/kplane/internal/registry"
)

// webhookKind returns the ValidatingWebhookConfiguration kind, or the
// Mutating one.
func webhookKind(t *testing.T, mutating bool) *registry.Kind {
	t.Helper()
	name := "ValidatingWebhookConfiguration"
	if mutating {
		name = "MutatingWebhookConfiguration"
	}
	for _, k := range webhookConfigurations() {
		if k.Kind == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return nil
}

// webhookConfig is a configuration's map as a body of the Go type
// decodes to (numbers int64).
func webhookConfig(t *testing.T, body string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(intsOf(m).(map[string]any))}
}

// intsOf turns JSON's float64s (all whole here) into int64s.
func intsOf(v any) any {
	switch v := v.(type) {
	case float64:
		return int64(v)
	case map[string]any:
		for k, e := range v {
			v[k] = intsOf(e)
		}
	case []any:
		for i, e := range v {
			v[i] = intsOf(e)
		}
	}
	return v
}

// Every webhook gets the v1 API's defaults where it sets none, and keeps
// what it sets; sideEffects and admissionReviewVersions get none.
func TestWebhookDefaults(t *testing.T) {
	for _, mutating := range []bool{false, true} {
		k := webhookKind(t, mutating)
		obj := webhookConfig(t, `{"webhooks":[
			{"name":"a.example.com","clientConfig":{"service":{"name":"s","namespace":"n"}},"rules":[{"operations":["*"]}]},
			{"name":"b.example.com","clientConfig":{"url":"https://h"},"failurePolicy":"Ignore","matchPolicy":"Exact","timeoutSeconds":3,
			 "namespaceSelector":{"matchLabels":{"a":"b"}},"objectSelector":{"matchLabels":{"c":"d"}},"reinvocationPolicy":"IfNeeded","rules":[{"scope":"Cluster"}]}]}`)
		k.Default(obj)
		defaulted := `{"name":"a.example.com","clientConfig":{"service":{"name":"s","namespace":"n","port":443}},"rules":[{"operations":["*"],"scope":"*"}],` +
			`"failurePolicy":"Fail","matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"timeoutSeconds":10`
		kept := `{"name":"b.example.com","clientConfig":{"url":"https://h"},"failurePolicy":"Ignore","matchPolicy":"Exact","timeoutSeconds":3,` +
			`"namespaceSelector":{"matchLabels":{"a":"b"}},"objectSelector":{"matchLabels":{"c":"d"}},"reinvocationPolicy":"IfNeeded","rules":[{"scope":"Cluster"}]}`
		if mutating {
			defaulted += `,"reinvocationPolicy":"Never"`
		}
		want := webhookConfig(t, `{"webhooks":[`+defaulted+`},`+kept+`]}`)
		if !reflect.DeepEqual(obj.Object, want.Object) {
			g, _ := json.Marshal(obj.Object)
			w, _ := json.Marshal(want.Object)
			t.Errorf("mutating %v:\n got  %s\n want %s", mutating, g, w)
		}
	}
}

// An update keeps what upstream lets a stored configuration keep (one
// written through v1beta1, which allowed more): side effects Some or
// Unknown, admission review versions none of which is known, repeated
// webhook names, label values a selector may not have, and matchConditions
// that do not compile, as long as they are not changed. A configuration
// whose stored webhooks pass today's checks gets them all.
func TestWebhookUpdateKeepsWhatTheStoredConfigurationHas(t *testing.T) {
	const stored = `{"metadata":{"name":"old"},"webhooks":[
		{"name":"a.example.com","clientConfig":{"url":"https://h"},"sideEffects":"Some","admissionReviewVersions":["v2"],
		 "namespaceSelector":{"matchExpressions":[{"key":"k","operator":"In","values":["not ok"]}]},
		 "matchConditions":[{"name":"m","expression":"nope"}]},
		{"name":"a.example.com","clientConfig":{"url":"https://h"},"sideEffects":"Unknown","admissionReviewVersions":["v1"]}]}`
	for _, mutating := range []bool{false, true} {
		k := webhookKind(t, mutating)
		old := webhookConfig(t, stored)
		k.Default(old)
		if errs := k.Validate(old.DeepCopy()); len(errs) != 6 {
			t.Fatalf("mutating %v: a create of the stored configuration: %v, want its 6 errors", mutating, errs)
		}
		next := old.DeepCopy()
		next.SetLabels(map[string]string{"changed": "metadata"})
		if errs := k.ValidateUpdate(next, old); len(errs) != 0 {
			t.Errorf("mutating %v: an update of the metadata: %v", mutating, errs)
		}

		// A changed matchCondition is compiled again.
		next = old.DeepCopy()
		webhooksOf(next)[0]["matchConditions"] = []any{map[string]any{"name": "m", "expression": "still nope"}}
		if errs := k.ValidateUpdate(next, old); len(errs) != 1 || errs[0].Field != "webhooks[0].matchConditions[0].expression" {
			t.Errorf("mutating %v: a changed matchCondition: %v", mutating, errs)
		}

		// A stored configuration that passes today's checks is held to
		// them: the stored exceptions come back as errors.
		good := webhookConfig(t, `{"metadata":{"name":"old"},"webhooks":[
			{"name":"a.example.com","clientConfig":{"url":"https://h"},"sideEffects":"None","admissionReviewVersions":["v1"]}]}`)
		k.Default(good)
		var got []string
		for _, e := range k.ValidateUpdate(old.DeepCopy(), good) {
			got = append(got, e.Error())
		}
		want := []string{
			`webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`,
			`webhooks[0].namespaceSelector.matchExpressions[0].values[0]: Invalid value: "not ok": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
			"webhooks[0].matchConditions[0].expression: Invalid value: \"nope\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope\n | ^",
			`webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1`,
			`webhooks[1].sideEffects: Unsupported value: "Unknown": supported values: "None", "NoneOnDryRun"`,
			`webhooks[1].name: Duplicate value: "a.example.com"`,
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("mutating %v: held to today's checks:\n got  %q\n want %q", mutating, got, want)
		}
	}
}

// The reserved suffix is refused on create only (a stored configuration
// keeps its name), and an update of one is warned about.
func TestWebhookStaticSuffix(t *testing.T) {
	k := webhookKind(t, false)
	obj := webhookConfig(t, `{"metadata":{"name":"mine.static.k8s.io"}}`)
	errs := k.Validate(obj)
	if len(errs) != 1 || errs[0].Error() != `metadata.name: Invalid value: "mine.static.k8s.io": names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API` {
		t.Errorf("create: %v", errs)
	}
	if errs := k.ValidateUpdate(obj, obj.DeepCopy()); len(errs) != 0 {
		t.Errorf("update: %v", errs)
	}
	if w := k.Warnings(obj, nil); len(w) != 0 {
		t.Errorf("create's warnings: %q", w)
	}
	if w := k.Warnings(obj, obj.DeepCopy()); len(w) != 1 || w[0] != `metadata.name: names ending with ".static.k8s.io" are reserved for static manifest-based configurations and cannot be managed via the API` {
		t.Errorf("update's warnings: %q", w)
	}
}
