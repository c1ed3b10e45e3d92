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
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// A webhook that asks for a client certificate and a token gets both
// from the kubeconfig; called anonymously, it refuses, and the call
// fails.
func TestWebhookCalledWithCredentials(t *testing.T) {
	ca, caKey := newCA(t)
	certPEM, keyPEM := clientCert(t, ca, caKey, "kplane-admission")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.Header.Get("Authorization") != "Bearer s3cret" {
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

	e := newEnv(t)
	hostPort := strings.TrimPrefix(srv.URL, "https://")
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kc, `
users:
- name: "`+hostPort+`"
  user:
    token: s3cret
    client-certificate-data: `+base64.StdEncoding.EncodeToString(certPEM)+`
    client-key-data: `+base64.StdEncoding.EncodeToString(keyPEM)+`
`)
	// The webhook at the secured server, trusting its certificate.
	e.configure("Validating", "secured", map[string]any{"name": "secured.example.com", "path": "/", "clientConfig": map[string]any{
		"url": srv.URL + "/", "caBundle": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}})

	if _, err := e.createConfigMap("anonymous", nil, registry.WriteOptions{}); err == nil ||
		!strings.Contains(err.Error(), `failed calling webhook "secured.example.com": failed to call webhook: the server has asked for the client to provide credentials`) {
		t.Errorf("called anonymously: %v", err)
	}
	auth, err := webhook.LoadWebhookAuth(kc)
	if err != nil {
		t.Fatal(err)
	}
	// (Set while the server runs, which kplane does not do, so that a
	// client kept from the anonymous call would be found out.)
	e.w.ValidatingAuth = auth
	if _, err := e.createConfigMap("authenticated", nil, registry.WriteOptions{}); err != nil {
		t.Errorf("with the kubeconfig's credentials: %v", err)
	}
	// The mutating webhooks' kubeconfig is not the validating ones'.
	e.w.ValidatingAuth, e.w.MutatingAuth = nil, auth
	if _, err := e.createConfigMap("mutating-only", nil, registry.WriteOptions{}); err == nil {
		t.Error("a validating webhook called with the mutating webhooks' credentials")
	}
}

func writeKubeconfig(t *testing.T, path, content string) {
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
