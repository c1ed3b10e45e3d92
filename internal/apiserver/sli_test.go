package apiserver_test

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// The latency SLI leaves out the time a request spent in admission
// webhooks, as kube-apiserver's apiserver_request_sli_duration_seconds
// does; the duration histogram counts it. A validating webhook that takes
// 300 ms answers every create of a ConfigMap in namespace "slow".
func TestSLILeavesOutWebhooks(t *testing.T) {
	var calls atomic.Int64
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		calls.Add(1)
		time.Sleep(300 * time.Millisecond)
		rev.Response = &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		rev.Request = nil
		json.NewEncoder(w).Encode(&rev)
	}))
	defer hook.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}))

	h := newInProcess(t)
	send := func(method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := send(http.MethodPost, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
		`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"slow"},"webhooks":[{"name":"slow.example.com",
		"clientConfig":{"url":"`+hook.URL+`","caBundle":"`+ca+`"},"sideEffects":"None","admissionReviewVersions":["v1"],
		"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"slow"}},
		"rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["configmaps"]}]}]}`); w.Code != http.StatusCreated {
		t.Fatalf("the webhook configuration: %d %s", w.Code, w.Body)
	}
	if w := send(http.MethodPost, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"slow"}}`); w.Code != http.StatusCreated {
		t.Fatalf("the namespace: %d %s", w.Code, w.Body)
	}
	// The configuration takes effect once read: creates until one is
	// seen by the webhook, then one more, each seen.
	for i := 0; calls.Load() == 0; i++ {
		if i == 100 {
			t.Fatal("the webhook was never called")
		}
		if w := send(http.MethodPost, "/api/v1/namespaces/slow/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"c-"}}`); w.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
	metrics := get(t, h, "/metrics").Body.String()
	sum := func(family string) float64 {
		t.Helper()
		for _, line := range strings.Split(metrics, "\n") {
			if strings.HasPrefix(line, family+"_sum{") && strings.Contains(line, `resource="configmaps"`) && strings.Contains(line, `verb="POST"`) {
				var v float64
				if err := json.Unmarshal([]byte(line[strings.LastIndexByte(line, ' ')+1:]), &v); err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
		t.Fatalf("no %s of the creates", family)
		return 0
	}
	total, sli := sum("apiserver_request_duration_seconds"), sum("apiserver_request_sli_duration_seconds")
	// Each call took 300 ms at least: the duration histogram has them,
	// the SLI not.
	if webhooks := 0.3 * float64(calls.Load()); total < webhooks || total-sli < webhooks {
		t.Fatalf("%d webhook calls: the creates took %.3f s, %.3f s for the SLI; want %.1f s more in the duration histogram", calls.Load(), total, sli, webhooks)
	}
}

// A request answered pretty-printed (curl's and browsers' by default) is
// counted in the request metrics as any other.
func TestPrettyRequestsAreCounted(t *testing.T) {
	h := newInProcess(t)
	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
		r.Header.Set("User-Agent", "curl/8.14.1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "\n  ") {
			t.Fatalf("%d, not pretty: %s", w.Code, w.Body)
		}
	}
	want := `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 3`
	if metrics := get(t, h, "/metrics").Body.String(); !strings.Contains(metrics, want+"\n") {
		t.Fatalf("the pretty lists are not counted: no %s", want)
	}
}
