package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Files in the data dir.
const (
	caCertFile      = "ca.crt"
	caKeyFile       = "ca.key"
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
	adminCertFile   = "admin.crt"
	adminKeyFile    = "admin.key"
	// saKeyFile signs service account tokens (serviceaccounts/token).
	saKeyFile = "sa.key"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore leaves a month between reissuing a leaf and its expiry, so
	// a server restarted now and then never serves an expired certificate.
	renewBefore = 30 * 24 * time.Hour
	// backdate tolerates clients whose clocks run behind the server's.
	backdate = time.Hour
)

// authority is a loaded CA.
type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// ensureCA loads the CA or creates it. The key is written before the
// certificate, so a crash in between leaves a key alone, from which the
// certificate is re-signed; a certificate without its key is an error, since
// a new key would invalidate every credential issued so far.
func ensureCA(dir string) (*authority, error) {
	certPath, keyPath := filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile)
	certPEM, keyPEM, err := readPair(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	var key crypto.Signer
	if keyPEM != nil {
		if key, err = parseKey(keyPath, keyPEM); err != nil {
			return nil, err
		}
	}
	if certPEM != nil {
		cert, err := parseCert(certPath, certPEM)
		if err != nil {
			return nil, err
		}
		if key == nil {
			return nil, fmt.Errorf("pki: %s exists but %s is missing: no certificates can be issued without the CA key (remove both to create a new CA)", certPath, keyPath)
		}
		if !cert.IsCA || !matches(cert, key) {
			return nil, fmt.Errorf("pki: %s is not a CA certificate for the key in %s", certPath, keyPath)
		}
		if time.Now().After(cert.NotAfter) {
			return nil, fmt.Errorf("pki: %s expired at %s and kplane does not rotate its CA: remove %s and %s to create a new one (existing kubeconfigs stop working)", certPath, cert.NotAfter.Format(time.RFC3339), certPath, keyPath)
		}
		return &authority{cert: cert, certPEM: certPEM, key: key}, nil
	}
	if key == nil {
		if key, keyPEM, err = newKey(); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kplane-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // leaves only, no intermediates
	}
	certPEM, cert, err := sign(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &authority{cert: cert, certPEM: certPEM, key: key}, nil
}

// leafSpec describes a certificate the CA issues.
type leafSpec struct {
	certFile, keyFile string
	usage             x509.ExtKeyUsage
	subject           pkix.Name
	dnsNames          []string
	ips               []net.IP
}

func servingSpec(sans sanList) leafSpec {
	return leafSpec{
		certFile: servingCertFile, keyFile: servingKeyFile,
		usage:    x509.ExtKeyUsageServerAuth,
		subject:  pkix.Name{CommonName: "kplane"},
		dnsNames: sans.dns, ips: sans.ips,
	}
}

func adminSpec() leafSpec {
	return leafSpec{
		certFile: adminCertFile, keyFile: adminKeyFile,
		usage:   x509.ExtKeyUsageClientAuth,
		subject: pkix.Name{CommonName: "kplane-admin", Organization: []string{"system:masters"}},
	}
}

// ensureLeaf returns the PEM of a certificate and key fitting spec, reusing
// the files in dir when they still fit and issuing new ones otherwise. Unlike
// the CA, a leaf is cheap to replace, so a missing half, a mismatched pair
// (a crash between the two renames) or another issuer just means reissue.
func ensureLeaf(dir string, ca *authority, spec leafSpec) (certPEM, keyPEM []byte, err error) {
	certPath, keyPath := filepath.Join(dir, spec.certFile), filepath.Join(dir, spec.keyFile)
	certPEM, keyPEM, err = readPair(certPath, keyPath)
	if err != nil {
		return nil, nil, err
	}
	var cert *x509.Certificate
	var key crypto.Signer
	if certPEM != nil {
		if cert, err = parseCert(certPath, certPEM); err != nil {
			return nil, nil, err
		}
	}
	if keyPEM != nil {
		if key, err = parseKey(keyPath, keyPEM); err != nil {
			return nil, nil, err
		}
	}
	if cert != nil && key != nil && fits(cert, key, ca, spec, time.Now()) {
		return certPEM, keyPEM, nil
	}
	if certPEM, keyPEM, err = newLeaf(ca, spec, leafValidity); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// fits reports whether cert (with key) can keep being used for spec.
func fits(cert *x509.Certificate, key crypto.Signer, ca *authority, spec leafSpec, now time.Time) bool {
	if !matches(cert, key) {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{spec.usage}}
	if _, err := cert.Verify(opts); err != nil {
		return false
	}
	// Leaves never outlive the CA, so near the CA's end "expires soon" is
	// measured against the CA's expiry instead, or every start would reissue.
	renewAt := now.Add(renewBefore)
	if renewAt.After(ca.cert.NotAfter) {
		renewAt = ca.cert.NotAfter
	}
	if cert.NotAfter.Before(renewAt) {
		return false
	}
	if cert.Subject.CommonName != spec.subject.CommonName || !slices.Equal(cert.Subject.Organization, spec.subject.Organization) {
		return false
	}
	for _, name := range spec.dnsNames {
		if !slices.Contains(cert.DNSNames, name) {
			return false
		}
	}
	for _, ip := range spec.ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// newLeaf issues a fresh key and certificate for spec, valid for validity but
// never past the CA's own expiry.
func newLeaf(ca *authority, spec leafSpec, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:               spec.subject,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{spec.usage},
		BasicConstraintsValid: true,
		DNSNames:              spec.dnsNames,
		IPAddresses:           spec.ips,
	}
	certPEM, _, err = sign(tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// sign fills in a random 128-bit serial and signs tmpl with the parent's key.
func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, *x509.Certificate, error) {
	serial := new(big.Int)
	for serial.Sign() == 0 { // serials must be positive
		var err error
		if serial, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128)); err != nil {
			return nil, nil, fmt.Errorf("pki: serial number: %w", err)
		}
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: signing %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: signing %q: %w", tmpl.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), cert, nil
}

func newKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generating key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: encoding key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// readPair reads a certificate and key file; a missing file reads as nil.
func readPair(certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = readOptional(certPath); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = readOptional(keyPath); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err) // already names the file
	}
	return b, nil
}

func parseCert(path string, data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("pki: %s: no PEM CERTIFICATE block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	return cert, nil
}

// parseKey accepts PKCS#8 (what newKey writes) and SEC 1 EC keys, so a key
// made with openssl can be dropped in.
func parseKey(path string, data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("pki: %s: no PEM block", path)
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("pki: %s: unsupported PEM block %q", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: %s: key of type %T cannot sign", path, key)
	}
	return signer, nil
}

// matches reports whether key is the private half of cert's public key.
func matches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(key.Public())
}

// sanList is the serving certificate's subject alternative names.
type sanList struct {
	dns []string
	ips []net.IP
}

// servingSANs is localhost, 127.0.0.1 and ::1 plus hosts, deduplicated. A
// wildcard listen address names no host, and local clients are covered by
// the loopback names, so it adds nothing. Anything that is neither an IP nor
// a plausible DNS name (say "example.com:6443") is refused rather than put in
// a certificate no client would match.
func servingSANs(hosts []string) (sanList, error) {
	var s sanList
	for _, h := range append([]string{"localhost", "127.0.0.1", "::1"}, hosts...) {
		h = strings.TrimSpace(h)
		if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); ip != nil {
			if !ip.IsUnspecified() && !slices.ContainsFunc(s.ips, ip.Equal) {
				s.ips = append(s.ips, ip)
			}
			continue
		}
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if h == "" || slices.Contains(s.dns, h) {
			continue
		}
		if !validDNSName(h) {
			return sanList{}, fmt.Errorf("pki: host %q is neither an IP address nor a DNS name", h)
		}
		s.dns = append(s.dns, h)
	}
	return s, nil
}

// CheckHosts reports the first of hosts that the serving certificate
// could not name (Ensure's hosts): neither an IP address nor a DNS name.
func CheckHosts(hosts []string) error {
	_, err := servingSANs(hosts)
	return err
}

// validDNSName accepts dot-separated labels of letters, digits, '-' and '_',
// with an optional leading "*" label.
func validDNSName(name string) bool {
	for i, label := range strings.Split(name, ".") {
		if label == "*" && i == 0 {
			continue
		}
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return len(name) <= 253
}
