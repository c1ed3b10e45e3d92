package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The custom resource of the custom-resources scenario: a Widget as
// controller-gen writes an operator's type, with the validations operators
// use (enums, a pattern, int-or-string, a list-type map, a date-time
// format, a CEL rule) and a status subresource.
var (
	crdGVR    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetGVR = schema.GroupVersionResource{Group: "bench.kplane.dev", Version: "v1", Resource: "widgets"}
)

const widgetCRD = `{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.bench.kplane.dev"},
  "spec": {
    "group": "bench.kplane.dev",
    "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
    "versions": [{
      "name": "v1", "served": true, "storage": true,
      "subresources": {"status": {}},
      "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {
          "apiVersion": {"type": "string"},
          "kind": {"type": "string"},
          "metadata": {"type": "object"},
          "spec": {
            "type": "object",
            "required": ["image"],
            "x-kubernetes-validations": [{"rule": "self.minReplicas <= self.replicas", "message": "minReplicas must not exceed replicas"}],
            "properties": {
              "image": {"type": "string", "maxLength": 128, "pattern": "^[a-z0-9./:-]+$"},
              "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 100, "default": 1},
              "minReplicas": {"type": "integer", "format": "int32", "minimum": 0, "default": 0},
              "tier": {"type": "string", "enum": ["frontend", "backend", "cache"], "default": "backend"},
              "maxUnavailable": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true},
              "paused": {"type": "boolean"},
              "selector": {"type": "object", "additionalProperties": {"type": "string"}},
              "ports": {
                "type": "array", "maxItems": 16,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name", "port"], "properties": {
                  "name": {"type": "string", "maxLength": 15},
                  "port": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535},
                  "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"}}}
              },
              "config": {"type": "string", "maxLength": 4096}
            }
          },
          "status": {
            "type": "object",
            "properties": {
              "observedGeneration": {"type": "integer", "format": "int64"},
              "readyReplicas": {"type": "integer", "format": "int32"},
              "phase": {"type": "string", "enum": ["Pending", "Running", "Failed"]},
              "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "required": ["type", "status", "lastTransitionTime"], "properties": {
                  "type": {"type": "string", "maxLength": 316},
                  "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                  "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                  "lastTransitionTime": {"type": "string", "format": "date-time"},
                  "reason": {"type": "string", "maxLength": 1024, "minLength": 1, "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                  "message": {"type": "string", "maxLength": 32768}}}
              }
            }
          }
        }
      }}
    }]
  }
}`

// widgetConfig pads each Widget to about 1 KiB, like the ConfigMaps.
var widgetConfig = strings.Repeat("x", 600)

func widgetName(i int) string { return fmt.Sprintf("widget-%05d", i) }

func newWidget(ns string, i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bench.kplane.dev/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": widgetName(i), "namespace": ns, "labels": map[string]any{"app": "kplane-bench"}},
		"spec": map[string]any{
			"image":          "registry.example.com/widget:1.0",
			"replicas":       int64(3),
			"minReplicas":    int64(1),
			"tier":           "cache",
			"maxUnavailable": "25%",
			"selector":       map[string]any{"app": "widget"},
			"ports":          []any{map[string]any{"name": "http", "port": int64(8080)}, map[string]any{"name": "metrics", "port": int64(9090)}},
			"config":         widgetConfig,
		},
	}}
}

// customResources: a CRD with a controller-gen-shaped schema (created,
// waited for, and deleted at the end), then Workers clients create
// CustomResources Widgets ("cr-create"), then update the status of each
// once from the object their create returned, as a controller does from
// its cache ("cr-status"), then write the same status again from the
// object that update returned, three times, which must change nothing
// ("cr-status-unchanged"), then list them ListRepeat times ("cr-list",
// consistent, JSON through the dynamic client). The creates must come back defaulted, a status
// update must not conflict (each object has one writer), and every
// object must end with its status and a managedFields entry of it.
func (r *runner) customResources(ctx context.Context) ([]Result, error) {
	dc, err := dynamic.NewForConfig(r.cfg)
	if err != nil {
		return nil, err
	}
	cleanup, err := ensureWidgetCRD(ctx, dc)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	widgets := dc.Resource(widgetGVR).Namespace(r.ns)
	n := r.sizes.CustomResources
	created := make([]*unstructured.Unstructured, n)

	s := r.begin()
	lat, err := parallel(ctx, r.sizes.Workers, n, func(ctx context.Context, _, i int) error {
		got, err := widgets.Create(ctx, newWidget(r.ns, i), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "ports")
		if len(ports) != 2 || ports[0].(map[string]any)["protocol"] != "TCP" {
			return fmt.Errorf("%s: ports %v, want the default protocol TCP", widgetName(i), ports)
		}
		created[i] = got
		return nil
	})
	results := []Result{s.end("cr-create", len(lat), lat)}
	results[0].addExtra(map[string]any{"workers": r.sizes.Workers})
	if err != nil {
		return results, err
	}

	var conflicts atomic.Int64
	updated := make([]*unstructured.Unstructured, n)
	now := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
	s = r.begin()
	lat, err = parallel(ctx, r.sizes.Workers, n, func(ctx context.Context, _, i int) error {
		w := created[i].DeepCopy()
		w.Object["status"] = widgetStatus(i, w.GetGeneration(), now)
		got, err := widgets.UpdateStatus(ctx, w, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			conflicts.Add(1) // parallel stops at the first error
		}
		updated[i] = got
		return err
	})
	results = append(results, s.end("cr-status", len(lat), lat))
	results[1].Conflicts = conflicts.Load()
	results[1].addExtra(map[string]any{"workers": r.sizes.Workers})
	if err != nil {
		return results, err
	}
	// cr-status-unchanged: the same status written again from the
	// object the update returned, three times over, as an operator ends
	// each reconcile of an object that did not change with an
	// unconditional status update; nothing changes, so nothing may be
	// written.
	const rounds = 3
	s = r.begin()
	lat, err = parallel(ctx, r.sizes.Workers, rounds*n, func(ctx context.Context, _, j int) error {
		i := j % n
		got, err := widgets.UpdateStatus(ctx, updated[i].DeepCopy(), metav1.UpdateOptions{})
		if err == nil && got.GetResourceVersion() != updated[i].GetResourceVersion() {
			err = fmt.Errorf("%s: a status update that changes nothing wrote it (resourceVersion %s, was %s)", widgetName(i), got.GetResourceVersion(), updated[i].GetResourceVersion())
		}
		return err
	})
	unchanged := s.end("cr-status-unchanged", len(lat), lat)
	unchanged.addExtra(map[string]any{"workers": r.sizes.Workers, "rounds": rounds})
	results = append(results, unchanged)
	if err != nil {
		return results, err
	}
	// cr-list: consistent lists of all the Widgets, as an informer
	// lists them; the last one is checked.
	var list *unstructured.UnstructuredList
	lat = nil
	s = r.begin()
	for range r.sizes.ListRepeat {
		t0 := time.Now()
		if list, err = widgets.List(ctx, metav1.ListOptions{}); err != nil {
			return results, err
		}
		lat = append(lat, time.Since(t0))
	}
	listed := s.end("cr-list", len(lat), lat)
	listed.addExtra(map[string]any{"objects": n})
	results = append(results, listed)
	if len(list.Items) != n {
		return results, fmt.Errorf("%d Widgets listed, %d created", len(list.Items), n)
	}
	for _, w := range list.Items {
		var i int
		fmt.Sscanf(w.GetName(), "widget-%05d", &i)
		want, _ := json.Marshal(widgetStatus(i, w.GetGeneration(), now))
		got, _ := json.Marshal(w.Object["status"])
		if string(got) != string(want) {
			return results, fmt.Errorf("%s: status %s, want %s", w.GetName(), got, want)
		}
		if !slices.ContainsFunc(w.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Subresource == "status" }) {
			return results, fmt.Errorf("%s: no managedFields entry of the status update: %v", w.GetName(), w.GetManagedFields())
		}
	}
	return results, nil
}

func widgetStatus(i int, generation int64, now string) map[string]any {
	return map[string]any{
		"observedGeneration": generation,
		"readyReplicas":      int64(i % 4),
		"phase":              "Running",
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "observedGeneration": generation,
			"lastTransitionTime": now, "reason": "Reconciled", "message": fmt.Sprintf("widget %d is ready", i),
		}},
	}
}

// ensureWidgetCRD creates the Widget CRD (or takes the one a previous run
// left) and waits until Widgets can be listed. cleanup deletes it, and
// with it every Widget.
func ensureWidgetCRD(ctx context.Context, dc dynamic.Interface) (cleanup func(), err error) {
	crd := &unstructured.Unstructured{}
	if err := crd.UnmarshalJSON([]byte(widgetCRD)); err != nil {
		return nil, err
	}
	crds := dc.Resource(crdGVR)
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the Widget CRD: %w", err)
	}
	cleanup = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		crds.Delete(ctx, crd.GetName(), metav1.DeleteOptions{})
	}
	// Established, then served: the first list may 404 until the
	// server's discovery and handlers catch up.
	for {
		_, err := dc.Resource(widgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return cleanup, nil
		}
		if !apierrors.IsNotFound(err) {
			cleanup()
			return nil, fmt.Errorf("waiting for the Widget CRD to be served: %w", err)
		}
		select {
		case <-ctx.Done():
			cleanup()
			return nil, fmt.Errorf("waiting for the Widget CRD to be served: %w", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
