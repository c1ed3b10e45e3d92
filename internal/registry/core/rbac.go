package core

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RBAC's defaults and checks, as kube-apiserver's: a binding's roleRef
// and its User and Group subjects default to the rbac.authorization.k8s.io
// group; a rule needs verbs and either resources in API groups or, in a
// ClusterRole, non-resource URLs; a binding's roleRef names a role of a
// kind it may bind and never changes, and its subjects are of the three
// kinds. The answers were read off a running v1.37.2; errors upstream's
// declarative validation reports (a rule's verbs, a subject's name) come
// after the others, as there.

// defaultBinding sets the groups a binding may leave out.
func defaultBinding(obj *unstructured.Unstructured) {
	if ref, ok := obj.Object["roleRef"].(map[string]any); ok {
		if g, _ := ref["apiGroup"].(string); g == "" {
			ref["apiGroup"] = rbacv1.GroupName
		}
	}
	subjects, _ := obj.Object["subjects"].([]any)
	for _, s := range subjects {
		subject, ok := s.(map[string]any)
		if !ok {
			continue
		}
		kind, _ := subject["kind"].(string)
		if g, _ := subject["apiGroup"].(string); g == "" && (kind == rbacv1.UserKind || kind == rbacv1.GroupKind) {
			subject["apiGroup"] = rbacv1.GroupName
		}
	}
}

// validateRules checks a Role's (namespaced) or ClusterRole's rules.
func validateRules(namespaced bool) func(*unstructured.Unstructured) field.ErrorList {
	return func(obj *unstructured.Unstructured) field.ErrorList {
		var errs, verbs field.ErrorList
		rules, _ := obj.Object["rules"].([]any)
		for i, r := range rules {
			rule, _ := r.(map[string]any)
			path := field.NewPath("rules").Index(i)
			if len(strs(rule["verbs"])) == 0 {
				verbs = append(verbs, field.Required(path.Child("verbs"), ""))
			}
			if urls := strs(rule["nonResourceURLs"]); len(urls) > 0 {
				if namespaced {
					errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), urls, "namespaced rules cannot apply to non-resource URLs"))
				}
				if len(strs(rule["apiGroups"])) > 0 || len(strs(rule["resources"])) > 0 {
					errs = append(errs, field.Invalid(path.Child("nonResourceURLs"), urls, "rules cannot apply to both regular resources and non-resource URLs"))
				}
				continue
			}
			if len(strs(rule["apiGroups"])) == 0 {
				errs = append(errs, field.Required(path.Child("apiGroups"), "resource rules must supply at least one api group"))
			}
			if len(strs(rule["resources"])) == 0 {
				errs = append(errs, field.Required(path.Child("resources"), "resource rules must supply at least one resource"))
			}
		}
		return append(errs, verbs...)
	}
}

// validateBinding checks a RoleBinding's (namespaced) or
// ClusterRoleBinding's roleRef and subjects.
func validateBinding(namespaced bool) func(*unstructured.Unstructured) field.ErrorList {
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	return func(obj *unstructured.Unstructured) field.ErrorList {
		var errs, names field.ErrorList
		ref := roleRefOf(obj)
		refPath := field.NewPath("roleRef")
		if ref.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(refPath.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
		}
		if !slices.Contains(kinds, ref.Kind) {
			errs = append(errs, field.NotSupported(refPath.Child("kind"), ref.Kind, kinds))
		}
		if ref.Name == "" {
			errs = append(errs, field.Required(refPath.Child("name"), ""))
		}
		for _, msg := range pathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(refPath.Child("name"), ref.Name, msg))
		}
		subjects, _ := obj.Object["subjects"].([]any)
		for i, s := range subjects {
			subject, _ := s.(map[string]any)
			path := field.NewPath("subjects").Index(i)
			kind, _ := subject["kind"].(string)
			name, _ := subject["name"].(string)
			group, _ := subject["apiGroup"].(string)
			if name == "" {
				names = append(names, field.Required(path.Child("name"), ""))
			}
			switch kind {
			case rbacv1.ServiceAccountKind:
				if name != "" {
					for _, msg := range validation.IsDNS1123Subdomain(name) {
						errs = append(errs, field.Invalid(path.Child("name"), name, msg))
					}
				}
				if group != "" {
					errs = append(errs, field.NotSupported(path.Child("apiGroup"), group, []string{""}))
				}
				if ns, _ := subject["namespace"].(string); !namespaced && ns == "" {
					errs = append(errs, field.Required(path.Child("namespace"), ""))
				}
			case rbacv1.UserKind, rbacv1.GroupKind:
				if group != rbacv1.GroupName {
					errs = append(errs, field.NotSupported(path.Child("apiGroup"), group, []string{rbacv1.GroupName}))
				}
			default:
				errs = append(errs, field.NotSupported(path.Child("kind"), kind,
					[]string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
			}
		}
		return append(errs, names...)
	}
}

// validateBindingUpdate checks a binding as an update of old: its roleRef
// never changes (a binding is deleted and created again to bind another
// role).
func validateBindingUpdate(namespaced bool) func(obj, old *unstructured.Unstructured) field.ErrorList {
	validate := validateBinding(namespaced)
	return func(obj, old *unstructured.Unstructured) field.ErrorList {
		errs := validate(obj) // first, as upstream lists them
		if ref := roleRefOf(obj); ref != roleRefOf(old) {
			errs = append(errs, field.Invalid(field.NewPath("roleRef"), ref, "field is immutable"))
		}
		return errs
	}
}

// roleRef is a binding's roleRef. Its fields have no JSON names, so that
// the immutable field's error shows it as upstream's internal type does.
type roleRef struct{ APIGroup, Kind, Name string }

func roleRefOf(obj *unstructured.Unstructured) roleRef {
	ref, _ := obj.Object["roleRef"].(map[string]any)
	var r roleRef
	r.APIGroup, _ = ref["apiGroup"].(string)
	r.Kind, _ = ref["kind"].(string)
	r.Name, _ = ref["name"].(string)
	return r
}

// strs reads a list of strings in place.
func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
