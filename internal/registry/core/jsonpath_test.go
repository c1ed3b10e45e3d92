package core

import (
	"fmt"
	"testing"

	"k8s.io/client-go/util/jsonpath"
)

// checkFieldRef accepts and refuses what kubectl's JSONPath parser does,
// with its words.
func TestCheckFieldRefAsClientGo(t *testing.T) {
	for _, ref := range []string{
		"spec.validations[0].expression", "spec.validations[*].expression", ".spec.x", "spec.matchConditions[0]",
		"spec['a b']", "spec.x[1:3]", "spec.x[-1]", "spec.x[0,1]", "spec..name", "$.spec", "@.spec",
		"spec.x[", "spec.x[a]", "spec.x[1:b]", "spec'x", `spec"x`, "spec%x", "spec.x[?(@.a==1", "spec.x[?(@.a==1)]",
		"spec...x", "spec....x", "spec.x}", "spec,x", "spec x", "spec.x}{y", "spec.x\n", "spec.x[0]]", "spec.\\.x", "spec.x[1:2:3]", "spec{x}",
	} {
		want := jsonpath.New("spec").Parse("{" + ref + "}")
		got := checkFieldRef(ref)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: got %v, client-go's parser says %v", ref, got, want)
		}
	}
}
