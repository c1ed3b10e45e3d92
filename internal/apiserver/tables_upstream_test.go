package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"testing"
)

// Tables answer as kube-apiserver v1.37.2's printers and table converters
// do. testdata/tables-kube-apiserver-v1.37.2.json holds the objects it was
// sent and the Tables it answered for them (each column with its type,
// format, priority and description; each row's cells, with ages and
// creation times masked): every built-in kind kplane serves, the CRD
// kind, and custom resources with the default AGE column and with
// printer columns of every type over JSONPath fields, wildcards, slices,
// filters and recursive descent.
func TestTablesAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/tables-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Creates [][3]json.RawMessage
		Tables  map[string]struct {
			ColumnDefinitions []any
			Rows              [][]any
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	do, h := newCustomResourcesHandler(t, gizmoCRD)
	for _, c := range upstream.Creates {
		var method, path string
		if json.Unmarshal(c[0], &method) != nil || json.Unmarshal(c[1], &path) != nil {
			t.Fatalf("create %s", c)
		}
		if w := do(method, path, string(c[2])); w.Code != http.StatusCreated {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
	}
	if len(upstream.Tables) < 17 {
		t.Fatalf("%d tables", len(upstream.Tables))
	}
	for path, want := range upstream.Tables {
		compareTable(t, h, path, want.ColumnDefinitions, want.Rows)
	}
}

// The Tables of FlowSchemas and PriorityLevelConfigurations are
// kube-apiserver v1.37.2's. testdata/flowcontrol-tables-kube-apiserver-v1.37.2.json
// holds upstream's bootstrap objects of both kinds, as it listed them, and
// the Tables it answered for lists and single objects: the printers'
// columns (a level's numbers as "<none>" when it is exempt or does not
// queue, a schema's missing level from its Dangling condition), and a
// FlowSchema list's rows sorted by matching precedence, then name, where
// the list itself is in name order.
func TestFlowControlTablesAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/flowcontrol-tables-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Objects map[string][]map[string]any
		Tables  map[string]struct {
			ColumnDefinitions []any
			Rows              [][]any
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	do, h := newCustomResourcesHandler(t, gizmoCRD)
	const base = "/apis/flowcontrol.apiserver.k8s.io/v1/"
	for _, resource := range []string{"prioritylevelconfigurations", "flowschemas"} {
		for _, obj := range upstream.Objects[resource] {
			// Created, then given the status upstream's controller wrote.
			status := obj["status"]
			delete(obj, "status")
			body, _ := json.Marshal(obj)
			w := do(http.MethodPost, base+resource, string(body))
			if w.Code != http.StatusCreated {
				t.Fatalf("POST %s %s: %d %s", resource, body, w.Code, w.Body)
			}
			if status == nil {
				continue
			}
			var created map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil {
				t.Fatal(err)
			}
			created["status"] = status
			body, _ = json.Marshal(created)
			path := base + resource + "/" + created["metadata"].(map[string]any)["name"].(string) + "/status"
			if w := do(http.MethodPut, path, string(body)); w.Code != http.StatusOK {
				t.Fatalf("PUT %s: %d %s", path, w.Code, w.Body)
			}
		}
	}
	if len(upstream.Tables) < 5 {
		t.Fatalf("%d tables", len(upstream.Tables))
	}
	for path, want := range upstream.Tables {
		compareTable(t, h, path, want.ColumnDefinitions, want.Rows)
	}
}

// compareTable GETs path as a Table and compares its columns and cells
// with upstream's recorded ones, ages and timestamps masked ("<age>",
// "<time>") as the recording masks them.
func compareTable(t *testing.T, h http.Handler, path string, columns []any, cells [][]any) {
	t.Helper()
	age := regexp.MustCompile(`^([0-9]+[smhdy])+$`)
	created := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Accept", asTable)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var got struct {
		ColumnDefinitions []any
		Rows              []struct{ Cells []any }
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
	}
	if !reflect.DeepEqual(got.ColumnDefinitions, columns) {
		t.Errorf("%s: columns\n got  %v\n want %v", path, got.ColumnDefinitions, columns)
	}
	var rows [][]any
	for _, row := range got.Rows {
		for i, c := range row.Cells {
			if s, ok := c.(string); ok && age.MatchString(s) {
				row.Cells[i] = "<age>"
			} else if ok && created.MatchString(s) {
				row.Cells[i] = "<time>"
			}
		}
		rows = append(rows, row.Cells)
	}
	if !reflect.DeepEqual(rows, cells) {
		t.Errorf("%s: cells\n got  %v\n want %v", path, rows, cells)
	}
}
