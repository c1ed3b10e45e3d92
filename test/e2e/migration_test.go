package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// widgetsCRD is a CRD of two versions that differ only in name, storing
// the one given.
func widgetsCRD(storage string, versions ...string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
`)
	for _, v := range versions {
		b.WriteString("  - name: " + v + "\n    served: true\n    storage: " + map[bool]string{true: "true", false: "false"}[v == storage] + "\n")
		b.WriteString("    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}\n")
	}
	return b.String()
}

// A CRD's storage version changes, as an operator's upgrade changes it:
// a StorageVersionMigration made with kubectl rewrites the objects stored
// in the old version, kplane then records the new version alone in the
// CRD's status.storedVersions, and the old version can be dropped from
// the CRD, which kube-apiserver refuses while objects may be stored in
// it.
func TestStorageVersionMigration(t *testing.T) {
	s := startServer(t)
	apply := func(manifest string) (string, error) {
		path := filepath.Join(t.TempDir(), "m.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := s.kubectl("apply", "-f", path)
		return out + errOut, err
	}
	if out, err := apply(widgetsCRD("v1", "v1", "v2")); err != nil {
		t.Fatal(out)
	}
	s.mustKubectl(t, "wait", "--for", "condition=Established", "crd/widgets.example.com")
	for _, name := range []string{"a", "b", "c"} {
		if out, err := apply("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: " + name + ", namespace: default}\nspec: {size: 1}\n"); err != nil {
			t.Fatal(out)
		}
	}
	if out, err := apply(widgetsCRD("v2", "v1", "v2")); err != nil {
		t.Fatal(out)
	}
	if out := s.mustKubectl(t, "get", "crd", "widgets.example.com", "-o", "jsonpath={.status.storedVersions}"); out != `["v1","v2"]` {
		t.Fatalf("storedVersions before: %s", out)
	}
	// v1 cannot go while objects may be stored in it.
	out, err := apply(widgetsCRD("v2", "v2"))
	if err == nil || !strings.Contains(out, "must remain in spec.versions until a storage migration ensures no data remains persisted in v1") {
		t.Fatalf("dropping v1 before the migration: %v %s", err, out)
	}

	if out, err := apply("apiVersion: storagemigration.k8s.io/v1\nkind: StorageVersionMigration\nmetadata: {name: widgets}\nspec: {resource: {group: example.com, resource: widgets}}\n"); err != nil {
		t.Fatal(out)
	}
	eventually(t, 10*time.Second, "the migration succeeds", func() (bool, string) {
		out, errOut, _ := s.kubectl("get", "storageversionmigrations")
		return strings.Contains(out, "widgets   widgets.example.com   Succeeded"), out + errOut
	})
	eventually(t, 10*time.Second, "storedVersions is v2", func() (bool, string) {
		out, _, _ := s.kubectl("get", "crd", "widgets.example.com", "-o", `jsonpath={.status.storedVersions} {.status.conditions[?(@.type=="StorageMigrating")].message}`)
		return out == `["v2"] The migration has succeeded and the stored versions have been updated`, out
	})
	// Now v1 can go, and the objects are read in v2.
	if out, err := apply(widgetsCRD("v2", "v2")); err != nil {
		t.Fatalf("dropping v1 after the migration: %s", out)
	}
	if out := s.mustKubectl(t, "get", "widgets.v2.example.com", "-o", "name"); out != "widget.example.com/a\nwidget.example.com/b\nwidget.example.com/c\n" {
		t.Fatalf("widgets: %q", out)
	}
	// Each object was stored anew, in v2.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	kv, err := exec.Command(kplaneBinary(t), "kv", "--data-dir", s.dir, "get", "/example.com/widgets/", "--prefix").CombinedOutput()
	stored := string(kv)
	if err != nil || strings.Count(stored, `{\"apiVersion\":\"example.com/v2\",\"kind\":\"Widget\"`) != 3 || strings.Contains(stored, `example.com/v1\",\"kind\":\"Widget`) {
		t.Fatalf("stored: %v %s", err, stored)
	}
}
