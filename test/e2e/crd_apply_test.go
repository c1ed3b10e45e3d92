package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
	"sigs.k8s.io/yaml"
)

// gearCRD declares the list and map semantics server-side apply follows:
// ports a list keyed by name, tags a set, selector an atomic map. Its
// color and size are selectable fields (crd_fields_test.go).
const gearCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gears.apply.kplane.dev
spec:
  group: apply.kplane.dev
  names: {kind: Gear, listKind: GearList, plural: gears, singular: gear}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.color
    - jsonPath: .spec.size
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
              selector:
                type: object
                x-kubernetes-map-type: atomic
                additionalProperties: {type: string}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
`

var gearGVR = schema.GroupVersionResource{Group: "apply.kplane.dev", Version: "v1", Resource: "gears"}

func installGearCRD(t *testing.T, s *server, crd string) {
	t.Helper()
	s.mustKubectl(t, "apply", "-f", writeFile(t, "gear-crd.yaml", crd))
	s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/gears.apply.kplane.dev")
}

// gearApply builds an apply configuration of Gear name from a YAML spec.
func gearApply(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	doc := "apiVersion: apply.kplane.dev/v1\nkind: Gear\nmetadata:\n  name: " + name + "\nspec:\n" + spec
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestCRDServerSideApply: server-side apply on a custom resource merges
// by the CRD's schema, as kube-apiserver does (apiextensions-apiserver
// builds the field manager's type converter from the schema): managers of
// different items of a keyed list keep both; the same item's field is a
// conflict with upstream's message; a set is a union; an atomic map is
// replaced whole and owned whole.
func TestCRDServerSideApply(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installGearCRD(t, s, gearCRD)
		gears := dynamic.NewForConfigOrDie(s.config()).Resource(gearGVR).Namespace("default")
		apply := func(manager, name, spec string, force bool) (*unstructured.Unstructured, error) {
			return gears.Apply(ctx, name, gearApply(t, name, spec), metav1.ApplyOptions{FieldManager: manager, Force: force})
		}
		mustApply := func(manager, name, spec string) *unstructured.Unstructured {
			t.Helper()
			obj, err := apply(manager, name, spec, false)
			if err != nil {
				t.Fatalf("apply by %s: %v", manager, err)
			}
			return obj
		}
		port := func(name string) fieldpath.Path {
			return fieldpath.MakePathOrDie("spec", "ports", fieldpath.KeyByFields("name", name), "port")
		}

		t.Run("listType map: each manager keeps and owns its item", func(t *testing.T) {
			mustApply("ports-a", "ports", "  ports: [{name: http, port: 80}]\n")
			obj := mustApply("ports-b", "ports", "  ports: [{name: https, port: 443}]\n")
			if got := ports(t, obj); got != "http=80 https=443" {
				t.Fatalf("ports after two managers = %s, want http=80 https=443", got)
			}
			mf := obj.GetManagedFields()
			for _, c := range []struct {
				manager string
				path    fieldpath.Path
				want    bool
			}{
				{"ports-a", port("http"), true}, {"ports-a", port("https"), false},
				{"ports-b", port("https"), true}, {"ports-b", port("http"), false},
			} {
				if got := owns(t, mf, c.manager, c.path); got != c.want {
					t.Errorf("%s owns %s: %v, want %v; managedFields %s", c.manager, c.path, got, c.want, managedFieldsJSON(mf))
				}
			}
		})

		t.Run("listType map: the same item's field conflicts", func(t *testing.T) {
			_, err := apply("ports-b", "ports", "  ports: [{name: https, port: 443}, {name: http, port: 8080}]\n", false)
			var st apierrors.APIStatus
			if !apierrors.IsConflict(err) || !errors.As(err, &st) {
				t.Fatalf("ports-b setting http's port: %v, want 409", err)
			}
			const want = `Apply failed with 1 conflict: conflict with "ports-a": .spec.ports[name="http"].port`
			if st.Status().Message != want {
				t.Errorf("conflict message:\n got %s\nwant %s", st.Status().Message, want)
			}
			if c := st.Status().Details.Causes; len(c) != 1 || c[0].Type != metav1.CauseTypeFieldManagerConflict ||
				c[0].Field != `.spec.ports[name="http"].port` || c[0].Message != `conflict with "ports-a"` {
				t.Errorf("conflict causes = %+v", c)
			}
			obj, err := gears.Get(ctx, "ports", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ports(t, obj); got != "http=80 https=443" {
				t.Errorf("a refused apply changed ports to %s", got)
			}
		})

		t.Run("listType map: a manager dropping its item removes only that item", func(t *testing.T) {
			obj := mustApply("ports-a", "ports", "  ports: []\n")
			if got := ports(t, obj); got != "https=443" {
				t.Errorf("ports after ports-a dropped http = %s, want https=443", got)
			}
		})

		t.Run("listType set is a union of the managers' values", func(t *testing.T) {
			mustApply("tags-a", "tags", "  tags: [a, b]\n")
			obj := mustApply("tags-b", "tags", "  tags: [c]\n")
			tags, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "tags")
			if strings.Join(tags, ",") != "a,b,c" {
				t.Errorf("tags = %v, want a, b, c", tags)
			}
			if !owns(t, obj.GetManagedFields(), "tags-b", fieldpath.MakePathOrDie("spec", "tags", setValue("c"))) ||
				owns(t, obj.GetManagedFields(), "tags-b", fieldpath.MakePathOrDie("spec", "tags", setValue("a"))) {
				t.Errorf("tags-b should own exactly c: %s", managedFieldsJSON(obj.GetManagedFields()))
			}
		})

		t.Run("an atomic map is owned and replaced whole", func(t *testing.T) {
			mustApply("sel-a", "selector", "  selector: {app: web, tier: front}\n")
			_, err := apply("sel-b", "selector", "  selector: {app: db}\n", false)
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "sel-a": .spec.selector`) {
				t.Fatalf("sel-b applying another selector: %v, want a conflict on .spec.selector", err)
			}
			obj, err := apply("sel-b", "selector", "  selector: {app: db}\n", true)
			if err != nil {
				t.Fatal(err)
			}
			sel, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "selector")
			if len(sel) != 1 || sel["app"] != "db" {
				t.Errorf("selector = %v, want {app: db} only", sel)
			}
			if owns(t, obj.GetManagedFields(), "sel-a", fieldpath.MakePathOrDie("spec", "selector")) {
				t.Errorf("sel-a still owns the selector: %s", managedFieldsJSON(obj.GetManagedFields()))
			}
		})

		t.Run("preserve-unknown-fields keeps and owns free-form fields", func(t *testing.T) {
			obj := mustApply("extra-a", "extra", "  extra: {anything: {deep: [1, 2]}}\n")
			if v, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "extra", "anything", "deep"); !ok || fmt.Sprint(v) != "[1 2]" {
				t.Errorf("spec.extra.anything.deep = %v", v)
			}
			if !owns(t, obj.GetManagedFields(), "extra-a", fieldpath.MakePathOrDie("spec", "extra", "anything", "deep")) {
				t.Errorf("extra-a does not own spec.extra.anything.deep: %s", managedFieldsJSON(obj.GetManagedFields()))
			}
		})

		t.Run("kubectl apply --server-side", func(t *testing.T) {
			mustApply("ports-a", "kubectl", "  ports: [{name: http, port: 80}]\n")
			file := writeFile(t, "gear.yaml", "apiVersion: apply.kplane.dev/v1\nkind: Gear\nmetadata:\n  name: kubectl\nspec:\n  ports:\n  - name: metrics\n    port: 9090\n")
			out := s.mustKubectl(t, "apply", "--server-side", "--field-manager", "ops", "-f", file)
			if !strings.Contains(out, "gear.apply.kplane.dev/kubectl serverside-applied") {
				t.Errorf("kubectl apply --server-side: %s", out)
			}
			obj, err := gears.Get(ctx, "kubectl", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ports(t, obj); got != "http=80 metrics=9090" {
				t.Errorf("ports after kubectl's apply = %s, want http=80 metrics=9090", got)
			}
			conflicting := writeFile(t, "gear-conflict.yaml", "apiVersion: apply.kplane.dev/v1\nkind: Gear\nmetadata:\n  name: kubectl\nspec:\n  ports:\n  - name: http\n    port: 81\n")
			_, errOut, err := s.kubectl("apply", "--server-side", "--field-manager", "ops", "-f", conflicting)
			if err == nil || !strings.Contains(errOut, `Apply failed with 1 conflict: conflict with "ports-a": .spec.ports[name="http"].port`) {
				t.Errorf("kubectl apply --server-side of a conflicting port: %v\n%s", err, errOut)
			}
			s.mustKubectl(t, "apply", "--server-side", "--force-conflicts", "--field-manager", "ops", "-f", conflicting)
			obj, err = gears.Get(ctx, "kubectl", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// ops now owns http and no longer applies metrics.
			if got := ports(t, obj); got != "http=81" {
				t.Errorf("ports after the forced apply = %s, want http=81", got)
			}
		})
	})
}

// TestCRDApplyAfterSchemaChange: an object stored before its CRD dropped
// a field still takes applies and updates with its field ownership kept,
// as upstream, which prunes objects read from storage.
func TestCRDApplyAfterSchemaChange(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installGearCRD(t, s, gearCRD)
		gears := dynamic.NewForConfigOrDie(s.config()).Resource(gearGVR).Namespace("default")
		if _, err := gears.Apply(ctx, "old", gearApply(t, "old", "  color: red\n  tags: [a]\n"), metav1.ApplyOptions{FieldManager: "first"}); err != nil {
			t.Fatal(err)
		}
		withoutColor := strings.Replace(gearCRD, "              color: {type: string}\n", "", 1)
		withoutColor = strings.Replace(withoutColor, "    - jsonPath: .spec.color\n", "", 1)
		installGearCRD(t, s, withoutColor)

		// An update of the object as read, color and all (the write prunes
		// it, with a warning), keeps every manager's fields.
		obj, err := gears.Get(ctx, "old", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj.Object["spec"].(map[string]any)["tags"] = []any{"a", "c"}
		obj, err = gears.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "updater"})
		if err != nil {
			t.Fatal(err)
		}
		if !owns(t, obj.GetManagedFields(), "first", fieldpath.MakePathOrDie("spec", "tags", setValue("a"))) ||
			!owns(t, obj.GetManagedFields(), "updater", fieldpath.MakePathOrDie("spec", "tags", setValue("c"))) {
			t.Errorf("an update lost field ownership: %s", managedFieldsJSON(obj.GetManagedFields()))
		}

		obj, err = gears.Apply(ctx, "old", gearApply(t, "old", "  tags: [b]\n"), metav1.ApplyOptions{FieldManager: "second"})
		if err != nil {
			t.Fatalf("apply to an object stored with a dropped field: %v", err)
		}
		tags, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "tags")
		if len(tags) != 3 || !owns(t, obj.GetManagedFields(), "first", fieldpath.MakePathOrDie("spec", "tags", setValue("a"))) ||
			!owns(t, obj.GetManagedFields(), "second", fieldpath.MakePathOrDie("spec", "tags", setValue("b"))) {
			t.Errorf("after the apply: tags %v, managedFields %s", tags, managedFieldsJSON(obj.GetManagedFields()))
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "color"); ok {
			t.Errorf("the dropped field survived a write: %v", obj.Object["spec"])
		}
	})
}

// ports renders spec.ports as "name=port ...".
func ports(t *testing.T, obj *unstructured.Unstructured) string {
	t.Helper()
	list, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
	var out []string
	for _, p := range list {
		m := p.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v", m["name"], m["port"]))
	}
	return strings.Join(out, " ")
}

func setValue(v any) fieldpath.PathElement {
	val := value.NewValueInterface(v)
	return fieldpath.PathElement{Value: &val}
}

// owns reports whether manager has a managedFields entry owning path.
func owns(t *testing.T, mf []metav1.ManagedFieldsEntry, manager string, path fieldpath.Path) bool {
	t.Helper()
	for _, e := range mf {
		if e.Manager != manager || e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			t.Fatalf("managedFields of %s: %v", manager, err)
		}
		if set.Has(path) {
			return true
		}
	}
	return false
}

func managedFieldsJSON(mf []metav1.ManagedFieldsEntry) string {
	var b strings.Builder
	for _, e := range mf {
		raw := ""
		if e.FieldsV1 != nil {
			raw = e.FieldsV1.GetRawString()
		}
		fmt.Fprintf(&b, "\n  %s %s %s", e.Manager, e.Operation, raw)
	}
	return b.String()
}

// kubectl prints a deprecated CRD version's warning, as against
// kube-apiserver, on reads and writes in that version alone.
func TestCRDDeprecatedVersionWarning(t *testing.T) {
	s := startServer(t)
	anything := `
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}`
	s.mustKubectl(t, "apply", "-f", writeFile(t, "gizmo-crd.yaml", `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.dep.example.com}
spec:
  group: dep.example.com
  names: {kind: Gizmo, plural: gizmos}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true`+anything+`
  - name: v1
    served: true
    storage: true`+anything+`
`))
	const warning = "Warning: dep.example.com/v1alpha1 Gizmo is deprecated; use dep.example.com/v1 Gizmo\n"
	eventually(t, 10*time.Second, "gizmos served", func() (bool, string) {
		_, errOut, err := s.kubectl("get", "gizmos.v1.dep.example.com")
		return err == nil, errOut
	})
	for _, c := range []struct {
		args    []string
		warning string
	}{
		{[]string{"create", "-f", writeFile(t, "gizmo.yaml", "apiVersion: dep.example.com/v1alpha1\nkind: Gizmo\nmetadata: {name: g1}\n")}, warning},
		{[]string{"get", "gizmos.v1alpha1.dep.example.com", "g1", "-o", "name"}, warning},
		{[]string{"get", "gizmos.v1.dep.example.com", "g1", "-o", "name"}, ""},
	} {
		out, errOut, err := s.kubectl(c.args...)
		if err != nil || errOut != c.warning {
			t.Errorf("kubectl %s: %v, stdout %q, stderr %q, want stderr %q", strings.Join(c.args, " "), err, out, errOut, c.warning)
		}
	}
}
