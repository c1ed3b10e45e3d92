package core

import (
	"strings"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// StorageVersionMigrations is storagemigration.k8s.io/v1's
// StorageVersionMigration (GA in Kubernetes 1.37), as kube-apiserver
// serves it: a resource to rewrite in its storage version, and the
// migration's progress in the status, which package migration's
// controller writes. The spec is fixed once made; the status's
// resourceVersion once set; Succeeded and Failed, once true, stay so.
func StorageVersionMigrations() *registry.Kind {
	return &registry.Kind{
		Group: svmv1.GroupName, Versions: []string{"v1"}, Kind: "StorageVersionMigration", ListKind: "StorageVersionMigrationList",
		Resource: "storageversionmigrations", Singular: "storageversionmigration", Status: true, QualifiedFinalizers: true,
		// kube-apiserver 1.37 stores it as v1beta1 (not served), which
		// discovery's storageVersionHash names.
		UpstreamStorageVersion: "v1beta1",
		Typed:                  func() runtime.Object { return &svmv1.StorageVersionMigration{} },
		// The Go type writes an empty status as {}.
		PrepareForCreate: func(obj *unstructured.Unstructured) { obj.Object["status"] = map[string]any{} },
		Validate:         func(obj *unstructured.Unstructured) field.ErrorList { return validateMigration(obj) },
		ValidateSubresourceUpdate: func(sub string, obj, old *unstructured.Unstructured) field.ErrorList {
			if sub == "status" {
				return validateMigrationStatus(obj, old)
			}
			errs := validateMigration(obj)
			if spec, was := TypedMigration(obj).Spec, TypedMigration(old).Spec; spec != was {
				errs = append(errs, field.Invalid(field.NewPath("spec"), migrationSpec{spec.Resource}, "field is immutable"))
			}
			return errs
		},
		Columns: []registry.Column{
			// Upstream's printer gives this Name column no format.
			{Name: "Name", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"], Cell: registry.CellName},
			{Name: "Resource", Type: "string", Description: "GroupResource to migrate", Reads: []string{"spec"},
				Value: func(obj *unstructured.Unstructured) any {
					r := TypedMigration(obj).Spec.Resource
					return (&r).String()
				}},
			{Name: "Status", Type: "string", Description: "Status of the migration", Reads: []string{"status"},
				Value: func(obj *unstructured.Unstructured) any { return migrationState(TypedMigration(obj)) }},
		},
	}
}

// migrationSpec is how upstream shows a spec in an error: its internal Go
// type, whose JSON names the field Resource.
type migrationSpec struct{ Resource metav1.GroupResource }

// TypedMigration is obj as the Go type (fields that do not convert left
// empty).
func TypedMigration(obj *unstructured.Unstructured) *svmv1.StorageVersionMigration {
	var svm svmv1.StorageVersionMigration
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &svm)
	return &svm
}

// migrationState is upstream's Status column: the last of Running,
// Failed and Succeeded that is true, or Unknown.
func migrationState(svm *svmv1.StorageVersionMigration) string {
	state := "Unknown"
	for _, c := range svm.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch svmv1.MigrationConditionType(c.Type) {
		case svmv1.MigrationRunning, svmv1.MigrationFailed, svmv1.MigrationSucceeded:
			state = c.Type
		}
	}
	return state
}

// validateMigration is upstream's ValidateStorageVersionMigration (the
// metadata is the registry's).
func validateMigration(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	r := TypedMigration(obj).Spec.Resource
	if r.Resource == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "resource", "resource"), "resource is required to be set"))
	} else if msgs := validation.IsDNS1035Label(r.Resource); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "resource", "resource"), r.Resource, strings.Join(msgs, ",")))
	}
	if r.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(r.Group); len(msgs) > 0 {
			errs = append(errs, field.Invalid(field.NewPath("spec", "resource", "group"), r.Group, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// validateMigrationStatus is upstream's
// ValidateStorageVersionMigrationStatusUpdate (the metadata is the
// registry's).
func validateMigrationStatus(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	svm, was := TypedMigration(obj), TypedMigration(old)
	p := field.NewPath("status")
	if rv := svm.Status.ResourceVersion; rv != "" {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			errs = append(errs, field.Invalid(p.Child("resourceVersion"), rv, err.Error()))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(svm.Status.Conditions, p.Child("conditions"))...)
	if was.Status.ResourceVersion != "" && was.Status.ResourceVersion != svm.Status.ResourceVersion {
		errs = append(errs, field.Invalid(p.Child("resourceVersion"), svm.Status.ResourceVersion, "field is immutable"))
	}
	is := func(s *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) bool {
		return meta.IsStatusConditionTrue(s.Status.Conditions, string(t))
	}
	if is(svm, svmv1.MigrationSucceeded) && is(svm, svmv1.MigrationFailed) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if is(was, svmv1.MigrationSucceeded) && !is(svm, svmv1.MigrationSucceeded) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if is(was, svmv1.MigrationFailed) && !is(svm, svmv1.MigrationFailed) {
		errs = append(errs, field.Invalid(p.Child("conditions"), svm.Status.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}
