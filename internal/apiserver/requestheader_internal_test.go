package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"
)

// The headers that name the user are gone from a request the proxy's
// user is taken from, so that nothing after authentication sees them;
// other headers stay.
func TestRequestHeaderClears(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	rh := &RequestHeader{CAs: func() *x509.CertPool { return pool }, UsernameHeaders: []string{"X-Remote-User"},
		GroupHeaders: []string{"X-Remote-Group"}, UIDHeaders: []string{"X-Remote-Uid"}, ExtraHeaderPrefixes: []string{"x-remote-extra-"}}
	r := httptest.NewRequest("GET", "/api", nil)
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}
	for _, h := range []string{"X-Remote-User", "X-Remote-Group", "X-Remote-Uid", "X-Remote-Extra-A", "Accept"} {
		r.Header.Set(h, "v")
	}
	u, ok, err := rh.authenticate(r)
	if !ok || err != nil || u.Name != "v" {
		t.Fatalf("%+v %v %v", u, ok, err)
	}
	for h := range r.Header {
		if h != "Accept" {
			t.Errorf("%s is still there", h)
		}
	}
	if r.Header.Get("Accept") != "v" {
		t.Error("another header was removed")
	}
}
