package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A platform team's defaults, as they would ship them: a custom
// resource gets an owner label from a ConfigMap parameter, a sidecar
// item merged into its list by name, a tag added to its set and an
// annotation by JSON Patch; every ConfigMap gets a label.
const mutatingPolicies = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.mp.example.com}
spec:
  group: mp.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              items:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    value: {type: string}
                    mode: {type: string, default: auto}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
---
apiVersion: v1
kind: Namespace
metadata: {name: platform}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: defaults, namespace: platform}
data: {owner: platform-team}
---
apiVersion: v1
kind: Namespace
metadata:
  name: apps
  labels: {defaults: "yes"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: widget-defaults}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [mp.example.com]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [widgets]
    namespaceSelector:
      matchLabels: {defaults: "yes"}
  variables:
  - name: owner
    expression: "string(params.data.owner)"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{
          metadata: Object.metadata{labels: {'owner': variables.owner}},
          spec: Object.spec{
            items: [Object.spec.items{name: 'sidecar', value: 'injected'}],
            tags: ['managed']}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        object.metadata.name == 'broken' ? [JSONPatch{op: 'remove', path: '/spec/nope'}] :
        [JSONPatch{op: 'add', path: '/metadata/annotations', value: {'example.com/owner': variables.owner}}]
  reinvocationPolicy: IfNeeded
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: widget-defaults}
spec:
  policyName: widget-defaults
  paramRef: {name: defaults, namespace: platform, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: stamp-configmaps}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [configmaps]
    namespaceSelector:
      matchLabels: {defaults: "yes"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'stamped': request.operation}}}"
  reinvocationPolicy: Never
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: stamp-configmaps}
spec:
  policyName: stamp-configmaps
`

const widget = `
apiVersion: mp.example.com/v1
kind: Widget
metadata: {name: %s, namespace: apps}
spec:
  items:
  - {name: main, value: "1"}
  tags: [mine]
`

// TestMutatingAdmissionPolicies applies policies with kubectl and writes
// through kubectl, client-go and controller-runtime: each sees the
// objects mutated as kube-apiserver mutates them (merged by the custom
// resource's schema, defaulted), a failing mutation refuses in its
// words, /metrics counts the mutations, and the policies hold after a
// restart until their binding is deleted.
func TestMutatingAdmissionPolicies(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(manifest, []byte(mutatingPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl(t, "apply", "-f", manifest)
	s.mustKubectl(t, "wait", "--for", "condition=established", "crd/widgets.mp.example.com")
	if out := s.mustKubectl(t, "get", "mutatingadmissionpolicies"); !strings.Contains(out, "widget-defaults") || !strings.Contains(out, "stamp-configmaps") {
		t.Errorf("kubectl get mutatingadmissionpolicies:\n%s", out)
	}

	// kubectl: the created widget as the policy leaves it.
	apply := func(name string) (string, string, error) {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, fmt.Appendf(nil, widget, name), 0o600); err != nil {
			t.Fatal(err)
		}
		return s.kubectl("create", "-f", f, "-o", "json")
	}
	out, errOut, err := apply("w1")
	if err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, errOut)
	}
	checkWidget(t, "kubectl", []byte(out))

	// A mutation that fails under failurePolicy Fail refuses the create.
	_, errOut, err = apply("broken")
	want := `policy 'widget-defaults' with binding 'widget-defaults' denied request: JSON Patch: error in remove for path: '/spec/nope': Unable to remove nonexistent key: nope: missing value`
	// kubectl prints a refusal with reason Invalid as an invalid object,
	// for kube-apiserver's alike.
	if err == nil || strings.TrimSpace(errOut) != `The widgets "broken" is invalid: : `+want {
		t.Errorf("kubectl create of a widget the policy fails on: %v\n%s", err, errOut)
	}

	// controller-runtime: a create and an update of an unstructured
	// widget.
	ctx := context.Background()
	c, err := client.New(s.config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "mp.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w2", "namespace": "apps"},
		"spec":     map[string]any{"items": []any{map[string]any{"name": "main", "value": "1"}}, "tags": []any{"mine"}},
	}}
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(w.Object)
	checkWidget(t, "controller-runtime create", data)
	w.SetLabels(nil)
	if err := c.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.GetLabels()["owner"] != "platform-team" {
		t.Errorf("controller-runtime update: labels %v, want the owner again", w.GetLabels())
	}

	// client-go: the ConfigMap policy on create and update.
	cs := kubernetes.NewForConfigOrDie(s.config())
	cm, err := cs.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
	if err != nil || cm.Labels["stamped"] != "CREATE" {
		t.Fatalf("client-go create: %v, labels %v", err, cm.Labels)
	}
	if cm, err = cs.CoreV1().ConfigMaps("apps").Update(ctx, cm, metav1.UpdateOptions{}); err != nil || cm.Labels["stamped"] != "UPDATE" {
		t.Fatalf("client-go update: %v, labels %v", err, cm.Labels)
	}
	if cm, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil || len(cm.Labels) != 0 {
		t.Errorf("a namespace the policy does not select: %v, labels %v", err, cm.Labels)
	}

	// /metrics: widget-defaults' two mutations for kubectl's create,
	// controller-runtime's create and update, each twice (upstream runs a
	// reinvocable policy whose mutations applied again), and for the
	// refused create one that applied and one that failed;
	// stamp-configmaps' two.
	counts := counters(t, s, "apiserver_mutating_admission_policy_check_total")
	wantCounts := map[string]float64{
		"error_type=invalid_error,policy=widget-defaults,policy_binding=widget-defaults": 1,
		"error_type=no_error,policy=stamp-configmaps,policy_binding=stamp-configmaps":    2,
		"error_type=no_error,policy=widget-defaults,policy_binding=widget-defaults":      13,
	}
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Errorf("apiserver_mutating_admission_policy_check_total\n%v\nwant\n%v", counts, wantCounts)
	}

	// The policies are in the store: they hold after a restart, and a
	// binding deleted with kubectl stops mutating.
	s.restart()
	if out, errOut, err = apply("w3"); err != nil {
		t.Fatalf("after a restart: %v\n%s", err, errOut)
	}
	checkWidget(t, "after a restart", []byte(out))
	s.mustKubectl(t, "delete", "mutatingadmissionpolicybinding", "widget-defaults")
	if out, errOut, err = apply("w4"); err != nil || strings.Contains(out, "sidecar") {
		t.Errorf("after the binding's delete: %v\n%s%s", err, out, errOut)
	}
}

// checkWidget checks a widget as widget-defaults leaves it: owner label
// and annotation, the sidecar merged after the item sent, both
// defaulted, the tag added to the set.
func checkWidget(t *testing.T, via string, data []byte) {
	t.Helper()
	var w struct {
		Metadata metav1.ObjectMeta
		Spec     struct {
			Items []map[string]string
			Tags  []string
		}
	}
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatalf("%s: %v\n%s", via, err, data)
	}
	items := fmt.Sprint(w.Spec.Items)
	if w.Metadata.Labels["owner"] != "platform-team" || w.Metadata.Annotations["example.com/owner"] != "platform-team" ||
		items != "[map[mode:auto name:main value:1] map[mode:auto name:sidecar value:injected]]" ||
		!slices.Equal(w.Spec.Tags, []string{"mine", "managed"}) {
		t.Errorf("%s: labels %v annotations %v items %s tags %v", via, w.Metadata.Labels, w.Metadata.Annotations, items, w.Spec.Tags)
	}
}
