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

// authorizingRegistry returns a registry whose writes RBAC authorizes,
// with the default roles and bindings, and a context without a user.
func authorizingRegistry(t *testing.T) (*registry.Registry, context.Context) {
	t.Helper()
	authz := &core.RBAC{}
	reg := newRegistry(t, memoryStore(t), authz)
	ctx, cancel := context.WithCancel(context.Background())
	if err := core.Bootstrap(ctx, reg); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- authz.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-authz.Synced()
	return reg, ctx
}

// Writing a policy or binding with parameters needs the right to read
// them, as kube-apiserver v1.37.2 checks it, with its words (read off it
// for the user carol, impersonated).
func TestAdmissionPolicyParamsNeedReadAccess(t *testing.T) {
	reg, ctx := authorizingRegistry(t)
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
	// So does one with an invalid name, as its metadata is checked first.
	err = create(carol, "validatingadmissionpolicies", policy("Bad_Name", map[string]any{"paramKind": cm}))
	if err == nil || strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a policy with an invalid name: %v", err)
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

// The mutating kinds are checked as the validating ones, with
// kube-apiserver v1.37.2's words: its mutating binding strategy swaps the
// verb and the user in the refusal that names neither a policy nor a
// paramKind ("user get does not have "&{carol ...}" permission"), and a
// binding's policy is looked up among the mutating policies.
func TestMutatingAdmissionPolicyParamsNeedReadAccess(t *testing.T) {
	reg, ctx := authorizingRegistry(t)
	carol := registry.WithUser(ctx, registry.User{Name: "carol", Groups: []string{"system:authenticated"}})
	admin := registry.WithUser(ctx, registry.User{Name: "admin", Groups: []string{"system:masters"}})
	resource := func(name string) *registry.Resource {
		res, ok := reg.Get(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: name})
		if !ok {
			t.Fatalf("%s not served", name)
		}
		return res
	}
	write := func(ctx context.Context, body string) error {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(body)); err != nil {
			t.Fatal(err)
		}
		plural := strings.ToLower(obj.GetKind()) + "s"
		if strings.HasSuffix(plural, "policys") {
			plural = strings.TrimSuffix(plural, "ys") + "ies"
		}
		_, err := resource(plural).Create(ctx, "v1", "", obj, registry.WriteOptions{})
		return err
	}
	patchPolicy := func(ctx context.Context, name, body string) error {
		_, _, err := resource("mutatingadmissionpolicies").Patch(ctx, "v1", "", name, []byte(body), registry.PatchOptions{Type: types.MergePatchType})
		return err
	}
	const (
		rules = `"matchConstraints":{"resourceRules":[{"apiGroups":["example.com"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["things"]}]}`
		muts  = `"reinvocationPolicy":"Never","mutations":[{"patchType":"ApplyConfiguration","applyConfiguration":{"expression":"Object{}"}}]`
		cm    = `"paramKind":{"apiVersion":"v1","kind":"ConfigMap"}`
		user  = "user &{carol  [system:authenticated] map[]}"
		head  = `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicy","metadata":{"name":"%s"},"spec":{`
	)
	policy := func(name, spec string) string {
		return strings.Replace(head, "%s", name, 1) + spec + "," + rules + "," + muts + "}}"
	}
	binding := func(name, spec string) string {
		return `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicyBinding","metadata":{"name":"` + name + `"},"spec":{` + spec + `}}`
	}
	byName := `"paramRef":{"name":"limits","namespace":"params","parameterNotFoundAction":"Deny"}`
	bySelector := `"paramRef":{"selector":{},"namespace":"params","parameterNotFoundAction":"Allow"}`
	for _, body := range []string{
		policy("cm", cm), policy("nokind", `"paramKind":{"apiVersion":"example.com/v1","kind":"Nope"}`), policy("plain", `"failurePolicy":"Fail"`),
		`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"validating"},"spec":{` + cm + "," + rules +
			`,"validations":[{"expression":"true"}]}}`,
	} {
		if err := write(admin, body); err != nil {
			t.Fatalf("as system:masters: %v", err)
		}
	}
	forbidden := func(kind, name, path, msg string) string {
		return kind + `.admissionregistration.k8s.io "` + name + `" is invalid: ` + path + `: Forbidden: ` + msg
	}
	needsGet := func(kind string) string {
		return user + ` must have "get" permission on all objects of the referenced paramKind (kind=` + kind + `, apiVersion=v1)`
	}
	unable := func(why string) string {
		return why + ` to determine minimum required permissions and ` + user + ` does not have "get" permission for all groups, versions and resources`
	}
	for _, c := range []struct{ what, body, want string }{
		{"a policy with params", policy("c1", cm), forbidden("MutatingAdmissionPolicy", "c1", "spec.paramKind", needsGet("ConfigMap"))},
		{"a policy without params", policy("c2", `"failurePolicy":"Ignore"`), ""},
		{"an invalid policy gets its errors", policy("c3", cm+`,"failurePolicy":"Maybe"`),
			`MutatingAdmissionPolicy.admissionregistration.k8s.io "c3" is invalid: spec.failurePolicy: Unsupported value: "Maybe": supported values: "Fail", "Ignore"`},
		{"a binding by name", binding("b1", `"policyName":"cm",`+byName),
			forbidden("MutatingAdmissionPolicyBinding", "b1", "spec.paramRef", `user get does not have "&{carol  [system:authenticated] map[]}" permission on the object referenced by paramRef`)},
		{"a binding by selector", binding("b2", `"policyName":"cm",`+bySelector),
			forbidden("MutatingAdmissionPolicyBinding", "b2", "spec.paramRef", `user list does not have "&{carol  [system:authenticated] map[]}" permission on the object referenced by paramRef`)},
		{"a binding of a missing policy", binding("b3", `"policyName":"missing",`+byName),
			forbidden("MutatingAdmissionPolicyBinding", "b3", "spec.paramRef", unable("unable to get policy missing"))},
		{"a binding naming a validating policy", binding("b4", `"policyName":"validating",`+byName),
			forbidden("MutatingAdmissionPolicyBinding", "b4", "spec.paramRef", unable("unable to get policy validating"))},
		{"a binding of a policy of an unknown kind", binding("b5", `"policyName":"nokind",`+byName),
			forbidden("MutatingAdmissionPolicyBinding", "b5", "spec.paramRef", unable("unable to resolve paramKind &{example.com/v1 Nope}"))},
		{"a binding without a paramRef", binding("b6", `"policyName":"cm"`), ""},
	} {
		err := write(carol, c.body)
		if (c.want == "" && err != nil) || (c.want != "" && (!apierrors.IsInvalid(err) || err.Error() != c.want)) {
			t.Errorf("%s:\n got  %v\n want %s", c.what, err, c.want)
		}
	}
	// An update is checked when it changes the paramKind only.
	if err := patchPolicy(carol, "cm", `{"spec":{"failurePolicy":"Ignore"}}`); err != nil {
		t.Errorf("an update keeping the paramKind: %v", err)
	}
	want := forbidden("MutatingAdmissionPolicy", "cm", "spec.paramKind", needsGet("Secret"))
	if err := patchPolicy(carol, "cm", `{"spec":{"paramKind":{"kind":"Secret"}}}`); err == nil || err.Error() != want {
		t.Errorf("an update changing the paramKind:\n got  %v\n want %s", err, want)
	}
	// Once carol may get configmaps in params, she may bind by name.
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "params"}}}
	nsRes, _ := reg.Get(schema.GroupResource{Resource: "namespaces"})
	if _, err := nsRes.Create(ctx, "v1", "", ns, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "read", "namespace": "params"},
		"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}}}}}
	roleBinding := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "carol", "namespace": "params"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}}}}
	for resource, obj := range map[string]*unstructured.Unstructured{"roles": role, "rolebindings": roleBinding} {
		if _, err := rbacResource(t, reg, resource).Create(ctx, "v1", "params", obj, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := write(carol, binding("b1", `"policyName":"cm",`+byName)); err != nil {
		t.Errorf("a binding by name with get: %v", err)
	}
	// A policy with an invalid name is refused for its name.
	if err := write(carol, policy("Bad_Name", cm)); err == nil || strings.Contains(err.Error(), "Forbidden") || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("a policy with an invalid name: %v", err)
	}
}
