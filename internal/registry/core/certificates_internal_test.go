package core

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
)

func testCSR(t *testing.T, cn string, orgs ...string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// csrFixture is a registry serving CertificateSigningRequests, written
// as the user alice.
type csrFixture struct {
	*tokenFixture
	csrs *registry.Resource
	user context.Context
}

func newCSRFixture(t *testing.T) *csrFixture {
	f := newTokenFixture(t)
	csrs, ok := f.reg.Get(csrResource)
	if !ok {
		t.Fatal("no certificatesigningrequests")
	}
	user := registry.WithUser(f.ctx, registry.User{Name: "alice", UID: "u-1", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"k": {"v"}}})
	return &csrFixture{tokenFixture: f, csrs: csrs, user: user}
}

func (f *csrFixture) write(sub, name, body string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"` + name + `"},` + body[1:])); err != nil {
		f.t.Fatal(err)
	}
	if sub == "create" {
		out, _, err := f.csrs.CreateEncoded(f.user, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
		return out, err
	}
	return f.csrs.Update(f.user, "v1", "", name, obj, registry.WriteOptions{FieldManager: "test", Subresource: sub})
}

// A request records who made it, whatever it says; its spec is fixed;
// /approval changes only the conditions, /status only the certificate
// and the other conditions; each write is checked as upstream checks it.
func TestCSRWrites(t *testing.T) {
	f := newCSRFixture(t)
	req := testCSR(t, "alice", "devs")
	created, err := f.write("create", "a", `{"spec":{"request":"`+req+`","signerName":"example.com/s","usages":["client auth"],"username":"mallory","groups":["system:masters"]},"status":{"conditions":[{"type":"Approved","status":"True"}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(created.Object["spec"])
	if want := `{"extra":{"k":["v"]},"groups":["devs","system:authenticated"],"request":"` + req + `","signerName":"example.com/s","uid":"u-1","usages":["client auth"],"username":"alice"}`; string(spec) != want {
		t.Errorf("spec:\n got %s\nwant %s", spec, want)
	}
	if st, ok := created.Object["status"].(map[string]any); !ok || len(st) != 0 {
		t.Errorf("status on create: %v", created.Object["status"])
	}
	approved := `{"status":{"conditions":[{"type":"Approved","status":"True","reason":"R","message":"ok"}]}}`
	for _, c := range []struct{ sub, body, err string }{
		// The main resource keeps spec and status.
		{"", `{"spec":{"request":"` + req + `","signerName":"example.com/other","usages":["server auth"]},"status":{"certificate":"eA=="}}`, ""},
		// /status may not approve, nor set a certificate that is not one.
		{"status", approved, `CertificateSigningRequest.certificates.k8s.io "a" is invalid: status.conditions: Forbidden: updates may not add a condition of type "Approved"`},
		{"status", `{"status":{"certificate":"` + base64.StdEncoding.EncodeToString([]byte("junk")) + `"}}`, `CertificateSigningRequest.certificates.k8s.io "a" is invalid: status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block`},
		{"approval", `{"status":{"conditions":[{"type":"Approved","status":"True"},{"type":"Denied","status":"True"}]}}`, "CertificateSigningRequest.certificates.k8s.io \"a\" is invalid: status.conditions: Invalid value: \"{conditions[{\\\"type\\\": \\\"Approved\\\"}], conditions[{\\\"type\\\": \\\"Denied\\\"}]}\": must specify at most one of: `conditions[{\"type\": \"Approved\"}]`, `conditions[{\"type\": \"Denied\"}]`"},
		{"approval", `{"status":{"conditions":[{"type":"Approved","status":"False"}]}}`, `CertificateSigningRequest.certificates.k8s.io "a" is invalid: status.conditions[0].status: Unsupported value: "False": supported values: "True"`},
		{"approval", approved, ""},
		// An approval stays.
		{"approval", `{"status":{"conditions":[]}}`, `CertificateSigningRequest.certificates.k8s.io "a" is invalid: status.conditions: Forbidden: updates may not remove a condition of type "Approved"`},
	} {
		_, err := f.write(c.sub, "a", c.body)
		if got := errText(err); got != c.err {
			t.Errorf("%s %s:\n got %s\nwant %s", c.sub, c.body, got, c.err)
		}
	}
	// Labels come with an approval, as upstream's strategy keeps the
	// request's metadata.
	if _, err := f.write("approval", "a", `{"metadata":{"name":"a","labels":{"team":"blue"}},"status":{"conditions":[{"type":"Approved","status":"True","reason":"R","message":"ok"}]}}`); err != nil {
		t.Fatal(err)
	}
	got, _ := f.csrs.Get(f.ctx, "v1", "", "a", metav1.GetOptions{})
	if got.GetLabels()["team"] != "blue" {
		t.Errorf("labels through /approval: %v", got.GetLabels())
	}
	csr, _ := typedCSR(got)
	if csr.Spec.SignerName != "example.com/s" || len(csr.Status.Certificate) > 0 || len(csr.Status.Conditions) != 1 ||
		csr.Status.Conditions[0].Message != "ok" || csr.Status.Conditions[0].LastUpdateTime.IsZero() || csr.Status.Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("after the writes: %+v", csr)
	}
	// Through /status a condition of another type is added, and the
	// approval sent changed is kept as stored.
	if _, err := f.write("status", "a", `{"status":{"conditions":[{"type":"Approved","status":"True","message":"changed"},{"type":"Progress","status":"Unknown"}]}}`); err != nil {
		t.Fatal(err)
	}
	got, _ = f.csrs.Get(f.ctx, "v1", "", "a", metav1.GetOptions{})
	csr, _ = typedCSR(got)
	if len(csr.Status.Conditions) != 2 || csr.Status.Conditions[0].Message != "ok" || csr.Status.Conditions[1].Type != "Progress" {
		t.Errorf("after /status: %+v", csr.Status)
	}
}

// Requests are checked as upstream checks them, with its errors.
func TestCSRValidation(t *testing.T) {
	f := newCSRFixture(t)
	req := testCSR(t, "bob")
	notPEM := base64.StdEncoding.EncodeToString([]byte("hello"))
	seconds := func(n int) string {
		return `,"expirationSeconds":` + strings.TrimSpace(json.Number(big.NewInt(int64(n)).String()).String())
	}
	prefix := `CertificateSigningRequest.certificates.k8s.io "x" is invalid: `
	for _, c := range []struct{ spec, err string }{
		{`"request":"` + req + `","signerName":"example.com/s","usages":["client auth"]`, ""},
		{`"request":"` + notPEM + `","signerName":"example.com/s","usages":["client auth"]`, prefix + `spec.request: Invalid value: "` + notPEM + `": PEM block type must be CERTIFICATE REQUEST`},
		{`"request":"` + req + `","signerName":"example.com/s"`, prefix + `spec.usages: Required value`},
		{`"request":"` + req + `","signerName":"example.com/s","usages":["client auth","nope","client auth"]`, prefix + `[spec.usages[1]: Unsupported value: "nope": supported values: "any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment", "decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel", "ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime", "server auth", "signing", "timestamping", spec.usages[2]: Duplicate value: "client auth"]`},
		{`"request":"` + req + `","usages":["client auth"]`, prefix + `spec.signerName: Required value`},
		{`"request":"` + req + `","signerName":"foo","usages":["client auth"]`, prefix + `spec.signerName: Invalid value: "foo": must be a fully qualified domain and path of the form 'example.com/signer-name'`},
		{`"request":"` + req + `","signerName":"example/s","usages":["client auth"]`, prefix + `spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots`},
		{`"request":"` + req + `","signerName":"kubernetes.io/legacy-unknown","usages":["client auth"]`, prefix + `spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`},
		{`"request":"` + req + `","signerName":"example.com/s","usages":["client auth"]` + seconds(599), prefix + `spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)`},
	} {
		_, err := f.write("create", "x", `{"spec":{`+c.spec+`}}`)
		if got := errText(err); got != c.err {
			t.Errorf("%s:\n got %s\nwant %s", c.spec, got, c.err)
		}
		f.csrs.Delete(f.ctx, "v1", "", "x", metav1.DeleteOptions{}, registry.WriteOptions{})
	}
}

// The signer issues certificates as upstream's: backdated five minutes,
// for the duration asked within ten minutes and its own bound (less the
// backdate from eight hours on), never past the authority; it fails a
// request for usages a client certificate may not have.
func TestCSRSigner(t *testing.T) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(100 * 24 * time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	ca, _ := x509.ParseCertificate(caDER)
	now := time.Now().Truncate(time.Second)
	s := &CSRSigner{CA: ca, Key: caKey, Duration: 30 * 24 * time.Hour, Now: func() time.Time { return now }}
	reqDER, _ := base64.StdEncoding.DecodeString(testCSR(t, "alice", "devs"))
	req, err := parseCSR(reqDER)
	if err != nil {
		t.Fatal(err)
	}
	sec := func(n int32) *int32 { return &n }
	for _, c := range []struct {
		asked          *int32
		before, after  time.Duration
		usages         []certificatesv1.KeyUsage
		keyUsage       x509.KeyUsage
		extKeyUsageLen int
	}{
		{nil, -5 * time.Minute, 30*24*time.Hour - 5*time.Minute, []certificatesv1.KeyUsage{"client auth"}, 0, 1},
		{sec(3600), -5 * time.Minute, time.Hour, []certificatesv1.KeyUsage{"digital signature", "key encipherment", "client auth"}, x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, 1},
		{sec(600), -5 * time.Minute, 10 * time.Minute, []certificatesv1.KeyUsage{"client auth"}, 0, 1},
		{sec(10 * 3600), -5 * time.Minute, 10*time.Hour - 5*time.Minute, []certificatesv1.KeyUsage{"client auth"}, 0, 1},
		{sec(365 * 24 * 3600), -5 * time.Minute, 30*24*time.Hour - 5*time.Minute, []certificatesv1.KeyUsage{"client auth"}, 0, 1},
	} {
		pemCert, err := s.sign(req, c.usages, c.asked)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(pemCert)
		cert, _ := x509.ParseCertificate(block.Bytes)
		if !cert.NotBefore.Equal(now.Add(c.before)) || !cert.NotAfter.Equal(now.Add(c.after)) || cert.IsCA || cert.KeyUsage != c.keyUsage ||
			len(cert.ExtKeyUsage) != c.extKeyUsageLen || cert.Subject.CommonName != "alice" || cert.Subject.Organization[0] != "devs" {
			t.Errorf("asked %v: %v–%v (want %v–%v), CA %v, usage %v %v", c.asked, cert.NotBefore.Sub(now), cert.NotAfter.Sub(now), c.before, c.after, cert.IsCA, cert.KeyUsage, cert.ExtKeyUsage)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(ca), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: now}); err != nil {
			t.Errorf("asked %v: does not verify: %v", c.asked, err)
		}
	}
	// Past the authority: cut at its end.
	s.Duration = 1000 * 24 * time.Hour
	pemCert, _ := s.sign(req, []certificatesv1.KeyUsage{"client auth"}, nil)
	block, _ := pem.Decode(pemCert)
	if cert, _ := x509.ParseCertificate(block.Bytes); !cert.NotAfter.Equal(ca.NotAfter) {
		t.Errorf("past the authority: %v, want %v", cert.NotAfter, ca.NotAfter)
	}
	for usages, want := range map[string]string{
		"server auth":           "invalid usage for client certificate: server auth",
		"digital signature":     "missing required usage for client certificate: client auth",
		"client auth,cert sign": "invalid usage for client certificate: cert sign",
	} {
		var us []certificatesv1.KeyUsage
		for _, u := range strings.Split(usages, ",") {
			us = append(us, certificatesv1.KeyUsage(u))
		}
		if err := clientUsages(us); errText(err) != want {
			t.Errorf("%s: %v, want %s", usages, err, want)
		}
	}
}

func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// Old requests are cleaned as upstream's cleaner cleans them.
func TestCSRCleaner(t *testing.T) {
	now := time.Now()
	s := &CSRSigner{Now: func() time.Time { return now }}
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	cond := func(typ string, at metav1.Time) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.RequestConditionType(typ), Status: "True", LastUpdateTime: at}
	}
	issued := []byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
	for name, c := range map[string]struct {
		created    metav1.Time
		conditions []certificatesv1.CertificateSigningRequestCondition
		cert       []byte
		want       bool
	}{
		"pending, new":         {ago(time.Hour), nil, nil, false},
		"pending, a day old":   {ago(25 * time.Hour), nil, nil, true},
		"issued, new":          {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Approved", ago(30*time.Minute))}, issued, false},
		"issued an hour ago":   {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Approved", ago(61*time.Minute))}, issued, true},
		"approved, not issued": {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Approved", ago(61*time.Minute))}, nil, false},
		"approved a day ago":   {ago(26 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Approved", ago(25*time.Hour))}, nil, true},
		"denied an hour ago":   {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Denied", ago(61*time.Minute))}, nil, true},
		"failed, new":          {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Approved", ago(time.Minute)), cond("Failed", ago(time.Minute))}, nil, false},
		"failed an hour ago":   {ago(2 * time.Hour), []certificatesv1.CertificateSigningRequestCondition{cond("Failed", ago(61*time.Minute))}, nil, true},
	} {
		csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: c.created}}
		csr.Status.Conditions, csr.Status.Certificate = c.conditions, c.cert
		if got := s.expired(csr); got != c.want {
			t.Errorf("%s: cleaned %v, want %v", name, got, c.want)
		}
	}
}

// For the kube-apiserver-client signer, a request that does not parse is
// invalid (422) before the subject restriction refuses it, and a
// system:masters one forbidden (403): upstream's
// CertificateSubjectRestriction is validating admission, after
// validation.
func TestCSRSubjectRestrictionAfterValidation(t *testing.T) {
	f := newCSRFixture(t)
	garbage := base64.StdEncoding.EncodeToString([]byte("garbage\n"))
	_, err := f.write("create", "bad", `{"spec":{"request":"`+garbage+`","signerName":"kubernetes.io/kube-apiserver-client","usages":["client auth"]}}`)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `spec.request: Invalid value: "`+garbage+`": PEM block type must be CERTIFICATE REQUEST`) {
		t.Errorf("a request that does not parse: %v", err)
	}
	_, err = f.write("create", "root", `{"spec":{"request":"`+testCSR(t, "root", "system:masters")+`","signerName":"kubernetes.io/kube-apiserver-client","usages":["client auth"]}}`)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed") {
		t.Errorf("system:masters: %v", err)
	}
}

// A write of the spec or status on the main resource changes nothing, as
// upstream's strategy puts both back and its reset fields leave the
// writer owning none of them: no write, no managedFields entry.
func TestCSRMainResourceWriteOfTheSpecIsNoChange(t *testing.T) {
	f := newCSRFixture(t)
	req := testCSR(t, "alice", "devs")
	created, err := f.write("create", "c", `{"spec":{"request":"`+req+`","signerName":"example.com/s","usages":["client auth"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	changed := created.DeepCopy()
	unstructured.SetNestedStringSlice(changed.Object, []string{"server auth"}, "spec", "usages")
	unstructured.SetNestedField(changed.Object, "bWU=", "status", "certificate")
	out, err := f.csrs.Update(f.user, "v1", "", "c", changed, registry.WriteOptions{FieldManager: "kubectl-patch"})
	if err != nil {
		t.Fatal(err)
	}
	if out.GetResourceVersion() != created.GetResourceVersion() {
		t.Errorf("written: resourceVersion %s → %s", created.GetResourceVersion(), out.GetResourceVersion())
	}
	for _, e := range out.GetManagedFields() {
		if e.Manager == "kubectl-patch" {
			t.Errorf("the writer owns %s", e.FieldsV1.GetRawString())
		}
	}
	if u, _, _ := unstructured.NestedStringSlice(out.Object, "spec", "usages"); len(u) != 1 || u[0] != "client auth" {
		t.Errorf("usages %v", u)
	}
}
