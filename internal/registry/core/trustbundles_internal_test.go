package core

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
)

func testCert(t *testing.T, ca bool) string {
	return string(certPEM(t, "x", ca, time.Now().Add(time.Hour)))
}

// certPEM is a self-signed certificate of name, an authority's if ca,
// valid from two days before notAfter until then, in PEM.
func certPEM(t *testing.T, name string, ca bool, notAfter time.Time) []byte {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: ca, BasicConstraintsValid: true,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// ClusterTrustBundles are checked as upstream checks them: their names
// by their signer, their bundles CA certificates, each once; the signer
// fixed; publishing for a signer takes attest on it.
func TestClusterTrustBundles(t *testing.T) {
	f := newTokenFixture(t)
	ctbs, ok := f.reg.Get(ctbResource)
	if !ok {
		t.Fatal("no clustertrustbundles")
	}
	ca, ca2, leaf := testCert(t, true), testCert(t, true), testCert(t, false)
	write := func(ctx context.Context, name, signer, bundle string, update bool) error {
		spec := map[string]any{"trustBundle": bundle}
		if signer != "" {
			spec["signerName"] = signer
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "certificates.k8s.io/v1", "kind": "ClusterTrustBundle",
			"metadata": map[string]any{"name": name}, "spec": spec}}
		if update {
			cur, err := ctbs.Get(ctx, "v1", "", name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			obj.SetResourceVersion(cur.GetResourceVersion())
			_, err = ctbs.Update(ctx, "v1", "", name, obj, registry.WriteOptions{FieldManager: "test"})
			return err
		}
		_, _, err := ctbs.CreateEncoded(ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
		return err
	}
	prefix := func(name string) string { return `ClusterTrustBundle.certificates.k8s.io "` + name + `" is invalid: ` }
	for _, c := range []struct{ name, signer, bundle, err string }{
		{"plain", "", ca, ""},
		{"example.com:s:one", "example.com/s", ca + ca2, ""},
		{"wrong", "example.com/s", ca, prefix("wrong") + `metadata.name: Invalid value: "wrong": ClusterTrustBundle for signerName example.com/s must be named with prefix example.com:s:`},
		{"a:b", "", ca, prefix("a:b") + `metadata.name: Invalid value: "a:b": ClusterTrustBundle without signer name must not have ":" in its name`},
		{"leaf", "", leaf, prefix("leaf") + `spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set`},
		{"empty", "", "", prefix("empty") + `spec.trustBundle: Invalid value: "<value omitted>": at least one trust anchor must be provided`},
		{"twice", "", ca + ca2 + ca, prefix("twice") + `spec.trustBundle: Invalid value: "<value omitted>": duplicate trust anchor (indices [0 2])`},
	} {
		if got := errText(write(f.ctx, c.name, c.signer, c.bundle, false)); got != c.err {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.err)
		}
	}
	if got, want := errText(write(f.ctx, "example.com:s:one", "example.com/t", ca, true)), prefix("example.com:s:one")+`[metadata.name: Invalid value: "example.com:s:one": ClusterTrustBundle for signerName example.com/t must be named with prefix example.com:t:, spec.signerName: Invalid value: "example.com/t": field is immutable]`; got != want {
		t.Errorf("a changed signer:\n got %s\nwant %s", got, want)
	}
	// Attest, with an authorizer that allows only carol.
	k := ClusterTrustBundles(attestCarol{})
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "example.com:s:x"}, "spec": map[string]any{"signerName": "example.com/s"}}}
	for user, want := range map[string]string{
		"bob":   `clustertrustbundles.certificates.k8s.io "example.com:s:x" is forbidden: user not permitted to attest for signerName "example.com/s"`,
		"carol": "",
	} {
		ctx := registry.WithUser(context.Background(), registry.User{Name: user})
		if got := errText(k.Admit(ctx, obj, nil)); got != want {
			t.Errorf("%s: %s, want %s", user, got, want)
		}
	}
}

// attestCarol allows carol to attest for the signers of example.com.
type attestCarol struct{}

func (attestCarol) Authorize(_ context.Context, a registry.Attributes) (registry.Decision, string, error) {
	if a.User.Name == "carol" && a.Verb == "attest" && a.Resource == "signers" && a.Name == "example.com/*" {
		return registry.Allow, "", nil
	}
	return registry.NoOpinion, "", nil
}
