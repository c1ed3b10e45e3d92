package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var allFiles = []string{caCertFile, caKeyFile, servingCertFile, servingKeyFile, adminCertFile, adminKeyFile, saKeyFile}

func ensure(t *testing.T, dir string, hosts ...string) *Bundle {
	t.Helper()
	b, err := Ensure(dir, hosts)
	if err != nil {
		t.Fatalf("Ensure(%s, %q): %v", dir, hosts, err)
	}
	return b
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustParse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert("test", certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := ensure(t, dir)

	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v, %v; want mode 0700", fi.Mode(), err)
	}
	for _, name := range allFiles {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s not created: %v", name, err)
		}
		if strings.HasSuffix(name, ".key") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, fi.Mode().Perm())
		}
	}

	again := ensure(t, dir)
	if !bytes.Equal(first.CACertPEM, again.CACertPEM) {
		t.Error("second Ensure returned another CA")
	}
	if !bytes.Equal(first.Serving.Certificate[0], again.Serving.Certificate[0]) {
		t.Error("second Ensure reissued the serving cert")
	}
	if !bytes.Equal(first.AdminCertPEM, again.AdminCertPEM) || !bytes.Equal(first.AdminKeyPEM, again.AdminKeyPEM) {
		t.Error("second Ensure reissued the admin credential")
	}
	if first.ServiceAccountKey == nil || !first.ServiceAccountKey.Equal(again.ServiceAccountKey) {
		t.Error("second Ensure made another service account key")
	}
}

// A data dir from before service account tokens gains a key; one that is
// not ECDSA P-256 (the ES256 tokens need it) is an error and kept.
func TestServiceAccountKey(t *testing.T) {
	dir := t.TempDir()
	ensure(t, dir)
	path := filepath.Join(dir, saKeyFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if b := ensure(t, dir); b.ServiceAccountKey == nil || b.ServiceAccountKey.Curve != elliptic.P256() {
		t.Fatalf("key %v", b.ServiceAccountKey)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	other := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(dir, nil); err == nil || !strings.Contains(err.Error(), "ECDSA P-256") {
		t.Errorf("a P-384 key: error %v", err)
	}
	if !bytes.Equal(readFile(t, path), other) {
		t.Error("the P-384 key was overwritten")
	}
}

func TestCertificateProfiles(t *testing.T) {
	b := ensure(t, t.TempDir(), "kplane.example.com", "10.0.0.7")
	ca := mustParse(t, b.CACertPEM)
	serving := b.Serving.Leaf
	admin := mustParse(t, b.AdminCertPEM)

	if !ca.IsCA || ca.Subject.CommonName != "kplane-ca" || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v CN=%q usage=%v", ca.IsCA, ca.Subject.CommonName, ca.KeyUsage)
	}
	if life := ca.NotAfter.Sub(ca.NotBefore); life < 9*365*24*time.Hour {
		t.Errorf("CA lives %v, want about 10 years", life)
	}
	if serving.Subject.CommonName != "kplane" || !slices.Equal(serving.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("serving: CN=%q EKU=%v", serving.Subject.CommonName, serving.ExtKeyUsage)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1", "kplane.example.com", "10.0.0.7"} {
		if err := serving.VerifyHostname(h); err != nil {
			t.Errorf("serving cert does not cover %s: %v", h, err)
		}
	}
	if admin.Subject.CommonName != "kplane-admin" || !slices.Equal(admin.Subject.Organization, []string{"system:masters"}) ||
		!slices.Equal(admin.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("admin: subject=%v EKU=%v", admin.Subject, admin.ExtKeyUsage)
	}
	for _, c := range []*x509.Certificate{ca, serving, admin} {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: key %T, want ECDSA P-256", c.Subject.CommonName, c.PublicKey)
		}
		if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
			t.Errorf("%s: serial %v", c.Subject.CommonName, c.SerialNumber)
		}
	}
	if serving.SerialNumber.Cmp(admin.SerialNumber) == 0 {
		t.Error("serving and admin share a serial number")
	}
}

func TestNewHostReissuesServingFromSameCA(t *testing.T) {
	dir := t.TempDir()
	first := ensure(t, dir)
	caKey := readFile(t, filepath.Join(dir, caKeyFile))

	// A new name and a new IP each force a reissue on their own.
	named := ensure(t, dir, "kplane.example.com")
	if bytes.Equal(first.Serving.Certificate[0], named.Serving.Certificate[0]) {
		t.Fatal("serving cert not reissued for a new DNS name")
	}
	second := ensure(t, dir, "kplane.example.com", "192.0.2.10")
	if bytes.Equal(named.Serving.Certificate[0], second.Serving.Certificate[0]) {
		t.Fatal("serving cert not reissued for a new IP")
	}
	if err := second.Serving.Leaf.VerifyHostname("kplane.example.com"); err != nil {
		t.Error(err)
	}
	if !slices.ContainsFunc(second.Serving.Leaf.IPAddresses, net.ParseIP("192.0.2.10").Equal) {
		t.Errorf("IP SANs %v lack 192.0.2.10", second.Serving.Leaf.IPAddresses)
	}
	if !bytes.Equal(first.CACertPEM, second.CACertPEM) || !bytes.Equal(caKey, readFile(t, filepath.Join(dir, caKeyFile))) {
		t.Error("CA changed")
	}
	if !bytes.Equal(first.AdminCertPEM, second.AdminCertPEM) {
		t.Error("admin cert changed")
	}
	opts := x509.VerifyOptions{Roots: first.CAPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := second.Serving.Leaf.Verify(opts); err != nil {
		t.Errorf("new serving cert is not from the original CA: %v", err)
	}
	// Dropping the host again is no reason to reissue.
	third := ensure(t, dir)
	if !bytes.Equal(second.Serving.Certificate[0], third.Serving.Certificate[0]) {
		t.Error("serving cert reissued although it covers every host")
	}
}

func TestStaleLeavesAreReissued(t *testing.T) {
	dir := t.TempDir()
	ensure(t, dir)
	ca, err := ensureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	sans, _ := servingSANs(nil)
	notAdmin := adminSpec()
	notAdmin.subject.Organization = nil
	// A serving cert with 60 days left is kept; leaves with 10 days left are
	// not, nor is an admin cert that lost its group.
	for _, c := range []struct {
		spec     leafSpec
		validity time.Duration
		reissue  bool
	}{
		{servingSpec(sans), 60 * 24 * time.Hour, false},
		{servingSpec(sans), 10 * 24 * time.Hour, true},
		{adminSpec(), 10 * 24 * time.Hour, true},
		{notAdmin, leafValidity, true},
	} {
		certPEM, keyPEM, err := newLeaf(ca, c.spec, c.validity)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, c.spec.keyFile), keyPEM, 0o600)
		os.WriteFile(filepath.Join(dir, c.spec.certFile), certPEM, 0o644)
		ensure(t, dir)
		got := readFile(t, filepath.Join(dir, c.spec.certFile))
		if reissued := !bytes.Equal(got, certPEM); reissued != c.reissue {
			t.Errorf("%s valid for %v: reissued=%v, want %v", c.spec.certFile, c.validity, reissued, c.reissue)
		}
		if !bytes.Equal(readFile(t, filepath.Join(dir, caCertFile)), ca.certPEM) {
			t.Fatal("CA changed")
		}
	}
}

func TestUnparseableFileIsAnErrorAndKept(t *testing.T) {
	for _, name := range []string{caCertFile, caKeyFile, servingCertFile, adminKeyFile, saKeyFile} {
		dir := t.TempDir()
		ensure(t, dir)
		path := filepath.Join(dir, name)
		junk := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
		if err := os.WriteFile(path, junk, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Ensure(dir, nil)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("corrupt %s: error %v, want one naming %s", name, err, path)
		}
		if !bytes.Equal(readFile(t, path), junk) {
			t.Errorf("corrupt %s was overwritten", name)
		}
	}
}

func TestCAKeyLossAndRecovery(t *testing.T) {
	dir := t.TempDir()
	first := ensure(t, dir)

	// Only ca.crt lost: the key re-signs it and the issued certs stay valid.
	os.Remove(filepath.Join(dir, caCertFile))
	second := ensure(t, dir)
	if !bytes.Equal(first.Serving.Certificate[0], second.Serving.Certificate[0]) || !bytes.Equal(first.AdminCertPEM, second.AdminCertPEM) {
		t.Error("leaves reissued although the CA key is unchanged")
	}
	if _, err := first.Serving.Leaf.Verify(x509.VerifyOptions{Roots: second.CAPool}); err != nil {
		t.Errorf("old serving cert does not verify against the re-signed CA: %v", err)
	}

	// ca.key replaced by another key: refuse, naming ca.crt.
	keyPath := filepath.Join(dir, caKeyFile)
	oldKey := readFile(t, keyPath)
	_, otherKey, _ := newKey()
	os.WriteFile(keyPath, otherKey, 0o600)
	if _, err := Ensure(dir, nil); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, caCertFile)) {
		t.Errorf("ca.key not matching ca.crt: error %v", err)
	}
	os.WriteFile(keyPath, oldKey, 0o600)

	// ca.key lost: refuse, rather than mint a CA nothing trusts.
	os.Remove(keyPath)
	if _, err := Ensure(dir, nil); err == nil || !strings.Contains(err.Error(), keyPath) {
		t.Errorf("missing ca.key: error %v, want one naming %s", err, keyPath)
	}
	if _, err := os.Stat(keyPath); err == nil {
		t.Error("a new ca.key was created")
	}

	// Both gone: a new CA, and leaves from the old one are reissued from it.
	os.Remove(filepath.Join(dir, caCertFile))
	fresh := ensure(t, dir)
	if bytes.Equal(fresh.CACertPEM, first.CACertPEM) {
		t.Fatal("CA not recreated")
	}
	cfg, err := fresh.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, leaf := range []*x509.Certificate{fresh.Serving.Leaf, cfg.Certificates[0].Leaf} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: fresh.CAPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s not reissued from the new CA: %v", leaf.Subject.CommonName, err)
		}
	}
}

// A crash between writing a leaf's key and its cert leaves a mismatched or
// half pair; the next Ensure reissues it instead of failing or serving it.
func TestHalfWrittenLeafIsReissued(t *testing.T) {
	for _, c := range []struct{ name, change string }{
		{servingKeyFile, "replace"}, {adminKeyFile, "replace"},
		{servingCertFile, "remove"}, {adminKeyFile, "remove"},
	} {
		dir := t.TempDir()
		first := ensure(t, dir)
		path := filepath.Join(dir, c.name)
		if c.change == "remove" {
			os.Remove(path)
		} else {
			_, key, _ := newKey()
			os.WriteFile(path, key, 0o600)
		}
		b := ensure(t, dir)
		if _, err := b.ClientTLSConfig(); err != nil {
			t.Errorf("%s %s: admin credential unusable: %v", c.change, c.name, err)
		}
		if bytes.Equal(first.Serving.Certificate[0], b.Serving.Certificate[0]) && bytes.Equal(first.AdminCertPEM, b.AdminCertPEM) {
			t.Errorf("%s %s: nothing reissued", c.change, c.name)
		}
		if !bytes.Equal(first.CACertPEM, b.CACertPEM) {
			t.Errorf("%s %s: CA changed", c.change, c.name)
		}
	}
}

func TestHosts(t *testing.T) {
	b := ensure(t, t.TempDir(), "", "0.0.0.0", "::", "[::]", " ")
	leaf := b.Serving.Leaf
	if !slices.Equal(leaf.DNSNames, []string{"localhost"}) || len(leaf.IPAddresses) != 2 ||
		!leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || !leaf.IPAddresses[1].Equal(net.IPv6loopback) {
		t.Errorf("wildcards and blanks changed the SANs: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if _, err := Ensure(t.TempDir(), []string{"kplane.example.com:6443"}); err == nil {
		t.Error("host with a port accepted")
	}
}

// serve starts an HTTPS server with b's TLS config whose handler reports the
// client certificate's CN, or "none". hits counts requests that reached it.
func serve(t *testing.T, b *Bundle) (srv *httptest.Server, hits *atomic.Int32) {
	hits = new(atomic.Int32)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			io.WriteString(w, "none")
			return
		}
		io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = b.ServerTLSConfig()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // rejected handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, hits
}

func get(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func clientWith(cfg *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestTLSHandshake(t *testing.T) {
	b := ensure(t, t.TempDir())
	srv, hits := serve(t, b)

	cfg, err := b.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := get(clientWith(cfg), srv.URL); err != nil || got != "kplane-admin" {
		t.Errorf("admin client: %q, %v; want kplane-admin", got, err)
	}

	if got, err := get(clientWith(&tls.Config{RootCAs: b.CAPool}), srv.URL); err != nil || got != "none" {
		t.Errorf("client without a cert: %q, %v; want to connect with no peer cert", got, err)
	}

	other := ensure(t, t.TempDir())
	foreign, err := other.ClientTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	foreign.RootCAs = b.CAPool // trust the server, present a cert it does not
	before := hits.Load()
	if got, err := get(clientWith(foreign), srv.URL); err == nil {
		t.Errorf("client cert from another CA accepted: %q", got)
	}
	if hits.Load() != before {
		t.Error("request with a foreign client cert reached the handler")
	}

	// And the server cert is trusted only through kplane's CA.
	if _, err := get(clientWith(&tls.Config{RootCAs: other.CAPool}), srv.URL); err == nil {
		t.Error("client trusting another CA accepted the serving cert")
	}
}

func TestWriteKubeconfig(t *testing.T) {
	b := ensure(t, t.TempDir())
	srv, _ := serve(t, b)
	dir := filepath.Join(t.TempDir(), "kube")
	path := filepath.Join(dir, "config")
	for range 2 { // the second write replaces the first
		if err := WriteKubeconfig(path, srv.URL, b); err != nil {
			t.Fatal(err)
		}
	}

	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v, %v; want mode 0600", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "config" {
		t.Errorf("dir holds %v, want only config (temp files left behind?)", entries)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != srv.URL {
		t.Errorf("kubeconfig server %q, want %q", cfg.Host, srv.URL)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if ctx := raw.Contexts[raw.CurrentContext]; raw.CurrentContext != "kplane" || ctx == nil || ctx.Cluster != "kplane" || ctx.AuthInfo != "kplane-admin" {
		t.Errorf("current context %q = %+v", raw.CurrentContext, ctx)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := get(client, srv.URL); err != nil || got != "kplane-admin" {
		t.Errorf("client from kubeconfig: %q, %v; want kplane-admin", got, err)
	}

	if err := WriteKubeconfig(path, "http://127.0.0.1:6443", b); err == nil {
		t.Error("plain http server URL accepted")
	}
}
