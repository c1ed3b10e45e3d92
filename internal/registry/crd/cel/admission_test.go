package cel

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A webhook's matchCondition sees admission's variables, typed as
// upstream types them, and must be a bool; the errors are upstream's (as
// kube-apiserver v1.37.2 answered them).
func TestCheckMatchCondition(t *testing.T) {
	for _, expr := range []string{
		"true",
		"object.metadata.name == 'x' && oldObject == null",
		"request.kind.group == '' && request.resource.resource == 'pods' && request.subResource == '' && request.requestKind.version == 'v1'",
		"request.requestResource.group == '' && request.requestSubResource == '' && request.name != '' && request.namespace != ''",
		"request.operation == 'CREATE' && request.dryRun && request.options != null",
		"request.userInfo.username != '' && request.userInfo.uid != '' && 'g' in request.userInfo.groups && 'k' in request.userInfo.extra",
		"namespaceObject.metadata.labels['a'] == 'b' && namespaceObject.metadata.UID != '' && namespaceObject.spec.finalizers.size() > 0",
		"namespaceObject.status.phase == 'Active' && namespaceObject.status.conditions.all(c, c.lastTransitionTime < timestamp('2030-01-01T00:00:00Z'))",
		"authorizer.group('apps').resource('deployments').namespace('ns').check('get').allowed()",
		"authorizer.requestResource.subresource('status').check('update').allowed()",
		"dyn(object.spec.replicas) > 1",
	} {
		if err := CheckMatchCondition(expr, field.NewPath("e")); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
	for expr, want := range map[string]string{
		"1":                    `e: Invalid value: "1": must evaluate to bool but got int`,
		"request.userInfo":     `e: Invalid value: "request.userInfo": must evaluate to bool but got kubernetes.UserInfo`,
		"namespaceObject.spec": `e: Invalid value: "namespaceObject.spec": must evaluate to bool but got kubernetes.NamespaceSpec`,
		"params.x":             "e: Invalid value: \"params.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x\n | ^",
		"request.nope":         "e: Invalid value: \"request.nope\": compilation failed: ERROR: <input>:1:8: undefined field 'nope'\n | request.nope\n | .......^",
		"variables.x":          "e: Invalid value: \"variables.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables' (in container '')\n | variables.x\n | ^",
	} {
		if err := CheckMatchCondition(expr, field.NewPath("e")); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", expr, err, want)
		}
	}
}
