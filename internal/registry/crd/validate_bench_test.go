package crd

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// BenchmarkValidateStatusUpdate is the check of a write that leaves a
// CRD's spec alone (the controller's status writes, once per CRD; a label
// change), on a CRD of forty fields.
func BenchmarkValidateStatusUpdate(b *testing.B) {
	props := map[string]any{}
	for i := range 40 {
		props[fmt.Sprintf("field%02d", i)] = map[string]any{"type": "string", "description": "A field of the bench's CRD, described as controller-gen describes one."}
	}
	old := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "gizmos.example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": props}}}}}}},
		"status": map[string]any{"storedVersions": []any{"v1"}},
	}}
	next := old.DeepCopy()
	next.Object["status"] = map[string]any{"storedVersions": []any{"v1"},
		"acceptedNames": map[string]any{"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"}}
	b.ReportAllocs()
	for b.Loop() {
		if errs := validateUpdate(next, old); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
