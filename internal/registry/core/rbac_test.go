package core_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// newRegistry serves the core kinds over kvs, with authz (if set)
// answering the reviews and checking RBAC writes, until the test ends.
func newRegistry(t testing.TB, kvs kv.Store, authz *core.RBAC) *registry.Registry {
	t.Helper()
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	kinds := core.Kinds()
	if authz != nil {
		authz.Registry = reg
		kinds = authz.Install(kinds)
	}
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { reg.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return reg
}

func memoryStore(t testing.TB) kv.Store {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	return kvs
}

func rbacResource(t *testing.T, reg *registry.Registry, resource string) *registry.Resource {
	t.Helper()
	r, ok := reg.Get(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: resource})
	if !ok {
		t.Fatalf("%s not served", resource)
	}
	return r
}

// The default roles and bindings are upstream's: the same names, labels,
// annotations, rules, roleRefs and subjects as kube-apiserver v1.37.2's
// (testdata/default-policy-kube-apiserver-v1.37.2.json, read off it).
func TestDefaultPolicyAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/default-policy-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		ClusterRoles, ClusterRoleBindings []map[string]any
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(t, memoryStore(t), nil)
	ctx := context.Background()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	for resource, want := range map[string][]map[string]any{"clusterroles": upstream.ClusterRoles, "clusterrolebindings": upstream.ClusterRoleBindings} {
		list, err := rbacResource(t, reg, resource).List(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(want) {
			t.Errorf("%s: %d, want %d", resource, len(list.Items), len(want))
		}
		for _, w := range want {
			name := w["name"].(string)
			obj, err := rbacResource(t, reg, resource).Get(ctx, "v1", "", name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s %s: %v", resource, name, err)
				continue
			}
			got := map[string]any{"name": name, "labels": obj.Object["metadata"].(map[string]any)["labels"],
				"annotations": obj.Object["metadata"].(map[string]any)["annotations"]}
			for _, f := range []string{"rules", "aggregationRule", "roleRef", "subjects"} {
				if _, ok := w[f]; ok {
					got[f] = obj.Object[f]
				}
			}
			// Through JSON, as the file was read.
			b, _ := json.Marshal(got)
			var g map[string]any
			json.Unmarshal(b, &g)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("%s %s:\n got  %s\n want %v", resource, name, b, w)
			}
		}
	}
}

// Each start gives the default roles and bindings back what they lack,
// as upstream's reconciliation does: what no rule covers comes back,
// broken down (a rule a user widened or added stays, and adds nothing); a
// subject removed comes back; a deleted one is made again; a binding
// whose roleRef was changed (deleted and made anew) is made again with
// upstream's; one annotated rbac.authorization.kubernetes.io/autoupdate
// "false" is left as it is.
func TestDefaultPolicyReconciled(t *testing.T) {
	reg := newRegistry(t, memoryStore(t), nil)
	ctx := context.Background()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	roles, bindings := rbacResource(t, reg, "clusterroles"), rbacResource(t, reg, "clusterrolebindings")
	get := func(r *registry.Resource, name string) *unstructured.Unstructured {
		t.Helper()
		obj, err := r.Get(ctx, "v1", "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return obj
	}
	update := func(r *registry.Resource, obj *unstructured.Unstructured) {
		t.Helper()
		if _, err := r.Update(ctx, "v1", "", obj.GetName(), obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatalf("%s: %v", obj.GetName(), err)
		}
	}
	want := map[string]any{}
	for _, name := range []string{"system:basic-user", "system:discovery"} {
		want[name] = get(roles, name).Object["rules"]
	}
	// A rule removed, a rule narrowed, a rule added, a rule widened, a
	// protected role emptied.
	basic := get(roles, "system:basic-user")
	basic.Object["rules"] = basic.Object["rules"].([]any)[1:]
	update(roles, basic)
	viewer := get(roles, "system:public-info-viewer")
	viewer.Object["rules"] = []any{map[string]any{"verbs": []any{"get"}, "nonResourceURLs": []any{"/readyz", "/version", "/version/"}}}
	update(roles, viewer)
	disc := get(roles, "system:discovery")
	extra := map[string]any{"verbs": []any{"get"}, "nonResourceURLs": []any{"/extra"}}
	disc.Object["rules"] = append(disc.Object["rules"].([]any), extra)
	update(roles, disc)
	monitoring := get(roles, "system:monitoring")
	monitoring.Object["rules"] = []any{map[string]any{"verbs": []any{"*"}, "nonResourceURLs": []any{"*"}},
		map[string]any{"verbs": []any{"get"}, "apiGroups": []any{"*"}, "resources": []any{"nodes/metrics", "pods"}}}
	update(roles, monitoring)
	monitoringVersion := get(roles, "system:monitoring").GetResourceVersion()
	delegator := get(roles, "system:auth-delegator")
	delegator.SetAnnotations(map[string]string{"rbac.authorization.kubernetes.io/autoupdate": "false"})
	delegator.Object["rules"] = []any{map[string]any{"verbs": []any{"get"}, "nonResourceURLs": []any{"/version"}}}
	update(roles, delegator)
	// A subject replaced; a binding deleted; a roleRef changed.
	bu := get(bindings, "system:basic-user")
	bu.Object["subjects"] = []any{map[string]any{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team"}}
	update(bindings, bu)
	if _, _, err := bindings.Delete(ctx, "v1", "", "system:monitoring", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	dd := get(bindings, "system:discovery")
	if _, _, err := bindings.Delete(ctx, "v1", "", "system:discovery", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	dd.Object["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}
	dd.SetResourceVersion("")
	dd.SetUID("")
	if _, err := bindings.Create(ctx, "v1", "", dd, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}

	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	// What kube-apiserver v1.37.2's start made of the same changes to
	// these roles: what is missing broken down, added after the rest.
	rulesJSON := func(name string) string {
		b, _ := json.Marshal(get(roles, name).Object["rules"])
		return string(b)
	}
	for name, want := range map[string]string{
		"system:basic-user": `[{"apiGroups":["authentication.k8s.io"],"resources":["selfsubjectreviews"],"verbs":["create"]},` +
			`{"apiGroups":["authorization.k8s.io"],"resources":["selfsubjectaccessreviews"],"verbs":["create"]},` +
			`{"apiGroups":["authorization.k8s.io"],"resources":["selfsubjectrulesreviews"],"verbs":["create"]}]`,
		"system:public-info-viewer": `[{"nonResourceURLs":["/readyz","/version","/version/"],"verbs":["get"]},` +
			`{"nonResourceURLs":["/healthz"],"verbs":["get"]},{"nonResourceURLs":["/livez"],"verbs":["get"]}]`,
		"system:monitoring":     `[{"nonResourceURLs":["*"],"verbs":["*"]},{"apiGroups":["*"],"resources":["nodes/metrics","pods"],"verbs":["get"]}]`,
		"system:auth-delegator": `[{"nonResourceURLs":["/version"],"verbs":["get"]}]`,
	} {
		if got := rulesJSON(name); got != want {
			t.Errorf("%s: %s\nwant %s", name, got, want)
		}
	}
	if got := get(roles, "system:discovery").Object["rules"]; !reflect.DeepEqual(got, append(want["system:discovery"].([]any), extra)) {
		t.Errorf("system:discovery: %v, want its rule and the one added", got)
	}
	if v := get(roles, "system:monitoring").GetResourceVersion(); v != monitoringVersion {
		t.Errorf("system:monitoring, whose rule covers upstream's, written again: resourceVersion %s, was %s", v, monitoringVersion)
	}
	if got := get(bindings, "system:basic-user").Object["subjects"].([]any); len(got) != 2 || got[0].(map[string]any)["name"] != "team" ||
		got[1].(map[string]any)["name"] != "system:authenticated" {
		t.Errorf("system:basic-user binding: %v, want team and system:authenticated", got)
	}
	get(bindings, "system:monitoring")
	if ref := get(bindings, "system:discovery").Object["roleRef"].(map[string]any); ref["name"] != "system:discovery" {
		t.Errorf("system:discovery binding: roleRef %v, want upstream's", ref)
	}
	// A start with nothing to give back writes nothing.
	before := get(roles, "system:discovery").GetResourceVersion()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if after := get(roles, "system:discovery").GetResourceVersion(); after != before {
		t.Errorf("system:discovery written again: resourceVersion %s, was %s", after, before)
	}
}

// A grant written through another server (another registry on the same
// store, as two kplanes on one etcd) applies to the next request: before
// RBAC refuses, it catches up with every write the store acknowledged.
func TestRBACCatchesUpWithAnotherServersWrites(t *testing.T) {
	kvs := memoryStore(t)
	authz := &core.RBAC{}
	newRegistry(t, kvs, authz)
	there := newRegistry(t, kvs, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := core.Bootstrap(ctx, there); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- authz.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-authz.Synced()

	user := registry.User{Name: "alice", Groups: []string{"system:authenticated"}}
	for i := range 20 {
		name := "r" + string(rune('a'+i))
		attrs := registry.Attributes{User: user, Verb: "get", ResourceRequest: true, Resource: "configmaps", Namespace: "default", Name: name}
		if d, _, _ := authz.Authorize(ctx, attrs); d != registry.NoOpinion {
			t.Fatalf("%s: %v before the grant", name, d)
		}
		role := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"rules":    []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get"}, "resourceNames": []any{name}}}}}
		binding := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
			"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}}}}
		if _, err := rbacResource(t, there, "roles").Create(ctx, "v1", "default", role, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := rbacResource(t, there, "rolebindings").Create(ctx, "v1", "default", binding, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if d, reason, err := authz.Authorize(ctx, attrs); d != registry.Allow {
			t.Fatalf("%s: %v right after the grant was written: %q, %v", name, d, reason, err)
		}
	}
}

// ClusterRoles are aggregated as kube-controller-manager v1.37.2's
// clusterrole-aggregation controller aggregates them
// (testdata/aggregation-kube-controller-manager-v1.37.2.json): admin,
// edit and view gather the default aggregate-to roles and those a user
// adds, each aggregating into the next; a role's selectors (labels and
// expressions) gather in name order, the role itself left out, each rule
// once; the rules are the controller's, by a forced apply; a role
// deleted takes its rules out.
func TestRoleAggregationAsKubeControllerManager(t *testing.T) {
	data, err := os.ReadFile("testdata/aggregation-kube-controller-manager-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Create                   []map[string]any
		Deleted                  []string
		AfterCreate, AfterDelete []map[string]any
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	// With RBAC's escalation checks, which the controller, kplane's own,
	// passes though its user holds no role.
	reg := newRegistry(t, memoryStore(t), &core.RBAC{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- (&core.RoleAggregation{Registry: reg}).Run(ctx) }()
	defer func() { cancel(); <-done }()
	roles := rbacResource(t, reg, "clusterroles")
	for _, obj := range upstream.Create {
		if _, err := roles.Create(ctx, "v1", "", &unstructured.Unstructured{Object: obj}, registry.WriteOptions{FieldManager: "kubectl"}); err != nil {
			t.Fatal(err)
		}
	}
	// aggregated reports whether each role of want has its rules (and,
	// if want lists them, the controller's managedFields entries).
	aggregated := func(want []map[string]any) (bool, string) {
		for _, w := range want {
			obj, err := roles.Get(ctx, "v1", "", w["name"].(string), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := map[string]any{"name": obj.GetName(), "rules": obj.Object["rules"]}
			if m, ok := w["managers"]; ok {
				got["managers"] = m // held to below
			}
			if ms, ok := w["managers"].([]any); ok {
				// "manager:operation:fieldsV1", the fields as JSON.
				var managers, want []any
				for _, m := range obj.GetManagedFields() {
					if m.Manager == "clusterrole-aggregation-controller" {
						var fields any
						json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields)
						managers = append(managers, []any{m.Manager, string(m.Operation), fields})
					}
				}
				for _, m := range ms {
					parts := strings.SplitN(m.(string), ":", 3)
					var fields any
					json.Unmarshal([]byte(parts[2]), &fields)
					want = append(want, []any{parts[0], parts[1], fields})
				}
				if !reflect.DeepEqual(managers, want) {
					return false, fmt.Sprintf("%s: managedFields %v, want %v", w["name"], managers, want)
				}
			}
			b, _ := json.Marshal(got)
			var g map[string]any
			json.Unmarshal(b, &g)
			if !reflect.DeepEqual(g, w) {
				return false, fmt.Sprintf("%s:\n got  %s\n want %v", w["name"], b, w)
			}
		}
		return true, ""
	}
	waitFor := func(what string, want []map[string]any) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok, diff := aggregated(want)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, diff)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("after the creates", upstream.AfterCreate)
	for _, name := range upstream.Deleted {
		if _, _, err := roles.Delete(ctx, "v1", "", name, metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("after the deletes", upstream.AfterDelete)
}

// At start-up, before any controller runs, Sync gives the default
// aggregated roles their rules, through the chain view → edit → admin,
// so the server is ready with them: view's are aggregate-to-view's;
// edit's aggregate-to-edit's then view's; admin's edit's then
// aggregate-to-admin's (the matches in name order), as
// kube-controller-manager converges to. A second Sync writes nothing.
func TestRoleAggregationSyncAtStartUp(t *testing.T) {
	reg := newRegistry(t, memoryStore(t), nil)
	ctx := context.Background()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := (&core.RoleAggregation{Registry: reg}).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	roles := rbacResource(t, reg, "clusterroles")
	rules := func(name string) []any {
		t.Helper()
		obj, err := roles.Get(ctx, "v1", "", name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := obj.Object["rules"].([]any)
		return r
	}
	view := rules("system:aggregate-to-view")
	edit := append(rules("system:aggregate-to-edit"), view...)
	admin := append(slices.Clone(edit), rules("system:aggregate-to-admin")...)
	for name, want := range map[string][]any{"view": view, "edit": edit, "admin": admin} {
		if got := rules(name); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rules, want %d", name, len(got), len(want))
		}
	}
	obj, _ := roles.Get(ctx, "v1", "", "admin", metav1.GetOptions{})
	before := obj.GetResourceVersion()
	if err := (&core.RoleAggregation{Registry: reg}).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if obj, _ := roles.Get(ctx, "v1", "", "admin", metav1.GetOptions{}); obj.GetResourceVersion() != before {
		t.Errorf("admin written again: %s, was %s", obj.GetResourceVersion(), before)
	}
}

// BenchmarkBootstrapRestart is a restart's Bootstrap: the system
// namespaces and the default policy are stored already, so it reads the
// roles and bindings back, finds nothing lacking, and writes nothing.
func BenchmarkBootstrapRestart(b *testing.B) {
	reg := newRegistry(b, memoryStore(b), nil)
	ctx := context.Background()
	if err := core.Bootstrap(ctx, reg); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := core.Bootstrap(ctx, reg); err != nil {
			b.Fatal(err)
		}
	}
}
