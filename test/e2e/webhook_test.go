package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
)

// fooWebhook defaults and validates Foos, as an operator's webhooks
// built with controller-runtime do.
type fooWebhook struct{}

func (fooWebhook) Default(_ context.Context, foo *webappv1.Foo) error {
	if foo.Spec.Foo == "" {
		foo.Spec.Foo = "defaulted"
	}
	return nil
}

func (fooWebhook) ValidateCreate(_ context.Context, foo *webappv1.Foo) (admission.Warnings, error) {
	if foo.Spec.Foo == "forbidden" {
		return nil, errors.New("spec.foo may not be forbidden")
	}
	return nil, nil
}

func (fooWebhook) ValidateUpdate(_ context.Context, _, foo *webappv1.Foo) (admission.Warnings, error) {
	return admission.Warnings{"foo " + foo.Name + " updated"}, nil
}

func (fooWebhook) ValidateDelete(_ context.Context, foo *webappv1.Foo) (admission.Warnings, error) {
	if foo.Labels["protected"] == "true" {
		return nil, errors.New("foo is protected")
	}
	return nil, nil
}

// webhookCerts writes a self-signed serving certificate for 127.0.0.1
// into dir (tls.crt, tls.key, as controller-runtime's webhook server
// reads them) and returns it in PEM, the caBundle that trusts it.
func webhookCerts(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foo-webhook"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// waitServing waits for a webhook server to answer TLS on port.
func waitServing(t *testing.T, port int) {
	t.Helper()
	eventually(t, 30*time.Second, "webhook server serving", func() (bool, string) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestAdmissionWebhooks runs an operator's defaulting and validating
// webhooks, built with controller-runtime's webhook builder, and has
// kplane call them through the configurations the operator would
// install: kplane's answers to client-go, controller-runtime and kubectl
// carry what the webhooks decided.
func TestAdmissionWebhooks(t *testing.T) {
	s := startServer(t)
	installFooCRD(t, s)
	dir := t.TempDir()
	caBundle := webhookCerts(t, dir)
	port := freePort(t)
	mgr := startManager(t, s, ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
	}, func(mgr ctrl.Manager) error {
		return ctrl.NewWebhookManagedBy(mgr, &webappv1.Foo{}).WithDefaulter(fooWebhook{}).WithValidator(fooWebhook{}).Complete()
	})
	waitServing(t, port)

	cs := kubernetes.NewForConfigOrDie(s.config())
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"webapp.my.domain"}, APIVersions: []string{"v1"}, Resources: []string{"foos"}},
	}}
	url := func(path string) *string { return ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, path)) }
	none := admissionregistrationv1.SideEffectClassNone
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "foo-defaults"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mfoo.webapp.my.domain", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate-webapp-my-domain-v1-foo"), CABundle: caBundle},
			Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "foo-checks"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vfoo.webapp.my.domain", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate-webapp-my-domain-v1-foo"), CABundle: caBundle},
			Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The defaulting webhook's patch is in the object stored and answered.
	c := mgr.GetAPIReader()
	w, err := client.New(s.config(), client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	foo := &webappv1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"}}
	if err := w.Create(ctx, foo); err != nil {
		t.Fatal(err)
	}
	if foo.Spec.Foo != "defaulted" {
		t.Errorf("created spec.foo %q, want the webhook's default", foo.Spec.Foo)
	}
	var stored webappv1.Foo
	if err := c.Get(ctx, client.ObjectKeyFromObject(foo), &stored); err != nil || stored.Spec.Foo != "defaulted" {
		t.Errorf("stored spec.foo %q (%v), want the webhook's default", stored.Spec.Foo, err)
	}

	// The validating webhook's refusal is the client's error.
	bad := &webappv1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}, Spec: webappv1.FooSpec{Foo: "forbidden"}}
	err = w.Create(ctx, bad)
	const denied = `admission webhook "vfoo.webapp.my.domain" denied the request: spec.foo may not be forbidden`
	if !apierrors.IsForbidden(err) || err.Error() != denied {
		t.Errorf("create refused by the webhook: %v, want 403 %q", err, denied)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bad), &stored); !apierrors.IsNotFound(err) {
		t.Errorf("the refused Foo: %v, want not found", err)
	}
	_, stderr, err := s.kubectl("create", "--dry-run=server", "-f", writeFile(t, "bad.yaml",
		"apiVersion: webapp.my.domain/v1\nkind: Foo\nmetadata: {name: bad, namespace: default}\nspec: {foo: forbidden}\n"))
	if err == nil || !strings.Contains(stderr, denied) {
		t.Errorf("kubectl create --dry-run=server: %v\n%s", err, stderr)
	}

	// Warnings come back as Warning headers (kubectl prints them).
	_, stderr, err = s.kubectl("label", "foo", "plain", "protected=true")
	if err != nil || !strings.Contains(stderr, "Warning: foo plain updated") {
		t.Errorf("kubectl label: %v, stderr %q, want the webhook's warning", err, stderr)
	}
	// A delete is validated too.
	err = w.Delete(ctx, foo)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "foo is protected") {
		t.Errorf("delete of a protected Foo: %v", err)
	}
	s.mustKubectl(t, "label", "foo", "plain", "protected-")
	if err := w.Delete(ctx, foo); err != nil {
		t.Errorf("delete once unprotected: %v", err)
	}

	// The configurations are read again at start-up: after a restart the
	// validating webhook still refuses.
	s.restart()
	bad.ResourceVersion = ""
	if err := w.Create(ctx, bad); !apierrors.IsForbidden(err) || err.Error() != denied {
		t.Errorf("create after a restart: %v, want 403 %q", err, denied)
	}

	// Without the configurations, nothing is called: the next write is
	// not refused.
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "foo-checks", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bad.ResourceVersion = ""
	if err := w.Create(ctx, bad); err != nil {
		t.Errorf("create once the validating configuration is gone: %v", err)
	}
}
