package migration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// waitLimit bounds every wait: a failure bound, not a timing assertion.
const waitLimit = 30 * time.Second

var widgets = schema.GroupResource{Group: "example.kplane.dev", Resource: "widgets"}

// widgetKind is a kind with two versions that differ only in name, as a
// CRD without a conversion webhook, storing the first.
func widgetKind(versions ...string) *registry.Kind {
	return &registry.Kind{Group: widgets.Group, Versions: versions, Kind: "Widget", ListKind: "WidgetList",
		Resource: widgets.Resource, Singular: "widget", Namespaced: true}
}

type env struct {
	t     *testing.T
	ctx   context.Context
	reg   *registry.Registry
	kvs   *mvcc.Store
	clock *clock
}

// clock is the controller's, moved on by the test.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// newEnv serves the built-in kinds and Widget (stored as v1) over an
// in-memory store, with the migration controller running.
func newEnv(t *testing.T) *env {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	for _, k := range append(core.Kinds(), widgetKind("v1", "v2")) {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { reg.Run(ctx); done <- struct{}{} }()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, reg: reg, kvs: kvs, clock: &clock{}}
	c := &Controller{Registry: reg, Retry: 5 * time.Millisecond, Now: e.clock.now}
	go func() { c.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return e
}

func (e *env) res(gr schema.GroupResource) *registry.Resource {
	res, ok := e.reg.Get(gr)
	if !ok {
		e.t.Fatalf("%v not served", gr)
	}
	return res
}

func (e *env) widget(name string) {
	e.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": widgets.Group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": int64(1)}}}
	if _, err := e.res(widgets).Create(e.ctx, "v1", "default", obj, registry.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// stored is each widget's stored apiVersion, by name.
func (e *env) stored() string {
	e.t.Helper()
	prefix := "/" + widgets.Group + "/widgets/"
	r, err := e.kvs.Range(e.ctx, prefix, kv.RangeOptions{End: kv.PrefixEnd(prefix)})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, kv := range r.KVs {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(kv.Value); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, obj.GetName()+"="+obj.GetAPIVersion())
	}
	return strings.Join(out, " ")
}

func (e *env) migrate(name string, gr schema.GroupResource) {
	e.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"resource": map[string]any{"group": gr.Group, "resource": gr.Resource}}}}
	if _, err := e.res(migrations).Create(e.ctx, "v1", "", obj, registry.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// conditions is migration name's conditions, as type=status/reason:message.
func (e *env) conditions(name string) (string, *svmv1.StorageVersionMigration) {
	e.t.Helper()
	cur, err := e.res(migrations).Get(e.ctx, "v1", "", name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	svm := core.TypedMigration(cur)
	var out []string
	for _, c := range svm.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s:%s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, "; "), svm
}

func (e *env) waitFor(name, want string) *svmv1.StorageVersionMigration {
	e.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		got, svm := e.conditions(name)
		if got == want {
			return svm
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("migration %s: %s, want %s", name, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

const done = "Running=False/MigrationCompleted:Migration completed; Succeeded=True/StorageVersionMigrationSucceeded:Migration completed"

// A migration rewrites in the storage version every object written
// before it started.
func TestMigrationRewritesOldObjects(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c"} {
		e.widget(n)
	}
	if got := e.stored(); got != "a=example.kplane.dev/v1 b=example.kplane.dev/v1 c=example.kplane.dev/v1" {
		t.Fatalf("stored: %s", got)
	}
	// The storage version becomes v2, as a CRD's would.
	if err := e.reg.Add(widgetKind("v2", "v1")); err != nil {
		t.Fatal(err)
	}
	before, _ := e.res(widgets).Get(e.ctx, "v2", "default", "a", metav1.GetOptions{})
	e.migrate("m", widgets)
	svm := e.waitFor("m", done)
	if got := e.stored(); got != "a=example.kplane.dev/v2 b=example.kplane.dev/v2 c=example.kplane.dev/v2" {
		t.Fatalf("stored after the migration: %s", got)
	}
	if svm.Status.ResourceVersion == "" {
		t.Fatal("no status.resourceVersion")
	}
	after, _ := e.res(widgets).Get(e.ctx, "v2", "default", "a", metav1.GetOptions{})
	if before.GetResourceVersion() == after.GetResourceVersion() || fmt.Sprint(before.Object["spec"]) != fmt.Sprint(after.Object["spec"]) {
		t.Fatalf("before %v, after %v", before.Object, after.Object)
	}
}

// Migrations of one resource run one at a time, the oldest first; a
// resource not served fails its migration after a minute.
func TestMigrationOrderAndFailure(t *testing.T) {
	e := newEnv(t)
	e.widget("a")
	e.migrate("first", widgets)
	e.waitFor("first", done)
	e.migrate("second", widgets)
	e.waitFor("second", done)
	// A resource nobody serves: nothing happens within the minute.
	nothings := schema.GroupResource{Group: "example.kplane.dev", Resource: "nothings"}
	e.migrate("missing", nothings)
	e.waitFor("missing", "Running=True/MigrationRunning:The migration is running")
	e.clock.offset.Store(int64(2 * time.Minute))
	e.waitFor("missing", "Running=False/MigrationCompleted:Migration completed; Failed=True/StorageVersionMigrationFailed:resource does not exist in discovery")
	// A kind never stored cannot be migrated.
	e.migrate("reviews", schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"})
	e.waitFor("reviews", `Running=False/MigrationCompleted:Migration completed; Failed=True/StorageVersionMigrationFailed:resource "authorization.k8s.io/v1, Resource=selfsubjectaccessreviews" does not support discovery operations: [update patch list]`)
	// Built-in resources migrate too.
	e.migrate("configmaps", schema.GroupResource{Resource: "configmaps"})
	e.waitFor("configmaps", done)
}
