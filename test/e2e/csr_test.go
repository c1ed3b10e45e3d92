package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// csrFor makes a key and a PEM certificate request for cn in orgs.
func csrFor(t *testing.T, cn string, orgs ...string) (req, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// csrManifest is a CertificateSigningRequest to apply.
func csrManifest(name string, req []byte, usages string, extra string) string {
	return fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: %s
spec:
  request: %s
  signerName: kubernetes.io/kube-apiserver-client
  usages: [%s]
%s`, name, base64.StdEncoding.EncodeToString(req), usages, extra)
}

// A user's client certificate through the CertificateSigningRequest API,
// as on a cluster with kube-controller-manager: kubectl creates the
// request, lists it, approves it; kplane signs it with its own
// authority, and the certificate logs in as the request's subject. Bad
// requests are refused or failed with upstream's words, and approving
// takes the approve verb on the signer.
func TestCertificateSigningRequests(t *testing.T) {
	s := startServer(t, "--authorization-mode", "RBAC")
	apply := func(manifest string) (string, error) {
		path := filepath.Join(t.TempDir(), "csr.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := s.kubectl("create", "-f", path)
		return out + errOut, err
	}
	req, keyPEM := csrFor(t, "alice", "devs")
	if out, err := apply(csrManifest("alice", req, "client auth", "  expirationSeconds: 3600\n")); err != nil {
		t.Fatalf("create: %v %s", err, out)
	}
	out := s.mustKubectl(t, "get", "csr", "alice", "--no-headers")
	if f := strings.Fields(out); len(f) != 6 || f[2] != "kubernetes.io/kube-apiserver-client" || f[3] != "kplane-admin" || f[4] != "60m" || f[5] != "Pending" {
		t.Errorf("get csr: %q", out)
	}
	if out := s.mustKubectl(t, "certificate", "approve", "alice"); strings.TrimSpace(out) != "certificatesigningrequest.certificates.k8s.io/alice approved" {
		t.Errorf("approve: %q", out)
	}
	var certPEM []byte
	eventually(t, 10*time.Second, "the certificate", func() (bool, string) {
		out, _, _ := s.kubectl("get", "csr", "alice", "-o", "jsonpath={.status.certificate}")
		certPEM, _ = base64.StdEncoding.DecodeString(out)
		return len(certPEM) > 0, out
	})
	if out := s.mustKubectl(t, "get", "csr", "alice", "--no-headers"); !strings.Contains(out, "Approved,Issued") {
		t.Errorf("get csr after signing: %q", out)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d != 65*time.Minute || cert.Subject.CommonName != "alice" || cert.IsCA ||
		len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("the certificate: %v for %s, CA %v, usages %v", d, cert.Subject, cert.IsCA, cert.ExtKeyUsage)
	}
	// It logs in as alice, in devs.
	admin := s.config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kplane"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos["alice"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts["alice"] = &clientcmdapi.Context{Cluster: "kplane", AuthInfo: "alice"}
	kc.CurrentContext = "alice"
	path := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := s.kubectl("--kubeconfig", path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); err != nil || !strings.HasPrefix(out, `alice ["devs","system:authenticated"]`) {
		t.Errorf("whoami with the certificate: %q %v %s", out, err, errOut)
	}

	// Refused at create: system:masters for this signer; a request that
	// is not one.
	masters, _ := csrFor(t, "root", "system:masters")
	if out, err := apply(csrManifest("root", masters, "client auth", "")); err == nil || !strings.Contains(out, `certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed`) {
		t.Errorf("system:masters: %v %s", err, out)
	}
	if out, err := apply(csrManifest("short", req, "client auth", "  expirationSeconds: 60\n")); err == nil || !strings.Contains(out, "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)") {
		t.Errorf("a short duration: %v %s", err, out)
	}
	// A server certificate from the client signer fails once approved.
	if out, err := apply(csrManifest("server", req, "server auth", "")); err != nil {
		t.Fatalf("create: %v %s", err, out)
	}
	s.mustKubectl(t, "certificate", "approve", "server")
	eventually(t, 10*time.Second, "the failure", func() (bool, string) {
		out, _, _ := s.kubectl("get", "csr", "server", "-o", `jsonpath={.status.conditions[?(@.type=="Failed")].message}`)
		return out == "invalid usage for client certificate: server auth", out
	})
	// Approving takes the approve verb on the signer, besides the
	// approval subresource.
	s.mustKubectl(t, "create", "clusterrole", "csr-approver", "--verb", "get,list,update", "--resource", "certificatesigningrequests,certificatesigningrequests/approval")
	s.mustKubectl(t, "create", "clusterrolebinding", "bob-csr", "--clusterrole", "csr-approver", "--user", "bob")
	other, _ := csrFor(t, "carol")
	if out, err := apply(csrManifest("carol", other, "client auth", "")); err != nil {
		t.Fatalf("create: %v %s", err, out)
	}
	_, errOut, err := s.kubectl("certificate", "approve", "carol", "--as", "bob")
	if want := `certificatesigningrequests.certificates.k8s.io "carol" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("approve without the signer: %v %s", err, errOut)
	}
	// signers is no resource the API serves: the rule is written out, as
	// upstream's documentation does.
	if out, err := apply(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: signer-approver}
rules:
- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: [kubernetes.io/*]
  verbs: [approve]
`); err != nil {
		t.Fatalf("the signer's role: %v %s", err, out)
	}
	s.mustKubectl(t, "create", "clusterrolebinding", "bob-signer", "--clusterrole", "signer-approver", "--user", "bob")
	if _, errOut, err := s.kubectl("certificate", "approve", "carol", "--as", "bob"); err != nil {
		t.Errorf("approve with the signer's domain: %v %s", err, errOut)
	}
	// Names any path takes, as upstream's.
	if out, err := apply(csrManifest("Alice_UPPER:colon@x", other, "client auth", "")); err != nil {
		t.Errorf("an unusual name: %v %s", err, out)
	}
	// Discovery, as kube-apiserver v1.37.2 lists the kind (it also
	// serves ClusterTrustBundles and PodCertificateRequests there).
	disc := s.mustKubectl(t, "get", "--raw", "/apis/certificates.k8s.io/v1")
	for _, want := range []string{
		`{"name":"certificatesigningrequests","singularName":"certificatesigningrequest","namespaced":false,"kind":"CertificateSigningRequest","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["csr"],"storageVersionHash":"95fRKMXA+00="}`,
		`{"name":"certificatesigningrequests/approval","singularName":"","namespaced":false,"kind":"CertificateSigningRequest","verbs":["get","patch","update"]},{"name":"certificatesigningrequests/status","singularName":"","namespaced":false,"kind":"CertificateSigningRequest","verbs":["get","patch","update"]}`,
		`{"name":"clustertrustbundles","singularName":"clustertrustbundle","namespaced":false,"kind":"ClusterTrustBundle","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"storageVersionHash":"v5yhuVertL4="}`,
	} {
		if !strings.Contains(disc, want) {
			t.Errorf("discovery lacks %s:\n%s", want, disc)
		}
	}
	// kplane's authority published as a ClusterTrustBundle, for the
	// clients that trust it.
	ca := strings.ReplaceAll(strings.TrimSpace(string(s.config().CAData)), "\n", "\n    ")
	if out, err := apply("apiVersion: certificates.k8s.io/v1\nkind: ClusterTrustBundle\nmetadata: {name: kplane-ca}\nspec:\n  trustBundle: |\n    " + ca + "\n"); err != nil {
		t.Errorf("a trust bundle: %v %s", err, out)
	}
	if out := s.mustKubectl(t, "get", "clustertrustbundles"); !strings.Contains(out, "kplane-ca   <none>") {
		t.Errorf("get clustertrustbundles: %q", out)
	}
	// client-go sees the same objects.
	cs := kubernetes.NewForConfigOrDie(s.config())
	got, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), "carol", metav1.GetOptions{})
	if err != nil || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Approved" || got.Spec.Username != "kplane-admin" {
		t.Errorf("client-go: %+v %v", got, err)
	}
}
