package webhook_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
)

// mutatingPolicy stores a MutatingAdmissionPolicy named name with spec,
// its matchConstraints defaulting to creates and updates of core
// configmaps and its reinvocationPolicy to Never.
func (e *env) mutatingPolicy(name string, spec map[string]any) {
	e.t.Helper()
	if spec["matchConstraints"] == nil {
		spec["matchConstraints"] = map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"configmaps"},
		}}}
	}
	if spec["reinvocationPolicy"] == nil {
		spec["reinvocationPolicy"] = "Never"
	}
	e.storeAdmission("mutatingadmissionpolicies", "MutatingAdmissionPolicy", name, spec)
}

// mutatingBinding stores a MutatingAdmissionPolicyBinding of policy
// with the rest of spec.
func (e *env) mutatingBinding(name, policy string, spec map[string]any) {
	e.t.Helper()
	if spec == nil {
		spec = map[string]any{}
	}
	spec["policyName"] = policy
	e.storeAdmission("mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", name, spec)
}

func applyConfiguration(expression string) map[string]any {
	return map[string]any{"patchType": "ApplyConfiguration", "applyConfiguration": map[string]any{"expression": expression}}
}

func jsonPatch(expression string) map[string]any {
	return map[string]any{"patchType": "JSONPatch", "jsonPatch": map[string]any{"expression": expression}}
}

// policyRefusal checks that err is the refusal of mutating policies as
// kube-apiserver v1.37.2 gave it: 403, reason, and the causes in order,
// the first one the message.
func policyRefusal(t *testing.T, err error, reason metav1.StatusReason, resource, name string, causes ...string) {
	t.Helper()
	var st *apierrors.StatusError
	if !errors.As(err, &st) {
		t.Fatalf("got %v, want a refusal", err)
	}
	s := st.ErrStatus
	var got []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			got = append(got, c.Message)
		}
	}
	if s.Code != 403 || s.Reason != reason || s.Message != causes[0] || s.Details == nil || s.Details.Name != name ||
		s.Details.Kind != resource || !slices.Equal(got, causes) {
		t.Errorf("got %d %s %q %+v\nwant 403 %s %q causes %q", s.Code, s.Reason, s.Message, s.Details, reason, causes[0], causes)
	}
}

// The policies of /tmp/map/setup.yaml, requests and answers as
// kube-apiserver v1.37.2 gave them.
func TestMutatingPolicyPatchesAsKubeAPIServer(t *testing.T) {
	e := newEnv(t)
	e.namespace("m1", map[string]string{"env": "m"})
	e.mutatingPolicy("m-label", map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"configmaps"},
		}}},
		"matchConditions": []any{map[string]any{"name": "not-skip", "expression": "!object.metadata.name.startsWith('skip')"}},
		"variables":       []any{map[string]any{"name": "who", "expression": "request.userInfo.username"}},
		"mutations": []any{
			applyConfiguration("Object{metadata: Object.metadata{labels: {'mutated': 'yes', 'len': string(size(object.metadata.name))}}}"),
			jsonPatch("has(object.data) ? [JSONPatch{op: 'add', path: '/data/' + jsonpatch.escapeKey('by.user'), value: variables.who}] : []"),
		},
	})
	e.mutatingBinding("m-label-b", "m-label", map[string]any{
		"matchResources": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "m"}}},
	})
	e.mutatingPolicy("m-fail", map[string]any{
		"matchConditions": []any{map[string]any{"name": "fail-only", "expression": "object.metadata.name.startsWith('fail')"}},
		"mutations": []any{
			applyConfiguration("Object{metadata: Object.spec{labels: {'a': 'b'}}}"),
			jsonPatch("[JSONPatch{op: 'replace', path: '/nope/x', value: 1}]"),
			jsonPatch("[JSONPatch{op: 'test', path: '/metadata/name', value: 'zzz'}, JSONPatch{op: 'add', path: '/metadata/labels/never', value: 'x'}]"),
			applyConfiguration("Object{data: {'after': 'errors'}}"),
			applyConfiguration("Object{data: {'x': string(1/0)}}"),
		},
	})
	e.mutatingBinding("m-fail-b", "m-fail", nil)
	e.mutatingPolicy("m-ignore", map[string]any{
		"failurePolicy":   "Ignore",
		"matchConditions": []any{map[string]any{"name": "ign", "expression": "object.metadata.name.startsWith('ign')"}},
		"mutations": []any{
			jsonPatch("[JSONPatch{op: 'replace', path: '/nope/x', value: 1}]"),
			jsonPatch("[JSONPatch{op: 'add', path: '/metadata/labels', value: {'ignored': 'ok'}}]"),
		},
	})
	e.mutatingBinding("m-ignore-b", "m-ignore", nil)

	create := func(ns, name string, labels map[string]string, data bool, opts registry.WriteOptions) (*unstructured.Unstructured, error) {
		obj := configMap(name, labels)
		if !data {
			delete(obj.Object, "data")
		}
		opts.FieldManager = "test"
		return e.res("", "configmaps").Create(e.ctx, "v1", ns, obj, opts)
	}
	check := func(obj *unstructured.Unstructured, err error, labels, data map[string]string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		gotData, _, _ := unstructured.NestedStringMap(obj.Object, "data")
		if !maps.Equal(obj.GetLabels(), labels) || !maps.Equal(gotData, data) {
			t.Errorf("%s: labels %v data %v, want %v and %v", obj.GetName(), obj.GetLabels(), gotData, labels, data)
		}
	}
	obj, err := create("m1", "plain", nil, true, registry.WriteOptions{})
	check(obj, err, map[string]string{"len": "5", "mutated": "yes"}, map[string]string{"k": "v", "by.user": "alice"})
	obj, err = create("m1", "nodata2", map[string]string{"keep": "me"}, false, registry.WriteOptions{})
	check(obj, err, map[string]string{"keep": "me", "len": "7", "mutated": "yes"}, nil)
	obj, err = create("m1", "skip-me", nil, true, registry.WriteOptions{})
	check(obj, err, nil, map[string]string{"k": "v"})
	obj, err = create("default", "other-ns", nil, true, registry.WriteOptions{})
	check(obj, err, nil, map[string]string{"k": "v"})
	// m-ignore's failed mutation is dropped, its next one applies (a
	// JSON Patch add replacing the labels), then m-label's merge.
	obj, err = create("m1", "ign-y", nil, false, registry.WriteOptions{})
	check(obj, err, map[string]string{"ignored": "ok", "len": "5", "mutated": "yes"}, nil)

	_, err = create("m1", "failing", nil, true, registry.WriteOptions{})
	policyRefusal(t, err, metav1.StatusReasonInvalid, "configmaps", "failing",
		`policy 'm-fail' with binding 'm-fail-b' denied request: type mismatch: unexpected type name "Object.spec", expected "Object.metadata", which matches field name path from root Object type`,
		`policy 'm-fail' with binding 'm-fail-b' denied request: JSON Patch: replace operation does not apply: doc is missing path: /nope/x: missing value`,
		`policy 'm-fail' with binding 'm-fail-b' denied request: expression 'Object{data: {'x': string(1/0)}}' resulted in error: division by zero`)

	_, err = create("m1", "gen-", nil, true, registry.WriteOptions{DryRun: true})
	policyRefusal(t, err, metav1.StatusReasonInvalid, "configmaps", "gen-",
		`policy 'm-fail' with binding 'm-fail-b' denied request: expression 'object.metadata.name.startsWith('fail')' resulted in error: no such key: name`,
		`policy 'm-label' with binding 'm-label-b' denied request: expression '!object.metadata.name.startsWith('skip')' resulted in error: no such key: name`)
}

// An apply configuration merges by the resource's schema (a set merges,
// an atomic list or struct may not be set); a JSON Patch is applied as
// JSON, and one that leaves the object unfit for its type is an internal
// error. The policy of /tmp/map/setup2.yaml; kube-apiserver v1.37.2's
// answers.
func TestMutatingPolicyMergesBySchema(t *testing.T) {
	e := newEnv(t)
	e.namespace("m2", nil)
	e.mutatingPolicy("m-schema", map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"configmaps", "serviceaccounts"},
		}}},
		"mutations": []any{
			applyConfiguration(`
object.metadata.name == 'fin' ? Object{metadata: Object.metadata{finalizers: ['example.com/b']}} :
object.metadata.name == 'owner' ? Object{metadata: Object.metadata{ownerReferences: [Object.metadata.ownerReferences{apiVersion: 'v1', kind: 'X', name: 'n', uid: 'u'}]}} :
object.metadata.name == 'badtype' ? Object{data: {'a': 1}} :
object.metadata.name == 'pull' ? Object{imagePullSecrets: [Object.imagePullSecrets{name: 'p'}]} :
object.metadata.name == 'sec' ? Object{secrets: [Object.secrets{name: 's'}]} :
object.metadata.name == 'unknown' ? Object{spec: Object.spec{x: 1}} :
object.metadata.name == 'kindset' ? Object{kind: 'Other', metadata: Object.metadata{labels: {'k': 'v'}}} :
object.metadata.name == 'nulls' ? Object{metadata: Object.metadata{labels: null}} :
Object{}`),
			jsonPatch(`
object.metadata.name == 'jbad' ? [JSONPatch{op: 'replace', path: '/data/k', value: 1}] :
object.metadata.name == 'jobj' ? [JSONPatch{op: 'add', path: '/metadata/labels', value: Object.metadata.labels{a: 'b'}}] :
object.metadata.name == 'jfrom' ? [JSONPatch{op: 'copy', from: '/data/k', path: '/data/k2'}, JSONPatch{op: 'move', from: '/data/k2', path: '/data/k3'}] :
object.metadata.name == 'jtime' ? [JSONPatch{op: 'add', path: '/data/t', value: timestamp('2020-01-01T00:00:00Z')}] :
object.metadata.name == 'jbadop' ? [JSONPatch{op: 'frob', path: '/data/t', value: 'x'}] :
[]`),
		},
	})
	e.mutatingBinding("m-schema-b", "m-schema", nil)
	create := func(resource, name string, finalizers ...any) (*unstructured.Unstructured, error) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "metadata": map[string]any{"name": name}}}
		if resource == "configmaps" {
			obj.Object["kind"], obj.Object["data"] = "ConfigMap", map[string]any{"k": "v"}
		} else {
			obj.Object["kind"] = "ServiceAccount"
		}
		if len(finalizers) > 0 {
			obj.SetFinalizers([]string{finalizers[0].(string)})
		}
		return e.res("", resource).Create(e.ctx, "v1", "m2", obj, registry.WriteOptions{FieldManager: "test"})
	}
	check := func(name string, want func(*unstructured.Unstructured) bool, finalizers ...any) {
		t.Helper()
		obj, err := create("configmaps", name, finalizers...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !want(obj) {
			t.Errorf("%s: got %v", name, obj.Object)
		}
	}
	data := func(obj *unstructured.Unstructured) map[string]string {
		d, _, _ := unstructured.NestedStringMap(obj.Object, "data")
		return d
	}
	check("fin", func(o *unstructured.Unstructured) bool {
		return slices.Equal(o.GetFinalizers(), []string{"example.com/a", "example.com/b"})
	}, "example.com/a")
	check("kindset", func(o *unstructured.Unstructured) bool {
		return o.GetKind() == "ConfigMap" && o.GetLabels()["k"] == "v"
	})
	check("jobj", func(o *unstructured.Unstructured) bool { return maps.Equal(o.GetLabels(), map[string]string{"a": "b"}) })
	check("jfrom", func(o *unstructured.Unstructured) bool {
		return maps.Equal(data(o), map[string]string{"k": "v", "k3": "v"})
	})
	check("jtime", func(o *unstructured.Unstructured) bool {
		return maps.Equal(data(o), map[string]string{"k": "v", "t": "2020-01-01T00:00:00Z"})
	})

	refusals := []struct{ resource, name, message string }{
		{"configmaps", "owner", "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .metadata.ownerReferences[0]"},
		{"configmaps", "badtype", "error applying patch: failed to convert patch object to typed object: .data.a: expected string, got &value.valueUnstructured{Value:1}"},
		{"configmaps", "unknown", "error applying patch: failed to convert patch object to typed object: .spec: field not declared in schema"},
		{"configmaps", "nulls", "error applying patch: failed to convert patch object to typed object: .metadata.labels: expected map, got &{NULL_VALUE}"},
		{"configmaps", "jbadop", "JSON Patch: Unexpected kind: frob"},
		{"serviceaccounts", "pull", "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .imagePullSecrets, .imagePullSecrets[0]"},
		{"serviceaccounts", "sec", "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .secrets[0]"},
	}
	for _, r := range refusals {
		_, err := create(r.resource, r.name)
		policyRefusal(t, err, metav1.StatusReasonInvalid, r.resource, r.name, "policy 'm-schema' with binding 'm-schema-b' denied request: "+r.message)
	}
	_, err := create("configmaps", "jbad")
	if want := "Internal error occurred: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"; !apierrors.IsInternalError(err) || err.Error() != want {
		t.Errorf("a JSON Patch giving data a number: %v, want %q", err, want)
	}
}

func TestMutatingPolicyParams(t *testing.T) {
	e := newEnv(t)
	e.namespace("m1", nil)
	params := configMap("params", nil)
	params.Object["data"] = map[string]any{"suffix": "-p"}
	if _, err := e.res("", "configmaps").Create(e.ctx, "v1", "m1", params, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	e.mutatingPolicy("m-params", map[string]any{
		"paramKind": map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"secrets"},
		}}},
		"mutations": []any{
			applyConfiguration("Object{metadata: Object.metadata{annotations: {'p': string(params.data.suffix), 'op': request.operation}}}"),
			// The second mutation sees the first one's patch.
			jsonPatch("[JSONPatch{op: 'add', path: '/metadata/annotations/second', value: object.metadata.annotations.p + '2'}]"),
		},
		"reinvocationPolicy": "IfNeeded",
	})
	e.mutatingBinding("m-params-b", "m-params", map[string]any{
		"paramRef": map[string]any{"name": "params", "parameterNotFoundAction": "Deny"},
	})
	secrets := e.res("", "secrets")
	secret := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name}}}
	}
	annotations := map[string]string{"op": "CREATE", "p": "-p", "second": "-p2"}
	obj, err := secrets.Create(e.ctx, "v1", "m1", secret("s3"), registry.WriteOptions{FieldManager: "test"})
	if err != nil || !maps.Equal(obj.GetAnnotations(), annotations) {
		t.Fatalf("create: %v, annotations %v, want %v", err, obj.GetAnnotations(), annotations)
	}
	obj, err = secrets.Update(e.ctx, "v1", "m1", "s3", secret("s3"), registry.WriteOptions{FieldManager: "test"})
	if annotations["op"] = "UPDATE"; err != nil || !maps.Equal(obj.GetAnnotations(), annotations) {
		t.Fatalf("update: %v, annotations %v, want %v", err, obj.GetAnnotations(), annotations)
	}
	_, err = secrets.Create(e.ctx, "v1", "default", secret("s4"), registry.WriteOptions{FieldManager: "test"})
	policyRefusal(t, err, metav1.StatusReasonForbidden, "secrets", "s4",
		"policy 'm-params' with binding 'm-params-b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")

	// A changed parameter applies to the next request.
	params.Object["data"] = map[string]any{"suffix": "-q"}
	if _, err := e.res("", "configmaps").Update(e.ctx, "v1", "m1", "params", params, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	obj, err = secrets.Create(e.ctx, "v1", "m1", secret("s5"), registry.WriteOptions{FieldManager: "test"})
	if want := map[string]string{"op": "CREATE", "p": "-q", "second": "-q2"}; err != nil || !maps.Equal(obj.GetAnnotations(), want) {
		t.Fatalf("after the parameter changed: %v, annotations %v, want %v", err, obj.GetAnnotations(), want)
	}
}

// Policies run before the mutating webhooks; when a webhook changes the
// object after a policy whose reinvocationPolicy is IfNeeded, the policy
// runs again, and a webhook with IfNeeded runs again when that changes
// the object once more.
func TestMutatingPolicyReinvocation(t *testing.T) {
	for _, reinvoke := range []string{"Never", "IfNeeded"} {
		t.Run(reinvoke, func(t *testing.T) {
			e := newEnv(t)
			e.mutatingPolicy("saw-webhook", map[string]any{
				"mutations": []any{applyConfiguration(
					"Object{metadata: Object.metadata{labels: {'saw-first': string(has(object.metadata.labels) && 'first' in object.metadata.labels)}}}")},
				"reinvocationPolicy": reinvoke,
			})
			e.mutatingBinding("saw-webhook", "saw-webhook", nil)
			e.configure("Mutating", "first", map[string]any{"name": "first.example.com", "path": "/label-first", "reinvocationPolicy": "IfNeeded"})
			obj, err := e.createConfigMap("cm", nil, registry.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			saw, calls := "false", 1
			if reinvoke == "IfNeeded" {
				// The policy ran again after the webhook, and changed
				// the object: the webhook ran again too.
				saw, calls = "true", 2
			}
			if l := obj.GetLabels(); l["first"] != "yes" || l["saw-first"] != saw {
				t.Errorf("labels %v, want first=yes saw-first=%s", l, saw)
			}
			revs := e.srv.got("/label-first")
			if len(revs) != calls {
				t.Fatalf("webhook called %d times, want %d", len(revs), calls)
			}
			// The webhook saw the policy's patch.
			if l := decode(t, revs[0].Request.Object.Raw).GetLabels(); l["saw-first"] != "false" {
				t.Errorf("the webhook saw labels %v, want the policy's", l)
			}
		})
	}
}

func TestMutatingPolicyMetrics(t *testing.T) {
	e := newEnv(t)
	e.mutatingPolicy("m", map[string]any{
		"mutations": []any{
			applyConfiguration("Object{metadata: Object.metadata{labels: {'a': 'b'}}}"),
			jsonPatch("object.metadata.name == 'bad' ? [JSONPatch{op: 'remove', path: '/nope'}] : []"),
		},
	})
	e.mutatingBinding("m-b", "m", nil)
	if _, err := e.createConfigMap("good", nil, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.createConfigMap("bad", nil, registry.WriteOptions{}); err == nil {
		t.Fatal("a failing mutation under Fail did not refuse the create")
	}
	got := map[string]uint64{}
	for _, s := range e.w.MutationMetrics() {
		got[strings.Join(s.Labels, " ")] = s.Total()
	}
	want := map[string]uint64{
		"error_type no_error policy m policy_binding m-b":      3,
		"error_type invalid_error policy m policy_binding m-b": 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
}

// Each mutation's result is defaulted as a request body is before the
// next mutation sees it, as upstream defaults its typed object.
func TestMutatingPolicyDefaultsBetweenMutations(t *testing.T) {
	e := newEnv(t)
	e.mutatingPolicy("m", map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"secrets"},
		}}},
		"mutations": []any{
			jsonPatch("[JSONPatch{op: 'add', path: '/type', value: ''}]"),
			applyConfiguration("Object{metadata: Object.metadata{labels: {'type': object.type}}}"),
		},
	})
	e.mutatingBinding("m-b", "m", nil)
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s"}}}
	obj, err := e.res("", "secrets").Create(e.ctx, "v1", "default", secret, registry.WriteOptions{FieldManager: "test"})
	if err != nil {
		t.Fatalf("%v: want the type defaulted again before the second mutation", err)
	}
	if l := obj.GetLabels(); l["type"] != "Opaque" {
		t.Errorf("labels %v: want the type defaulted again before the second mutation", l)
	}
}

// Upstream reinvokes a policy with reinvocationPolicy IfNeeded whose
// mutations applied, even when nothing changed the object after it
// (its plugin marks the object dirty on any applied mutation): the
// mutation runs twice for one create, as kube-apiserver v1.37.2's
// metrics showed. With Never it runs once.
func TestMutatingPolicyReinvokedAfterItsOwnMutation(t *testing.T) {
	for reinvoke, want := range map[string]uint64{"Never": 1, "IfNeeded": 2} {
		e := newEnv(t)
		e.mutatingPolicy("p", map[string]any{
			"mutations":          []any{applyConfiguration("Object{metadata: Object.metadata{labels: {'a': 'b'}}}")},
			"reinvocationPolicy": reinvoke,
		})
		e.mutatingBinding("p", "p", nil)
		if _, err := e.createConfigMap("cm", nil, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		var got uint64
		for _, s := range e.w.MutationMetrics() {
			got += s.Total()
		}
		if got != want {
			t.Errorf("reinvocationPolicy %s: the mutation ran %d times, want %d", reinvoke, got, want)
		}
	}
}

// A mutating policy written by another server on the same store applies
// once its watch event arrives.
func TestMutatingPoliciesWrittenElsewhere(t *testing.T) {
	e := newEnv(t)
	other := e.elsewhere()
	for resource, obj := range map[string]map[string]any{
		"mutatingadmissionpolicies": {"kind": "MutatingAdmissionPolicy", "metadata": map[string]any{"name": "p"}, "spec": map[string]any{
			"matchConstraints":   labelled("held", "yes"),
			"mutations":          []any{applyConfiguration("Object{metadata: Object.metadata{labels: {'mutated': 'yes'}}}")},
			"reinvocationPolicy": "Never",
		}},
		"mutatingadmissionpolicybindings": {"kind": "MutatingAdmissionPolicyBinding", "metadata": map[string]any{"name": "p"},
			"spec": map[string]any{"policyName": "p"}},
	} {
		obj["apiVersion"] = "admissionregistration.k8s.io/v1"
		res, _ := other.Get(e.res("admissionregistration.k8s.io", resource).Kind().GroupResource())
		if _, err := res.Create(e.ctx, "v1", "", &unstructured.Unstructured{Object: obj}, registry.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second) // a bound on a failure, not a timing assertion
	for i := 0; ; i++ {
		obj, err := e.createConfigMap(fmt.Sprintf("held%d", i), map[string]string{"held": "yes"}, registry.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetLabels()["mutated"] == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the policy written elsewhere never applied")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A mutating policy whose rule names another version of a kind with a
// conversion webhook (matchPolicy Equivalent, the default) sees and
// patches the object in that version; the result is converted back to
// the request's version.
func TestMutatingPolicyPatchesInItsVersion(t *testing.T) {
	c := newConverter(t)
	e := newEnv(t, c.widgetKind("/convert", "v1"))
	e.mutatingPolicy("widgets-v1", map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{"conv.example.com"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"widgets"},
		}}},
		"mutations": []any{jsonPatch(
			"object.apiVersion == 'conv.example.com/v1' ? [JSONPatch{op: 'replace', path: '/spec/image', value: object.spec.image + '-patched'}] : []")},
	})
	e.mutatingBinding("widgets-v1", "widgets-v1", nil)
	// A later policy of the request's version sees the object back in it.
	e.mutatingPolicy("x-widgets-v2", map[string]any{
		"matchConstraints": map[string]any{"matchPolicy": "Exact", "resourceRules": []any{map[string]any{
			"apiGroups": []any{"conv.example.com"}, "apiVersions": []any{"v2"}, "operations": []any{"CREATE"}, "resources": []any{"widgets"},
		}}},
		"mutations": []any{applyConfiguration(
			"Object{metadata: Object.metadata{labels: {'seen': object.apiVersion == 'conv.example.com/v2' && object.spec.template.image == 'nginx:1-patched' ? 'v2-patched' : 'other'}}}")},
	})
	e.mutatingBinding("x-widgets-v2", "x-widgets-v2", nil)
	created, err := e.res("conv.example.com", "widgets").Create(e.ctx, "v2", "default", widget("v2", "a", "nginx:1"), registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetAPIVersion() != "conv.example.com/v2" || image(created) != "nginx:1-patched" || created.GetLabels()["seen"] != "v2-patched" {
		t.Errorf("created %v, want a v2 Widget patched in v1, then seen in v2", created.Object)
	}
}
