package core

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// CSRSigner is kube-controller-manager's csrsigning and csrcleaner
// controllers for the one signer kplane serves,
// kubernetes.io/kube-apiserver-client: an approved request to it, not
// failed and not yet issued, is signed with kplane's own certificate
// authority (CA, Key), so that the certificate logs in to kplane as the
// request's subject (common name the user, organizations the groups);
// one whose usages are not a client's gets a Failed condition instead,
// as upstream's. Requests to other signers are left to their signers.
// Old requests are deleted as upstream's cleaner deletes them: issued,
// denied or failed ones an hour after, pending ones a day after, and
// those whose certificate expired.
type CSRSigner struct {
	Registry *registry.Registry
	CA       *x509.Certificate
	Key      crypto.Signer
	// Duration is the longest certificate issued
	// (--cluster-signing-duration); 0: a year, upstream's default.
	Duration time.Duration
	Logger   *slog.Logger
	// CleanEvery is how often old requests are deleted (0: an hour).
	CleanEvery time.Duration
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

func (c *CSRSigner) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Run signs and cleans until ctx ends.
func (c *CSRSigner) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.KubeControllerManager)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	csrs, ok := c.Registry.Get(csrResource)
	if !ok {
		<-ctx.Done()
		return nil
	}
	go c.clean(ctx, csrs)
	retryFollow(ctx, c.Logger, 0, "certificate signer", func(ctx context.Context) error { return c.follow(ctx, csrs) })
	return nil
}

func (c *CSRSigner) follow(ctx context.Context, csrs *registry.Resource) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := csrs.Watch(wctx, "v1", "", registry.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			if u, isObj := ev.Object.(runtime.Unstructured); isObj && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				c.handle(ctx, csrs, &unstructured.Unstructured{Object: u.UnstructuredContent()})
			}
		}
	}
}

// handle signs obj, or fails it, if it is kplane's to sign.
func (c *CSRSigner) handle(ctx context.Context, csrs *registry.Resource, obj *unstructured.Unstructured) {
	csr, err := typedCSR(obj)
	if err != nil || csr.Spec.SignerName != KubeAPIServerClientSigner || len(csr.Status.Certificate) > 0 ||
		!hasCondition(csr, certificatesv1.CertificateApproved) || hasCondition(csr, certificatesv1.CertificateFailed) ||
		hasCondition(csr, certificatesv1.CertificateDenied) {
		return
	}
	next := obj.DeepCopy()
	req, err := parseCSR(csr.Spec.Request)
	if err != nil {
		c.Logger.Warn("certificate signer: unable to parse csr", "csr", csr.Name, "err", err)
		return
	}
	if err := clientUsages(csr.Spec.Usages); err != nil {
		conditions, _, _ := unstructured.NestedSlice(next.Object, "status", "conditions")
		conditions = append(conditions, map[string]any{
			"type": string(certificatesv1.CertificateFailed), "status": string(corev1.ConditionTrue),
			"reason": "SignerValidationFailure", "message": err.Error(),
			"lastUpdateTime": c.now().UTC().Format(time.RFC3339),
		})
		setConditions(next, conditions)
	} else {
		cert, err := c.sign(req, csr.Spec.Usages, csr.Spec.ExpirationSeconds)
		if err != nil {
			c.Logger.Warn("certificate signer: signing", "csr", csr.Name, "err", err)
			return
		}
		if err := unstructured.SetNestedField(next.Object, base64.StdEncoding.EncodeToString(cert), "status", "certificate"); err != nil {
			return
		}
	}
	// next carries obj's resourceVersion: a request changed meanwhile is
	// a conflict, and its own event handles it again.
	if _, err := csrs.Update(ctx, "v1", "", csr.Name, next, registry.WriteOptions{FieldManager: controllerManager, Subresource: "status"}); err != nil &&
		!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		c.Logger.Warn("certificate signer: updating the request", "csr", csr.Name, "err", err)
	}
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// clientUsages checks the usages of a client certificate, as upstream's
// signer for kube-apiserver-client does, with its errors.
func clientUsages(usages []certificatesv1.KeyUsage) error {
	client := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			client = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !client {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}

// Upstream's signing policy: backdated 5 minutes, which a certificate
// of 8 hours or more also gives up from its end.
const (
	signBackdate = 5 * time.Minute
	signShort    = 8 * time.Hour
)

// sign issues the certificate of req, as upstream's permissive signing
// policy: the request's subject and names, the usages asked, not a CA,
// for the duration asked (10 minutes to Duration), never past the CA's.
func (c *CSRSigner) sign(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, expirationSeconds *int32) ([]byte, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %v", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, EmailAddresses: req.EmailAddresses, URIs: req.URIs,
		BasicConstraintsValid: true,
	}
	for _, u := range usages {
		if ku, ok := keyUsages[u]; ok {
			tmpl.KeyUsage |= ku
		} else if eku, ok := extKeyUsages[u]; ok && !slices.Contains(tmpl.ExtKeyUsage, eku) {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, eku)
		}
	}
	slices.Sort(tmpl.ExtKeyUsage)
	ttl := c.Duration
	if ttl <= 0 {
		ttl = 365 * 24 * time.Hour
	}
	if expirationSeconds != nil {
		asked := time.Duration(*expirationSeconds) * time.Second
		ttl = max(min(asked, ttl), 10*time.Minute)
	}
	now := c.now()
	tmpl.NotBefore = now.Add(-signBackdate)
	if ttl < signShort {
		tmpl.NotAfter = now.Add(ttl)
	} else {
		tmpl.NotAfter = now.Add(ttl - signBackdate)
	}
	if !tmpl.NotAfter.Before(c.CA.NotAfter) {
		tmpl.NotAfter = c.CA.NotAfter
	}
	if !now.Before(c.CA.NotAfter) {
		return nil, errors.New("refusing to sign a certificate that expired in the past")
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.CA, req.PublicKey, c.Key)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

var keyUsages = map[certificatesv1.KeyUsage]x509.KeyUsage{
	certificatesv1.UsageSigning: x509.KeyUsageDigitalSignature, certificatesv1.UsageDigitalSignature: x509.KeyUsageDigitalSignature,
	certificatesv1.UsageContentCommitment: x509.KeyUsageContentCommitment, certificatesv1.UsageKeyEncipherment: x509.KeyUsageKeyEncipherment,
	certificatesv1.UsageKeyAgreement: x509.KeyUsageKeyAgreement, certificatesv1.UsageDataEncipherment: x509.KeyUsageDataEncipherment,
	certificatesv1.UsageCertSign: x509.KeyUsageCertSign, certificatesv1.UsageCRLSign: x509.KeyUsageCRLSign,
	certificatesv1.UsageEncipherOnly: x509.KeyUsageEncipherOnly, certificatesv1.UsageDecipherOnly: x509.KeyUsageDecipherOnly,
}

var extKeyUsages = map[certificatesv1.KeyUsage]x509.ExtKeyUsage{
	certificatesv1.UsageAny: x509.ExtKeyUsageAny, certificatesv1.UsageServerAuth: x509.ExtKeyUsageServerAuth,
	certificatesv1.UsageClientAuth: x509.ExtKeyUsageClientAuth, certificatesv1.UsageCodeSigning: x509.ExtKeyUsageCodeSigning,
	certificatesv1.UsageEmailProtection: x509.ExtKeyUsageEmailProtection, certificatesv1.UsageSMIME: x509.ExtKeyUsageEmailProtection,
	certificatesv1.UsageIPsecEndSystem: x509.ExtKeyUsageIPSECEndSystem, certificatesv1.UsageIPsecTunnel: x509.ExtKeyUsageIPSECTunnel,
	certificatesv1.UsageIPsecUser: x509.ExtKeyUsageIPSECUser, certificatesv1.UsageTimestamping: x509.ExtKeyUsageTimeStamping,
	certificatesv1.UsageOCSPSigning: x509.ExtKeyUsageOCSPSigning, certificatesv1.UsageMicrosoftSGC: x509.ExtKeyUsageMicrosoftServerGatedCrypto,
	certificatesv1.UsageNetscapeSGC: x509.ExtKeyUsageNetscapeServerGatedCrypto,
}

// Upstream's cleaner's ages.
const (
	csrApprovedExpiration = time.Hour
	csrDeniedExpiration   = time.Hour
	csrPendingExpiration  = 24 * time.Hour
)

// clean deletes old requests now and every CleanEvery.
func (c *CSRSigner) clean(ctx context.Context, csrs *registry.Resource) {
	every := c.CleanEvery
	if every <= 0 {
		every = time.Hour
	}
	for {
		c.cleanOnce(ctx, csrs)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (c *CSRSigner) cleanOnce(ctx context.Context, csrs *registry.Resource) {
	list, err := csrs.List(ctx, "v1", "", registry.ListOptions{})
	if err != nil {
		c.Logger.Warn("certificate cleaner: listing", "err", err)
		return
	}
	for i := range list.Items {
		csr, err := typedCSR(&list.Items[i])
		if err != nil || !c.expired(csr) {
			continue
		}
		if _, _, err := csrs.Delete(ctx, "v1", "", csr.Name, metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.Logger.Warn("certificate cleaner: deleting", "csr", csr.Name, "err", err)
		}
	}
}

// expired is upstream's cleaner's rule.
func (c *CSRSigner) expired(csr *certificatesv1.CertificateSigningRequest) bool {
	now := c.now()
	older := func(t metav1.Time, d time.Duration) bool { return !t.IsZero() && t.Add(d).Before(now) }
	issued := len(csr.Status.Certificate) > 0
	if len(csr.Status.Conditions) == 0 && older(csr.CreationTimestamp, csrPendingExpiration) {
		return true
	}
	for _, cond := range csr.Status.Conditions {
		switch cond.Type {
		case certificatesv1.CertificateApproved:
			if issued && older(cond.LastUpdateTime, csrApprovedExpiration) {
				return true
			}
			if !issued && older(cond.LastUpdateTime, csrPendingExpiration) {
				return true
			}
			if issued && certExpired(csr.Status.Certificate, now) {
				return true
			}
		case certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			if older(cond.LastUpdateTime, csrDeniedExpiration) {
				return true
			}
		}
	}
	return false
}

func certExpired(data []byte, now time.Time) bool {
	block, _ := pem.Decode(data)
	if block == nil {
		return false
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	return err == nil && now.After(cert.NotAfter)
}
