package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A ValidatingAdmissionPolicy read from a file, as kube-apiserver reads
// one (staticManifestsDir): it refuses client-go's and kubectl's writes,
// including of the admission configurations, applies its file's changes
// once they are written, and a file it cannot load stops kplane at
// start with upstream's words.
func TestStaticAdmissionManifests(t *testing.T) {
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies")
	if err := os.Mkdir(policies, 0o755); err != nil {
		t.Fatal(err)
	}
	// writePolicy writes the policy refusing names that start with
	// prefix, at once (aside, then renamed).
	writePolicy := func(prefix string) {
		t.Helper()
		content := `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: names.static.k8s.io}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE], apiGroups: ["", admissionregistration.k8s.io], apiVersions: [v1], resources: [configmaps, validatingadmissionpolicies]}
  validations:
  - expression: "!object.metadata.name.startsWith('` + prefix + `')"
    message: "no names starting with ` + prefix + `"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: names.static.k8s.io}
spec: {policyName: names.static.k8s.io, validationActions: [Deny]}
`
		tmp := filepath.Join(policies, ".policy.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(policies, "policy.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy("red")
	config := filepath.Join(dir, "admission.yaml")
	if err := os.WriteFile(config, []byte(`
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ValidatingAdmissionPolicyConfiguration
    staticManifestsDir: `+policies+`
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--admission-control-config-file", config)
	cs := kubernetes.NewForConfigOrDie(s.config())
	ctx := context.Background()
	create := func(name string) error {
		_, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	err := create("red-1")
	want := `configmaps "red-1" is forbidden: ValidatingAdmissionPolicy 'names.static.k8s.io' with binding 'names.static.k8s.io' denied request: no names starting with red`
	if !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("create red-1: %v\nwant %s", err, want)
	}
	if err := create("blue-1"); err != nil {
		t.Errorf("create blue-1: %v", err)
	}
	// It applies to the admission policies themselves, which no policy
	// written through the API can.
	vap := filepath.Join(dir, "vap.json")
	if err := os.WriteFile(vap, []byte(`{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": {"name": "red-policy"}, "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
		"apiVersions": ["v1"], "resources": ["secrets"]}]}, "validations": [{"expression": "true"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := s.kubectl("create", "-f", vap, "--dry-run=server")
	if err == nil || !strings.Contains(stderr, "denied request: no names starting with red") {
		t.Errorf("kubectl create of a policy the file refuses: %v\n%s", err, stderr)
	}
	// The API keeps the names of the files' configurations to them.
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mine.static.k8s.io"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "names.static.k8s.io", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `names ending with ".static.k8s.io" are reserved for static manifest-based configurations`) {
		t.Errorf("create of a binding with the reserved suffix: %v", err)
	}

	writePolicy("blue")
	eventually(t, 20*time.Second, "the changed file applies", func() (bool, string) {
		blue, red := create("blue-2"), create("red-3")
		return blue != nil && red == nil, fmt.Sprintf("blue-2: %v, red-3: %v", blue, red)
	})
	metrics := s.mustKubectl(t, "get", "--raw", "/metrics")
	if !strings.Contains(metrics, `apiserver_manifest_admission_config_controller_automatic_reloads_total{apiserver_id_hash="sha256:`) ||
		!strings.Contains(metrics, `plugin="ValidatingAdmissionPolicy",status="success"} 2`) {
		t.Errorf("reload metrics:\n%s", grepLines(metrics, "manifest_admission"))
	}

	// A file kube-apiserver would refuse stops kplane.
	if err := os.WriteFile(filepath.Join(policies, "more.yaml"), []byte("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: orphan.static.k8s.io}\nspec: {policyName: gone.static.k8s.io, validationActions: [Deny]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kplaneBinary(t), "serve", "--storage", "memory", "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--admission-control-config-file", config).CombinedOutput()
	want = `--admission-control-config-file: admission plugin "ValidatingAdmissionPolicy": failed to load static policy manifests from "` + policies + `": binding "orphan.static.k8s.io" references policy "gone.static.k8s.io" which does not exist in the manifest directory`
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("serve with a binding of no policy: %v\n%s\nwant %s", err, out, want)
	}
}

// grepLines are the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
