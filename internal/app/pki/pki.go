package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Bundle is the credentials kplane keeps in its data dir. The CA and admin
// credential are kept as PEM because that is what kubeconfigs and other
// clients consume; the serving certificate is ready for a tls.Config.
type Bundle struct {
	CACertPEM []byte
	CAPool    *x509.CertPool
	// CACert and CAKey are the authority itself, which signs the client
	// certificates kplane issues (CertificateSigningRequests).
	CACert  *x509.Certificate
	CAKey   crypto.Signer
	Serving tls.Certificate

	AdminCertPEM, AdminKeyPEM []byte

	// ServiceAccountKey signs the service account tokens kplane issues
	// (serviceaccounts/token) and checks those clients present.
	ServiceAccountKey *ecdsa.PrivateKey
}

// Ensure loads the CA, serving certificate and admin client credential from
// dir, creating any that are missing, so that the first `kplane serve` is
// already secure and later runs reuse the same trust root.
//
// hosts are the DNS names / IPs the serving cert must cover in addition to
// localhost, 127.0.0.1 and ::1; empty entries and wildcard listen addresses
// (0.0.0.0, ::) are skipped. If the existing serving cert does not cover all
// hosts, or expires within 30 days, a new serving cert is issued from the same
// CA (CA and admin cert kept). The admin cert is reissued the same way when it
// nears expiry. Extra names on an existing cert are not a reason to reissue,
// so restarting with fewer flags causes no churn.
//
// A file that exists but cannot be parsed is an error naming the file, and the
// file is never overwritten: it may be a credential the operator put there.
func Ensure(dir string, hosts []string) (*Bundle, error) {
	if dir == "" {
		return nil, errors.New("pki: no data dir")
	}
	sans, err := servingSANs(hosts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	ca, err := ensureCA(dir)
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := ensureLeaf(dir, ca, servingSpec(sans))
	if err != nil {
		return nil, err
	}
	serving, err := tls.X509KeyPair(servingCert, servingKey)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, servingCertFile), err)
	}
	adminCert, adminKey, err := ensureLeaf(dir, ca, adminSpec())
	if err != nil {
		return nil, err
	}
	saKey, err := ensureServiceAccountKey(dir)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &Bundle{
		ServiceAccountKey: saKey,
		CACertPEM:         ca.certPEM,
		CAPool:            pool,
		CACert:            ca.cert,
		CAKey:             ca.key,
		Serving:           serving,
		AdminCertPEM:      adminCert,
		AdminKeyPEM:       adminKey,
	}, nil
}

// ensureServiceAccountKey loads the key that signs service account tokens,
// or creates it. Like the CA's, it is never replaced: a new key would
// invalidate every token issued so far. It must be ECDSA P-256, the ES256
// tokens are signed with.
func ensureServiceAccountKey(dir string) (*ecdsa.PrivateKey, error) {
	path := filepath.Join(dir, saKeyFile)
	data, err := readOptional(path)
	if err != nil {
		return nil, err
	}
	if data == nil {
		signer, keyPEM, err := newKey()
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(path, keyPEM, 0o600); err != nil {
			return nil, err
		}
		return signer.(*ecdsa.PrivateKey), nil
	}
	signer, err := parseKey(path, data)
	if err != nil {
		return nil, err
	}
	key, ok := signer.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		return nil, fmt.Errorf("pki: %s: the service account key must be an ECDSA P-256 key", path)
	}
	return key, nil
}

// ServerTLSConfig is the API server's TLS configuration: TLS 1.2+, the
// serving cert, and client certificates verified against the CA. Clients
// without a certificate are let through (tls.VerifyClientCertIfGiven) so that
// the API server can answer them itself, e.g. with 401 or via another
// authenticator; a certificate that does not verify fails the handshake.
// h2 is offered first because kubectl and client-go prefer it; an
// http.Server's ServeTLS drops it when Go's HTTP/2 server is off.
func (b *Bundle) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{b.Serving},
		ClientCAs:    b.CAPool,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// ClientTLSConfig is a TLS configuration that trusts only kplane's CA and
// presents the admin certificate, for tests and internal clients that talk to
// the API server without a kubeconfig.
func (b *Bundle) ClientTLSConfig() (*tls.Config, error) {
	admin, err := tls.X509KeyPair(b.AdminCertPEM, b.AdminKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: admin credential: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      b.CAPool,
		Certificates: []tls.Certificate{admin},
	}, nil
}
