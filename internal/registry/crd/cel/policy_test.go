package cel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkErrors are the errors a checker gave, as their strings.
type checkErrors []string

func (c *checkErrors) add(e *field.Error) {
	if e != nil {
		*c = append(*c, e.Error())
	}
}

// expect compares the errors with want, in order.
func (c checkErrors) expect(t *testing.T, want []string) {
	t.Helper()
	if strings.Join(c, "\n\n") != strings.Join(want, "\n\n") {
		t.Errorf("got\n%s\n\nwant\n%s", strings.Join(c, "\n\n"), strings.Join(want, "\n\n"))
	}
}

// The errors kube-apiserver v1.37.2 gave for a policy with these
// expressions (variables x: "1", yy: "variables.x + 'a'", zz:
// "variables.yy"; no paramKind).
func TestPolicyCheckerAsKubeAPIServer(t *testing.T) {
	c := NewPolicyChecker(false, true)
	var got checkErrors
	add := got.add
	spec := field.NewPath("spec")
	add(CheckPolicyMatchCondition("variables.x == 1", false, spec.Child("matchConditions").Index(0).Child("expression")))
	add(CheckPolicyMatchCondition("authorizer.group('').resource('pods').check('get').allowed()", false, spec.Child("matchConditions").Index(1).Child("expression")))
	for i, v := range [][2]string{{"x", "1"}, {"yy", "variables.x + 'a'"}, {"zz", "variables.yy"}} {
		add(c.Variable(v[0], v[1], spec.Child("variables").Index(i).Child("expression")))
	}
	for i, v := range []string{"1", "params.x", "variables.x == 'a'", "variables.zz == 'a'"} {
		add(c.Validation(v, spec.Child("validations").Index(i).Child("expression")))
	}
	add(c.MessageExpression("authorizer.group('').resource('pods').check('get').reason()", spec.Child("validations").Index(4).Child("messageExpression")))
	add(c.MessageExpression("variables.x", spec.Child("validations").Index(5).Child("messageExpression")))
	for i, v := range []string{" 1 ", "null", "request.name"} {
		add(c.AuditAnnotation(v, spec.Child("auditAnnotations").Index(i).Child("valueExpression")))
	}
	want := []string{
		"spec.matchConditions[0].expression: Invalid value: \"variables.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n | variables.x == 1\n | ^",
		"spec.variables[1].expression: Invalid value: \"variables.x + 'a'\": compilation failed: ERROR: <input>:1:13: found no matching overload for '_+_' applied to '(int, string)'\n | variables.x + 'a'\n | ............^",
		"spec.validations[0].expression: Invalid value: \"1\": must evaluate to bool but got int",
		"spec.validations[1].expression: Invalid value: \"params.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x\n | ^",
		"spec.validations[2].expression: Invalid value: \"variables.x == 'a'\": compilation failed: ERROR: <input>:1:13: found no matching overload for '_==_' applied to '(int, string)'\n | variables.x == 'a'\n | ............^",
		"spec.validations[4].messageExpression: Invalid value: \"authorizer.group('').resource('pods').check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.group('').resource('pods').check('get').reason()\n | ^",
		"spec.validations[5].messageExpression: Invalid value: \"variables.x\": must evaluate to string but got int",
		"spec.auditAnnotations[0].valueExpression: Invalid value: \" 1 \": must evaluate to one of [string null_type] but got int",
	}
	got.expect(t, want)
}

// A policy with variables has `variables` even when none of them is
// checked (each expression empty): a reference to one is an undefined
// field, as upstream's.
func TestPolicyCheckerDeclaresVariables(t *testing.T) {
	e := NewPolicyChecker(false, true).Validation("variables.a == 1", field.NewPath("v"))
	if e == nil || !strings.Contains(e.Detail, "<input>:1:10: undefined field 'a'") {
		t.Errorf("got %v", e)
	}
	e = NewPolicyChecker(false, false).Validation("variables.a == 1", field.NewPath("v"))
	if e == nil || !strings.Contains(e.Detail, "<input>:1:1: undeclared reference to 'variables'") {
		t.Errorf("without variables: %v", e)
	}
}

func TestPolicyCheckerParams(t *testing.T) {
	if e := NewPolicyChecker(true, false).Validation("params.max >= object.spec.replicas", nil); e != nil {
		t.Errorf("params with a paramKind: %v", e)
	}
	if e := CheckPolicyMatchCondition("params.on == true", true, nil); e != nil {
		t.Errorf("params in a matchCondition with a paramKind: %v", e)
	}
	if e := NewPolicyChecker(false, false).Validation("has(object.spec)", nil); e != nil {
		t.Errorf("no variables, no params: %v", e)
	}
}

func deployment(replicas int64) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"replicas": replicas}}
}

func TestPolicyValidate(t *testing.T) {
	p := CompilePolicy(PolicySpec{
		HasParams: true,
		Variables: []NamedExpression{
			{Name: "replicas", Expression: "object.spec.replicas"},
			{Name: "broken", Expression: "object.spec.missing"},
		},
		Validations: []Validation{
			{Expression: "variables.replicas <= params.max"},
			{Expression: "variables.replicas <= params.max", Message: "  too many  ", Reason: "Forbidden"},
			{Expression: "variables.replicas <= params.max", Message: "unused",
				MessageExpression: "'replicas ' + string(variables.replicas) + ' over ' + string(params.max)"},
			{Expression: "variables.replicas <= params.max", Message: "fallback", MessageExpression: "'a\\nb'"},
			{Expression: "variables.broken == 1"},
			{Expression: "object.spec.replicas > 0"},
		},
		AuditAnnotations: []AuditAnnotation{
			{Key: "high", ValueExpression: "'replicas ' + string(variables.replicas)"},
			{Key: "none", ValueExpression: "null"},
			{Key: "empty", ValueExpression: "'  '"},
			{Key: "failing", ValueExpression: "string(variables.broken)"},
		},
	})
	if errs := p.CompileErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	in := &PolicyInput{Object: deployment(5), Request: map[string]any{"name": "web"}, Params: map[string]any{"max": int64(3)}}
	decisions, annotations, err := p.Validate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	decisions, annotations = untimed(decisions, annotations)
	want := []Decision{
		{Index: 0, Reason: "Invalid", Message: "failed expression: variables.replicas <= params.max"},
		{Index: 1, Reason: "Forbidden", Message: "too many"},
		{Index: 2, Reason: "Invalid", Message: "replicas 5 over 3"},
		{Index: 3, Reason: "Invalid", Message: "fallback"},
		{Index: 4, Error: true, Message: "expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing"},
	}
	if len(decisions) != len(want) {
		t.Fatalf("decisions %+v, want %+v", decisions, want)
	}
	for i := range want {
		if decisions[i] != want[i] {
			t.Errorf("decision %d: %+v, want %+v", i, decisions[i], want[i])
		}
	}
	wantAnn := []AnnotationResult{{Key: "high", Value: "replicas 5"}} // none and empty are left out
	if len(annotations) != 2 || annotations[0] != wantAnn[0] || annotations[1].Key != "failing" ||
		annotations[1].Err == nil || annotations[1].Err.Error() != "expression 'string(variables.broken)' resulted in error: composited variable \"broken\" fails to evaluate: no such key: missing" {
		t.Errorf("annotations %+v", annotations)
	}

	in.Object = deployment(2)
	decisions, annotations, err = p.Validate(context.Background(), in)
	if err != nil || len(decisions) != 1 || decisions[0].Index != 4 || len(annotations) != 2 || annotations[0].Value != "replicas 2" {
		t.Errorf("within bounds: %+v %+v %v", decisions, annotations, err)
	}
}

// untimed are ds and as without their durations, which vary.
func untimed(ds []Decision, as []AnnotationResult) ([]Decision, []AnnotationResult) {
	for i := range ds {
		ds[i].Elapsed = 0
	}
	for i := range as {
		as[i].Elapsed = 0
	}
	return ds, as
}

func TestPolicyMatchConditions(t *testing.T) {
	p := CompilePolicy(PolicySpec{MatchConditions: []NamedExpression{
		{Name: "errs", Expression: "object.metadata.missing == 'x'"},
		{Name: "web", Expression: "object.metadata.name == 'web'"},
		{Name: "errs-too", Expression: "object.spec.missing == 1"},
	}})
	ctx := context.Background()
	// The errors before the false one are counted, as upstream's metrics
	// count them.
	ok, failed, err := p.Match(ctx, &PolicyInput{Object: map[string]any{"metadata": map[string]any{"name": "db"}}})
	if ok || failed != 1 || err != nil {
		t.Errorf("a false condition wins over errors: %v %d %v", ok, failed, err)
	}
	_, failed, err = p.Match(ctx, &PolicyInput{Object: deployment(1)})
	want := "[expression 'object.metadata.missing == 'x'' resulted in error: no such key: missing, expression 'object.spec.missing == 1' resulted in error: no such key: missing]"
	if failed != 2 || err == nil || err.Error() != want {
		t.Errorf("errors: %d %v, want 2 and %s", failed, err, want)
	}
}

// A variable is evaluated once however often it is read: its cost is
// paid once.
func TestPolicyVariablesAreEvaluatedOnce(t *testing.T) {
	p := CompilePolicy(PolicySpec{
		Variables:   []NamedExpression{{Name: "big", Expression: "object.items.map(x, x * 2)"}},
		Validations: []Validation{{Expression: "size(variables.big) > 0"}},
	})
	items := make([]any, 100)
	for i := range items {
		items[i] = int64(1)
	}
	a := p.activation(context.Background(), &PolicyInput{Object: map[string]any{"items": items}})
	a.vars.get("big")
	first := a.cost
	for range 3 {
		a.vars.get("big")
	}
	if first == 0 || a.cost != first {
		t.Errorf("cost %d after one read, %d after four: evaluated again", first, a.cost)
	}
}

// The authorizer asks the server's authorizer as the request's user (or
// a service account), a resource check at any version.
func TestPolicyAuthorizer(t *testing.T) {
	p := CompilePolicy(PolicySpec{Validations: []Validation{
		{Expression: "authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns').name('web').check('update').allowed()"},
		{Expression: "authorizer.requestResource.check('delete').allowed()"},
		{Expression: "authorizer.requestResource.check('update').reason() == 'RBAC: update'"},
		{Expression: "authorizer.serviceAccount('ns', 'bot').path('/healthz').check('get').allowed()"},
		{Expression: "authorizer.path('/metrics').check('get').errored()"},
		{Expression: "authorizer.group('').resource(' ').check('get').allowed()"},
	}})
	if errs := p.CompileErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	var checks []AuthzCheck
	in := &PolicyInput{
		Request:         map[string]any{},
		User:            AuthzUser{Name: "alice", Groups: []string{"dev"}},
		RequestResource: RequestResource{Resource: "configmaps", Namespace: "ns", Name: "cm"},
		Authorize: func(_ context.Context, c AuthzCheck) (bool, string, error) {
			checks = append(checks, c)
			if c.Path == "/metrics" {
				return false, "", errors.New("broken")
			}
			return c.Verb != "delete", "RBAC: " + c.Verb, nil
		},
	}
	decisions, _, err := p.Validate(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	decisions, _ = untimed(decisions, nil)
	want := []Decision{
		{Index: 1, Reason: "Invalid", Message: "failed expression: authorizer.requestResource.check('delete').allowed()"},
		{Index: 5, Error: true, Message: "expression 'authorizer.group('').resource(' ').check('get').allowed()' resulted in error: resource must not be empty"},
	}
	if fmt.Sprint(decisions) != fmt.Sprint(want) {
		t.Errorf("decisions\n%+v\nwant\n%+v", decisions, want)
	}
	alice := AuthzUser{Name: "alice", Groups: []string{"dev"}}
	wantChecks := []AuthzCheck{
		{User: alice, Verb: "update", ResourceRequest: true, Group: "apps", Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "web"},
		{User: alice, Verb: "delete", ResourceRequest: true, Resource: "configmaps", Namespace: "ns", Name: "cm"},
		{User: alice, Verb: "update", ResourceRequest: true, Resource: "configmaps", Namespace: "ns", Name: "cm"},
		{User: AuthzUser{Name: "system:serviceaccount:ns:bot", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns"}}, Verb: "get", Path: "/healthz"},
		{User: alice, Verb: "get", Path: "/metrics"},
	}
	if fmt.Sprint(checks) != fmt.Sprint(wantChecks) {
		t.Errorf("checks\n%+v\nwant\n%+v", checks, wantChecks)
	}
}

// messageExpressions have no authorizer, even through a variable: the
// message falls back to the validation's, as upstream's does.
func TestPolicyMessagesHaveNoAuthorizer(t *testing.T) {
	p := CompilePolicy(PolicySpec{
		Variables: []NamedExpression{
			{Name: "reason", Expression: "authorizer.path('/x').check('get').reason()"},
			{Name: "name", Expression: "object.metadata.name"},
		},
		Validations: []Validation{
			{Expression: "variables.reason == 'yes'", Message: "fallback", MessageExpression: "'reason: ' + variables.reason"},
			{Expression: "variables.reason == 'yes'", Message: "unused", MessageExpression: "'name: ' + variables.name"},
		},
	})
	if errs := p.CompileErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	in := &PolicyInput{Object: deployment(1), Request: map[string]any{},
		Authorize: func(context.Context, AuthzCheck) (bool, string, error) { return true, "no", nil }}
	decisions, _, err := p.Validate(context.Background(), in)
	decisions, _ = untimed(decisions, nil)
	want := []Decision{{Index: 0, Reason: "Invalid", Message: "fallback"}, {Index: 1, Reason: "Invalid", Message: "name: web"}}
	if err != nil || fmt.Sprint(decisions) != fmt.Sprint(want) {
		t.Errorf("got %+v %v\nwant %+v", decisions, err, want)
	}
}
