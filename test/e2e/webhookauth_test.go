package e2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestWebhookCredentials runs kplane serve with
// --admission-control-config-file: a validating webhook that wants a
// bearer token gets the one the kubeconfig names for its host (from a
// token file, then from an exec plugin), and a configuration kplane
// cannot use stops the server at start with the reason.
func TestWebhookCredentials(t *testing.T) {
	var calls, refused atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			refused.Add(1)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		rev.Response, rev.Request = &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}, nil
		json.NewEncoder(w).Encode(&rev)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := write("webhooks.kubeconfig", `
apiVersion: v1
kind: Config
users:
- name: "`+strings.TrimPrefix(srv.URL, "https://")+`"
  user: {tokenFile: token}
`)
	write("token", "s3cret\n")
	config := write("admission.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfig+`
`)
	// A second kubeconfig whose user's exec plugin prints the token.
	plugin := write("token-plugin.sh", `#!/bin/sh
echo '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "s3cret"}}'
`)
	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	execKubeconfig := write("exec.kubeconfig", `
users:
- name: "*"
  user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./token-plugin.sh, interactiveMode: Never}}
`)
	execConfig := write("exec-admission.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration, kubeConfigFile: `+execKubeconfig+`}
`)
	for _, cfg := range []string{config, execConfig} {
		calls.Store(0)
		webhookCalledWithToken(t, srv, startServer(t, "--admission-control-config-file", cfg))
		if calls.Load() != 1 || refused.Load() != 0 {
			t.Errorf("%s: the webhook was called %d times and refused %d, want 1 and 0", filepath.Base(cfg), calls.Load(), refused.Load())
		}
	}

	// A kubeConfigFile kube-apiserver would refuse stops kplane too.
	bad := write("bad.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration, kubeConfigFile: relative.kubeconfig}
`)
	out, err := exec.Command(kplaneBinary(t), "serve", "--storage", "memory", "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--admission-control-config-file", bad).CombinedOutput()
	want := `--admission-control-config-file: plugin MutatingAdmissionWebhook: kubeConfigFile: Invalid value: "relative.kubeconfig": must be an absolute file path`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("serve with a relative kubeConfigFile: %v\n%s\nwant %s", err, out, want)
	}
}

// webhookCalledWithToken configures srv as a validating webhook of
// configmaps on s and creates one through it.
func webhookCalledWithToken(t *testing.T, srv *httptest.Server, s *server) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(s.config())
	ctx := context.Background()
	none := admissionregistrationv1.SideEffectClassNone
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "secured"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "secured.example.com",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + "/validate"), CABundle: caBundle},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "checked"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through the webhook: %v", err)
	}
}
