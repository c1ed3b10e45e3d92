package apiserver_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/apiserver/audit"
)

// auditEvents are the events of the audit log at path.
func auditEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("a line that is not JSON: %s", sc.Text())
		}
		out = append(out, e)
	}
	return out
}

// Each request the policy logs gets its events at the level the first
// matching rule gives, as kube-apiserver writes them: RequestReceived,
// then ResponseComplete with the code, the object named, the
// authorization decision, and at level Request and up the request's
// object (a create's as decoded), at RequestResponse the answer
// (without managedFields when the rule omits them).
func TestAuditLog(t *testing.T) {
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(`
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/version"]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  namespaces: [audited]
  omitManagedFields: true
- level: Request
  resources: [{group: "", resources: [secrets]}]
  omitStages: [RequestReceived]
- level: Metadata
`), 0o600); err != nil {
		t.Fatal(err)
	}
	policy, err := audit.ReadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "audit.log")
	w, err := audit.NewWriter(logPath, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	h := newInProcess(t, func(c *apiserver.Config) { c.AuditPolicy, c.AuditLog = policy, w })
	do := func(method, path, body string) int {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	do(http.MethodPost, "/api/v1/namespaces", `{"metadata":{"name":"audited"}}`)
	do(http.MethodPost, "/api/v1/namespaces/audited/configmaps", `{"metadata":{"name":"one"},"data":{"a":"b"}}`)
	do(http.MethodPost, "/api/v1/namespaces/audited/secrets", `{"metadata":{"name":"s"},"stringData":{"k":"v"}}`)
	if code := do(http.MethodGet, "/api/v1/namespaces/audited/configmaps/missing", ""); code != http.StatusNotFound {
		t.Fatalf("get of a missing configmap: %d", code)
	}
	do(http.MethodGet, "/version", "")
	// A token that is not valid: one event, ResponseStarted, no user.
	bad := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/audited/secrets", nil)
	bad.Header.Set("Authorization", "Bearer not-a-token")
	badRec := httptest.NewRecorder()
	h.ServeHTTP(badRec, bad)
	if badRec.Code != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", badRec.Code)
	}

	events := auditEvents(t, logPath)
	var got []string
	for _, e := range events {
		ref, _ := e["objectRef"].(map[string]any)
		got = append(got, e["stage"].(string)+" "+e["level"].(string)+" "+e["verb"].(string)+" "+str(ref["resource"])+"/"+str(ref["name"]))
	}
	want := []string{
		"RequestReceived Metadata create namespaces/",
		"ResponseComplete Metadata create namespaces/audited",
		"RequestReceived RequestResponse create configmaps/",
		"ResponseComplete RequestResponse create configmaps/one",
		"ResponseComplete Request create secrets/s",
		"RequestReceived RequestResponse get configmaps/missing",
		"ResponseComplete RequestResponse get configmaps/missing",
		"ResponseStarted Request list secrets/",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cm := events[3]
	req, _ := cm["requestObject"].(map[string]any)
	resp, _ := cm["responseObject"].(map[string]any)
	status, _ := cm["responseStatus"].(map[string]any)
	notes, _ := cm["annotations"].(map[string]any)
	if str(req["kind"]) != "ConfigMap" || str(resp["kind"]) != "ConfigMap" || status["code"] != 201.0 ||
		notes["authorization.k8s.io/decision"] != "allow" || cm["auditID"] != events[2]["auditID"] || str(cm["apiVersion"]) != "audit.k8s.io/v1" {
		t.Errorf("the configmap's ResponseComplete: %v", cm)
	}
	if md, _ := resp["metadata"].(map[string]any); md == nil || md["managedFields"] != nil || md["name"] != "one" {
		t.Errorf("the answer logged with omitManagedFields: %v", resp)
	}
	if _, ok := events[2]["requestObject"]; ok {
		t.Error("RequestReceived carries the request object")
	}
	secret := events[4]
	if _, ok := secret["requestObject"]; !ok {
		t.Error("a Request-level event without the request object")
	}
	if _, ok := secret["responseObject"]; ok {
		t.Error("a Request-level event with the answer")
	}
	unauth, _ := events[7]["responseStatus"].(map[string]any)
	if user, _ := events[7]["user"].(map[string]any); len(user) != 0 || unauth["code"] != 401.0 || unauth["reason"] != "Unauthorized" {
		t.Errorf("the 401's event: %v", events[7])
	}
	missing, _ := events[6]["responseStatus"].(map[string]any)
	if missing["code"] != 404.0 || missing["reason"] != "NotFound" || missing["status"] != "Failure" || missing["message"] != `configmaps "missing" not found` {
		t.Errorf("the 404's status: %v", missing)
	}
}

func str(v any) string { s, _ := v.(string); return s }

// With --audit-log-mode=blocking-strict a request whose first event
// cannot be written (a full disk: /dev/full) is refused with upstream's
// 500; in blocking mode it is served, and the lost events are counted.
func TestAuditLogStrict(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, nonResourceURLs: [/metrics]}, {level: Metadata}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := audit.ReadPolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		w, err := audit.NewWriter("/dev/full", 0, 0, 0)
		if err != nil {
			t.Skip("no /dev/full:", err)
		}
		h := newInProcess(t, func(c *apiserver.Config) { c.AuditPolicy, c.AuditLog, c.AuditStrict = p, w, strict })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps?limit=1", nil))
		want, body := http.StatusOK, ""
		if strict {
			want, body = http.StatusInternalServerError, `Internal Server Error: "/api/v1/namespaces/default/configmaps?limit=1": failed to store audit event`+"\n"
		}
		if rec.Code != want || body != "" && rec.Body.String() != body {
			t.Errorf("strict %v: %d %s", strict, rec.Code, rec.Body)
		}
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		rejected := "0"
		if strict {
			rejected = "1"
		}
		for _, line := range []string{"apiserver_audit_requests_rejected_total " + rejected + "\n", `apiserver_audit_error_total{plugin="log"} `} {
			if !strings.Contains(rec.Body.String(), line) {
				t.Errorf("strict %v: no %q in the metrics", strict, line)
			}
		}
		w.Close()
	}
}
