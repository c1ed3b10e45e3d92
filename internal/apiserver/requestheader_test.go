package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// testCA is a certificate authority that issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client issues a client certificate for cn.
func (ca *testCA) client(t *testing.T, cn string, orgs ...string) *x509.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// Front proxies (--requestheader-*): a certificate of the proxies'
// authority with an allowed name names the user in headers, which are
// then removed; one naming no user, or with a name not allowed, is
// refused, not taken for a client of kplane's own authority; kplane's
// own clients are as before.
func TestRequestHeader(t *testing.T) {
	own, proxies := newTestCA(t, "kplane-ca"), newTestCA(t, "front-proxy-ca")
	h := newInProcess(t, func(c *apiserver.Config) {
		c.Anonymous = false
		c.ClientCAs = func() *x509.CertPool { return own.pool }
		c.RequestHeader = &apiserver.RequestHeader{
			CAs: func() *x509.CertPool { return proxies.pool }, AllowedNames: []string{"front-proxy"},
			UsernameHeaders: []string{"X-Remote-User", "X-Other-User"}, UIDHeaders: []string{"X-Remote-Uid"},
			GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"},
		}
	})
	h.(*apiserver.Server).MarkStarted()
	whoami := func(cert *x509.Certificate, ca *testCA, headers map[string][]string) (int, string) {
		r := httptest.NewRequest(http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		r.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			r.Header[http.CanonicalHeaderKey(k)] = v
		}
		// The handshake verified it against both authorities.
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca.cert}}}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.String()
		if i := strings.Index(body, `"userInfo":`); i >= 0 {
			body = strings.TrimSuffix(strings.TrimSpace(body[i+len(`"userInfo":`):]), "}}")
		}
		return w.Code, body
	}
	proxy := proxies.client(t, "front-proxy")
	for _, c := range []struct {
		name    string
		cert    *x509.Certificate
		ca      *testCA
		headers map[string][]string
		code    int
		user    string
	}{
		{"the proxy's user", proxy, proxies, map[string][]string{
			"X-Remote-User": {"alice"}, "X-Remote-Uid": {"u-1"}, "X-Remote-Group": {"devs", "", "ops"},
			"X-Remote-Extra-Scopes": {"a", "b"}, "X-Remote-Extra-Acme.io%2fteam": {"blue"}, "X-Other-User": {"bob"},
		}, 201, `{"extra":{"acme.io/team":["blue"],"scopes":["a","b"]},"groups":["devs","ops","system:authenticated"],"uid":"u-1","username":"alice"}`},
		{"the second username header", proxy, proxies, map[string][]string{"X-Other-User": {"bob"}}, 201, `{"groups":["system:authenticated"],"username":"bob"}`},
		{"no user named", proxy, proxies, nil, 401, ""},
		{"a name not allowed", proxies.client(t, "other-proxy"), proxies, map[string][]string{"X-Remote-User": {"alice"}}, 401, ""},
		{"kplane's client", own.client(t, "carol", "team"), own, map[string][]string{"X-Remote-User": {"mallory"}}, 201, `"groups":["team","system:authenticated"],"username":"carol"}`},
	} {
		code, user := whoami(c.cert, c.ca, c.headers)
		if code != c.code || c.user != "" && !strings.Contains(user, c.user) {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, code, user, c.code, c.user)
		}
	}
}
