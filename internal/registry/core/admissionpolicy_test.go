package core_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// policyKind returns the built-in kind of admissionregistration.k8s.io
// named name.
func policyKind(t *testing.T, name string) *registry.Kind {
	t.Helper()
	for _, k := range core.Kinds() {
		if k.Group == "admissionregistration.k8s.io" && k.Kind == name {
			return k
		}
	}
	t.Fatalf("no kind %s", name)
	return nil
}

// objectOf is body as a request's decoding leaves it: the kind's
// defaults set.
func objectOf(t *testing.T, k *registry.Kind, body string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(m)}
	k.Default(obj)
	return obj
}

func errorStrings(errs field.ErrorList) []string {
	out := []string{}
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// A create of each body is refused with kube-apiserver v1.37.2's errors,
// in its order and words, or accepted where it accepted it: every family
// of checks of both kinds (testdata/admissionpolicies-kube-apiserver-v1.37.2.json
// holds the bodies and upstream's 422 causes, read off a dry-run create).
// The metadata, which the registry checks, is valid in each.
func TestAdmissionPolicyCreatesAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/admissionpolicies-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Cases []struct {
			Kind, What string
			Body       json.RawMessage
			Errors     []string
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	if len(upstream.Cases) < 25 {
		t.Fatalf("%d cases", len(upstream.Cases))
	}
	for _, c := range upstream.Cases {
		t.Run(c.Kind+"/"+c.What, func(t *testing.T) {
			k := policyKind(t, c.Kind)
			obj := objectOf(t, k, string(c.Body))
			k.PrepareForCreate(obj)
			if got := errorStrings(k.Validate(obj)); !reflect.DeepEqual(got, c.Errors) {
				t.Errorf("errors:\n got  %q\n want %q", got, c.Errors)
			}
		})
	}
}

// A policy, validating or mutating, gets the v1 API's defaults: a failure
// policy, even without a spec, and matchConstraints' match policy,
// selectors and every rule's scope; a binding's matchResources get the
// same, and a paramRef none. What is set is kept.
func TestAdmissionPolicyDefaults(t *testing.T) {
	for _, c := range []struct{ kind, body, want string }{
		{"ValidatingAdmissionPolicy", `{}`, `{"spec":{"failurePolicy":"Fail"}}`},
		{"ValidatingAdmissionPolicy", `{"spec":null}`, `{"spec":{"failurePolicy":"Fail"}}`},
		{"ValidatingAdmissionPolicy",
			`{"spec":{"matchConstraints":{"resourceRules":[{"resources":["a"]},{"scope":"Cluster"}],"excludeResourceRules":[{}]}}}`,
			`{"spec":{"failurePolicy":"Fail","matchConstraints":{"matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},` +
				`"resourceRules":[{"resources":["a"],"scope":"*"},{"scope":"Cluster"}],"excludeResourceRules":[{"scope":"*"}]}}}`},
		{"ValidatingAdmissionPolicy",
			`{"spec":{"failurePolicy":"Ignore","matchConstraints":{"matchPolicy":"Exact","namespaceSelector":{"matchLabels":{"a":"b"}},"objectSelector":{"matchLabels":{"c":"d"}}}}}`,
			`{"spec":{"failurePolicy":"Ignore","matchConstraints":{"matchPolicy":"Exact","namespaceSelector":{"matchLabels":{"a":"b"}},"objectSelector":{"matchLabels":{"c":"d"}}}}}`},
		{"ValidatingAdmissionPolicyBinding", `{"spec":{"policyName":"p","paramRef":{"name":"x"}}}`, `{"spec":{"policyName":"p","paramRef":{"name":"x"}}}`},
		{"ValidatingAdmissionPolicyBinding", `{}`, `{}`},
		{"ValidatingAdmissionPolicyBinding", `{"spec":{"matchResources":{"resourceRules":[{}]}}}`,
			`{"spec":{"matchResources":{"matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"resourceRules":[{"scope":"*"}]}}}`},
		// A mutating policy's are a validating one's; its
		// reinvocationPolicy has none.
		{"MutatingAdmissionPolicy", `{}`, `{"spec":{"failurePolicy":"Fail"}}`},
		{"MutatingAdmissionPolicy", `{"spec":{"matchConstraints":{"resourceRules":[{}],"excludeResourceRules":[{"scope":"Namespaced"}]},"mutations":[{}]}}`,
			`{"spec":{"failurePolicy":"Fail","matchConstraints":{"matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},` +
				`"resourceRules":[{"scope":"*"}],"excludeResourceRules":[{"scope":"Namespaced"}]},"mutations":[{}]}}`},
		{"MutatingAdmissionPolicy", `{"spec":{"failurePolicy":"Ignore","reinvocationPolicy":"IfNeeded"}}`, `{"spec":{"failurePolicy":"Ignore","reinvocationPolicy":"IfNeeded"}}`},
		{"MutatingAdmissionPolicyBinding", `{"spec":{"policyName":"p","paramRef":{"name":"x"}}}`, `{"spec":{"policyName":"p","paramRef":{"name":"x"}}}`},
		{"MutatingAdmissionPolicyBinding", `{"spec":{"matchResources":{"excludeResourceRules":[{}]}}}`,
			`{"spec":{"matchResources":{"matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"excludeResourceRules":[{"scope":"*"}]}}}`},
	} {
		k := policyKind(t, c.kind)
		got := objectOf(t, k, c.body)
		var want map[string]any
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Object, want) {
			g, _ := json.Marshal(got.Object)
			t.Errorf("%s %s:\n got  %s\n want %s", c.kind, c.body, g, c.want)
		}
	}
}

// An update compiles the matchConditions again only if they or the
// paramKind changed (ValidateValidatingAdmissionPolicyUpdate, and its
// mutating twin), so a policy stored with one that no longer compiles
// keeps it through other changes; the rest of the spec is checked as on a
// create. (kube-apiserver stores no such policy itself: this is a policy
// another server stored.)
func TestAdmissionPolicyUpdateKeepsUnchangedMatchConditions(t *testing.T) {
	const matching = `"paramKind":{"apiVersion":"v1","kind":"ConfigMap"},
		"matchConstraints":{"resourceRules":[{"apiGroups":["x"],"apiVersions":["v1"],"operations":["*"],"resources":["y"]}]},
		"matchConditions":[{"name":"m","expression":"nope"}]`
	for kind, body := range map[string]string{
		"ValidatingAdmissionPolicy": `{"metadata":{"name":"p"},"spec":{` + matching + `,"validations":[{"expression":"true"}]}}`,
		"MutatingAdmissionPolicy": `{"metadata":{"name":"p"},"spec":{` + matching + `,"reinvocationPolicy":"Never",
			"mutations":[{"patchType":"ApplyConfiguration","applyConfiguration":{"expression":"Object{}"}}]}}`,
	} {
		k := policyKind(t, kind)
		old := objectOf(t, k, body)
		if errs := k.Validate(old.DeepCopy()); len(errs) != 1 {
			t.Fatalf("%s: a create of the stored policy: %v, want its one error", kind, errs)
		}
		next := old.DeepCopy()
		next.SetLabels(map[string]string{"a": "b"})
		unstructured.SetNestedField(next.Object, "Ignore", "spec", "failurePolicy")
		if errs := k.ValidateUpdate(next, old); len(errs) != 0 {
			t.Errorf("%s: an update that keeps the matchConditions: %v", kind, errs)
		}
		unstructured.SetNestedField(next.Object, "Sometimes", "spec", "failurePolicy")
		if got, want := errorStrings(k.ValidateUpdate(next, old)), []string{`spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore"`}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the rest of the spec is checked: %q, want %q", kind, got, want)
		}

		wantCondition := "spec.matchConditions[0].expression: Invalid value: \"nope\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'nope' (in container '')\n | nope\n | ^"
		for what, change := range map[string]func(*unstructured.Unstructured){
			"a changed matchCondition": func(o *unstructured.Unstructured) {
				unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "m", "expression": " nope"}}, "spec", "matchConditions")
			},
			"a changed paramKind": func(o *unstructured.Unstructured) {
				unstructured.SetNestedField(o.Object, "Secret", "spec", "paramKind", "kind")
			},
		} {
			next := old.DeepCopy()
			change(next)
			if got := errorStrings(k.ValidateUpdate(next, old)); !reflect.DeepEqual(got, []string{wantCondition}) {
				t.Errorf("%s: %s: %q, want %q", kind, what, got, wantCondition)
			}
		}
	}
}

// An update that changes the status (only a write to /status does: the
// registry keeps the stored one otherwise) checks the status alone, as
// ValidateValidatingAdmissionPolicyStatusUpdate: the type checker's
// warnings, then the conditions.
func TestAdmissionPolicyStatusUpdate(t *testing.T) {
	k := policyKind(t, "ValidatingAdmissionPolicy")
	old := objectOf(t, k, `{"metadata":{"name":"p"},"spec":{"failurePolicy":"Sometimes"},"status":{}}`)
	next := old.DeepCopy()
	next.Object["status"] = map[string]any{
		"observedGeneration": int64(1),
		"typeChecking": map[string]any{"expressionWarnings": []any{
			map[string]any{"fieldRef": "", "warning": ""},
			map[string]any{"fieldRef": " spec.x[ ", "warning": "w"},
			map[string]any{"fieldRef": "spec.validations[0].expression", "warning": "w"},
		}},
		"conditions": []any{map[string]any{"type": "Ready", "status": "Maybe", "reason": "R", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}},
	}
	want := []string{
		"status.typeChecking.expressionWarnings[0].warning: Required value",
		"status.typeChecking.expressionWarnings[0].fieldRef: Required value",
		`status.typeChecking.expressionWarnings[1].fieldRef: Invalid value: "spec.x[": invalid JSONPath: unterminated array`,
		`status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"`,
	}
	if got := errorStrings(k.ValidateUpdate(next, old)); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n got  %q\n want %q", got, want)
	}
}

// The printer's columns: a validating policy's number of validations, a
// mutating one's of mutations, and their paramKind; a binding's policy
// and paramRef, as upstream's printer writes them.
func TestAdmissionPolicyColumns(t *testing.T) {
	cells := func(k *registry.Kind, body string) []any {
		obj := objectOf(t, k, body)
		var out []any
		for _, c := range k.Columns {
			if c.Value != nil {
				out = append(out, c.Value(obj))
			}
		}
		return out
	}
	policy, binding := policyKind(t, "ValidatingAdmissionPolicy"), policyKind(t, "ValidatingAdmissionPolicyBinding")
	mutating, mutatingBinding := policyKind(t, "MutatingAdmissionPolicy"), policyKind(t, "MutatingAdmissionPolicyBinding")
	for _, c := range []struct {
		k    *registry.Kind
		body string
		want []any
	}{
		{policy, `{"spec":{}}`, []any{int64(0), "<unset>"}},
		{policy, `{"spec":{"validations":[{},{}],"paramKind":{"apiVersion":"example.com/v1","kind":"Limits"}}}`, []any{int64(2), "example.com/v1/Limits"}},
		{binding, `{"spec":{"policyName":"p"}}`, []any{"p", "<unset>"}},
		{binding, `{"spec":{"policyName":"p","paramRef":{"name":"x","namespace":"ns"}}}`, []any{"p", "ns/x"}},
		{binding, `{"spec":{"policyName":"p","paramRef":{"name":"x"}}}`, []any{"p", "*/x"}},
		{binding, `{"spec":{"paramRef":{"selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["v"]}]}}}}`,
			[]any{"", "&LabelSelector{MatchLabels:map[string]string{a: b,},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:k,Operator:In,Values:[v],},},}"}},
		{binding, `{"spec":{"paramRef":{}}}`, []any{"", "<unset>"}},
		{mutating, `{"spec":{}}`, []any{int64(0), "<unset>"}},
		{mutating, `{"spec":{"mutations":[{},{},{}],"validations":[{}],"paramKind":{"apiVersion":"v1","kind":"ConfigMap"}}}`, []any{int64(3), "v1/ConfigMap"}},
		{mutatingBinding, `{"spec":{"policyName":"p","paramRef":{"name":"x","namespace":"ns"}}}`, []any{"p", "ns/x"}},
		{mutatingBinding, `{"spec":{"policyName":"p","paramRef":{"selector":{}}}}`, []any{"p", "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}"}},
	} {
		if got := cells(c.k, c.body); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s: %q, want %q", c.k.Kind, c.body, got, c.want)
		}
	}
	var names []string
	for _, k := range []*registry.Kind{policy, binding, mutating, mutatingBinding} {
		for _, c := range k.Columns {
			names = append(names, c.Name+":"+c.Type)
		}
	}
	if want := []string{"Validations:integer", "ParamKind:string", "Age:string", "PolicyName:string", "ParamRef:string", "Age:string",
		"Mutations:integer", "ParamKind:string", "Age:string", "PolicyName:string", "ParamRef:string", "Age:string"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %q, want %q", names, want)
	}
}

// Stored, a policy starts at generation 1 with "status: {}" whatever the
// create sent; a change of its spec bumps the generation, one of its
// metadata or through /status does not; writes to the policy keep the
// status, writes to /status change nothing else. Neither kind creates on
// update or takes an update without a resourceVersion, and a binding has
// no /status.
func TestAdmissionPolicyStorage(t *testing.T) {
	reg := newRegistry(t, memoryStore(t), nil)
	ctx := context.Background()
	resource := func(name string) *registry.Resource {
		r, ok := reg.Get(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: name})
		if !ok {
			t.Fatalf("%s not served", name)
		}
		return r
	}
	policies, bindings := resource("validatingadmissionpolicies"), resource("validatingadmissionpolicybindings")
	k := policies.Kind()
	obj := objectOf(t, k, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"p"},
		"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":["x"],"apiVersions":["v1"],"operations":["*"],"resources":["y"]}]},
		"validations":[{"expression":"true"}]},"status":{"observedGeneration":5}}`)
	out, err := policies.Create(ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, out *unstructured.Unstructured, generation int64, status, failurePolicy string) {
		t.Helper()
		st, _ := json.Marshal(out.Object["status"])
		fp, _, _ := unstructured.NestedString(out.Object, "spec", "failurePolicy")
		if out.GetGeneration() != generation || string(st) != status || fp != failurePolicy {
			t.Errorf("%s: generation %d, status %s, failurePolicy %s; want %d, %s, %s", what, out.GetGeneration(), st, fp, generation, status, failurePolicy)
		}
	}
	check("create", out, 1, `{}`, "Fail")
	patch := func(name, subresource, body string) (*unstructured.Unstructured, error) {
		out, _, err := policies.Patch(ctx, "v1", "", name, []byte(body), registry.PatchOptions{Type: types.MergePatchType,
			WriteOptions: registry.WriteOptions{FieldManager: "test", Subresource: subresource}})
		return out, err
	}
	steps := []struct {
		what, subresource, body string
		generation              int64
		status, failurePolicy   string
	}{
		{"a spec change", "", `{"spec":{"failurePolicy":"Ignore"},"status":{"observedGeneration":3}}`, 2, `{}`, "Ignore"},
		{"a label", "", `{"metadata":{"labels":{"a":"b"}}}`, 2, `{}`, "Ignore"},
		{"a status write", "status", `{"spec":{"failurePolicy":"Fail"},"status":{"observedGeneration":2}}`, 2, `{"observedGeneration":2}`, "Ignore"},
		{"a spec change keeps the status", "", `{"spec":{"failurePolicy":"Fail"},"status":null}`, 3, `{"observedGeneration":2}`, "Fail"},
	}
	for _, s := range steps {
		out, err := patch("p", s.subresource, s.body)
		if err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		check(s.what, out, s.generation, s.status, s.failurePolicy)
	}
	if _, err := patch("p", "status", `{"status":{"conditions":[{"type":"Ready","status":"Maybe"}]}}`); !apierrors.IsInvalid(err) {
		t.Errorf("an invalid status: %v", err)
	}

	// No create on update, no update without a resourceVersion.
	other := obj.DeepCopy()
	other.SetName("q")
	if _, err := policies.Update(ctx, "v1", "", "q", other, registry.WriteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an update of a policy that does not exist: %v", err)
	}
	again := obj.DeepCopy()
	again.SetResourceVersion("")
	if _, err := policies.Update(ctx, "v1", "", "p", again, registry.WriteOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("an update without a resourceVersion: %v", err)
	}
	if bindings.Kind().Status || !bindings.Kind().Generation || bindings.Kind().CreateOnUpdate || bindings.Kind().UnconditionalUpdate {
		t.Errorf("binding: %+v", bindings.Kind())
	}
}
