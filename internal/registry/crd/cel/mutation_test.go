package cel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The errors kube-apiserver v1.37.2 gave for a MutatingAdmissionPolicy
// with these expressions (kubectl create --dry-run=server): the patch
// types and jsonpatch.escapeKey exist only in mutations.
func TestMutationCheckerAsKubeAPIServer(t *testing.T) {
	c := NewPolicyChecker(false, true)
	var got checkErrors
	add := got.add
	spec := field.NewPath("spec")
	add(CheckPolicyMatchCondition("jsonpatch.escapeKey('a') == 'a'", false, spec.Child("matchConditions").Index(0).Child("expression")))
	add(CheckPolicyMatchCondition("Object{} == Object{}", false, spec.Child("matchConditions").Index(1).Child("expression")))
	add(c.Variable("v", "object.metadata.name", spec.Child("variables").Index(0).Child("expression")))
	add(c.Variable("w", "Object{}", spec.Child("variables").Index(1).Child("expression")))
	mutation := func(i int, kind string) *field.Path {
		return spec.Child("mutations").Index(i).Child(kind, "expression")
	}
	for i, e := range []string{
		"object",
		"Object{metadata: Object.metadata{labels: {'a': variables.v}}}",
		"Object{spec: Object.spec{x: authorizer.group('').resource('x').check('get').allowed()}}",
		"Object{spec: params.x}",
		"Object.spec{}",
		"Objectx{}",
	} {
		add(c.ApplyConfiguration(e, mutation(i, "applyConfiguration")))
	}
	for i, e := range []string{
		"[JSONPatch{op: 'add', path: '/x/' + jsonpatch.escapeKey('a/b'), value: 1}]",
		"JSONPatch{op: 'add'}",
		"[JSONPatch{op: 1}]",
		"[JSONPatch{foo: 'x'}]",
		"[]",
	} {
		add(c.JSONPatch(e, mutation(6+i, "jsonPatch")))
	}
	want := []string{
		"spec.matchConditions[0].expression: Invalid value: \"jsonpatch.escapeKey('a') == 'a'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'jsonpatch' (in container '')\n | jsonpatch.escapeKey('a') == 'a'\n | ^\nERROR: <input>:1:20: undeclared reference to 'escapeKey' (in container '')\n | jsonpatch.escapeKey('a') == 'a'\n | ...................^",
		"spec.matchConditions[1].expression: Invalid value: \"Object{} == Object{}\": compilation failed: ERROR: <input>:1:7: undeclared reference to 'Object' (in container '')\n | Object{} == Object{}\n | ......^\nERROR: <input>:1:19: undeclared reference to 'Object' (in container '')\n | Object{} == Object{}\n | ..................^",
		"spec.variables[1].expression: Invalid value: \"Object{}\": compilation failed: ERROR: <input>:1:7: undeclared reference to 'Object' (in container '')\n | Object{}\n | ......^",
		"spec.mutations[0].applyConfiguration.expression: Invalid value: \"object\": must evaluate to Object but got dyn",
		"spec.mutations[3].applyConfiguration.expression: Invalid value: \"Object{spec: params.x}\": compilation failed: ERROR: <input>:1:14: undeclared reference to 'params' (in container '')\n | Object{spec: params.x}\n | .............^",
		"spec.mutations[4].applyConfiguration.expression: Invalid value: \"Object.spec{}\": must evaluate to Object but got Object.spec",
		"spec.mutations[5].applyConfiguration.expression: Invalid value: \"Objectx{}\": compilation failed: ERROR: <input>:1:8: undeclared reference to 'Objectx' (in container '')\n | Objectx{}\n | .......^",
		"spec.mutations[7].jsonPatch.expression: Invalid value: \"JSONPatch{op: 'add'}\": must evaluate to list(JSONPatch) but got JSONPatch",
		"spec.mutations[8].jsonPatch.expression: Invalid value: \"[JSONPatch{op: 1}]\": compilation failed: ERROR: <input>:1:14: expected type of field 'op' is 'string' but provided type is 'int'\n | [JSONPatch{op: 1}]\n | .............^",
		"spec.mutations[9].jsonPatch.expression: Invalid value: \"[JSONPatch{foo: 'x'}]\": compilation failed: ERROR: <input>:1:15: expected type of field 'foo' is '' but provided type is 'string'\n | [JSONPatch{foo: 'x'}]\n | ..............^",
		"spec.mutations[10].jsonPatch.expression: Invalid value: \"[]\": must evaluate to list(JSONPatch) but got list(dyn)",
	}
	got.expect(t, want)
	if e := NewPolicyChecker(true, false).ApplyConfiguration("Object{spec: Object.spec{n: params.n}}", nil); e != nil {
		t.Errorf("params with a paramKind: %v", e)
	}
}

func TestPolicyMutate(t *testing.T) {
	p := CompilePolicy(PolicySpec{
		HasParams: true,
		Variables: []NamedExpression{{Name: "name", Expression: "object.metadata.name"}},
		Mutations: []Mutation{
			{PatchType: ApplyConfiguration, Expression: `Object{
				metadata: Object.metadata{labels: {'by': variables.name + params.suffix}},
				spec: Object.spec{items: [Object.spec.items{name: 'a', n: 1}], list: [1, 2], d: 2.5, nested: {'k': [true]}}}`},
			{PatchType: JSONPatch, Expression: `[
				JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b~c'), value: 'v'},
				JSONPatch{op: 'add', path: '/spec/o', value: Object.spec.o{x: 9007199254740993}},
				JSONPatch{op: 'add', path: '/spec/t', value: timestamp('2020-01-01T00:00:00Z')},
				JSONPatch{op: 'copy', from: '/spec/o', path: '/spec/p'},
				JSONPatch{op: 'remove', path: '/spec/q'}]`},
			{PatchType: ApplyConfiguration, Expression: "Object{spec: Object.metadata{}}"},
			{PatchType: JSONPatch, Expression: "[JSONPatch{op: 'add', path: '/x', value: Object.spec{a: Object.x{}}}]"},
			{PatchType: JSONPatch, Expression: "[JSONPatch{op: 'add', path: '/x', value: variables.name + string(1/0)}]"},
			{PatchType: ApplyConfiguration, Expression: "Object{spec: Object.spec{n: 1}}  "},
			{PatchType: JSONPatch, Expression: "[JSONPatch{op: 'add', path: '/x', value: Object.x{t: timestamp('2020-01-01T00:00:00Z')}}]"},
		},
	})
	if errs := p.CompileErrors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	in := &PolicyInput{Object: map[string]any{"metadata": map[string]any{"name": "w"}}, Params: map[string]any{"suffix": "-p"}}
	ctx := context.Background()
	if p.Mutations() != 7 {
		t.Fatalf("%d mutations, want 7", p.Mutations())
	}
	got, err := p.Mutate(ctx, 0, in)
	if err != nil {
		t.Fatal(err)
	}
	apply, _ := json.Marshal(got.Apply)
	if want := `{"metadata":{"labels":{"by":"w-p"}},"spec":{"d":2.5,"items":[{"n":1,"name":"a"}],"list":[1,2],"nested":{"k":[true]}}}`; string(apply) != want || got.JSONPatch != nil {
		t.Errorf("apply configuration %s, want %s", apply, want)
	}
	got, err = p.Mutate(ctx, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	// As upstream: a value goes to JSON as protobuf's Value does
	// (numbers as doubles, timestamps as RFC 3339).
	want := `[{"op":"add","path":"/metadata/labels/a~1b~0c","value":"v"},` +
		`{"op":"add","path":"/spec/o","value":{"x":9007199254740992}},` +
		`{"op":"add","path":"/spec/t","value":"2020-01-01T00:00:00Z"},` +
		`{"from":"/spec/o","op":"copy","path":"/spec/p"},{"op":"remove","path":"/spec/q"}]`
	if string(got.JSONPatch) != want || got.Apply != nil {
		t.Errorf("JSON patch\n%s\nwant\n%s", got.JSONPatch, want)
	}
	for i, want := range map[int]string{
		2: `type mismatch: unexpected type name "Object.metadata", expected "Object.spec", which matches field name path from root Object type`,
		3: `type mismatch: unexpected type name "Object.x", expected "Object.spec.a", which matches field name path from root Object type`,
		4: `expression '[JSONPatch{op: 'add', path: '/x', value: variables.name + string(1/0)}]' resulted in error: division by zero`,
	} {
		if _, err := p.Mutate(ctx, i, in); err == nil || err.Error() != want {
			t.Errorf("mutation %d: %v, want %s", i, err, want)
		}
	}
	// A timestamp in an Object: upstream's conversion fails too (protobuf's
	// message has spaces that vary).
	if _, err := p.Mutate(ctx, 6, in); err == nil || !strings.HasPrefix(err.Error(), "JSONPath valueExpression evaluated to a type that could not marshal to JSON: proto:") ||
		!strings.HasSuffix(err.Error(), "time.Time") {
		t.Errorf("a timestamp in an Object: %v", err)
	}
	if got, err := p.Mutate(ctx, 5, in); err != nil || got.Apply["spec"].(map[string]any)["n"] != int64(1) {
		t.Errorf("an expression with trailing spaces: %v %v", got, err)
	}

	broken := CompilePolicy(PolicySpec{Mutations: []Mutation{{PatchType: JSONPatch, Expression: "[JSONPatch{op: 1}]"}}})
	if _, err := broken.Mutate(ctx, 0, in); err == nil || !strings.HasPrefix(err.Error(), "compilation failed: ERROR: <input>:1:14: expected type of field 'op' is 'string'") {
		t.Errorf("a mutation that does not compile: %v", err)
	}
}

// Variables are evaluated again for each mutation, over the object as it
// is then.
func TestPolicyMutateVariables(t *testing.T) {
	p := CompilePolicy(PolicySpec{
		Variables: []NamedExpression{{Name: "n", Expression: "object.n"}},
		Mutations: []Mutation{
			{PatchType: ApplyConfiguration, Expression: "Object{n: variables.n + 1}"},
		},
	})
	ctx := context.Background()
	for n := int64(1); n <= 3; n++ {
		got, err := p.Mutate(ctx, 0, &PolicyInput{Object: map[string]any{"n": n}})
		if err != nil || got.Apply["n"] != n+1 {
			t.Errorf("object.n %d: %v %v", n, got.Apply, err)
		}
	}
}
