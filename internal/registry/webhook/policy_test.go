package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// policy stores a ValidatingAdmissionPolicy named name with spec, its
// matchConstraints defaulting to creates and updates of core configmaps.
func (e *env) policy(name string, spec map[string]any) {
	e.t.Helper()
	if spec["matchConstraints"] == nil {
		spec["matchConstraints"] = map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"},
		}}}
	}
	e.storeAdmission("validatingadmissionpolicies", "ValidatingAdmissionPolicy", name, spec)
}

// binding stores a ValidatingAdmissionPolicyBinding of policy with the
// validation actions given and the rest of spec.
func (e *env) binding(name, policy string, actions []any, spec map[string]any) {
	e.t.Helper()
	if spec == nil {
		spec = map[string]any{}
	}
	spec["policyName"], spec["validationActions"] = policy, actions
	e.storeAdmission("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", name, spec)
}

func (e *env) storeAdmission(resource, kind, name string, spec map[string]any) {
	e.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": map[string]any{"name": name}, "spec": spec,
	}}
	if _, err := e.res("admissionregistration.k8s.io", resource).Create(e.ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		e.t.Fatalf("storing %s %s: %v", kind, name, err)
	}
}

func (e *env) namespace(name string, labels map[string]string) {
	e.t.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName(name)
	ns.SetLabels(labels)
	if _, err := e.res("", "namespaces").Create(e.ctx, "v1", "", ns, registry.WriteOptions{FieldManager: "test"}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createIn(ns string, obj *unstructured.Unstructured, warnings *[]string) error {
	ctx := e.ctx
	if warnings != nil {
		ctx = registry.WithWarnings(ctx, func(msg string) { *warnings = append(*warnings, msg) })
	}
	_, err := e.res("", "configmaps").Create(ctx, "v1", ns, obj, registry.WriteOptions{FieldManager: "test"})
	return err
}

// refusal checks that err is a policy's refusal as kube-apiserver words
// it, with code and reason, for configmap name.
func refusal(t *testing.T, err error, code int32, reason metav1.StatusReason, name, message string) {
	t.Helper()
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		t.Fatalf("got %v, want a refusal", err)
	}
	s := st.ErrStatus
	want := fmt.Sprintf("configmaps %q is forbidden: %s", name, message)
	if s.Code != code || s.Reason != reason || s.Message != want || s.Details == nil || s.Details.Name != name ||
		s.Details.Kind != "configmaps" || len(s.Details.Causes) != 1 || s.Details.Causes[0].Message != message {
		t.Errorf("got %d %s %q %+v\nwant %d %s %q", s.Code, s.Reason, s.Message, s.Details, code, reason, want)
	}
}

func withData(obj *unstructured.Unstructured, data map[string]any) *unstructured.Unstructured {
	obj.Object["data"] = data
	return obj
}

func TestPolicyDeniesWarnsAndAudits(t *testing.T) {
	e := newEnv(t)
	e.namespace("prod", map[string]string{"env": "prod"})
	e.namespace("dev", map[string]string{"env": "dev"})
	e.policy("names", map[string]any{
		"matchConditions": []any{map[string]any{"name": "not-skipped", "expression": "!object.metadata.name.startsWith('skip-')"}},
		"validations": []any{
			map[string]any{"expression": "object.metadata.name.size() < 10", "message": "name too long", "reason": "Forbidden"},
			map[string]any{"expression": "!has(object.metadata.labels) || !('bad' in object.metadata.labels)"},
		},
	})
	e.binding("names-warn", "names", []any{"Warn"}, nil)
	e.binding("names-deny", "names", []any{"Deny", "Audit"}, map[string]any{
		"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}},
	})
	e.binding("names-audit", "names", []any{"Audit"}, nil)

	var warnings []string
	err := e.createIn("prod", configMap("longname-cm", nil), &warnings)
	refusal(t, err, 403, metav1.StatusReasonForbidden, "longname-cm",
		"ValidatingAdmissionPolicy 'names' with binding 'names-deny' denied request: name too long")
	if want := []string{"Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names-warn': name too long"}; !slices.Equal(warnings, want) {
		t.Errorf("warnings %q, want %q", warnings, want)
	}

	warnings = nil
	if err := e.createIn("dev", configMap("longname-cm", nil), &warnings); err != nil || len(warnings) != 1 {
		t.Errorf("outside the Deny binding's namespaces: %v, warnings %q", err, warnings)
	}
	warnings = nil
	if err := e.createIn("prod", configMap("skip-longname-cm", nil), &warnings); err != nil || len(warnings) != 0 {
		t.Errorf("a false matchCondition: %v, warnings %q", err, warnings)
	}
	err = e.createIn("prod", configMap("labeled", map[string]string{"bad": "x"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "labeled",
		"ValidatingAdmissionPolicy 'names' with binding 'names-deny' denied request: failed expression: !has(object.metadata.labels) || !('bad' in object.metadata.labels)")
	// A create by generateName is refused under the generated name.
	err = e.createIn("prod", configMap("gen-longname-", nil), nil)
	var st *apierrors.StatusError
	if !errors.As(err, &st) || st.ErrStatus.Details == nil || !strings.HasPrefix(st.ErrStatus.Details.Name, "gen-longname-") || len(st.ErrStatus.Details.Name) != len("gen-longname-")+5 {
		t.Errorf("generateName: %v", err)
	}
	// A dry run is refused the same way; nothing is stored by any refusal.
	_, err = e.res("", "configmaps").Create(e.ctx, "v1", "prod", configMap("longname-dry", nil), registry.WriteOptions{FieldManager: "test", DryRun: true})
	refusal(t, err, 403, metav1.StatusReasonForbidden, "longname-dry",
		"ValidatingAdmissionPolicy 'names' with binding 'names-deny' denied request: name too long")
	list, err := e.res("", "configmaps").List(e.ctx, "v1", "prod", registry.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "skip-longname-cm" {
		t.Errorf("stored in prod: %v %v", list, err)
	}
}

func TestPolicyVariablesMessagesAndFailures(t *testing.T) {
	e := newEnv(t)
	e.policy("keys", map[string]any{
		"variables": []any{map[string]any{"name": "keys", "expression": "has(object.data) ? size(object.data) : 0"}},
		"validations": []any{map[string]any{
			"expression": "variables.keys <= 2", "messageExpression": "'too many keys: ' + string(variables.keys)",
		}},
	})
	e.binding("keys", "keys", []any{"Deny"}, nil)
	e.policy("x-fail", map[string]any{"validations": []any{map[string]any{"expression": "object.data.x == 'y'"}},
		"matchConstraints": labelled("x", "fail")})
	e.binding("x-fail", "x-fail", []any{"Deny"}, nil)
	e.policy("x-ignore", map[string]any{"failurePolicy": "Ignore", "validations": []any{map[string]any{"expression": "object.data.x == 'y'"}},
		"matchConstraints": labelled("x", "ignore")})
	e.binding("x-ignore", "x-ignore", []any{"Deny"}, nil)

	err := e.createIn("default", withData(configMap("many", nil), map[string]any{"a": "1", "b": "2", "c": "3"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "many", "ValidatingAdmissionPolicy 'keys' with binding 'keys' denied request: too many keys: 3")
	if err := e.createIn("default", configMap("few", nil), nil); err != nil {
		t.Fatal(err)
	}
	// Updates too: a merge patch adding two keys.
	_, _, err = e.res("", "configmaps").Patch(e.ctx, "v1", "default", "few", []byte(`{"data":{"x":"1","y":"2"}}`),
		registry.PatchOptions{Type: types.MergePatchType, WriteOptions: registry.WriteOptions{FieldManager: "test"}})
	refusal(t, err, 422, metav1.StatusReasonInvalid, "few", "ValidatingAdmissionPolicy 'keys' with binding 'keys' denied request: too many keys: 3")

	err = e.createIn("default", configMap("fails", map[string]string{"x": "fail"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "fails",
		"ValidatingAdmissionPolicy 'x-fail' with binding 'x-fail' denied request: expression 'object.data.x == 'y'' resulted in error: no such key: x")
	if err := e.createIn("default", configMap("ignored", map[string]string{"x": "ignore"}), nil); err != nil {
		t.Errorf("failurePolicy Ignore: %v", err)
	}
	// A matchCondition that fails to evaluate is a failed validation for
	// the binding's actions: a warning under Warn.
	e.policy("cond", map[string]any{"matchConstraints": labelled("cond", "yes"),
		"matchConditions": []any{map[string]any{"name": "a", "expression": "object.data.zzz == 'x'"}},
		"validations":     []any{map[string]any{"expression": "false"}}})
	e.binding("cond", "cond", []any{"Warn"}, nil)
	var warnings []string
	if err := e.createIn("default", configMap("cond", map[string]string{"cond": "yes"}), &warnings); err != nil ||
		!slices.Equal(warnings, []string{"Validation failed for ValidatingAdmissionPolicy 'cond' with binding 'cond': expression 'object.data.zzz == 'x'' resulted in error: no such key: zzz"}) {
		t.Errorf("a failing matchCondition under Warn: %v, warnings %q", err, warnings)
	}
}

// labelled are matchConstraints for configmaps labelled key=value.
func labelled(key, value string) map[string]any {
	return map[string]any{
		"objectSelector": map[string]any{"matchLabels": map[string]any{key: value}},
		"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"*"}, "resources": []any{"configmaps"},
		}},
	}
}

func TestPolicyParams(t *testing.T) {
	e := newEnv(t)
	e.namespace("params", nil)
	for name, data := range map[string]map[string]any{"limits": {"max": "2"}, "ban-a": {"banned": "aaa"}, "ban-b": {"banned": "bbb"}} {
		cm := withData(configMap(name, nil), data)
		if name != "limits" {
			cm.SetLabels(map[string]string{"kind": "ban"})
		}
		if err := e.createIn("params", cm, nil); err != nil {
			t.Fatal(err)
		}
	}
	paramKind := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
	e.policy("max", map[string]any{"paramKind": paramKind, "matchConstraints": labelled("max", "yes"),
		"validations": []any{map[string]any{"expression": "size(object.data) <= int(params.data.max)", "message": "too many keys"}}})
	e.binding("max", "max", []any{"Deny"}, map[string]any{"paramRef": map[string]any{"name": "limits", "namespace": "params", "parameterNotFoundAction": "Deny"}})
	e.binding("max-missing", "max", []any{"Deny"}, map[string]any{
		"paramRef":       map[string]any{"name": "nope", "namespace": "params", "parameterNotFoundAction": "Deny"},
		"matchResources": labelled("missing", "deny"),
	})
	e.binding("max-allowed", "max", []any{"Deny"}, map[string]any{
		"paramRef":       map[string]any{"name": "nope", "namespace": "params", "parameterNotFoundAction": "Allow"},
		"matchResources": labelled("missing", "allow"),
	})
	e.policy("banned", map[string]any{"paramKind": paramKind, "matchConstraints": labelled("ban", "yes"),
		"validations": []any{map[string]any{"expression": "object.metadata.name != params.data.banned", "messageExpression": "'banned by ' + params.metadata.name"}}})
	e.binding("banned", "banned", []any{"Deny"}, map[string]any{"paramRef": map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"kind": "ban"}}, "namespace": "params", "parameterNotFoundAction": "Allow",
	}})
	e.policy("no-kind", map[string]any{"paramKind": map[string]any{"apiVersion": "example.com/v1", "kind": "Nope"},
		"matchConstraints": labelled("nokind", "yes"), "validations": []any{map[string]any{"expression": "true"}}})
	e.binding("no-kind", "no-kind", []any{"Deny"}, nil)

	err := e.createIn("default", withData(configMap("three", map[string]string{"max": "yes"}), map[string]any{"a": "1", "b": "2", "c": "3"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "three", "ValidatingAdmissionPolicy 'max' with binding 'max' denied request: too many keys")
	if err := e.createIn("default", configMap("one", map[string]string{"max": "yes"}), nil); err != nil {
		t.Errorf("within the param's bound: %v", err)
	}
	err = e.createIn("default", configMap("missing", map[string]string{"max": "yes", "missing": "deny"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "missing",
		"ValidatingAdmissionPolicy 'max' with binding 'max-missing' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")
	if err := e.createIn("default", configMap("allowed", map[string]string{"missing": "allow"}), nil); err != nil {
		t.Errorf("parameterNotFoundAction Allow: %v", err)
	}
	// A selector's params are each evaluated.
	for _, name := range []string{"aaa", "bbb"} {
		err = e.createIn("default", configMap(name, map[string]string{"ban": "yes"}), nil)
		refusal(t, err, 422, metav1.StatusReasonInvalid, name, "ValidatingAdmissionPolicy 'banned' with binding 'banned' denied request: banned by ban-"+name[:1])
	}
	if err := e.createIn("default", configMap("ccc", map[string]string{"ban": "yes"}), nil); err != nil {
		t.Errorf("banned by none: %v", err)
	}
	err = e.createIn("default", configMap("nokind", map[string]string{"nokind": "yes"}), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "nokind",
		"ValidatingAdmissionPolicy 'no-kind' denied request: failed to configure policy: failed to find resource referenced by paramKind: 'example.com/v1, Kind=Nope'")

	// A namespaced paramRef without a namespace takes the request's: a
	// Namespace's own name for a Namespace.
	e.policy("ns-param", map[string]any{"paramKind": paramKind, "validations": []any{map[string]any{"expression": "true"}},
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{"", "rbac.authorization.k8s.io"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"namespaces", "clusterroles"},
		}}, "objectSelector": map[string]any{"matchLabels": map[string]any{"nsparam": "yes"}}}})
	e.binding("ns-param", "ns-param", []any{"Deny"}, map[string]any{"paramRef": map[string]any{"name": "limits", "parameterNotFoundAction": "Deny"}})
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName("nsp")
	ns.SetLabels(map[string]string{"nsparam": "yes"})
	_, err = e.res("", "namespaces").Create(e.ctx, "v1", "", ns, registry.WriteOptions{FieldManager: "test"})
	if err == nil || !strings.HasSuffix(err.Error(), "ValidatingAdmissionPolicy 'ns-param' with binding 'ns-param' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction") {
		t.Errorf("a namespace's params: %v", err)
	}
	role := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}}
	role.SetName("r")
	role.SetLabels(map[string]string{"nsparam": "yes"})
	_, err = e.res("rbac.authorization.k8s.io", "clusterroles").Create(e.ctx, "v1", "", role, registry.WriteOptions{FieldManager: "test"})
	if err == nil || !strings.HasSuffix(err.Error(), "failed to configure binding: cannot use namespaced paramRef in policy binding that matches cluster-scoped resources") {
		t.Errorf("a cluster-scoped object's namespaced params: %v", err)
	}
}

func TestPolicyMatchingAndWhatExpressionsSee(t *testing.T) {
	e := newEnv(t)
	e.namespace("dev", map[string]string{"env": "dev"})
	if err := e.createIn("dev", configMap("victim", nil), nil); err != nil {
		t.Fatal(err)
	}
	e.policy("see", map[string]any{
		"matchConstraints": map[string]any{
			"resourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "DELETE"}, "resources": []any{"configmaps"},
			}},
			"excludeResourceRules": []any{map[string]any{
				"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"*"}, "resources": []any{"configmaps"}, "resourceNames": []any{"excluded"},
			}},
		},
		"validations": []any{map[string]any{"expression": "false", "messageExpression": "" +
			"request.operation + ' ' + request.namespace + '/' + request.name + ' ' + request.userInfo.username + " +
			"' object=' + string(object != null) + ' old=' + string(oldObject != null) + " +
			"' env=' + (namespaceObject == null ? 'none' : namespaceObject.metadata.labels.env) + " +
			"' kind=' + request.kind.kind + ' dryRun=' + string(request.dryRun)"}},
	})
	e.binding("see", "see", []any{"Deny"}, nil)
	err := e.createIn("dev", configMap("cm", nil), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "cm",
		"ValidatingAdmissionPolicy 'see' with binding 'see' denied request: CREATE dev/cm alice object=true old=false env=dev kind=ConfigMap dryRun=false")
	if err := e.createIn("dev", configMap("excluded", nil), nil); err != nil {
		t.Errorf("excluded by name: %v", err)
	}
	_, _, err = e.res("", "configmaps").Delete(e.ctx, "v1", "dev", "excluded", metav1.DeleteOptions{}, registry.WriteOptions{})
	if err != nil {
		t.Errorf("delete of an excluded name: %v", err)
	}
	// The policies themselves are exempt; a policy matching everything
	// can be removed.
	e.policy("all", map[string]any{"validations": []any{map[string]any{"expression": "false"}},
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{"*"}, "apiVersions": []any{"*"}, "operations": []any{"*"}, "resources": []any{"*"},
		}}}})
	e.binding("all", "all", []any{"Deny"}, nil)
	for _, r := range []string{"validatingadmissionpolicybindings", "validatingadmissionpolicies"} {
		if _, _, err := e.res("admissionregistration.k8s.io", r).Delete(e.ctx, "v1", "", "all", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
			t.Errorf("deleting %s all: %v", r, err)
		}
	}
	// A delete shows the old object only.
	_, _, err = e.res("", "configmaps").Delete(e.ctx, "v1", "dev", "victim", metav1.DeleteOptions{}, registry.WriteOptions{DryRun: true})
	refusal(t, err, 422, metav1.StatusReasonInvalid, "victim",
		"ValidatingAdmissionPolicy 'see' with binding 'see' denied request: DELETE dev/victim alice object=false old=true env=dev kind=ConfigMap dryRun=true")
}

// recordingAuthorizer allows what its rules name and records each check.
type recordingAuthorizer struct {
	mu     sync.Mutex
	checks []registry.Attributes
	allow  func(registry.Attributes) bool
}

func (r *recordingAuthorizer) Authorize(_ context.Context, a registry.Attributes) (registry.Decision, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, a)
	if r.allow(a) {
		return registry.Allow, "", nil
	}
	return registry.NoOpinion, "no rule allows it", nil
}

func TestPolicyAuthorizer(t *testing.T) {
	authz := &recordingAuthorizer{allow: func(a registry.Attributes) bool { return a.User.Name == "admin" }}
	e := newEnvWith(t, func(w *webhook.Webhooks, _ *server) { w.Authorizer = authz })
	e.policy("secrets", map[string]any{"validations": []any{map[string]any{
		"expression":        "authorizer.group('').resource('secrets').namespace(request.namespace).check('list').allowed()",
		"messageExpression": "'may not list secrets in ' + request.namespace",
	}}})
	e.binding("secrets", "secrets", []any{"Deny"}, nil)
	err := e.createIn("default", configMap("cm", nil), nil)
	refusal(t, err, 422, metav1.StatusReasonInvalid, "cm", "ValidatingAdmissionPolicy 'secrets' with binding 'secrets' denied request: may not list secrets in default")
	admin := registry.WithUser(e.ctx, registry.User{Name: "admin"})
	if _, err := e.res("", "configmaps").Create(admin, "v1", "default", configMap("cm", nil), registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Errorf("as admin: %v", err)
	}
	want := []registry.Attributes{
		{User: registry.User{Name: "alice", Groups: []string{"devs", "system:authenticated"}}, Verb: "list", ResourceRequest: true, Namespace: "default", APIVersion: "*", Resource: "secrets"},
		{User: registry.User{Name: "admin"}, Verb: "list", ResourceRequest: true, Namespace: "default", APIVersion: "*", Resource: "secrets"},
	}
	if fmt.Sprint(authz.checks) != fmt.Sprint(want) {
		t.Errorf("checks\n%+v\nwant\n%+v", authz.checks, want)
	}
}

// A policy and binding written through another server over the same
// store apply here once its watch brings them.
func TestPoliciesWrittenElsewhere(t *testing.T) {
	e := newEnv(t)
	other := e.elsewhere()
	for _, obj := range []map[string]any{
		{"kind": "ValidatingAdmissionPolicy", "metadata": map[string]any{"name": "p"}, "spec": map[string]any{
			"matchConstraints": labelled("held", "yes"), "validations": []any{map[string]any{"expression": "false", "message": "held"}}}},
		{"kind": "ValidatingAdmissionPolicyBinding", "metadata": map[string]any{"name": "p"}, "spec": map[string]any{
			"policyName": "p", "validationActions": []any{"Deny"}}},
	} {
		obj["apiVersion"] = "admissionregistration.k8s.io/v1"
		u := &unstructured.Unstructured{Object: obj}
		resource := "validatingadmissionpolicies"
		if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
			resource = "validatingadmissionpolicybindings"
		}
		res, _ := other.Get(e.res("admissionregistration.k8s.io", resource).Kind().GroupResource())
		if _, err := res.Create(e.ctx, "v1", "", u, registry.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // a bound on a failure, not a timing assertion
	for i := 0; ; i++ {
		err := e.createIn("default", configMap(fmt.Sprintf("held%d", i), map[string]string{"held": "yes"}), nil)
		if apierrors.IsInvalid(err) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("create %d: %v; the policy written elsewhere never applied", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The policy metrics count what kube-apiserver's count: each failed
// validation once per action of its binding, one that could not be
// evaluated under Ignore as "allow", an audit annotation that failed as
// "deny"; a validation that passed, nothing.
func TestPolicyMetrics(t *testing.T) {
	e := newEnv(t)
	e.policy("names", map[string]any{"matchConstraints": labelled("m", "names"), "validations": []any{
		map[string]any{"expression": "object.metadata.name.size() < 5"},
		map[string]any{"expression": "true"},
	}})
	e.binding("names-deny", "names", []any{"Deny", "Audit"}, nil)
	e.binding("names-warn", "names", []any{"Warn"}, nil)
	e.policy("ignored", map[string]any{"failurePolicy": "Ignore", "matchConstraints": labelled("m", "ignored"),
		"validations": []any{map[string]any{"expression": "object.data.x == 'y'"}}})
	e.binding("ignored", "ignored", []any{"Deny"}, nil)
	e.policy("annotated", map[string]any{"matchConstraints": labelled("m", "annotated"),
		"auditAnnotations": []any{map[string]any{"key": "k", "valueExpression": "string(object.data.x)"}}})
	e.binding("annotated", "annotated", []any{"Warn"}, nil)

	for _, c := range []struct{ name, label string }{
		{"longname", "names"}, {"abc", "names"}, {"longname2", "names"}, {"i", "ignored"}, {"a", "annotated"},
	} {
		e.createIn("default", configMap(c.name, map[string]string{"m": c.label}), nil)
	}
	got := map[string]uint64{}
	for _, s := range e.w.PolicyMetrics() {
		if len(s.Bounds) != 5 || s.Bounds[0] != 0.0000005 || s.Sum < 0 {
			t.Errorf("series %v: bounds %v, sum %v", s.Labels, s.Bounds, s.Sum)
		}
		got[strings.Join(s.Labels, ",")] = s.Total()
	}
	want := map[string]uint64{
		"enforcement_action,deny,error_type,invalid_error,policy,names,policy_binding,names-deny":    2,
		"enforcement_action,audit,error_type,invalid_error,policy,names,policy_binding,names-deny":   2,
		"enforcement_action,warn,error_type,invalid_error,policy,names,policy_binding,names-warn":    2,
		"enforcement_action,allow,error_type,invalid_error,policy,ignored,policy_binding,ignored":    1,
		"enforcement_action,deny,error_type,invalid_error,policy,annotated,policy_binding,annotated": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series\n%v\nwant\n%v", got, want)
	}
}

// A changed policy applies to the next request (policies are compiled
// again only when they change); a deleted binding stops it.
func TestPolicyChangesApply(t *testing.T) {
	e := newEnv(t)
	e.policy("p", map[string]any{"matchConstraints": labelled("p", "yes"),
		"validations": []any{map[string]any{"expression": "object.metadata.name != 'a'", "message": "not a"}}})
	e.binding("p", "p", []any{"Deny"}, nil)
	policies := e.res("admissionregistration.k8s.io", "validatingadmissionpolicies")
	try := func(name string) error {
		return e.createIn("default", configMap(name, map[string]string{"p": "yes"}), nil)
	}
	refusal(t, try("a"), 422, metav1.StatusReasonInvalid, "a", "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: not a")
	// Another webhook configuration written reloads everything; the
	// policy compiled before still holds.
	e.configure("Validating", "other", map[string]any{"name": "other.example.com", "path": "/allow",
		"objectSelector": map[string]any{"matchLabels": map[string]any{"never": "yes"}}})
	refusal(t, try("a"), 422, metav1.StatusReasonInvalid, "a", "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: not a")
	if _, _, err := policies.Patch(e.ctx, "v1", "", "p", []byte(`{"spec":{"validations":[{"expression":"object.metadata.name != 'b'","message":"not b"}]}}`),
		registry.PatchOptions{Type: types.MergePatchType, WriteOptions: registry.WriteOptions{FieldManager: "test"}}); err != nil {
		t.Fatal(err)
	}
	if err := try("a"); err != nil {
		t.Errorf("a, after the change: %v", err)
	}
	refusal(t, try("b"), 422, metav1.StatusReasonInvalid, "b", "ValidatingAdmissionPolicy 'p' with binding 'p' denied request: not b")
	if _, _, err := e.res("admissionregistration.k8s.io", "validatingadmissionpolicybindings").Delete(e.ctx, "v1", "", "p", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := try("b"); err != nil {
		t.Errorf("b, once unbound: %v", err)
	}
}

// A policy stored without matchConstraints (refused when written here,
// so put in the store directly) is upstream's configuration error, not a
// match of everything.
func TestPolicyWithoutMatchConstraints(t *testing.T) {
	e := newEnv(t)
	k := e.res("admissionregistration.k8s.io", "validatingadmissionpolicies").Kind()
	raw := `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy",` +
		`"metadata":{"name":"raw","uid":"0b5c6a36-7f0e-4b8e-9d8e-2f8f6a1e7c11","creationTimestamp":"2026-11-28T00:00:00Z"},` +
		`"spec":{"failurePolicy":"Fail","validations":[{"expression":"true"}]}}`
	if _, err := e.kvs.Create(e.ctx, k.Prefix()+"raw", []byte(raw)); err != nil {
		t.Fatal(err)
	}
	e.binding("raw", "raw", []any{"Deny"}, nil) // reloads the configurations
	refusal(t, e.createIn("default", configMap("cm", nil), nil), 422, metav1.StatusReasonInvalid, "cm",
		"ValidatingAdmissionPolicy 'raw' denied request: failed to configure policy: policy contained no match constraints, a required field")
}

// The matchCondition metrics count as kube-apiserver v1.37.2's did for
// the same webhooks and policies: the conditions that failed to
// evaluate, and the duration only when some condition was false or
// failed, by name, kind ("webhook", "policy"), type ("admit",
// "validating", and "validate" for policies of both kinds) and
// operation.
func TestMatchConditionMetrics(t *testing.T) {
	e := newEnv(t)
	e.configure("Mutating", "mc-hook", map[string]any{"name": "mc-admit.example.com", "path": "/allow", "failurePolicy": "Ignore",
		"matchConditions": []any{
			map[string]any{"name": "errs", "expression": "object.metadata.labels.foo == 'bar'"},
			map[string]any{"name": "only-x", "expression": "object.metadata.name.startsWith('x')"},
		}})
	e.configure("Validating", "mc-vhook", map[string]any{"name": "mc-validate.example.com", "path": "/allow", "failurePolicy": "Ignore",
		"matchConditions": []any{map[string]any{"name": "only-y", "expression": "object.metadata.name.startsWith('y')"}}})
	e.policy("mc-vap", map[string]any{"failurePolicy": "Ignore",
		"matchConditions": []any{map[string]any{"name": "errs", "expression": "object.metadata.labels.foo == 'bar'"}},
		"validations":     []any{map[string]any{"expression": "true"}}})
	e.binding("mc-vap", "mc-vap", []any{"Deny"}, nil)
	e.mutatingPolicy("mc-map", map[string]any{
		"matchConditions": []any{map[string]any{"name": "only-z", "expression": "object.metadata.name.startsWith('z')"}},
		"mutations":       []any{applyConfiguration("Object{}")}})
	e.mutatingBinding("mc-map", "mc-map", nil)
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{{"xa", nil}, {"xb", map[string]string{"foo": "bar"}}, {"ya", map[string]string{"foo": "baz"}}} {
		if _, err := e.createConfigMap(c.name, c.labels, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ya, err := e.res("", "configmaps").Get(e.ctx, "v1", "default", "ya", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ya.SetLabels(nil)
	if _, err := e.res("", "configmaps").Update(e.ctx, "v1", "default", "ya", ya, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, s := range e.w.ConditionErrors() {
		got["errors "+strings.Join(s.Labels, " ")] = s.Total()
	}
	for _, s := range e.w.ConditionSeconds() {
		got["seconds "+strings.Join(s.Labels, " ")] = s.Total()
	}
	want := map[string]uint64{
		"errors kind policy name mc-vap operation CREATE type validate":                      1,
		"errors kind policy name mc-vap operation UPDATE type validate":                      1,
		"errors kind webhook name mc-admit.example.com operation CREATE type admit":          1,
		"errors kind webhook name mc-admit.example.com operation UPDATE type admit":          1,
		"seconds kind policy name mc-map operation CREATE type validate":                     3,
		"seconds kind policy name mc-map operation UPDATE type validate":                     1,
		"seconds kind policy name mc-vap operation CREATE type validate":                     2,
		"seconds kind policy name mc-vap operation UPDATE type validate":                     1,
		"seconds kind webhook name mc-admit.example.com operation CREATE type admit":         2,
		"seconds kind webhook name mc-admit.example.com operation UPDATE type admit":         1,
		"seconds kind webhook name mc-validate.example.com operation CREATE type validating": 2,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series\n%v\nwant\n%v", got, want)
	}
}

// The Audit action and auditAnnotations annotate the request's audit
// event as kube-apiserver v1.37.2's did for the same policy and request:
// POLICY/KEY with the value (distinct values of the bindings joined),
// and the validation_failure list of the validations that failed.
func TestPolicyAuditAnnotations(t *testing.T) {
	e := newEnv(t)
	e.policy("audit-keys", map[string]any{
		"validations": []any{
			map[string]any{"expression": "true"},
			map[string]any{"expression": "!has(object.data) || size(object.data) <= 1", "message": "too many keys"},
		},
		"auditAnnotations": []any{map[string]any{"key": "keys", "valueExpression": "string(has(object.data) ? size(object.data) : 0)"}},
	})
	e.binding("audit-keys", "audit-keys", []any{"Audit", "Warn"}, nil)
	// A second binding: its failure is listed too, its annotation's
	// value (the same) once.
	e.binding("audit-keys-2", "audit-keys", []any{"Audit"}, nil)
	got := map[string]string{}
	ctx := registry.WithAuditAnnotations(e.ctx, func(k, v string) { got[k] = v })
	obj := withData(configMap("two", nil), map[string]any{"a": "1", "b": "2"})
	if _, err := e.res("", "configmaps").Create(ctx, "v1", "default", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"audit-keys/keys": "2",
		"validation.policy.admission.k8s.io/validation_failure": `[{"message":"too many keys","policy":"audit-keys","binding":"audit-keys","expressionIndex":1,"validationActions":["Audit","Warn"]},` +
			`{"message":"too many keys","policy":"audit-keys","binding":"audit-keys-2","expressionIndex":1,"validationActions":["Audit"]}]`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit annotations\n%v\nwant\n%v", got, want)
	}
	// A request that passes gets the annotation, not the failure.
	clear(got)
	if _, err := e.res("", "configmaps").Create(ctx, "v1", "default", withData(configMap("one", nil), map[string]any{"a": "1"}), registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]string{"audit-keys/keys": "1"}) {
		t.Errorf("audit annotations of a passing request: %v", got)
	}
}
