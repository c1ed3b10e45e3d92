package openapi

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// DefinitionsWithoutDocs is Definitions less the descriptions, and a type
// converter reads the same structured-merge-diff schema from both.
func TestDefinitionsWithoutDocs(t *testing.T) {
	full := servedDefinitions(t)
	bare, err := DefinitionsWithoutDocs(served(), V2RefPrefix)
	if err != nil {
		t.Fatal(err)
	}
	described := 0
	for _, d := range full {
		described += clearDescriptions(d)
	}
	if described == 0 {
		t.Fatal("Definitions returned no description at all")
	}
	for _, d := range bare {
		if n := clearDescriptions(d); n != 0 {
			t.Fatalf("DefinitionsWithoutDocs returned %d descriptions", n)
		}
	}
	if !reflect.DeepEqual(jsonOf(t, full), jsonOf(t, bare)) {
		t.Error("DefinitionsWithoutDocs differs from Definitions in more than the descriptions")
	}

	withDocs, err := schemaconv.ToSchemaFromOpenAPI(servedDefinitions(t), false)
	if err != nil {
		t.Fatal(err)
	}
	withoutDocs, err := schemaconv.ToSchemaFromOpenAPI(bare, false)
	if err != nil {
		t.Fatal(err)
	}
	// schemaconv lists types and fields in map order: compare them as
	// JSON with every list of named entries sorted by name.
	if a, b := sortedJSON(t, withDocs), sortedJSON(t, withoutDocs); !reflect.DeepEqual(a, b) {
		t.Error("the structured-merge-diff schemas differ")
	}
}

// sortedJSON is v as generic JSON, each list of objects with a name
// sorted by name.
func sortedJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
			name := func(e any) string {
				n, _ := e.(map[string]any)["Name"].(string) // schema.TypeDef and StructField have no JSON tags
				return n
			}
			slices.SortFunc(v, func(a, b any) int { return strings.Compare(name(a), name(b)) })
		}
	}
	walk(out)
	return out
}

// clearDescriptions empties every description in s and returns how many
// were set.
func clearDescriptions(s *spec.Schema) int {
	if s == nil {
		return 0
	}
	n := 0
	if s.Description != "" {
		s.Description = ""
		n++
	}
	for k, p := range s.Properties {
		n += clearDescriptions(&p)
		s.Properties[k] = p
	}
	if s.Items != nil {
		n += clearDescriptions(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		n += clearDescriptions(s.AdditionalProperties.Schema)
	}
	return n
}

func jsonOf(t *testing.T, defs map[string]*spec.Schema) any {
	t.Helper()
	raw, err := json.Marshal(defs)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
