package openapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

// These tests run server-side apply the way kube-apiserver does, through
// apimachinery's FieldManager, on the type converter built from
// Definitions: the list and map semantics in the schemas decide what
// conflicts and what merges.

func TestApplyConflictNamesTheField(t *testing.T) {
	a := newApplier(t, "v1", "ConfigMap")
	obj := a.apply(t, nil, "alice", false, `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
data: {a: "1", b: "1"}`)

	_, err := a.try(obj, "bob", false, `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
data: {a: "2"}`)
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply of another manager's field: err = %v, want a conflict", err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil ||
		len(status.Status().Details.Causes) != 1 || status.Status().Details.Causes[0].Field != ".data.a" {
		t.Fatalf("conflict %v: want one cause naming .data.a", err)
	}
	if !strings.Contains(err.Error(), `conflict with "alice"`) || !strings.Contains(err.Error(), ".data.a") {
		t.Errorf("conflict message %q does not name alice and .data.a", err)
	}

	obj = a.apply(t, obj, "bob", true, `
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
data: {a: "2"}`)
	if got, _, _ := unstructured.NestedString(obj.Object, "data", "a"); got != "2" {
		t.Errorf("forced apply: data.a = %q, want 2", got)
	}
	owned := ownership(t, obj)
	if !owned["bob"].Has(path("data", "a")) || owned["bob"].Has(path("data", "b")) {
		t.Errorf("bob owns %v, want .data.a only", owned["bob"])
	}
	if owned["alice"].Has(path("data", "a")) || !owned["alice"].Has(path("data", "b")) {
		t.Errorf("alice owns %v, want .data.b (a was taken by force)", owned["alice"])
	}
}

func TestApplyMergesMapsAndKeyedLists(t *testing.T) {
	for _, c := range []struct {
		name, kind, alice, bob string
		check                  func(t *testing.T, obj *unstructured.Unstructured)
	}{{
		name:  "labels keep both managers' keys",
		kind:  "ConfigMap",
		alice: `metadata: {name: x, namespace: default, labels: {a: "1"}}`,
		bob:   `metadata: {name: x, namespace: default, labels: {b: "2"}}`,
		check: func(t *testing.T, obj *unstructured.Unstructured) {
			if l := obj.GetLabels(); l["a"] != "1" || l["b"] != "2" {
				t.Errorf("labels = %v, want a and b", l)
			}
		},
	}, {
		name:  "finalizers are a set",
		kind:  "ConfigMap",
		alice: `metadata: {name: x, namespace: default, finalizers: [example.com/a]}`,
		bob:   `metadata: {name: x, namespace: default, finalizers: [example.com/b]}`,
		check: func(t *testing.T, obj *unstructured.Unstructured) {
			if f := obj.GetFinalizers(); len(f) != 2 {
				t.Errorf("finalizers = %v, want both", f)
			}
		},
	}, {
		name:  "ownerReferences are keyed by uid",
		kind:  "ConfigMap",
		alice: `metadata: {name: x, namespace: default, ownerReferences: [{apiVersion: v1, kind: Secret, name: s1, uid: u1}]}`,
		bob:   `metadata: {name: x, namespace: default, ownerReferences: [{apiVersion: v1, kind: Secret, name: s2, uid: u2}]}`,
		check: func(t *testing.T, obj *unstructured.Unstructured) {
			refs := obj.GetOwnerReferences()
			if len(refs) != 2 || refs[0].UID != "u1" || refs[1].UID != "u2" {
				t.Errorf("ownerReferences = %+v, want u1 and u2", refs)
			}
		},
	}, {
		name:  "ServiceAccount secrets are keyed by name",
		kind:  "ServiceAccount",
		alice: "metadata: {name: x, namespace: default}\nsecrets: [{name: s1}]",
		bob:   "metadata: {name: x, namespace: default}\nsecrets: [{name: s2}]",
		check: func(t *testing.T, obj *unstructured.Unstructured) {
			secrets, _, _ := unstructured.NestedSlice(obj.Object, "secrets")
			if len(secrets) != 2 {
				t.Errorf("secrets = %v, want s1 and s2", secrets)
			}
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			a := newApplier(t, "v1", c.kind)
			head := "apiVersion: v1\nkind: " + c.kind + "\n"
			obj := a.apply(t, nil, "alice", false, head+c.alice)
			obj = a.apply(t, obj, "bob", false, head+c.bob)
			c.check(t, obj)
			owned := ownership(t, obj)
			alice, bob := owned["alice"].Leaves(), owned["bob"].Leaves()
			if alice.Empty() || bob.Empty() || !alice.Intersection(bob).Empty() {
				t.Errorf("alice owns %v and bob %v, want two disjoint non-empty sets", alice, bob)
			}
		})
	}
}

// An atomic list (a RoleBinding's subjects) is owned whole: a second
// manager's different list conflicts instead of merging.
func TestApplyAtomicListConflicts(t *testing.T) {
	a := newApplier(t, "rbac.authorization.k8s.io/v1", "RoleBinding")
	head := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: rb, namespace: default}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}\n"
	obj := a.apply(t, nil, "alice", false, head+"subjects: [{kind: User, name: u1}]")
	_, err := a.try(obj, "bob", false, head+"subjects: [{kind: User, name: u2}]")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), ".subjects") {
		t.Fatalf("apply of a different atomic list: err = %v, want a conflict on .subjects", err)
	}
}

// A value of the wrong type is refused, as kube-apiserver refuses it.
func TestApplyChecksTypes(t *testing.T) {
	a := newApplier(t, "coordination.k8s.io/v1", "Lease")
	head := "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: l, namespace: default}\n"
	a.apply(t, nil, "alice", false, head+"spec: {leaseDurationSeconds: 15, holderIdentity: me}")
	if _, err := a.try(nil, "alice", false, head+"spec: {leaseDurationSeconds: [15]}"); err == nil {
		t.Error("apply of a list where an integer belongs succeeded")
	}
}

type applier struct {
	gvk schema.GroupVersionKind
	fm  *managedfields.FieldManager
}

func newApplier(t *testing.T, apiVersion, kind string) *applier {
	t.Helper()
	tc, err := managedfields.NewTypeConverter(servedDefinitions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	fm, err := managedfields.NewDefaultFieldManager(tc, relabel{}, noDefaults{}, creater{}, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{gvk: gvk, fm: fm}
}

// try applies the YAML configuration to live (nil: the object does not
// exist yet) as manager.
func (a *applier) try(live *unstructured.Unstructured, manager string, force bool, config string) (*unstructured.Unstructured, error) {
	applied := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(config), &applied.Object); err != nil {
		return nil, err
	}
	if live == nil {
		o, _ := creater{}.New(a.gvk)
		live = o.(*unstructured.Unstructured)
	}
	out, err := a.fm.Apply(live, applied, manager, force)
	if err != nil {
		return nil, err
	}
	return out.(*unstructured.Unstructured), nil
}

func (a *applier) apply(t *testing.T, live *unstructured.Unstructured, manager string, force bool, config string) *unstructured.Unstructured {
	t.Helper()
	out, err := a.try(live, manager, force, config)
	if err != nil {
		t.Fatalf("%s applies:\n%s\n: %v", manager, config, err)
	}
	return out
}

// ownership decodes metadata.managedFields into each manager's field set.
func ownership(t *testing.T, obj runtime.Object) map[string]*fieldpath.Set {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*fieldpath.Set)
	for _, e := range m.GetManagedFields() {
		s := &fieldpath.Set{}
		if err := s.FromJSON(strings.NewReader(e.FieldsV1.GetRawString())); err != nil {
			t.Fatal(err)
		}
		out[e.Manager] = s
	}
	return out
}

func path(fields ...string) fieldpath.Path {
	parts := make([]any, len(fields))
	for i, f := range fields {
		parts[i] = f
	}
	return fieldpath.MakePathOrDie(parts...)
}

// relabel, noDefaults and creater are what a FieldManager needs around
// unstructured objects of a kind whose versions differ only in apiVersion
// (package registry has the same three).
type relabel struct{}

func (relabel) Convert(in, out, _ any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

func (relabel) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%v is not a version of %v", target, u.GroupVersionKind())
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (relabel) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
