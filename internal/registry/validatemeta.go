package registry

import (
	"fmt"
	"net/url"
	"strings"

	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateMeta checks the metadata every kind shares, as
// ValidateObjectMetaAccessor does. Metadata that plainly passes (metaPlain)
// is not handed to it: the library reads each field through the
// unstructured accessors, which copy labels and annotations and convert
// managedFields to their Go type, and checks names with regular
// expressions, about 3 % of a create's CPU. Anything else, and every
// error, comes from the library.
func validateMeta(k *Kind, obj metav1.Object) field.ErrorList {
	if metaPlain(k, obj) {
		return nil
	}
	nameFn := k.ValidateName
	if nameFn == nil {
		nameFn = metavalidation.NameIsDNSSubdomain
	}
	errs := metavalidation.ValidateObjectMetaAccessor(obj, k.Namespaced, nameFn, field.NewPath("metadata"))
	if k.QualifiedFinalizers {
		for i, f := range obj.GetFinalizers() {
			errs = append(errs, ValidateQualifiedFinalizer(f, field.NewPath("metadata", "finalizers").Index(i))...)
		}
	}
	return errs
}

// ValidateQualifiedFinalizer refuses a finalizer that is neither one of
// the standard ones nor qualified by a domain, as core validation does
// (metadata.finalizers with QualifiedFinalizers, a namespace's
// spec.finalizers).
func ValidateQualifiedFinalizer(name string, path *field.Path) field.ErrorList {
	if strings.Contains(name, "/") || standardFinalizers[name] {
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")}
}

// standardFinalizers are the finalizer names Kubernetes itself uses
// without a domain.
var standardFinalizers = map[string]bool{
	"kubernetes":                     true,
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
}

// The library's limits (k8s.io/apimachinery/pkg/api/validation and
// pkg/util/validation), for the plain cases only.
const (
	dnsSubdomainMax   = 253
	dnsLabelMax       = 63
	labelPartMax      = 63
	annotationsMax    = 256 * 1024
	fieldManagerMax   = 128
	subresourceMax    = 256
	managedOpApply    = string(metav1.ManagedFieldsOperationApply)
	managedOpUpdate   = string(metav1.ManagedFieldsOperationUpdate)
	managedFieldsType = "FieldsV1"
)

// metaPlain reports whether obj's metadata passes ValidateObjectMetaAccessor
// for k, by rules narrower than the library's: a name of the default
// kind (a DNS subdomain) and no generateName, labels and annotation keys
// of letters, digits, '-', '_' and '.', no ownerReferences or finalizers,
// and managedFields of the two operations. false means "ask the library",
// not "invalid". validatemeta_test.go holds it to the library.
func metaPlain(k *Kind, obj metav1.Object) bool {
	if k.ValidateName != nil {
		return false
	}
	var (
		u       *unstructured.Unstructured
		entries []metav1.ManagedFieldsEntry
		typed   bool
	)
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		u = o
	case metaView:
		u, entries, typed = o.Unstructured, o.managed, true
	default:
		return false
	}
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return false
	}
	for key, v := range md {
		switch key {
		case "name":
			s, ok := v.(string)
			if !ok || !dnsSubdomain(s) {
				return false
			}
		case "namespace":
			s, ok := v.(string)
			if !ok {
				return false
			}
			if k.Namespaced && !dnsLabel(s) || !k.Namespaced && s != "" {
				return false
			}
		case "generation":
			if g, ok := v.(int64); !ok || g < 0 {
				return false
			}
		case "labels":
			if !plainLabels(v) {
				return false
			}
		case "annotations":
			if !plainAnnotations(v) {
				return false
			}
		case "managedFields":
			if !typed && !plainManagedFields(v) {
				return false
			}
		case "uid", "resourceVersion", "creationTimestamp", "selfLink":
			// Not checked by the library on create; the registry sets them.
		default:
			// generateName, ownerReferences, finalizers, deletion fields
			// and anything unknown: the library decides.
			return false
		}
	}
	if _, ok := md["name"]; !ok {
		return false
	}
	if _, ok := md["namespace"]; !ok && k.Namespaced {
		return false
	}
	for i := range entries {
		e := &entries[i]
		if !plainManagedEntry(string(e.Operation), e.FieldsType, e.Manager, e.Subresource) {
			return false
		}
	}
	return true
}

func plainLabels(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return v == nil
	}
	for key, val := range m {
		s, ok := val.(string)
		if !ok || !labelKey(key, false) || (s != "" && !labelPart(s)) {
			return false
		}
	}
	return true
}

func plainAnnotations(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return v == nil
	}
	size := 0
	for key, val := range m {
		s, ok := val.(string)
		if !ok || !labelKey(key, true) {
			return false
		}
		size += len(key) + len(s)
	}
	return size <= annotationsMax
}

func plainManagedFields(v any) bool {
	items, ok := v.([]any)
	if !ok {
		return v == nil
	}
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		var op, typ, manager, sub string
		for key, val := range m {
			s, isString := val.(string)
			switch key {
			case "operation":
				op = s
			case "fieldsType":
				typ = s
			case "manager":
				manager = s
			case "subresource":
				sub = s
			case "apiVersion", "time", "fieldsV1":
				continue
			default:
				return false
			}
			if !isString {
				return false
			}
		}
		if !plainManagedEntry(op, typ, manager, sub) {
			return false
		}
	}
	return true
}

func plainManagedEntry(op, fieldsType, manager, subresource string) bool {
	if op != managedOpApply && op != managedOpUpdate {
		return false
	}
	if fieldsType != "" && fieldsType != managedFieldsType {
		return false
	}
	if len(manager) > fieldManagerMax || len(subresource) > subresourceMax {
		return false
	}
	for i := 0; i < len(manager); i++ {
		if c := manager[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// dnsSubdomain: dot-separated DNS labels, 253 bytes at most.
func dnsSubdomain(s string) bool {
	if len(s) == 0 || len(s) > dnsSubdomainMax {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !dnsLabelChars(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// dnsLabel: lower-case letters, digits and '-', starting and ending with
// a letter or digit, 63 bytes at most.
func dnsLabel(s string) bool { return len(s) <= dnsLabelMax && dnsLabelChars(s) }

func dnsLabelChars(s string) bool {
	if len(s) == 0 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// labelKey: a name part, optionally after a DNS subdomain prefix and '/'.
// anyCase takes upper-case letters in the prefix too, as annotation keys
// are checked lower-cased.
func labelKey(s string, anyCase bool) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '/' {
			continue
		}
		prefix := s[:i]
		if anyCase {
			for j := 0; j < len(prefix); j++ {
				if c := prefix[j]; c >= 'A' && c <= 'Z' {
					return false // rare: left to the library
				}
			}
		}
		return dnsSubdomain(prefix) && labelPart(s[i+1:])
	}
	return labelPart(s)
}

// labelPart: letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit, 63 bytes at most.
func labelPart(s string) bool {
	if len(s) == 0 || len(s) > labelPartMax || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// validateMetaUpdate checks next's metadata as an update of cur's, as
// ValidateObjectMetaAccessorUpdate and validateMeta do, by the same rule:
// what plainly passes (metaPlain for next, and the fields an update may
// not change plainly unchanged) skips the library, whose immutability
// checks compare by reflection (6 % of a merge patch's CPU); anything
// else, and every error, comes from the library.
func validateMetaUpdate(k *Kind, next, cur *unstructured.Unstructured) field.ErrorList {
	if metaPlain(k, next) && unchangedPlain(next, cur) {
		return nil
	}
	errs := metavalidation.ValidateObjectMetaAccessorUpdate(next, cur, field.NewPath("metadata"))
	return append(errs, validateMeta(k, next)...)
}

// unchangedPlain reports whether next keeps cur's name, namespace, uid,
// creationTimestamp (the same values, or both absent), has a
// resourceVersion and a generation not below cur's, and neither is being
// deleted. false means "ask the library".
func unchangedPlain(next, cur *unstructured.Unstructured) bool {
	nmd, ok := next.Object["metadata"].(map[string]any)
	if !ok {
		return false
	}
	cmd, ok := cur.Object["metadata"].(map[string]any)
	if !ok {
		return false
	}
	for _, key := range []string{"name", "namespace", "uid", "creationTimestamp"} {
		nv, nok := nmd[key]
		cv, cok := cmd[key]
		if nok != cok {
			return false
		}
		if !nok {
			continue
		}
		ns, nIsString := nv.(string)
		cs, cIsString := cv.(string)
		if !nIsString || !cIsString || ns != cs {
			return false
		}
	}
	if rv, ok := nmd["resourceVersion"].(string); !ok || rv == "" {
		return false
	}
	for _, key := range []string{"deletionTimestamp", "deletionGracePeriodSeconds"} {
		if _, ok := cmd[key]; ok {
			return false
		}
		if _, ok := nmd[key]; ok {
			return false
		}
	}
	var ng, cg int64
	if v, ok := nmd["generation"]; ok {
		if ng, ok = v.(int64); !ok {
			return false
		}
	}
	if v, ok := cmd["generation"]; ok {
		if cg, ok = v.(int64); !ok {
			return false
		}
	}
	return ng >= cg
}

// ValidateWebhookURL checks the url of a webhook kube-apiserver calls (a
// CRD's conversion webhook, an admission webhook), as upstream's
// ValidateWebhookURL with https required: a URL with a host, and without
// user information, fragment or query.
func ValidateWebhookURL(p *field.Path, raw string) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(p, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(p, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// ValidateWebhookPath checks the path of a webhook's service reference,
// as upstream's ValidateWebhookService: empty or "/", or "/" and
// segments that are DNS subdomains.
func ValidateWebhookPath(p *field.Path, path string) field.ErrorList {
	if path == "" || path == "/" {
		return nil
	}
	if path == "//" {
		return field.ErrorList{field.Invalid(p, path, "segment[0] may not be empty")}
	}
	var errs field.ErrorList
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, field.Invalid(p, path, "must start with a '/'"))
	}
	for i, seg := range strings.Split(strings.TrimSuffix(path[1:], "/"), "/") {
		if seg == "" {
			errs = append(errs, field.Invalid(p, path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(seg) {
			errs = append(errs, field.Invalid(p, path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}
