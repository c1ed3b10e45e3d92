package cel

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The errors kube-apiserver v1.37.2 gave for a MutatingAdmissionPolicy
// with these expressions (kubectl create --dry-run=server): the patch
// types and jsonpatch.escapeKey exist only in mutations.
func TestMutationCheckerAsKubeAPIServer(t *testing.T) {
	c := NewPolicyChecker(false, true)
	var got []string
	add := func(e *field.Error) {
		if e != nil {
			got = append(got, e.Error())
		}
	}
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
	if strings.Join(got, "\n\n") != strings.Join(want, "\n\n") {
		t.Errorf("got\n%s\n\nwant\n%s", strings.Join(got, "\n\n"), strings.Join(want, "\n\n"))
	}
	if e := NewPolicyChecker(true, false).ApplyConfiguration("Object{spec: Object.spec{n: params.n}}", nil); e != nil {
		t.Errorf("params with a paramKind: %v", e)
	}
}
