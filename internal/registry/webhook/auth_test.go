package webhook_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// A webhook that asks for a client certificate and a token gets both
// from the kubeconfig user named for its host and port; one at a host
// and port the kubeconfig does not name is called anonymously, refuses,
// and the call fails. The two servers share a certificate and a server
// name, so a client kept for one and used for the other is found out.
func TestWebhookCalledWithCredentials(t *testing.T) {
	ca, caKey := newCA(t)
	certPEM, keyPEM := clientCert(t, ca, caKey, "kplane-admission")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	token := func() string { return "Bearer s3cret" }
	known, unknown := securedServer(t, pool, token), securedServer(t, pool, token)

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, kc, `
users:
- name: "`+strings.TrimPrefix(known.URL, "https://")+`"
  user:
    token: s3cret
    client-certificate-data: `+base64.StdEncoding.EncodeToString(certPEM)+`
    client-key-data: `+base64.StdEncoding.EncodeToString(keyPEM)+`
`)
	auth, err := webhook.LoadWebhookAuth(kc)
	if err != nil {
		t.Fatal(err)
	}
	// A webhook at srv for the configmaps labelled step: name.
	at := func(srv *httptest.Server, name string) map[string]any {
		return map[string]any{"name": "secured.example.com", "path": "/", "clientConfig": map[string]any{
			"url": srv.URL + "/", "caBundle": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			"objectSelector": map[string]any{"matchLabels": map[string]any{"step": name}}}
	}

	e := newEnvWith(t, func(w *webhook.Webhooks, _ *server) { w.ValidatingAuth = auth })
	for _, step := range []struct {
		srv  *httptest.Server
		name string
		want string // the error's, or "" for none
	}{
		{known, "authenticated", ""},
		{unknown, "anonymous", `failed calling webhook "secured.example.com": failed to call webhook: the server has asked for the client to provide credentials`},
		{known, "authenticated-again", ""},
	} {
		e.configure("Validating", step.name, at(step.srv, step.name))
		_, err := e.createConfigMap(step.name, map[string]string{"step": step.name}, registry.WriteOptions{})
		if step.want == "" && err != nil || step.want != "" && (err == nil || !strings.Contains(err.Error(), step.want)) {
			t.Errorf("%s: %v, want %q", step.name, err, step.want)
		}
	}

	// The mutating webhooks' kubeconfig is not the validating ones'.
	e = newEnvWith(t, func(w *webhook.Webhooks, _ *server) { w.MutatingAuth = auth })
	e.configure("Validating", "secured", at(known, "mutating-only"))
	if _, err := e.createConfigMap("mutating-only", map[string]string{"step": "mutating-only"}, registry.WriteOptions{}); err == nil {
		t.Error("a validating webhook called with the mutating webhooks' credentials")
	}
}

func writeKubeconfig(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func clientCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// A kubeconfig user's exec plugin is run as client-go runs it for
// kube-apiserver: once for as long as its credentials last (its token
// in the Authorization header, its certificate in the handshake), again
// after a webhook answers 401; a plugin that fails fails the call in
// client-go's words.
func TestWebhookCalledWithExecCredentials(t *testing.T) {
	ca, caKey := newCA(t)
	certPEM, keyPEM := clientCert(t, ca, caKey, "kplane-admission")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	var want atomic.Value
	want.Store("Bearer t1")
	srv := securedServer(t, pool, func() string { return want.Load().(string) })

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The plugin counts its runs, keeps what it was told, and prints
	// out.json (or fails while fail exists).
	write("plugin.sh", `#!/bin/sh
n=$(cat "$DIR/runs" 2>/dev/null || echo 0)
echo $((n+1)) > "$DIR/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$DIR/info"
[ -f "$DIR/fail" ] && exit 3
cat "$DIR/out.json"
`)
	credential := func(token string) string {
		data, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
			"status": map[string]any{"token": token, "clientCertificateData": string(certPEM), "clientKeyData": string(keyPEM)}})
		return string(data)
	}
	write("out.json", credential("t1"))
	runs := func() string {
		data, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.TrimSpace(string(data))
	}
	kc := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kc, `
users:
- name: "*"
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      env: [{name: DIR, value: `+dir+`}]
      interactiveMode: Never
      provideClusterInfo: true
`)
	auth, err := webhook.LoadWebhookAuth(kc)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(w *webhook.Webhooks, _ *server) { w.ValidatingAuth = auth })
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	e.configure("Validating", "secured", map[string]any{"name": "secured.example.com", "path": "/", "clientConfig": map[string]any{
		"url": srv.URL + "/", "caBundle": caBundle}})

	for _, name := range []string{"first", "second"} {
		if _, err := e.createConfigMap(name, nil, registry.WriteOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if runs() != "1" {
		t.Errorf("the plugin ran %s times for two calls, want 1", runs())
	}
	var info struct {
		APIVersion, Kind string
		Spec             struct {
			Interactive *bool
			Cluster     struct {
				Server                   string
				CertificateAuthorityData []byte `json:"certificate-authority-data"`
			}
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "info"))
	if err := json.Unmarshal(data, &info); err != nil || info.APIVersion != "client.authentication.k8s.io/v1" || info.Kind != "ExecCredential" ||
		info.Spec.Interactive == nil || *info.Spec.Interactive || info.Spec.Cluster.Server != srv.URL || string(info.Spec.Cluster.CertificateAuthorityData) != string(caBundle) {
		t.Errorf("KUBERNETES_EXEC_INFO: %s (%v)", data, err)
	}

	// The webhook wants a new token: the call it refuses fails, the
	// plugin runs again, and the next call carries the new token.
	want.Store("Bearer t2")
	write("out.json", credential("t2"))
	if _, err := e.createConfigMap("refused", nil, registry.WriteOptions{}); err == nil {
		t.Error("a call with the old token passed")
	}
	if _, err := e.createConfigMap("renewed", nil, registry.WriteOptions{}); err != nil || runs() != "2" {
		t.Errorf("after a 401: %v, %s runs", err, runs())
	}

	// A plugin that fails fails the call (here a new kubeconfig's, with
	// no credentials yet).
	write("fail", "")
	if auth, err = webhook.LoadWebhookAuth(kc); err != nil {
		t.Fatal(err)
	}
	e = newEnvWith(t, func(w *webhook.Webhooks, _ *server) { w.ValidatingAuth = auth })
	e.configure("Validating", "secured", map[string]any{"name": "secured.example.com", "path": "/", "clientConfig": map[string]any{
		"url": srv.URL + "/", "caBundle": caBundle}})
	_, err = e.createConfigMap("no-credentials", nil, registry.WriteOptions{})
	plugin := filepath.Join(dir, "plugin.sh")
	if err == nil || !strings.Contains(err.Error(), `failed calling webhook "secured.example.com": failed to call webhook: Post "`+srv.URL+`/?timeout=10s": getting credentials: exec: executable `+plugin+` failed with exit code 3`) {
		t.Errorf("with a failing plugin: %v", err)
	}

	// What the plugin may not be is refused when the file is read.
	for config, msg := range map[string]string{
		`{apiVersion: client.authentication.k8s.io/v1alpha1, command: x}`:                    `exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"`,
		`{apiVersion: client.authentication.k8s.io/v1, command: x, interactiveMode: Always}`: `exec plugin cannot support interactive mode: standard input is not a terminal`,
		`{apiVersion: client.authentication.k8s.io/v1beta1}`:                                 `exec plugin: command is required`,
	} {
		writeKubeconfig(t, kc, `users: [{name: u, user: {exec: `+config+`}}]`)
		if _, err := webhook.LoadWebhookAuth(kc); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %s", config, err, msg)
		}
	}
}

// securedServer is a webhook server that allows every review sent with a
// client certificate pool trusts and the Authorization header auth
// returns, and answers 401 to any other.
func securedServer(t *testing.T, pool *x509.CertPool, auth func() string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.Header.Get("Authorization") != auth() {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		rev.Response = &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		rev.Request = nil
		json.NewEncoder(w).Encode(&rev)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
