package core

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Kinds returns the built-in kinds, fresh values each call. A Cohabit's
// host comes before its guest.
func Kinds() []*registry.Kind {
	events := &registry.Kind{
		Versions: []string{"v1"}, Kind: "Event", ListKind: "EventList", Resource: "events", Singular: "event",
		ShortNames: []string{"ev"}, Namespaced: true, UnconditionalUpdate: true, CreateOnUpdate: true,
		Typed:    func() runtime.Object { return &corev1.Event{} },
		Validate: validateEvent,
		Fields:   eventFields,
		Columns:  eventColumns(),
	}
	kinds := append([]*registry.Kind{
		Namespace(),
		{
			Versions: []string{"v1"}, Kind: "ConfigMap", ListKind: "ConfigMapList", Resource: "configmaps", Singular: "configmap",
			ShortNames: []string{"cm"}, Namespaced: true, UnconditionalUpdate: true, QualifiedFinalizers: true,
			Typed:          func() runtime.Object { return &corev1.ConfigMap{} },
			Validate:       validateConfigMap,
			ValidateUpdate: validateConfigMapUpdate,
			Columns:        configMapColumns,
		},
		{
			Versions: []string{"v1"}, Kind: "Secret", ListKind: "SecretList", Resource: "secrets", Singular: "secret",
			Namespaced: true, UnconditionalUpdate: true, QualifiedFinalizers: true,
			Typed:            func() runtime.Object { return &corev1.Secret{} },
			Default:          normalizeSecret,
			PrepareForCreate: normalizeSecret,
			PrepareForUpdate: func(obj, _ *unstructured.Unstructured) { normalizeSecret(obj) },
			Validate:         validateSecret,
			ValidateUpdate:   validateSecretUpdate,
			Fields: func(obj *unstructured.Unstructured) fields.Set {
				t, _, _ := unstructured.NestedString(obj.Object, "type")
				return fields.Set{"type": t}
			},
			Columns: secretColumns,
		},
		{
			Versions: []string{"v1"}, Kind: "ServiceAccount", ListKind: "ServiceAccountList", Resource: "serviceaccounts", Singular: "serviceaccount",
			ShortNames: []string{"sa"}, Namespaced: true, UnconditionalUpdate: true, ReturnDeletedObject: true, QualifiedFinalizers: true,
			Typed:   func() runtime.Object { return &corev1.ServiceAccount{} },
			Columns: serviceAccountColumns,
		},
		events,
		eventsV1(events),
		ResourceQuotas(),
		{
			Group: "coordination.k8s.io", Versions: []string{"v1"}, Kind: "Lease", ListKind: "LeaseList", Resource: "leases", Singular: "lease",
			// Upstream's Lease strategy refuses an update without a
			// resourceVersion, but creates on update.
			Namespaced: true, CreateOnUpdate: true,
			Typed:            func() runtime.Object { return &coordinationv1.Lease{} },
			Validate:         validateLease,
			PrepareForCreate: func(obj *unstructured.Unstructured) { dropLeaseElectionFields(obj, nil) },
			PrepareForUpdate: dropLeaseElectionFields,
			Columns:          leaseColumns,
		},
		role(rbac("Role", "roles", true, func() runtime.Object { return &rbacv1.Role{} })),
		role(rbac("ClusterRole", "clusterroles", false, func() runtime.Object { return &rbacv1.ClusterRole{} })),
		binding(rbac("RoleBinding", "rolebindings", true, func() runtime.Object { return &rbacv1.RoleBinding{} })),
		binding(rbac("ClusterRoleBinding", "clusterrolebindings", false, func() runtime.Object { return &rbacv1.ClusterRoleBinding{} })),
		CertificateSigningRequests(nil),
		ClusterTrustBundles(nil),
		StorageVersionMigrations(),
	}, slices.Concat(webhookConfigurations(), admissionPolicies(), reviews(), flowControlKinds())...)
	for _, k := range kinds {
		// Upstream's strategies of these kinds all validate
		// declaratively too, which reports each error once.
		k.DistinctErrors = true
	}
	return kinds
}

func role(k *registry.Kind) *registry.Kind {
	k.Validate = validateRules(k.Namespaced)
	k.Columns = roleColumns
	return k
}

func binding(k *registry.Kind) *registry.Kind {
	k.Default = defaultBinding
	k.PrepareForCreate = defaultBinding
	k.PrepareForUpdate = func(obj, _ *unstructured.Unstructured) { defaultBinding(obj) }
	k.Validate = validateBinding(k.Namespaced)
	k.ValidateUpdate = validateBindingUpdate(k.Namespaced)
	k.Columns = bindingColumns(k.Kind)
	return k
}

func rbac(kind, resource string, namespaced bool, typed func() runtime.Object) *registry.Kind {
	return &registry.Kind{
		Group: "rbac.authorization.k8s.io", Versions: []string{"v1"}, Kind: kind, ListKind: kind + "List",
		Resource: resource, Singular: lower(kind), Namespaced: namespaced, UnconditionalUpdate: true,
		QualifiedFinalizers: true, CreateOnUpdate: true,
		Typed: typed,
		// RBAC names are path segments upstream (ValidateRBACName).
		ValidateName: pathSegmentName,
	}
}

// pathSegmentName checks a name that must be usable as one segment of a
// URL path, as upstream checks RBAC names: not "." or "..", and (a
// generateName prefix too) without "/" or "%".
func pathSegmentName(name string, prefix bool) []string {
	var errs []string
	if !prefix && (name == "." || name == "..") {
		errs = append(errs, fmt.Sprintf("may not be '%s'", name))
	}
	for _, bad := range []string{"/", "%"} {
		if strings.Contains(name, bad) {
			errs = append(errs, fmt.Sprintf("may not contain '%s'", bad))
		}
	}
	return errs
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// str returns a column reading a string field.
func str(fieldPath ...string) func(*unstructured.Unstructured) any {
	return func(o *unstructured.Unstructured) any {
		v, _, _ := unstructured.NestedString(o.Object, fieldPath...)
		return v
	}
}

// dataCount is the Data column of ConfigMaps and Secrets, which reads
// dataMembers: the count of their keys (read in place; NestedMap would
// copy them).
func dataCount(o *unstructured.Unstructured) any {
	d, _ := o.Object["data"].(map[string]any)
	b, _ := o.Object["binaryData"].(map[string]any)
	return int64(len(d) + len(b))
}

var dataMembers = []string{"data", "binaryData"}

// maxDataSize is the limit on a ConfigMap's or Secret's data, as upstream.
const maxDataSize = 1 << 20

func validateConfigMap(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	// Read in place: the Nested* helpers return deep copies. A body of
	// the Go type has strings here; anything else was refused before.
	data, _ := obj.Object["data"].(map[string]any)
	binary, _ := obj.Object["binaryData"].(map[string]any)
	size := 0
	for key, v := range data {
		for _, msg := range configMapKeyErrors(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if s, ok := v.(string); ok {
			size += len(s)
		}
	}
	for key, v := range binary {
		for _, msg := range configMapKeyErrors(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		if _, dup := data[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		if s, ok := v.(string); ok {
			size += base64.StdEncoding.DecodedLen(len(s))
		}
	}
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return errs
}

// configMapKeyErrors is validation.IsConfigMapKey, without its regular
// expression for the keys that plainly pass it: 1 to 253 characters of
// [-._a-zA-Z0-9], not "." and not starting with "..".
func configMapKeyErrors(key string) []string {
	ok := len(key) > 0 && len(key) <= 253 && key != "." && !strings.HasPrefix(key, "..")
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = c == '-' || c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if ok {
		return nil
	}
	return validation.IsConfigMapKey(key)
}

// normalizeSecret folds stringData into data (as the API's conversion
// does) and defaults the type to Opaque.
func normalizeSecret(obj *unstructured.Unstructured) {
	sd, _, _ := unstructured.NestedStringMap(obj.Object, "stringData")
	if len(sd) > 0 {
		data, _, _ := unstructured.NestedMap(obj.Object, "data")
		if data == nil {
			data = map[string]any{}
		}
		for k, v := range sd {
			data[k] = base64.StdEncoding.EncodeToString([]byte(v))
		}
		unstructured.SetNestedMap(obj.Object, data, "data")
	}
	delete(obj.Object, "stringData")
	if t, _, _ := unstructured.NestedString(obj.Object, "type"); t == "" {
		unstructured.SetNestedField(obj.Object, string(corev1.SecretTypeOpaque), "type")
	}
}

func validateSecret(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	data, _ := obj.Object["data"].(map[string]any) // in place, not a deep copy
	size := 0
	for key, v := range data {
		for _, msg := range configMapKeyErrors(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if s, ok := v.(string); ok {
			size += base64.StdEncoding.DecodedLen(len(s))
		}
	}
	errs = append(errs, validateSecretType(obj)...)
	if size > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", maxDataSize))
	}
	return errs
}

func eventFields(obj *unstructured.Unstructured) fields.Set {
	s := func(p ...string) string { v, _, _ := unstructured.NestedString(obj.Object, p...); return v }
	return fields.Set{
		"involvedObject.kind":            s("involvedObject", "kind"),
		"involvedObject.namespace":       s("involvedObject", "namespace"),
		"involvedObject.name":            s("involvedObject", "name"),
		"involvedObject.uid":             s("involvedObject", "uid"),
		"involvedObject.apiVersion":      s("involvedObject", "apiVersion"),
		"involvedObject.resourceVersion": s("involvedObject", "resourceVersion"),
		"involvedObject.fieldPath":       s("involvedObject", "fieldPath"),
		"reason":                         s("reason"),
		"reportingComponent":             s("reportingComponent"),
		"source":                         s("source", "component"),
		"type":                           s("type"),
	}
}
