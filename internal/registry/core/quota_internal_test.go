package core

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// ResourceQuota writes as upstream's strategies treat them (its creates
// are in the apiserver package's replay of kube-apiserver's answers):
// a write of the object keeps the stored status, a write of /status
// keeps the spec, an unconditional /status write is allowed, scopes are
// fixed, and a status is checked when written through /status.
func TestResourceQuotaWrites(t *testing.T) {
	f := newTokenFixture(t)
	ctx := context.Background()
	quotas, ok := f.reg.Get(schema.GroupResource{Resource: "resourcequotas"})
	if !ok {
		t.Fatal("no resourcequotas")
	}
	obj := func(spec, status map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ResourceQuota",
			"metadata": map[string]any{"name": "q", "namespace": "default"}, "spec": spec}}
		if status != nil {
			o.Object["status"] = status
		}
		return o
	}
	state := func() string {
		cur, err := quotas.Get(ctx, "v1", "default", "q", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(cur.Object["spec"], " ", cur.Object["status"])
	}
	if _, err := quotas.Create(ctx, "v1", "default", obj(map[string]any{"hard": map[string]any{"count/configmaps": "3"}},
		map[string]any{"hard": map[string]any{"count/configmaps": "-1"}}), registry.WriteOptions{}); err != nil {
		t.Fatalf("create with a bad status (dropped): %v", err)
	}
	if got := state(); got != "map[hard:map[count/configmaps:3]] map[]" {
		t.Fatalf("after create: %s", got)
	}
	status := func(s map[string]any, spec map[string]any) error {
		_, err := quotas.Update(ctx, "v1", "default", "q", obj(spec, s), registry.WriteOptions{Subresource: "status"})
		return err
	}
	// No resourceVersion: unconditional, as upstream; the spec sent is
	// ignored.
	if err := status(map[string]any{"hard": map[string]any{"count/configmaps": "3"}, "used": map[string]any{"count/configmaps": "2"}},
		map[string]any{"hard": map[string]any{"count/configmaps": "50"}}); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "map[hard:map[count/configmaps:3]] map[hard:map[count/configmaps:3] used:map[count/configmaps:2]]" {
		t.Fatalf("after a status update: %s", got)
	}
	err := status(map[string]any{"hard": map[string]any{"foo": "1", "count/configmaps": "-1"}, "used": map[string]any{"count/configmaps": "1.5"}}, nil)
	want := `ResourceQuota "q" is invalid: [status.hard[count/configmaps]: Invalid value: "-1": must be greater than or equal to 0, ` +
		`status.hard[foo]: Invalid value: "foo": must be a standard resource type or fully qualified, ` +
		`status.hard[foo]: Invalid value: "foo": must be a standard resource for quota, ` +
		`status.used[count/configmaps]: Invalid value: "1500m": must be an integer]`
	if err == nil || err.Error() != want {
		t.Fatalf("bad status: %v\nwant %s", err, want)
	}
	// A write of the object keeps the status it has.
	if _, err := quotas.Update(ctx, "v1", "default", "q", obj(map[string]any{"hard": map[string]any{"count/configmaps": "4"}},
		map[string]any{"hard": map[string]any{"count/configmaps": "77"}}), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "map[hard:map[count/configmaps:4]] map[hard:map[count/configmaps:3] used:map[count/configmaps:2]]" {
		t.Fatalf("after a spec update: %s", got)
	}
	// Scopes are fixed.
	_, err = quotas.Update(ctx, "v1", "default", "q", obj(map[string]any{"hard": map[string]any{"pods": "4"}, "scopes": []any{"NotTerminating"}}, nil), registry.WriteOptions{})
	if want := `ResourceQuota "q" is invalid: spec.scopes: Invalid value: ["NotTerminating"]: field is immutable`; err == nil || err.Error() != want {
		t.Fatalf("adding a scope: %v", err)
	}
	// A request above its limit is warned about on create.
	if got := quotaWarnings(obj(map[string]any{"hard": map[string]any{"requests.cpu": "2", "limits.cpu": "1", "memory": "2Gi", "limits.memory": "1Gi"}}, nil), nil); fmt.Sprint(got) !=
		"[ResourceQuota requests.cpu (2) should be less than limits.cpu (1) ResourceQuota memory (2Gi) should be less than limits.memory (1Gi)]" {
		t.Fatalf("warnings: %q", got)
	}
}
