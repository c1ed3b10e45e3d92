package core

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

var ctbResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "clustertrustbundles"}

// maxTrustBundle is upstream's bound on a bundle's PEM.
const maxTrustBundle = 1 << 20

// ClusterTrustBundles is certificates.k8s.io/v1's ClusterTrustBundle
// (GA in Kubernetes 1.37), as kube-apiserver serves it: a PEM bundle of
// CA certificates, optionally published for a signer, whose name must
// then start with the signer's ("example.com:signer:"), checked as
// upstream checks it. authz decides who may publish a bundle for a
// signer (the attest verb on signers), as upstream's
// ClusterTrustBundleAttest admission plugin; nil lets everyone.
func ClusterTrustBundles(authz registry.Authorizer) *registry.Kind {
	signer := func(obj *unstructured.Unstructured) string {
		s, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName")
		return s
	}
	return &registry.Kind{
		Group: certificatesv1.GroupName, Versions: []string{"v1"}, Kind: "ClusterTrustBundle", ListKind: "ClusterTrustBundleList",
		Resource: "clustertrustbundles", Singular: "clustertrustbundle", UpstreamStorageVersion: "v1beta1",
		Typed: func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
		// The name's rules depend on the signer: Validate checks it.
		ValidateName: func(string, bool) []string { return nil },
		Validate:     func(obj *unstructured.Unstructured) field.ErrorList { return validateTrustBundle(obj, nil) },
		ValidateUpdate: func(obj, old *unstructured.Unstructured) field.ErrorList {
			return validateTrustBundle(obj, old)
		},
		Admit:  admitTrustBundle(authz),
		Fields: func(obj *unstructured.Unstructured) fields.Set { return fields.Set{"spec.signerName": signer(obj)} },
		Columns: []registry.Column{{Name: "SignerName", Type: "string", Description: certificatesv1.ClusterTrustBundleSpec{}.SwaggerDoc()["signerName"],
			Value: func(obj *unstructured.Unstructured) any {
				if s := signer(obj); s != "" {
					return s
				}
				return "<none>"
			}, Reads: []string{"spec"}}},
	}
}

// validateTrustBundle is upstream's ValidateClusterTrustBundle (and
// ...Update, old not nil), with its errors.
func validateTrustBundle(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	signer, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName")
	bundle, _, _ := unstructured.NestedString(obj.Object, "spec", "trustBundle")
	namePath := field.NewPath("metadata", "name")
	if name, prefix := obj.GetName(), obj.GetName() == "" && obj.GetGenerateName() != ""; name != "" || prefix {
		if prefix {
			name = obj.GetGenerateName()
		}
		for _, msg := range trustBundleName(signer, name, prefix) {
			errs = append(errs, field.Invalid(namePath, name, msg))
		}
	}
	if signer != "" {
		errs = append(errs, validateSignerName(field.NewPath("spec", "signerName"), signer)...)
	}
	oldBundle := ""
	if old != nil {
		oldBundle, _, _ = unstructured.NestedString(old.Object, "spec", "trustBundle")
	}
	if old == nil || bundle != oldBundle {
		errs = append(errs, checkTrustBundle(field.NewPath("spec", "trustBundle"), bundle)...)
	}
	if old != nil {
		oldSigner, _, _ := unstructured.NestedString(old.Object, "spec", "signerName")
		if signer != oldSigner {
			errs = append(errs, field.Invalid(field.NewPath("spec", "signerName"), signer, "field is immutable"))
		}
	}
	return errs
}

// trustBundleName is upstream's ValidateClusterTrustBundleName.
func trustBundleName(signer, name string, prefix bool) []string {
	dns := func(n string) []string {
		if prefix {
			n = strings.TrimSuffix(n, "-") + strings.Repeat("a", len(n)-len(strings.TrimSuffix(n, "-")))
		}
		return validation.IsDNS1123Subdomain(n)
	}
	if signer == "" {
		if strings.Contains(name, ":") {
			return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
		}
		return dns(name)
	}
	want := strings.ReplaceAll(signer, "/", ":") + ":"
	if !strings.HasPrefix(name, want) {
		return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signer, want)}
	}
	return dns(strings.TrimPrefix(name, want))
}

// checkTrustBundle is upstream's validateTrustBundle: CA certificates
// only, each once, at least one, within 1 MiB.
func checkTrustBundle(p *field.Path, in string) field.ErrorList {
	if len(in) > maxTrustBundle {
		return field.ErrorList{field.TooLong(p, "", maxTrustBundle)}
	}
	var errs field.ErrorList
	seen := map[string][]int{}
	var order []string
	rest := []byte(in)
	for i := 0; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		bad := func(msg string) {
			errs = append(errs, field.Invalid(p, "<value omitted>", fmt.Sprintf("entry %d %s", i, msg)))
		}
		if b.Type != "CERTIFICATE" {
			bad("has bad block type: " + b.Type)
			continue
		}
		if len(b.Headers) != 0 {
			bad("has PEM block headers")
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			bad("does not parse as X.509")
			continue
		}
		if !cert.IsCA {
			bad("does not have the CA bit set")
			continue
		}
		if !cert.BasicConstraintsValid {
			bad("has invalid basic constraints")
			continue
		}
		if _, ok := seen[string(b.Bytes)]; !ok {
			order = append(order, string(b.Bytes))
		}
		seen[string(b.Bytes)] = append(seen[string(b.Bytes)], i)
	}
	if len(errs) > 0 {
		return errs
	}
	if len(seen) == 0 {
		return field.ErrorList{field.Invalid(p, "<value omitted>", "at least one trust anchor must be provided")}
	}
	for _, k := range order {
		if idx := seen[k]; len(idx) > 1 {
			errs = append(errs, field.Invalid(p, "<value omitted>", fmt.Sprintf("duplicate trust anchor (indices %v)", idx)))
		}
	}
	return errs
}

// admitTrustBundle is upstream's ClusterTrustBundleAttest: publishing a
// bundle for a signer takes the attest verb on it (an update that only
// touches the garbage collector's fields does not).
func admitTrustBundle(authz registry.Authorizer) func(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) error {
	if authz == nil {
		return nil
	}
	return func(ctx context.Context, obj, old *unstructured.Unstructured) error {
		signer, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName")
		if signer == "" || registry.Internal(ctx) {
			return nil
		}
		if old != nil && onlyCollectorFields(obj, old) {
			return nil
		}
		if AuthorizedForSigner(ctx, authz, "attest", signer) {
			return nil
		}
		return apierrors.NewForbidden(ctbResource, obj.GetName(), fmt.Errorf("user not permitted to attest for signerName %q", signer))
	}
}
