package flowcontrol

import (
	"context"
	"slices"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// waitLimit bounds every wait: a failure bound, not a timing assertion.
const waitLimit = 30 * time.Second

// running is a registry with the built-in kinds over an in-memory store,
// and a Controller running on it, until the test ends.
func running(t *testing.T) (context.Context, *Controller, *registry.Resource, *registry.Resource) {
	return runningWith(t, Config{Seats: 600})
}

// runningWith is running, with the Controller's configuration cfg.
func runningWith(t *testing.T, cfg Config) (context.Context, *Controller, *registry.Resource, *registry.Resource) {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	for _, k := range core.Kinds() {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { reg.Run(ctx); done <- struct{}{} }()
	cfg.Registry = reg
	c := New(cfg)
	go func() { c.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	schemas, _ := reg.Get(schemasGR)
	levels, _ := reg.Get(levelsGR)
	return registry.AsController(ctx, registry.APIServerUser), c, schemas, levels
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitLimit)
		}
	}
}

func get(ctx context.Context, t *testing.T, res *registry.Resource, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func dangling(obj *unstructured.Unstructured) (status, reason, message string) {
	var fs flowcontrolv1.FlowSchema
	runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &fs)
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			return string(c.Status), c.Reason, c.Message
		}
	}
	return "", "", ""
}

func admitted(t *testing.T, c *Controller, user string) string {
	t.Helper()
	tk, err := c.Admit(context.Background(), &registry.Attributes{User: registry.User{Name: user, Groups: []string{"system:authenticated"}},
		Verb: "get", ResourceRequest: true, Resource: "configmaps", Namespace: "a"}, "", time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	tk.Done()
	return tk.FlowSchemaUID
}

func create(ctx context.Context, t *testing.T, res *registry.Resource, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(manifest)); err != nil {
		t.Fatal(err)
	}
	out, err := res.Create(ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Run makes the bootstrap objects, classifies by the stored ones (their
// uids in the answers' headers), and writes each flow schema's Dangling
// condition as its priority level comes and goes.
func TestRunFollowsTheConfiguration(t *testing.T) {
	ctx, c, schemas, levels := running(t)
	eventually(t, "the bootstrap objects", func() bool {
		fs, _ := schemas.List(ctx, "v1", "", registry.ListOptions{})
		pl, _ := levels.List(ctx, "v1", "", registry.ListOptions{})
		return fs != nil && pl != nil && len(fs.Items) == 11 && len(pl.Items) == 8
	})
	exempt := get(ctx, t, schemas, "exempt")
	var managers []string
	for _, m := range exempt.GetManagedFields() {
		managers = append(managers, m.Manager)
	}
	if exempt.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey] != "true" || !slices.Contains(managers, producer) {
		t.Fatalf("exempt: annotations %v, managed by %v", exempt.GetAnnotations(), managers)
	}
	eventually(t, "every flow schema's Dangling condition", func() bool {
		fs, _ := schemas.List(ctx, "v1", "", registry.ListOptions{})
		for _, o := range fs.Items {
			if s, r, _ := dangling(&o); s != "False" || r != "Found" {
				return false
			}
		}
		return true
	})
	if _, _, msg := dangling(get(ctx, t, schemas, "global-default")); msg != `This FlowSchema references the PriorityLevelConfiguration object named "global-default" and it exists` {
		t.Fatalf("message %q", msg)
	}
	admin, err := c.Admit(ctx, &registry.Attributes{User: registry.User{Name: "admin", Groups: []string{"system:masters"}}, Verb: "get", Path: "/version"}, "", time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	admin.Done()
	if admin.FlowSchemaUID != string(exempt.GetUID()) || admin.PriorityLevelUID != string(get(ctx, t, levels, "exempt").GetUID()) {
		t.Fatalf("the admin's request named %s and %s", admin.FlowSchemaUID, admin.PriorityLevelUID)
	}

	// A schema whose level is missing dangles, and takes nothing.
	mine := create(ctx, t, schemas, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"mine"},
		"spec":{"priorityLevelConfiguration":{"name":"later"},"matchingPrecedence":50,
		"rules":[{"subjects":[{"kind":"User","user":{"name":"bob"}}],"resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"namespaces":["*"]}]}]}}`)
	eventually(t, "the new schema's Dangling condition", func() bool {
		s, r, _ := dangling(get(ctx, t, schemas, "mine"))
		return s == "True" && r == "NotFound"
	})
	if _, _, msg := dangling(get(ctx, t, schemas, "mine")); msg != `This FlowSchema references the PriorityLevelConfiguration object named "later" but there is no such object` {
		t.Fatalf("message %q", msg)
	}
	if got := admitted(t, c, "bob"); got == string(mine.GetUID()) {
		t.Fatal("a dangling schema took a request")
	}
	create(ctx, t, levels, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"later"},
		"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":5,"limitResponse":{"type":"Reject"}}}}`)
	eventually(t, "the schema found its level", func() bool {
		s, _, _ := dangling(get(ctx, t, schemas, "mine"))
		return s == "False" && admitted(t, c, "bob") == string(mine.GetUID())
	})
	var status *metav1.ManagedFieldsEntry
	for _, m := range get(ctx, t, schemas, "mine").GetManagedFields() {
		if m.Manager == consumer {
			status = &m
		}
	}
	if status == nil || status.Operation != metav1.ManagedFieldsOperationApply || status.Subresource != "status" {
		t.Fatalf("the status write: %+v", status)
	}
}

// ensure puts back what was changed or deleted of the bootstrap
// configuration, as upstream's every minute: always for the mandatory
// objects, for the suggested ones unless their annotation says "false";
// and deletes objects that say "true" and are no longer wanted.
func TestEnsure(t *testing.T) {
	ctx, c, schemas, levels := running(t)
	eventually(t, "the bootstrap objects", func() bool {
		_, err := schemas.Get(ctx, "v1", "", "catch-all", metav1.GetOptions{})
		return err == nil
	})
	eventually(t, "the bootstrap levels", func() bool {
		pl, _ := levels.List(ctx, "v1", "", registry.ListOptions{})
		return pl != nil && len(pl.Items) == 8
	})
	shares := func(name string) int64 {
		v, _, _ := unstructured.NestedInt64(get(ctx, t, levels, name).Object, "spec", "limited", "nominalConcurrencyShares")
		return v
	}
	setShares := func(name string, n int64, annotation string) {
		obj := get(ctx, t, levels, name)
		unstructured.SetNestedField(obj.Object, n, "spec", "limited", "nominalConcurrencyShares")
		if annotation != "" {
			obj.SetAnnotations(map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: annotation})
		}
		if _, err := levels.Update(ctx, "v1", "", name, obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	setShares("workload-low", 7, "")
	setShares("global-default", 7, "false")
	if _, _, err := schemas.Delete(ctx, "v1", "", "catch-all", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(ctx, t, levels, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"stale","annotations":{"apf.kubernetes.io/autoupdate-spec":"true"}},
		"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}}`)
	create(ctx, t, levels, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"kept","annotations":{"apf.kubernetes.io/autoupdate-spec":"false"}},
		"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}}`)
	if err := c.ensure(ctx, schemas, levels); err != nil {
		t.Fatal(err)
	}
	if n := shares("workload-low"); n != 100 {
		t.Errorf("workload-low's shares %d after ensure, want 100 back", n)
	}
	if n := shares("global-default"); n != 7 {
		t.Errorf("global-default, autoupdate-spec false: shares %d, want the user's 7", n)
	}
	if _, err := schemas.Get(ctx, "v1", "", "catch-all", metav1.GetOptions{}); err != nil {
		t.Errorf("the mandatory catch-all schema: %v", err)
	}
	if _, err := levels.Get(ctx, "v1", "", "stale", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unwanted level with autoupdate-spec true: %v, want deleted", err)
	}
	if _, err := levels.Get(ctx, "v1", "", "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("a level with autoupdate-spec false: %v", err)
	}
	// A suggested object without the annotation, changed since it was
	// made (generation 2), is the user's: the annotation says so after.
	obj := get(ctx, t, levels, "workload-high")
	obj.SetAnnotations(nil)
	unstructured.SetNestedField(obj.Object, int64(9), "spec", "limited", "nominalConcurrencyShares")
	if _, err := levels.Update(ctx, "v1", "", "workload-high", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := c.ensure(ctx, schemas, levels); err != nil {
		t.Fatal(err)
	}
	if got := get(ctx, t, levels, "workload-high"); shares("workload-high") != 9 || got.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey] != "false" {
		t.Errorf("workload-high changed without the annotation: shares %d, annotations %v", shares("workload-high"), got.GetAnnotations())
	}
}

// With priority and fairness off, the bootstrap objects are kept all the
// same, as upstream's storage of the kinds keeps them; no condition is
// written.
func TestObjectsOnly(t *testing.T) {
	ctx, c, schemas, levels := runningWith(t, Config{Seats: 600, ObjectsOnly: true})
	select {
	case <-c.Synced():
	case <-time.After(waitLimit):
		t.Fatal("not synced")
	}
	fs, err := schemas.List(ctx, "v1", "", registry.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := levels.List(ctx, "v1", "", registry.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs.Items) != 11 || len(pl.Items) != 8 {
		t.Fatalf("%d flow schemas, %d levels", len(fs.Items), len(pl.Items))
	}
	for _, o := range fs.Items {
		if s, _, _ := dangling(&o); s != "" {
			t.Errorf("%s: a condition written with priority and fairness off", o.GetName())
		}
	}
	// The stored objects are not followed: the classifier still holds
	// the configuration it was made with, whose objects have no uids.
	if uid := admitted(t, c, "alice"); uid != "" {
		t.Errorf("objects only, a request was classified by stored schema %s", uid)
	}
}
