package app

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The service account key files are read as kube-apiserver reads them:
// the signing key from any private key block (PKCS#1, SEC 1, PKCS#8),
// other blocks skipped; public keys from every block of each file
// (public keys, private keys, certificates), with upstream's errors.
func TestServiceAccountKeyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, blocks ...*pem.Block) string {
		t.Helper()
		var data []byte
		for _, b := range blocks {
			data = append(data, pem.EncodeToMemory(b)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	sec1, _ := x509.MarshalECPrivateKey(ecKey)
	pkixDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sa"}, NotAfter: time.Now().Add(time.Hour)}
	cert, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	params := &pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}

	for name, c := range map[string]struct {
		file string
		want any
	}{
		"PKCS#1":                 {write("pkcs1.key", &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), rsaKey},
		"PKCS#8":                 {write("pkcs8.key", &pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), rsaKey},
		"SEC 1 after parameters": {write("ec.key", params, &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), ecKey},
	} {
		got, err := readSigningKey(c.file)
		if err != nil || !c.want.(interface{ Equal(crypto.PrivateKey) bool }).Equal(got) {
			t.Errorf("%s: %v", name, err)
		}
	}
	pub := write("sa.pub", &pem.Block{Type: "PUBLIC KEY", Bytes: pkixDER})
	if _, err := readSigningKey(pub); err == nil || err.Error() != "failed to parse service-account-issuer-key-file: error reading private key file "+pub+": data does not contain a valid RSA or ECDSA private key" {
		t.Errorf("a public key as the signing key: %v", err)
	}
	if _, err := readSigningKey(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing signing key file was read")
	}

	both := write("both.pem", &pem.Block{Type: "CERTIFICATE", Bytes: cert}, params, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	keys, err := readPublicKeys([]string{pub, both})
	if err != nil || len(keys) != 3 || !rsaKey.PublicKey.Equal(keys[0]) || !ecKey.PublicKey.Equal(keys[1]) || !rsaKey.PublicKey.Equal(keys[2]) {
		t.Errorf("public keys: %v, %v", keys, err)
	}
	junk := write("junk.pem", params)
	if _, err := readPublicKeys([]string{pub, junk}); err == nil || err.Error() != "error reading public key file "+junk+": data does not contain any valid RSA or ECDSA public keys" {
		t.Errorf("a file without keys: %v", err)
	}
}
