package core_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Every active namespace gets, and keeps, the default ServiceAccount, as
// kube-controller-manager keeps it: made for the namespaces there at
// start and those created later, and made again when deleted. A deleted
// system namespace comes back.
func TestNamespaceDefaults(t *testing.T) {
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
	defer cancel()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	go reg.Run(ctx)
	done := make(chan error, 1)
	go func() { done <- (&core.NamespaceDefaults{Registry: reg}).Run(ctx) }()
	defer func() { cancel(); <-done }()

	res := func(resource string) *registry.Resource {
		r, _ := reg.Get(schema.GroupResource{Resource: resource})
		return r
	}
	accounts, namespaces := res("serviceaccounts"), res("namespaces")
	// kept waits until ns has its default ServiceAccount.
	kept := func(ns string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := accounts.Get(ctx, "v1", ns, "default", metav1.GetOptions{})
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: ServiceAccount %v", ns, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		kept(ns)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "later"}}}
	if _, err := namespaces.Create(ctx, "v1", "", ns, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	kept("later")
	for range 3 {
		if _, _, err := accounts.Delete(ctx, "v1", "later", "default", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		kept("later")
	}
	// A deleted kube-node-lease comes back (once gone: the test finalizes
	// it, as the namespace controller would), with its ServiceAccount.
	if _, _, err := namespaces.Delete(ctx, "v1", "", "kube-node-lease", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone, err := namespaces.Get(ctx, "v1", "", "kube-node-lease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := gone.GetUID()
	unstructured.RemoveNestedField(gone.Object, "spec", "finalizers")
	if _, err := namespaces.Update(ctx, "v1", "", "kube-node-lease", gone, registry.WriteOptions{Subresource: "finalize"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		back, err := namespaces.Get(ctx, "v1", "", "kube-node-lease", metav1.GetOptions{})
		if err == nil && back.GetUID() != uid && back.GetDeletionTimestamp() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-node-lease not made again: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	kept("kube-node-lease")
}
