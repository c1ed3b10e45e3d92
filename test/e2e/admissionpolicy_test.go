package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A platform team's policies, as they would ship them: a limit read from
// a ConfigMap parameter, a warning about names, and a check of what the
// requester may do.
const admissionPolicies = `
apiVersion: v1
kind: Namespace
metadata: {name: policy-params}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: policy-params}
data: {maxKeys: "2"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-keys}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
    namespaceSelector:
      matchLabels: {policed: "yes"}
  variables:
  - name: keys
    expression: "has(object.data) ? size(object.data) : 0"
  validations:
  - expression: "variables.keys <= int(params.data.maxKeys)"
    messageExpression: "'too many keys: ' + string(variables.keys) + ' > ' + params.data.maxKeys"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-keys}
spec:
  policyName: max-keys
  validationActions: [Deny]
  paramRef: {name: limits, namespace: policy-params, parameterNotFoundAction: Deny}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: short-names}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
    namespaceSelector:
      matchLabels: {policed: "yes"}
  validations:
  - expression: "object.metadata.name.size() <= 12"
    message: "names should be short"
  - expression: "authorizer.group('').resource('secrets').namespace(request.namespace).check('get').allowed()"
    messageExpression: "request.userInfo.username + ' may not read secrets here'"
    reason: Forbidden
  - expression: "object.metadata.name != 'bobs' || !authorizer.group('').resource('configmaps').namespace(request.namespace).check('create').reason().startsWith('RBAC: allowed by RoleBinding \"bob-cm/team\" of Role \"cm-writer\" to User \"bob\"')"
    message: "allowed by bob-cm"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: short-names}
spec:
  policyName: short-names
  validationActions: [Warn]
---
apiVersion: v1
kind: Namespace
metadata:
  name: team
  labels: {policed: "yes"}
`

// TestValidatingAdmissionPolicies applies policies with kubectl and
// writes through kubectl, client-go and controller-runtime: refusals are
// kube-apiserver's words and codes, warnings reach each client, a
// parameter's change applies to the next request, the authorizer
// answers as RBAC does, and the policies hold after a restart.
func TestValidatingAdmissionPolicies(t *testing.T) {
	s := startServer(t, "--authorization-mode", "RBAC")
	manifest := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(manifest, []byte(admissionPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl(t, "apply", "-f", manifest)
	out := s.mustKubectl(t, "get", "validatingadmissionpolicies")
	if !strings.Contains(out, "max-keys") || !strings.Contains(out, "ConfigMap") {
		t.Errorf("kubectl get validatingadmissionpolicies:\n%s", out)
	}

	// kubectl: the refusal and the warning as kubectl prints them.
	_, errOut, err := s.kubectl("create", "configmap", "three", "-n", "team", "--from-literal=a=1", "--from-literal=b=2", "--from-literal=c=3")
	wantRefusal := `error: failed to create configmap: configmaps "three" is forbidden: ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys' denied request: too many keys: 3 > 2`
	if err == nil || strings.TrimSpace(errOut) != wantRefusal {
		t.Errorf("kubectl create of three keys: %v\n%s\nwant %s", err, errOut, wantRefusal)
	}
	out, errOut, err = s.kubectl("create", "configmap", "a-rather-long-name", "-n", "team", "--from-literal=a=1")
	wantWarning := "Warning: Validation failed for ValidatingAdmissionPolicy 'short-names' with binding 'short-names': names should be short"
	if err != nil || strings.TrimSpace(errOut) != wantWarning || !strings.Contains(out, "created") {
		t.Errorf("kubectl create of a long name: %v\n%s%s\nwant %s", err, out, errOut, wantWarning)
	}

	// client-go: a 422 Invalid with the message as its cause, and the
	// warning through the client's handler.
	var mu sync.Mutex
	var warnings []string
	cfg := s.config()
	cfg.WarningHandler = warningRecorder(func(msg string) { mu.Lock(); warnings = append(warnings, msg); mu.Unlock() })
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cg", Namespace: "team"}, Data: map[string]string{"a": "1", "b": "2", "c": "3"}}
	_, err = cs.CoreV1().ConfigMaps("team").Create(ctx, cm, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || apierrors.ReasonForError(err) != metav1.StatusReasonInvalid ||
		err.Error() != `configmaps "cg" is forbidden: ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys' denied request: too many keys: 3 > 2` {
		t.Errorf("client-go create: %v", err)
	}
	cm.Name, cm.Data = "another-long-name", map[string]string{"a": "1"}
	if _, err := cs.CoreV1().ConfigMaps("team").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(warnings) != 1 || warnings[0] != "Validation failed for ValidatingAdmissionPolicy 'short-names' with binding 'short-names': names should be short" {
		t.Errorf("client-go warnings %q", warnings)
	}
	mu.Unlock()

	// controller-runtime: an update over the limit is refused; raising
	// the parameter lets the same update through at once.
	c, err := client.New(s.config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "another-long-name"}, &got); err != nil {
		t.Fatal(err)
	}
	got.Data = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	if err := c.Update(ctx, got.DeepCopy()); !apierrors.IsInvalid(err) || !strings.HasSuffix(err.Error(), "too many keys: 4 > 2") {
		t.Errorf("controller-runtime update over the limit: %v", err)
	}
	var limits corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "policy-params", Name: "limits"}, &limits); err != nil {
		t.Fatal(err)
	}
	limits.Data["maxKeys"] = "4"
	if err := c.Update(ctx, &limits); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, got.DeepCopy()); err != nil {
		t.Errorf("controller-runtime update once the limit is 4: %v", err)
	}

	// /metrics counts the failed validations by policy, binding and
	// action: max-keys refused kubectl, client-go and controller-runtime
	// once each; short-names warned about two long names.
	counts := counters(t, s, "apiserver_validating_admission_policy_check_total")
	wantCounts := map[string]float64{
		"enforcement_action=deny,error_type=invalid_error,policy=max-keys,policy_binding=max-keys":       3,
		"enforcement_action=warn,error_type=invalid_error,policy=short-names,policy_binding=short-names": 2,
	}
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Errorf("apiserver_validating_admission_policy_check_total\n%v\nwant\n%v", counts, wantCounts)
	}

	// The authorizer asks RBAC as the requester: bob may write
	// configmaps in team but not read its secrets, so he is warned; the
	// check that allows him says which binding does.
	s.mustKubectl(t, "create", "role", "cm-writer", "-n", "team", "--verb=create,get", "--resource=configmaps")
	s.mustKubectl(t, "create", "rolebinding", "bob-cm", "-n", "team", "--role=cm-writer", "--user=bob")
	_, errOut, err = s.kubectl("create", "configmap", "bobs", "-n", "team", "--as=bob", "--from-literal=a=1")
	if want := "Warning: Validation failed for ValidatingAdmissionPolicy 'short-names' with binding 'short-names': bob may not read secrets here\n" +
		"Warning: Validation failed for ValidatingAdmissionPolicy 'short-names' with binding 'short-names': allowed by bob-cm"; err != nil || strings.TrimSpace(errOut) != want {
		t.Errorf("as bob: %v\n%s\nwant %s", err, errOut, want)
	}
	s.mustKubectl(t, "create", "rolebinding", "bob-view", "-n", "team", "--clusterrole=admin", "--user=bob")
	n := 0
	eventually(t, 10*time.Second, "bob's new binding in the authorizer", func() (bool, string) {
		n++
		_, errOut, err := s.kubectl("create", "configmap", fmt.Sprintf("bobs-%d", n), "-n", "team", "--as=bob", "--from-literal=a=1")
		return err == nil && strings.TrimSpace(errOut) == "", errOut
	})

	// The policies are in the store: they hold after a restart, and a
	// binding removed with kubectl stops refusing.
	s.restart()
	_, errOut, err = s.kubectl("create", "configmap", "five", "-n", "team", "--from-literal=a=1", "--from-literal=b=2", "--from-literal=c=3",
		"--from-literal=d=4", "--from-literal=e=5")
	if err == nil || !strings.Contains(errOut, "too many keys: 5 > 4") {
		t.Errorf("after a restart: %v\n%s", err, errOut)
	}
	s.mustKubectl(t, "delete", "validatingadmissionpolicybinding", "max-keys")
	s.mustKubectl(t, "create", "configmap", "five", "-n", "team", "--from-literal=a=1", "--from-literal=b=2", "--from-literal=c=3",
		"--from-literal=d=4", "--from-literal=e=5")
}

// warningRecorder is a client-go warning handler calling f.
type warningRecorder func(msg string)

func (f warningRecorder) HandleWarningHeader(_ int, _ string, msg string) { f(msg) }

var _ rest.WarningHandler = warningRecorder(nil)
