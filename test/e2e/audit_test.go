package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
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

// kplane serve with --audit-webhook-config-file sends the events to the
// webhook as audit.k8s.io/v1 EventLists, with the kubeconfig's
// credentials, beside the log file; a list the webhook refuses is sent
// again.
func TestAuditWebhook(t *testing.T) {
	var mu sync.Mutex
	var events []map[string]any
	refusals := 1 // the first list is refused once
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var list struct {
			Kind, APIVersion string
			Items            []map[string]any
		}
		if err := json.NewDecoder(r.Body).Decode(&list); err != nil || list.Kind != "EventList" || list.APIVersion != "audit.k8s.io/v1" ||
			r.Header.Get("Authorization") != "Bearer kplane-to-authz" || r.URL.Path != "/authorize" {
			http.Error(w, "not an event list", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refusals > 0 {
			refusals--
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		events = append(events, list.Items...)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata, resources: [{group: \"\", resources: [configmaps]}]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	s := startServer(t, "--audit-policy-file", policy, "--audit-log-path", logPath,
		"--audit-webhook-config-file", (&sarWebhook{Server: srv}).kubeconfig(t),
		"--audit-webhook-batch-max-wait", "100ms", "--audit-webhook-initial-backoff", "100ms")
	s.mustKubectl(t, "create", "configmap", "sent", "--from-literal=k=v")
	eventually(t, 30*time.Second, "the create's events at the webhook", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		var stages []string
		for _, e := range events {
			if ref, _ := e["objectRef"].(map[string]any); ref["resource"] == "configmaps" && e["verb"] == "create" {
				stages = append(stages, str(e["stage"])+" "+str(e["verb"]))
			}
		}
		got := strings.Join(stages, ", ")
		return got == "RequestReceived create, ResponseComplete create" && refusals == 0, got
	})
	data, err := os.ReadFile(logPath)
	if err != nil || strings.Count(string(data), `"stage":`) != 2 {
		t.Errorf("the log beside the webhook: %v\n%s", err, data)
	}
	mu.Lock()
	for _, e := range events {
		if _, ok := e["kind"]; ok {
			t.Errorf("a list's item has a kind of its own, as upstream's do not: %v", e)
		}
	}
	mu.Unlock()
	metrics := s.mustKubectl(t, "get", "--raw", "/metrics")
	if !strings.Contains(metrics, "apiserver_audit_event_total 2\n") || !strings.Contains(metrics, `apiserver_audit_level_total{level="Metadata"} 1`+"\n") ||
		!strings.Contains(metrics, `apiserver_audit_level_total{level="None"} `) {
		t.Errorf("the audit metrics:\n%s", grepLines(metrics, "apiserver_audit"))
	}
}
