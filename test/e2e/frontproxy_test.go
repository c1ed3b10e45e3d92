package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// proxyCA is a front proxy's certificate authority and a client
// certificate it issued.
type proxyCA struct {
	pem    []byte
	client tls.Certificate
}

func newProxyCA(t *testing.T, cn string) proxyCA {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "front-proxy-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return proxyCA{
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		client: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}
}

// --requestheader-*: a front proxy holding a certificate of its own
// authority names the user in headers, as to kube-apiserver; kplane's
// own clients are unaffected; a changed authority file is taken while
// kplane runs.
func TestFrontProxy(t *testing.T) {
	proxy := newProxyCA(t, "front-proxy")
	caFile := filepath.Join(t.TempDir(), "front-proxy-ca.crt")
	if err := os.WriteFile(caFile, proxy.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--authorization-mode", "RBAC", "--requestheader-client-ca-file", caFile,
		"--requestheader-allowed-names", "front-proxy", "--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group", "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--requestheader-uid-headers", "X-Remote-Uid")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(s.config().CAData)
	whoami := func(cert tls.Certificate, headers map[string]string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
		req, _ := http.NewRequest(http.MethodPost, "https://"+s.addr+"/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := whoami(proxy.client, map[string]string{"X-Remote-User": "alice", "X-Remote-Uid": "u-1", "X-Remote-Group": "devs", "X-Remote-Extra-Team": "blue"})
	if want := `"userInfo":{"extra":{"team":["blue"]},"groups":["devs","system:authenticated"],"uid":"u-1","username":"alice"}`; code != 201 || !strings.Contains(body, want) {
		t.Errorf("the proxy's user: %d %s\nwant %s", code, body, want)
	}
	if code, body := whoami(proxy.client, nil); code != 401 {
		t.Errorf("the proxy naming no one: %d %s", code, body)
	}
	// RBAC decides for the proxy's user.
	out, errOut, err := s.kubectl("auth", "can-i", "list", "secrets", "--as", "alice", "--as-group", "devs")
	if err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("can-i as alice: %q %v %s", out, err, errOut)
	}
	// The admin's certificate is kplane's own: as before.
	if _, errOut, err := s.kubectl("get", "namespaces"); err != nil {
		t.Errorf("the admin: %v %s", err, errOut)
	}
	// Another authority in the file: its proxies are taken without a
	// restart.
	other := newProxyCA(t, "front-proxy")
	if code, _ := whoami(other.client, map[string]string{"X-Remote-User": "bob"}); code != 0 {
		t.Errorf("another authority's proxy before the change: %d", code)
	}
	if err := os.WriteFile(caFile, append(proxy.pem, other.pem...), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the new authority", func() (bool, string) {
		code, body := whoami(other.client, map[string]string{"X-Remote-User": "bob"})
		return code == 201 && strings.Contains(body, `"username":"bob"`), body
	})

	// Published for servers that delegate authentication to kplane, as
	// kube-apiserver publishes it: its client authority, and the
	// proxies' authorities (both, once the file changed) and headers.
	eventually(t, 30*time.Second, "extension-apiserver-authentication", func() (bool, string) {
		out, errOut, err := s.kubectl("-n", "kube-system", "get", "configmap", "extension-apiserver-authentication", "-o", "json")
		if err != nil {
			return false, errOut
		}
		var cm struct{ Data map[string]string }
		if err := json.Unmarshal([]byte(out), &cm); err != nil {
			return false, err.Error()
		}
		want := map[string]string{
			"client-ca-file": string(s.config().CAData), "requestheader-client-ca-file": string(proxy.pem) + string(other.pem),
			"requestheader-allowed-names": `["front-proxy"]`, "requestheader-username-headers": `["X-Remote-User"]`,
			"requestheader-group-headers": `["X-Remote-Group"]`, "requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
			"requestheader-uid-headers": `["X-Remote-Uid"]`,
		}
		return maps.Equal(cm.Data, want), fmt.Sprintf("%q", cm.Data)
	})
	// A webhook server's account, bound to the reader role as charts
	// bind it, may read it.
	s.mustKubectl(t, "create", "serviceaccount", "hook")
	s.mustKubectl(t, "-n", "kube-system", "create", "rolebinding", "hook-auth-reader", "--role", "extension-apiserver-authentication-reader",
		"--serviceaccount", "default:hook")
	if out := s.mustKubectl(t, "-n", "kube-system", "auth", "can-i", "get", "configmap/extension-apiserver-authentication",
		"--as", "system:serviceaccount:default:hook"); strings.TrimSpace(out) != "yes" {
		t.Errorf("the bound account may not read it: %s", out)
	}
}
