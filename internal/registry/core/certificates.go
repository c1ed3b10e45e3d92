package core

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The signers kplane knows: KubeAPIServerClientSigner it signs for
// itself (CSRSigner), with its own authority, so that the certificates
// it issues log in to it.
const (
	KubeAPIServerClientSigner = "kubernetes.io/kube-apiserver-client"
	legacyUnknownSigner       = "kubernetes.io/legacy-unknown"
)

var csrResource = schema.GroupResource{Group: certificatesv1.GroupName, Resource: "certificatesigningrequests"}

// CertificateSigningRequests is certificates.k8s.io/v1's
// CertificateSigningRequest, as kube-apiserver serves it: the requester's
// identity recorded on create (spec.username, uid, groups, extra), the
// spec then fixed; /approval adds the Approved or Denied condition,
// /status the certificate and other conditions, each checked as
// upstream's strategies and validation check them. authz decides who may
// approve (the approve verb on signers) and who may sign (sign), as
// upstream's CertificateApproval and CertificateSigning admission
// plugins; nil lets everyone, as an authorizer that allows all would.
func CertificateSigningRequests(authz registry.Authorizer) *registry.Kind {
	// Upstream's printer describes the columns with v1beta1's
	// documentation, the Requestor with the request's.
	doc := certificatesv1beta1.CertificateSigningRequestSpec{}.SwaggerDoc()
	return &registry.Kind{
		Group: certificatesv1.GroupName, Versions: []string{"v1"}, Kind: "CertificateSigningRequest", ListKind: "CertificateSigningRequestList",
		Resource: "certificatesigningrequests", Singular: "certificatesigningrequest", ShortNames: []string{"csr"},
		Status: true, UnconditionalUpdate: true, UpdateSubresources: []string{"approval"}, WritesByUser: true,
		Typed: func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
		// Any name a path can carry, as upstream (its name check accepts
		// all; the path's refuses "..").
		ValidateName: pathSegmentName,
		Admit:        recordRequester,
		// Upstream's strategies put these back: a write does not own them.
		ResetFields: map[string][][]string{"": {{"spec"}, {"status"}}, "status": {{"spec"}, {"status", "conditions"}}, "approval": {{"spec"}, {"status", "certificate"}}},
		AdmitCreate: restrictSubject,
		PrepareForCreate: func(obj *unstructured.Unstructured) {
			obj.Object["status"] = map[string]any{}
		},
		PrepareForUpdate: func(obj, old *unstructured.Unstructured) {
			// The spec is fixed once created.
			if spec, ok := old.Object["spec"]; ok {
				obj.Object["spec"] = runtime.DeepCopyJSONValue(spec)
			} else {
				delete(obj.Object, "spec")
			}
		},
		PrepareForSubresource:     prepareCSRSubresource,
		Validate:                  func(obj *unstructured.Unstructured) field.ErrorList { return validateCSRUpdate("", obj, nil) },
		ValidateSubresourceUpdate: validateCSRUpdate,
		AdmitUpdate:               csrAdmitUpdate(authz),
		Fields: func(obj *unstructured.Unstructured) fields.Set {
			s, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName")
			return fields.Set{"spec.signerName": s}
		},
		Columns: []registry.Column{
			registry.AgeColumn,
			{Name: "SignerName", Type: "string", Description: doc["signerName"], Value: func(obj *unstructured.Unstructured) any {
				if s, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName"); s != "" {
					return s
				}
				return "<none>"
			}, Reads: []string{"spec"}},
			{Name: "Requestor", Type: "string", Description: doc["request"], Value: func(obj *unstructured.Unstructured) any {
				s, _, _ := unstructured.NestedString(obj.Object, "spec", "username")
				return s
			}, Reads: []string{"spec"}},
			{Name: "RequestedDuration", Type: "string", Description: doc["expirationSeconds"], Value: func(obj *unstructured.Unstructured) any {
				if s, ok, _ := unstructured.NestedInt64(obj.Object, "spec", "expirationSeconds"); ok {
					return duration.HumanDuration(time.Duration(s) * time.Second)
				}
				return "<none>"
			}, Reads: []string{"spec"}},
			{Name: "Condition", Type: "string", Description: certificatesv1beta1.CertificateSigningRequestStatus{}.SwaggerDoc()["conditions"], Value: csrCondition, Reads: []string{"status"}},
		},
	}
}

// csrCondition is the CONDITION column: Denied, Approved or Pending,
// then ",Failed" and ",Issued", as upstream's printer.
func csrCondition(obj *unstructured.Unstructured) any {
	var approved, denied, failed bool
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case string(certificatesv1.CertificateApproved):
			approved = true
		case string(certificatesv1.CertificateDenied):
			denied = true
		case string(certificatesv1.CertificateFailed):
			failed = true
		}
	}
	status := "Pending"
	switch {
	case denied:
		status = "Denied"
	case approved:
		status = "Approved"
	}
	if failed {
		status += ",Failed"
	}
	if c, _, _ := unstructured.NestedString(obj.Object, "status", "certificate"); c != "" {
		status += ",Issued"
	}
	return status
}

// typedCSR is obj as the typed CertificateSigningRequest.
func typedCSR(obj *unstructured.Unstructured) (*certificatesv1.CertificateSigningRequest, error) {
	if obj == nil {
		return nil, nil
	}
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, csr); err != nil {
		return nil, err
	}
	return csr, nil
}

// recordRequester records the requester of a created request, as
// upstream's strategy does on create (what the client sent there is
// replaced).
func recordRequester(ctx context.Context, obj, old *unstructured.Unstructured) error {
	if old != nil {
		return nil
	}
	spec, _ := obj.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj.Object["spec"] = spec
	}
	for _, f := range []string{"username", "uid", "groups", "extra"} {
		delete(spec, f)
	}
	if u, ok := registry.UserFrom(ctx); ok {
		// The fields of a UserInfo, as a TokenReview gives them.
		for k, v := range userInfo(u) {
			if k != "username" || u.Name != "" {
				spec[k] = v
			}
		}
	}
	return nil
}

// restrictSubject refuses a request to the kube-apiserver-client signer
// for system:masters, as upstream's CertificateSubjectRestriction
// admission plugin: after validation, so a request that does not parse
// is invalid (422) before it is forbidden.
func restrictSubject(_ context.Context, obj *unstructured.Unstructured) error {
	if s, _, _ := unstructured.NestedString(obj.Object, "spec", "signerName"); s != KubeAPIServerClientSigner {
		return nil
	}
	csr, err := typedCSR(obj)
	if err != nil {
		return nil // refused by validation, which says why
	}
	forbidden := func(err error) error { return apierrors.NewForbidden(csrResource, obj.GetName(), err) }
	req, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return forbidden(fmt.Errorf("failed to parse CSR: %v", err))
	}
	if slices.Contains(req.Subject.Organization, "system:masters") {
		return forbidden(fmt.Errorf("use of %s signer with system:masters group is not allowed", KubeAPIServerClientSigner))
	}
	return nil
}

// parseCSR reads a PEM certificate request, as upstream's ParseCSR.
func parseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// prepareCSRSubresource is upstream's status and approval strategies:
// through /status the Approved and Denied conditions stay as stored (when
// as many are sent); through /approval only the conditions change. New
// conditions get the time of the write.
func prepareCSRSubresource(subresource string, next, obj, cur *unstructured.Unstructured) {
	// The metadata a client may change comes from the request, as
	// upstream's strategies keep the new object's.
	next.SetLabels(obj.GetLabels())
	next.SetAnnotations(obj.GetAnnotations())
	next.SetFinalizers(obj.GetFinalizers())
	next.SetOwnerReferences(obj.GetOwnerReferences())
	sent, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	stored, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	switch subresource {
	case "status":
		conditions, _, _ := unstructured.NestedSlice(next.Object, "status", "conditions")
		for _, t := range []string{string(certificatesv1.CertificateApproved), string(certificatesv1.CertificateDenied)} {
			oldIdx, newIdx := conditionIndices(stored, t), conditionIndices(conditions, t)
			if len(oldIdx) == len(newIdx) {
				for i, oi := range oldIdx {
					conditions[newIdx[i]] = runtime.DeepCopyJSONValue(stored[oi])
				}
			}
		}
		stampConditions(conditions, stored)
		setConditions(next, conditions)
	case "approval":
		stampConditions(sent, stored)
		setConditions(next, sent)
	}
}

func setConditions(obj *unstructured.Unstructured, conditions []any) {
	status, _ := obj.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		obj.Object["status"] = status
	}
	if conditions == nil {
		delete(status, "conditions")
		return
	}
	status["conditions"] = conditions
}

func conditionIndices(conditions []any, t string) []int {
	var out []int
	for i, c := range conditions {
		if m, _ := c.(map[string]any); m["type"] == t {
			out = append(out, i)
		}
	}
	return out
}

// stampConditions gives conditions without times the write's time, and
// a condition's transition time the stored one of the same type and
// status, as upstream's populateConditionTimestamps.
func stampConditions(conditions, stored []any) {
	now := metav1.Now().Rfc3339Copy().UTC().Format(time.RFC3339)
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m == nil {
			continue
		}
		if t, _ := m["lastUpdateTime"].(string); t == "" {
			m["lastUpdateTime"] = now
		}
		if t, _ := m["lastTransitionTime"].(string); t != "" {
			continue
		}
		transition := now
		for _, o := range stored {
			om, _ := o.(map[string]any)
			if t, _ := om["lastTransitionTime"].(string); om["type"] == m["type"] && om["status"] == m["status"] && t != "" {
				transition = t
				break
			}
		}
		m["lastTransitionTime"] = transition
	}
}

// validUsages are the key usages upstream knows, sorted.
var validUsages = func() []string {
	us := []certificatesv1.KeyUsage{
		certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature, certificatesv1.UsageContentCommitment,
		certificatesv1.UsageKeyEncipherment, certificatesv1.UsageKeyAgreement, certificatesv1.UsageDataEncipherment,
		certificatesv1.UsageCertSign, certificatesv1.UsageCRLSign, certificatesv1.UsageEncipherOnly, certificatesv1.UsageDecipherOnly,
		certificatesv1.UsageAny, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth, certificatesv1.UsageCodeSigning,
		certificatesv1.UsageEmailProtection, certificatesv1.UsageSMIME, certificatesv1.UsageIPsecEndSystem, certificatesv1.UsageIPsecTunnel,
		certificatesv1.UsageIPsecUser, certificatesv1.UsageTimestamping, certificatesv1.UsageOCSPSigning, certificatesv1.UsageMicrosoftSGC,
		certificatesv1.UsageNetscapeSGC,
	}
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	slices.Sort(out)
	return out
}()

// validateCSRUpdate is upstream's validation of a create (old nil) or an
// update through subresource ("", "status" or "approval").
func validateCSRUpdate(subresource string, obj, old *unstructured.Unstructured) field.ErrorList {
	csr, err := typedCSR(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	oldCSR, err := typedCSR(old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	// Data already stored is tolerated, as upstream's options do.
	has := func(f func(*certificatesv1.CertificateSigningRequest) bool) bool { return oldCSR != nil && f(oldCSR) }
	allowUnknownUsages := has(func(c *certificatesv1.CertificateSigningRequest) bool {
		return slices.ContainsFunc(c.Spec.Usages, func(u certificatesv1.KeyUsage) bool { _, ok := slices.BinarySearch(validUsages, string(u)); return !ok })
	})
	allowDuplicateUsages := has(func(c *certificatesv1.CertificateSigningRequest) bool { return hasDuplicates(c.Spec.Usages) })
	allowLegacySigner := has(func(c *certificatesv1.CertificateSigningRequest) bool {
		return c.Spec.SignerName == legacyUnknownSigner
	})
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if _, err := checkCSR(csr.Spec.Request); err != nil {
		errs = append(errs, field.Invalid(spec.Child("request"), csr.Spec.Request, err.Error()))
	}
	if len(csr.Spec.Usages) == 0 {
		errs = append(errs, field.Required(spec.Child("usages"), ""))
	}
	if !allowUnknownUsages {
		for i, u := range csr.Spec.Usages {
			if _, ok := slices.BinarySearch(validUsages, string(u)); !ok {
				errs = append(errs, field.NotSupported(spec.Child("usages").Index(i), u, validUsages))
			}
		}
	}
	if !allowDuplicateUsages {
		seen := map[certificatesv1.KeyUsage]bool{}
		for i, u := range csr.Spec.Usages {
			if seen[u] {
				errs = append(errs, field.Duplicate(spec.Child("usages").Index(i), u))
			}
			seen[u] = true
		}
	}
	if !allowLegacySigner && csr.Spec.SignerName == legacyUnknownSigner {
		errs = append(errs, field.Invalid(spec.Child("signerName"), csr.Spec.SignerName, "the legacy signerName is not allowed via this API version"))
	} else {
		errs = append(errs, validateSignerName(spec.Child("signerName"), csr.Spec.SignerName)...)
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	errs = append(errs, validateCSRConditions(csr, oldCSR)...)
	certChanged := oldCSR == nil || !bytes.Equal(csr.Status.Certificate, oldCSR.Status.Certificate)
	if certChanged && (oldCSR == nil || checkCertificate(oldCSR.Status.Certificate) == nil) {
		if err := checkCertificate(csr.Status.Certificate); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("status", "certificate"), "<certificate data>", err.Error()))
		}
	}
	if oldCSR == nil {
		return errs
	}
	conditions := field.NewPath("status", "conditions")
	for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		if len(findConditions(csr, t)) < len(findConditions(oldCSR, t)) {
			errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not remove a condition of type %q", t)))
		}
	}
	if subresource != "approval" {
		for _, t := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied} {
			before, after := findConditions(oldCSR, t), findConditions(csr, t)
			switch {
			case len(after) < len(before):
			case len(after) > len(before):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not add a condition of type %q", t)))
			case !apiequality.Semantic.DeepEqual(before, after):
				errs = append(errs, field.Forbidden(conditions, fmt.Sprintf("updates may not modify a condition of type %q\n%v", t, diff.Diff(before, after))))
			}
		}
	}
	if !bytes.Equal(csr.Status.Certificate, oldCSR.Status.Certificate) {
		switch {
		case subresource != "status":
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not set certificate content"))
		case len(oldCSR.Status.Certificate) > 0:
			errs = append(errs, field.Forbidden(field.NewPath("status", "certificate"), "updates may not modify existing certificate content"))
		}
	}
	return errs
}

func hasDuplicates[T comparable](xs []T) bool {
	seen := map[T]bool{}
	for _, x := range xs {
		if seen[x] {
			return true
		}
		seen[x] = true
	}
	return false
}

func findConditions(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) []certificatesv1.CertificateSigningRequestCondition {
	var out []certificatesv1.CertificateSigningRequestCondition
	for _, c := range csr.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

// validateCSRConditions is upstream's validateConditions, with its
// tolerance of stored data.
func validateCSRConditions(csr, old *certificatesv1.CertificateSigningRequest) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("status", "conditions")
	bothAllowed := old != nil && len(findConditions(old, certificatesv1.CertificateApproved)) > 0 && len(findConditions(old, certificatesv1.CertificateDenied)) > 0
	duplicatesAllowed := old != nil && hasDuplicates(conditionTypes(old))
	emptyAllowed := old != nil && slices.Contains(conditionTypes(old), "")
	seen := map[certificatesv1.RequestConditionType]bool{}
	approved, denied := false, false
	for i, c := range csr.Status.Conditions {
		if !emptyAllowed && c.Type == "" {
			errs = append(errs, field.Required(path.Index(i).Child("type"), ""))
		}
		allowed := []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			allowed = []string{string(corev1.ConditionTrue)}
		}
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(path.Index(i).Child("status"), ""))
		case !slices.Contains(allowed, string(c.Status)):
			errs = append(errs, field.NotSupported(path.Index(i).Child("status"), c.Status, allowed))
		}
		switch c.Type {
		case certificatesv1.CertificateApproved:
			approved = true
		case certificatesv1.CertificateDenied:
			denied = true
		}
		if !duplicatesAllowed {
			if seen[c.Type] {
				errs = append(errs, field.Duplicate(path.Index(i).Child("type"), c.Type))
			}
			seen[c.Type] = true
		}
	}
	if approved && denied && !bothAllowed {
		// Upstream's declarative validation words it.
		errs = append(errs, field.Invalid(path, `{conditions[{"type": "Approved"}], conditions[{"type": "Denied"}]}`,
			"must specify at most one of: `conditions[{\"type\": \"Approved\"}]`, `conditions[{\"type\": \"Denied\"}]`"))
	}
	return errs
}

func conditionTypes(csr *certificatesv1.CertificateSigningRequest) []certificatesv1.RequestConditionType {
	var out []certificatesv1.RequestConditionType
	for _, c := range csr.Status.Conditions {
		out = append(out, c.Type)
	}
	return out
}

// checkCSR parses a request and checks its signature, as upstream.
func checkCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	req, err := parseCSR(pemBytes)
	if err != nil {
		return nil, err
	}
	return req, req.CheckSignature()
}

// checkCertificate is upstream's check of status.certificate: empty, or
// only CERTIFICATE PEM blocks without headers, each holding certificates.
func checkCertificate(data []byte) error {
	if len(data) == 0 {
		return nil
	}
	blocks := 0
	for {
		block, rest := pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("only CERTIFICATE PEM blocks are allowed, found %q", block.Type)
		}
		if len(block.Headers) != 0 {
			return errors.New("no PEM block headers are permitted")
		}
		blocks++
		certs, err := x509.ParseCertificates(block.Bytes)
		if err != nil {
			return err
		}
		if len(certs) == 0 {
			return errors.New("found CERTIFICATE PEM block containing 0 certificates")
		}
		data = rest
	}
	if blocks == 0 {
		return errors.New("must contain at least one CERTIFICATE PEM block")
	}
	return nil
}

// validateSignerName is upstream's: a domain of at least two DNS labels,
// a slash, a path of DNS subdomains.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	segments := strings.Split(name, "/")
	if len(segments) != 2 {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	maxDomain := validation.DNS1123SubdomainMaxLength
	if len(segments[0]) > maxDomain {
		errs = append(errs, field.TooLong(p, "", maxDomain))
	}
	labels := strings.Split(segments[0], ".")
	for _, l := range labels {
		if msgs := validation.IsDNS1123Label(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(p, segments[0], fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(p, segments[0], "should be a domain with at least two segments separated by dots"))
	}
	for _, l := range strings.Split(segments[1], ".") {
		if msgs := validation.IsDNS1123Subdomain(l); len(msgs) > 0 {
			for _, m := range msgs {
				errs = append(errs, field.Invalid(p, segments[1], fmt.Sprintf("validating label %q: %s", l, m)))
			}
			break
		}
	}
	maxName := maxDomain + validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1 + 1
	if len(name) > maxName {
		errs = append(errs, field.TooLong(p, "", maxName))
	}
	return errs
}

// csrAdmitUpdate is upstream's CertificateApproval and CertificateSigning
// admission: approving (through /approval) needs the approve verb, and
// changing the certificate or the conditions through /status the sign
// verb, on the signers resource named by the request's signer (or its
// domain and "/*").
func csrAdmitUpdate(authz registry.Authorizer) func(context.Context, string, *unstructured.Unstructured, *unstructured.Unstructured) error {
	if authz == nil {
		return nil
	}
	return func(ctx context.Context, subresource string, obj, old *unstructured.Unstructured) error {
		var verb string
		switch subresource {
		case "approval":
			verb = "approve"
		case "status":
			oc, _, _ := unstructured.NestedFieldNoCopy(old.Object, "status", "certificate")
			nc, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "certificate")
			ocs, _, _ := unstructured.NestedFieldNoCopy(old.Object, "status", "conditions")
			ncs, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
			if apiequality.Semantic.DeepEqual(oc, nc) && apiequality.Semantic.DeepEqual(ocs, ncs) {
				return nil
			}
			verb = "sign"
		default:
			return nil
		}
		if registry.Internal(ctx) {
			return nil
		}
		signer, _, _ := unstructured.NestedString(old.Object, "spec", "signerName")
		if AuthorizedForSigner(ctx, authz, verb, signer) {
			return nil
		}
		return apierrors.NewForbidden(csrResource, old.GetName(), fmt.Errorf("user not permitted to %s requests with signerName %q", verb, signer))
	}
}

// AuthorizedForSigner reports whether the request's user may verb
// (approve, sign) requests for signer, as upstream's
// IsAuthorizedForSignerName asks: the signer by name, then its domain
// with "/*".
func AuthorizedForSigner(ctx context.Context, authz registry.Authorizer, verb, signer string) bool {
	user, _ := registry.UserFrom(ctx)
	attrs := registry.Attributes{User: user, Verb: verb, ResourceRequest: true, APIGroup: certificatesv1.GroupName, APIVersion: "*", Resource: "signers", Name: signer}
	if registry.Allowed(ctx, authz, attrs) {
		return true
	}
	domain, _, _ := strings.Cut(signer, "/")
	attrs.Name = domain + "/*"
	return registry.Allowed(ctx, authz, attrs)
}
