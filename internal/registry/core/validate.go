package core

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of kube-apiserver's core validation that this file adds to
// the kinds' own: what each Secret type requires, and what an update of
// an immutable ConfigMap or Secret, or of a Secret's type, may not
// change. Each was held to a running v1.37.2's answers.

// validateSecretType checks what obj's type requires of its data and
// annotations. Only presence is required, not content, except that a
// Docker config must be JSON and an SSH key not empty.
func validateSecretType(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	data, _ := obj.Object["data"].(map[string]any)
	dataPath := field.NewPath("data")
	has := func(key string) bool { _, ok := data[key]; return ok }
	typ, _ := obj.Object["type"].(string)
	switch corev1.SecretType(typ) {
	case corev1.SecretTypeServiceAccountToken:
		if obj.GetAnnotations()[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if typ == string(corev1.SecretTypeDockerConfigJson) {
			key = corev1.DockerConfigJsonKey
		}
		if !has(key) {
			errs = append(errs, field.Required(dataPath.Key(key), ""))
			break
		}
		if err := json.Unmarshal(decoded(data[key]), &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		// Either may be empty, but one must be there.
		if !has(corev1.BasicAuthUsernameKey) && !has(corev1.BasicAuthPasswordKey) {
			errs = append(errs, field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(decoded(data[corev1.SSHAuthPrivateKey])) == 0 {
			errs = append(errs, field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if !has(key) {
				errs = append(errs, field.Required(dataPath.Key(key), ""))
			}
		}
	}
	return errs
}

// decoded is a data value's bytes (base64 in the stored form).
func decoded(v any) []byte {
	s, _ := v.(string)
	b, _ := base64.StdEncoding.DecodeString(s)
	return b
}

// validateConfigMapUpdate checks obj as an update of old: an immutable
// ConfigMap stays immutable and keeps its data.
func validateConfigMapUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	errs := immutableData(obj, old, "data", "binaryData")
	return append(errs, validateConfigMap(obj)...)
}

// validateSecretUpdate checks obj as an update of old: the type never
// changes, and an immutable Secret stays immutable and keeps its data.
func validateSecretUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if typ, was := obj.Object["type"], old.Object["type"]; typ != was {
		errs = append(errs, field.Invalid(field.NewPath("type"), typ, "field is immutable"))
	}
	errs = append(errs, immutableData(obj, old, "data")...)
	return append(errs, validateSecret(obj)...)
}

// immutableData refuses an update of an object whose old form has
// immutable: true and that unsets it or changes any of fields (an absent
// map and an empty one are the same).
func immutableData(obj, old *unstructured.Unstructured, fields ...string) field.ErrorList {
	if was, _ := old.Object["immutable"].(bool); !was {
		return nil
	}
	const msg = "field is immutable when `immutable` is set"
	var errs field.ErrorList
	if now, _ := obj.Object["immutable"].(bool); !now {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
	}
	for _, f := range fields {
		a, _ := obj.Object[f].(map[string]any)
		b, _ := old.Object[f].(map[string]any)
		if (len(a) != 0 || len(b) != 0) && !reflect.DeepEqual(a, b) {
			errs = append(errs, field.Forbidden(field.NewPath(f), msg))
		}
	}
	return errs
}

// validateLease checks a Lease's durations and count, as core validation
// does (the coordinated leader election fields are not checked).
func validateLease(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	spec, _ := obj.Object["spec"].(map[string]any)
	path := field.NewPath("spec")
	if v, ok := spec["leaseDurationSeconds"].(int64); ok && v <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), v, "must be greater than 0"))
	}
	if v, ok := spec["leaseTransitions"].(int64); ok && v < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), v, "must be greater than or equal to 0"))
	}
	// Coordinated leader election's fields (kept only where a stored
	// Lease had them: dropLeaseElectionFields).
	strategy, hasStrategy := spec["strategy"].(string)
	if hasStrategy {
		sp := path.Child("strategy").Child("strategy") // upstream's path, doubled
		if !strings.Contains(strategy, "/") {
			if strategy != "OldestEmulationVersion" {
				errs = append(errs, field.NotSupported(sp, strategy, []string{"OldestEmulationVersion"}))
			}
		} else {
			for _, msg := range validation.IsQualifiedName(strategy) {
				errs = append(errs, field.Invalid(sp, strategy, msg))
			}
		}
	}
	if h, _ := spec["preferredHolder"].(string); h != "" && strategy == "" {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// dropLeaseElectionFields drops a Lease's coordinated leader election
// fields (spec.strategy, spec.preferredHolder) that the stored Lease (old;
// nil on create) does not have, as upstream does with its
// CoordinatedLeaderElection feature off, its default.
func dropLeaseElectionFields(obj, old *unstructured.Unstructured) {
	spec, _ := obj.Object["spec"].(map[string]any)
	var oldSpec map[string]any
	if old != nil {
		oldSpec, _ = old.Object["spec"].(map[string]any)
	}
	for _, f := range []string{"strategy", "preferredHolder"} {
		if _, had := oldSpec[f]; !had {
			delete(spec, f)
		}
	}
}

// validateEvent checks a v1 Event as upstream's legacy event validation
// does: an event of the old form (no eventTime) is in its object's
// namespace, or, for an object without one, in default; one of the new
// form (eventTime set) also names its reporter, action and reason.
func validateEvent(obj *unstructured.Unstructured) field.ErrorList {
	return legacyEventErrors(obj, "reportingComponent")
}

// legacyEventErrors are validateEvent's errors, the reporting component
// named reporter: upstream names the field as the request's version does.
func legacyEventErrors(obj *unstructured.Unstructured, reporter string) field.ErrorList {
	var errs field.ErrorList
	ns := obj.GetNamespace()
	involved, _ := obj.Object["involvedObject"].(map[string]any)
	objNS, _ := involved["namespace"].(string)
	mismatch := field.Invalid(field.NewPath("involvedObject", "namespace"), objNS, "does not match event.namespace")
	if eventTime, _ := obj.Object["eventTime"].(string); eventTime == "" {
		if objNS == "" && ns != "" && ns != metav1.NamespaceDefault || objNS != "" && objNS != ns {
			errs = append(errs, mismatch)
		}
		return errs
	}
	if objNS == "" && ns != metav1.NamespaceDefault && ns != metav1.NamespaceSystem {
		errs = append(errs, mismatch)
	}
	str := func(name string) string { s, _ := obj.Object[name].(string); return s }
	if str("reportingComponent") == "" {
		errs = append(errs, field.Required(field.NewPath(reporter), ""))
	}
	for _, msg := range validation.IsQualifiedName(str("reportingComponent")) {
		errs = append(errs, field.Invalid(field.NewPath(reporter), str("reportingComponent"), msg))
	}
	// Each required, and within upstream's limits (its message shows no
	// value).
	for _, f := range []struct {
		name     string
		required bool
		limit    int
	}{{"reportingInstance", true, 128}, {"action", true, 128}, {"reason", true, 128}, {"message", false, 1024}} {
		if f.required && str(f.name) == "" {
			errs = append(errs, field.Required(field.NewPath(f.name), ""))
		}
		if len(str(f.name)) > f.limit {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", fmt.Sprintf("can have at most %d characters", f.limit)))
		}
	}
	return errs
}
