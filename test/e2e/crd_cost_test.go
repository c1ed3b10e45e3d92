package e2e

import (
	"strings"
	"testing"
)

// TestCRDRuleCost: a CEL rule whose estimated cost is over upstream's
// limit is refused when the CRD is created, naming the rule; bounding the
// lists it walks makes the same rule acceptable.
func TestCRDRuleCost(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		crd := func(listBound, itemBound string) string {
			return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: costly.e2e.kplane.dev
spec:
  group: e2e.kplane.dev
  names: {kind: Costly, plural: costly, singular: costly, listKind: CostlyList}
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
            x-kubernetes-validations:
            - rule: "self.names.all(a, self.names.all(b, a == b || a != b))"
            properties:
              names:
                type: array` + listBound + `
                items:
                  type: string` + itemBound + `
`
		}
		_, stderr, err := s.kubectl("apply", "-f", writeFile(t, "costly.yaml", crd("", "")))
		if err == nil || !strings.Contains(stderr, "x-kubernetes-validations[0].rule") || !strings.Contains(stderr, "estimated rule cost exceeds budget") {
			t.Fatalf("an unbounded costly rule was not refused: %v\n%s", err, stderr)
		}
		if out := s.mustKubectl(t, "apply", "-f", writeFile(t, "bounded.yaml", crd("\n                maxItems: 10", "\n                  maxLength: 64"))); !strings.Contains(out, "created") {
			t.Fatalf("the bounded rule: %s", out)
		}
	})
}
