package apiserver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A custom resource's /scale over replicas the object may lack (no
// default in the schema), as apiextensions-apiserver serves it: reading
// such a Scale is an internal error, a write through /scale that leaves
// the replicas unset is refused, and an apply that gives up replicas its
// manager owned writes 0, the Scale's int32 having no "unset"; an apply's
// conflicts are in the Scale's terms.
func TestScaleOfReplicasThatMayBeMissing(t *testing.T) {
	_, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"dials.test.kplane.dev"},
"spec":{"group":"test.kplane.dev","scope":"Namespaced","names":{"plural":"dials","singular":"dial","kind":"Dial","listKind":"DialList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer"},"note":{"type":"string"}}},
"status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}}]}}`)
	const path = "/apis/test.kplane.dev/v1/namespaces/default/dials"
	send := func(method, path, ctype, body string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	expect := func(w *httptest.ResponseRecorder, code int, message string) {
		t.Helper()
		if w.Code != code || !strings.Contains(w.Body.String(), message) {
			t.Errorf("%d %s\nwant %d and %q", w.Code, w.Body, code, message)
		}
	}
	replicas := func() any {
		t.Helper()
		w := send(http.MethodGet, path+"/d", "", "")
		var obj struct {
			Spec map[string]any `json:"spec"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &obj); w.Code != http.StatusOK || err != nil {
			t.Fatalf("GET: %d %s", w.Code, w.Body)
		}
		v, ok := obj.Spec["replicas"]
		if !ok {
			return "absent"
		}
		return v
	}
	const apply = "application/apply-patch+yaml"
	expect(send(http.MethodPost, path, "application/json", `{"apiVersion":"test.kplane.dev/v1","kind":"Dial","metadata":{"name":"d"},"spec":{"note":"n"}}`), http.StatusCreated, "")

	expect(send(http.MethodGet, path+"/d/scale", "", ""), http.StatusInternalServerError,
		`Internal error occurred: the spec replicas field \".spec.replicas\" does not exist`)
	const empty = `the spec replicas field \".spec.replicas\" cannot be empty`
	expect(send(http.MethodPatch, path+"/d/scale", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`), http.StatusBadRequest, empty)
	expect(send(http.MethodPatch, path+"/d/scale?fieldManager=auto", apply, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\n"), http.StatusBadRequest, empty)
	if got := replicas(); got != "absent" {
		t.Errorf("replicas after the refused writes: %v", got)
	}

	expect(send(http.MethodPatch, path+"/d/scale", "application/merge-patch+json", `{"spec":{"replicas":2}}`), http.StatusOK, `"replicas":2`)
	expect(send(http.MethodPatch, path+"/d/scale?fieldManager=auto&force=true", apply, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\nspec:\n  replicas: 3\n"), http.StatusOK, `"replicas":3`)
	if got := replicas(); got != float64(3) {
		t.Errorf("replicas after the apply of 3: %v", got)
	}
	// auto owns the replicas; its next configuration leaves them out.
	w := send(http.MethodPatch, path+"/d/scale?fieldManager=auto", apply, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\n")
	expect(w, http.StatusOK, `"kind":"Scale"`)
	if strings.Contains(w.Body.String(), `"replicas":3`) {
		t.Errorf("the Scale kept the replicas given up: %s", w.Body)
	}
	if got := replicas(); got != float64(0) {
		t.Errorf("replicas after the apply that gave them up: %v, want 0", got)
	}
	// Replicas owned by another manager stay.
	expect(send(http.MethodPatch, path+"/d/scale", "application/merge-patch+json", `{"spec":{"replicas":4}}`), http.StatusOK, `"replicas":4`)
	expect(send(http.MethodPatch, path+"/d/scale?fieldManager=auto", apply, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\n"), http.StatusOK, `"replicas":4`)
	if got := replicas(); got != float64(4) {
		t.Errorf("replicas after an apply that never owned them: %v, want 4", got)
	}
	// An apply of replicas another manager owns conflicts in the Scale's
	// terms, as kube-apiserver v1.37.2's scale handler words it.
	expect(send(http.MethodPatch, path+"/d/scale?fieldManager=late", apply, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\nspec:\n  replicas: 9\n"), http.StatusConflict,
		`with subresource \"scale\" using autoscaling/v1: .spec.replicas","reason":"Conflict"`)
}

// kubectl get --subresource=scale asks for the Scale as a Table: NAME,
// DESIRED, AVAILABLE and AGE, as apiextensions-apiserver's.
func TestScaleTable(t *testing.T) {
	do, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"dials.test.kplane.dev"},
"spec":{"group":"test.kplane.dev","scope":"Namespaced","names":{"plural":"dials","singular":"dial","kind":"Dial","listKind":"DialList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"replicas":{"type":"integer"}}},
"status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}}]}}`)
	const path = "/apis/test.kplane.dev/v1/namespaces/default/dials"
	if w := do(http.MethodPost, path, `{"apiVersion":"test.kplane.dev/v1","kind":"Dial","metadata":{"name":"d"},"spec":{"replicas":3}}`); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	if w := patchJSON(t, h, path+"/d/status", `{"status":{"replicas":2}}`); w != http.StatusOK {
		t.Fatalf("status: %d", w)
	}
	w := get(t, h, path+"/d/scale", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	var table metav1.Table
	if err := json.Unmarshal(w.Body.Bytes(), &table); w.Code != http.StatusOK || err != nil || table.Kind != "Table" {
		t.Fatalf("%d %v %s", w.Code, err, w.Body)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name+":"+c.Type)
	}
	if strings.Join(names, " ") != "Name:string Desired:integer Available:integer Age:date" || len(table.Rows) != 1 {
		t.Fatalf("columns %v, %d rows", names, len(table.Rows))
	}
	if cells := fmt.Sprint(table.Rows[0].Cells[:3]); cells != "[d 3 2]" {
		t.Errorf("cells %v", table.Rows[0].Cells)
	}
}
