package core_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// Writing a policy or binding with parameters needs the right to read
// them, as kube-apiserver v1.37.2 checks it, with its words (read off it
// for the user carol, impersonated).
func TestAdmissionPolicyParamsNeedReadAccess(t *testing.T) {
	authz := &core.RBAC{}
	reg := newRegistry(t, memoryStore(t), authz)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- authz.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-authz.Synced()

	res := func(resource string) *registry.Resource {
		r, ok := reg.Get(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: resource})
		if !ok {
			t.Fatalf("%s not served", resource)
		}
		return r
	}
	carol := registry.WithUser(ctx, registry.User{Name: "carol", Groups: []string{"system:authenticated"}})
	policy := func(name string, spec map[string]any) *unstructured.Unstructured {
		spec["matchConstraints"] = map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{"example.com"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"things"}}}}
		spec["validations"] = []any{map[string]any{"expression": "true"}}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1",
			"kind": "ValidatingAdmissionPolicy", "metadata": map[string]any{"name": name}, "spec": spec}}
	}
	binding := func(name, policy string, ref map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1",
			"kind": "ValidatingAdmissionPolicyBinding", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"policyName": policy, "validationActions": []any{"Deny"}, "paramRef": ref}}}
	}
	create := func(ctx context.Context, resource string, obj *unstructured.Unstructured) error {
		_, err := res(resource).Create(ctx, "v1", "", obj, registry.WriteOptions{})
		return err
	}
	refused := func(err error, want string) {
		t.Helper()
		if !apierrors.IsInvalid(err) || err.Error() != want {
			t.Errorf("got %v\nwant %s", err, want)
		}
	}
	const user = "user &{carol  [system:authenticated] map[]}"
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}

	err := create(carol, "validatingadmissionpolicies", policy("cm", map[string]any{"paramKind": cm}))
	refused(err, `ValidatingAdmissionPolicy.admissionregistration.k8s.io "cm" is invalid: spec.paramKind: Forbidden: `+user+
		` must have "get" permission on all objects of the referenced paramKind (kind=ConfigMap, apiVersion=v1)`)
	// An invalid policy gets its errors, not the refusal.
	err = create(carol, "validatingadmissionpolicies", policy("bad", map[string]any{"paramKind": cm, "failurePolicy": "Maybe"}))
	if err == nil || strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "spec.failurePolicy") {
		t.Errorf("an invalid policy: %v", err)
	}
	// Without a paramKind, nothing is checked; system:masters may do all.
	if err := create(carol, "validatingadmissionpolicies", policy("plain", map[string]any{})); err != nil {
		t.Errorf("a policy without params: %v", err)
	}
	admin := registry.WithUser(ctx, registry.User{Name: "admin", Groups: []string{"system:masters"}})
	if err := create(admin, "validatingadmissionpolicies", policy("cm", map[string]any{"paramKind": cm})); err != nil {
		t.Errorf("as system:masters: %v", err)
	}

	patch := func(resource, name, body string) error {
		_, _, err := res(resource).Patch(carol, "v1", "", name, []byte(body), registry.PatchOptions{Type: types.MergePatchType})
		return err
	}
	// An update keeping the paramKind is not checked; one changing it is.
	if err := patch("validatingadmissionpolicies", "cm", `{"spec":{"validations":[{"expression":"1 == 1"}]}}`); err != nil {
		t.Errorf("an update keeping the paramKind: %v", err)
	}
	refused(patch("validatingadmissionpolicies", "cm", `{"spec":{"paramKind":{"kind":"Secret"}}}`),
		`ValidatingAdmissionPolicy.admissionregistration.k8s.io "cm" is invalid: spec.paramKind: Forbidden: `+user+
			` must have "get" permission on all objects of the referenced paramKind (kind=Secret, apiVersion=v1)`)

	ref := map[string]any{"name": "limits", "namespace": "params", "parameterNotFoundAction": "Deny"}
	err = create(carol, "validatingadmissionpolicybindings", binding("b1", "cm", ref))
	refused(err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "b1" is invalid: spec.paramRef: Forbidden: `+user+
		` does not have "get" permission on the object referenced by paramRef`)
	err = create(carol, "validatingadmissionpolicybindings", binding("b2", "missing", ref))
	refused(err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "b2" is invalid: spec.paramRef: Forbidden: `+
		`unable to get policy missing to determine minimum required permissions and `+user+
		` does not have "get" permission for all groups, versions and resources`)

	// Once carol may read configmaps in params, she may bind by name,
	// but not by selector, which needs list.
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "params"}}}
	nsRes, _ := reg.Get(schema.GroupResource{Resource: "namespaces"})
	if _, err := nsRes.Create(ctx, "v1", "", ns, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []map[string]any{
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "read", "namespace": "params"},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "carol", "namespace": "params"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}}},
	} {
		u := &unstructured.Unstructured{Object: obj}
		resource := "roles"
		if u.GetKind() == "RoleBinding" {
			resource = "rolebindings"
		}
		if _, err := rbacResource(t, reg, resource).Create(ctx, "v1", "params", u, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := create(carol, "validatingadmissionpolicybindings", binding("b1", "cm", ref)); err != nil {
		t.Errorf("a binding by name with get: %v", err)
	}
	// Upstream compares paramRefs with ==, which their pointers never
	// pass: every update of a binding with a paramRef is checked again.
	if err := patch("validatingadmissionpolicybindings", "b1", `{"spec":{"validationActions":["Warn"]}}`); err != nil {
		t.Errorf("an update of a binding carol may read the params of: %v", err)
	}
	dave := registry.WithUser(ctx, registry.User{Name: "dave", Groups: []string{"system:authenticated"}})
	_, _, err = res("validatingadmissionpolicybindings").Patch(dave, "v1", "", "b1", []byte(`{"spec":{"validationActions":["Deny"]}}`),
		registry.PatchOptions{Type: types.MergePatchType})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `user &{dave  [system:authenticated] map[]} does not have "get" permission`) {
		t.Errorf("an update by dave keeping the paramRef: %v", err)
	}
	selector := map[string]any{"selector": map[string]any{}, "namespace": "params", "parameterNotFoundAction": "Allow"}
	err = create(carol, "validatingadmissionpolicybindings", binding("b3", "cm", selector))
	refused(err, `ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io "b3" is invalid: spec.paramRef: Forbidden: `+user+
		` does not have "list" permission on the object referenced by paramRef`)
}
