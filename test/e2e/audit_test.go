package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kplane serve with --audit-policy-file and --audit-log-path writes
// kubectl's requests to the audit log as kube-apiserver does: who, what,
// the decision, the object a create sent even as protobuf, and an
// admission policy's audit annotations; in blocking mode (the default)
// and in batch mode, whose queued events are all written by the time
// kplane has stopped.
func TestAuditLog(t *testing.T) {
	for _, mode := range [][]string{nil, {"--audit-log-mode", "batch", "--audit-log-batch-max-size", "10", "--audit-log-batch-max-wait", "50ms"}} {
		name := "blocking"
		if mode != nil {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) { testAuditLog(t, mode) })
	}
}

func testAuditLog(t *testing.T, mode []string) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(`
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Request
  resources: [{group: "", resources: [configmaps]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A policy that audits configmaps with two keys or more.
	vap := filepath.Join(dir, "vap.yaml")
	if err := os.WriteFile(vap, []byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: audit-keys}
spec:
  matchConstraints:
    resourceRules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  validations:
  - expression: "!has(object.data) || size(object.data) <= 1"
    message: too many keys
  auditAnnotations:
  - key: keys
    valueExpression: "string(has(object.data) ? size(object.data) : 0)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: audit-keys}
spec: {policyName: audit-keys, validationActions: [Audit]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	s := startServer(t, append([]string{"--audit-policy-file", policy, "--audit-log-path", logPath}, mode...)...)
	s.mustKubectl(t, "apply", "-f", vap)
	s.mustKubectl(t, "create", "configmap", "audited", "--from-literal=k=v", "--from-literal=j=w")
	s.mustKubectl(t, "get", "namespaces") // not in the policy: no events
	if mode != nil {
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	}

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []string
	var done map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		stages = append(stages, e["stage"].(string)+" "+e["verb"].(string))
		if e["stage"] == "ResponseComplete" {
			done = e
		}
	}
	if strings.Join(stages, ", ") != "RequestReceived create, ResponseComplete create" || done == nil {
		t.Fatalf("events: %v", stages)
	}
	user, _ := done["user"].(map[string]any)
	ref, _ := done["objectRef"].(map[string]any)
	req, _ := done["requestObject"].(map[string]any)
	data, _ := req["data"].(map[string]any)
	notes, _ := done["annotations"].(map[string]any)
	if user["username"] != "kplane-admin" || ref["name"] != "audited" || ref["namespace"] != "default" || data["k"] != "v" ||
		notes["authorization.k8s.io/decision"] != "allow" || !strings.HasPrefix(done["userAgent"].(string), "kubectl/") ||
		notes["audit-keys/keys"] != "2" || !strings.Contains(str(notes["validation.policy.admission.k8s.io/validation_failure"]), `"message":"too many keys"`) {
		t.Errorf("the create's event: %v", done)
	}
}

func str(v any) string { s, _ := v.(string); return s }
