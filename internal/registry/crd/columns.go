package crd

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kplane-dev/kplane/internal/registry"
)

// crdColumns are the CRD kind's Table columns, as kube-apiserver v1.37's
// CRD table has them.
var crdColumns = []registry.Column{
	{Name: "Scope", Type: "string", Description: "Cluster/Namespaced", Value: func(o *unstructured.Unstructured) any {
		s, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
		return s
	}, Reads: []string{"spec"}},
	{Name: "Versions", Type: "string", Description: "Served versions", Value: func(o *unstructured.Unstructured) any {
		// Served versions, sorted, the storage version marked.
		list, _, _ := unstructured.NestedFieldNoCopy(o.Object, "spec", "versions")
		vs, _ := list.([]any)
		var out []string
		for _, v := range vs {
			v, _ := v.(map[string]any)
			if served, _ := v["served"].(bool); !served {
				continue
			}
			label, _ := v["name"].(string)
			if storage, _ := v["storage"].(bool); storage {
				label += "(storage)"
			}
			out = append(out, label)
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}, Reads: []string{"spec"}},
	registry.CreatedColumn,
	{Name: "Group", Type: "string", Priority: 1, Description: "API group", Value: func(o *unstructured.Unstructured) any {
		s, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		return s
	}, Reads: []string{"spec"}},
	{Name: "Kind", Type: "string", Priority: 1, Description: "CustomResource kind", Value: func(o *unstructured.Unstructured) any {
		s, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		return s
	}, Reads: []string{"spec"}},
	{Name: "ShortNames", Type: "string", Priority: 1, Description: "Short names", Value: func(o *unstructured.Unstructured) any {
		s, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "names", "shortNames")
		return strings.Join(s, ",")
	}, Reads: []string{"spec"}},
	{Name: "Established", Type: "boolean", Priority: 1, Description: "Established status", Value: func(o *unstructured.Unstructured) any {
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conds {
			c, _ := c.(map[string]any)
			if c["type"] == string(apiextensionsv1.Established) && c["status"] == string(apiextensionsv1.ConditionTrue) {
				return true
			}
		}
		return false
	}, Reads: []string{"status"}},
}

// ageColumn is the column a version without additionalPrinterColumns
// gets, as upstream gives it.
var ageColumn = apiextensionsv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
	Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}

// scaleColumns are the columns of a Scale's Table, on the Scale: its
// desired and actual replicas, and its age, as apiextensions-apiserver's.
var scaleColumns = []registry.Column{
	printerColumn(apiextensionsv1.CustomResourceColumnDefinition{Name: "Desired", Type: "integer", Description: "Number of desired replicas", JSONPath: ".spec.replicas"}),
	printerColumn(apiextensionsv1.CustomResourceColumnDefinition{Name: "Available", Type: "integer", Description: "Number of actual replicas", JSONPath: ".status.replicas"}),
	printerColumn(ageColumn),
}

// versionColumns are a version's Table columns: its
// additionalPrinterColumns, or AGE.
func versionColumns(v *apiextensionsv1.CustomResourceDefinitionVersion) []registry.Column {
	defs := v.AdditionalPrinterColumns
	if len(defs) == 0 {
		defs = []apiextensionsv1.CustomResourceColumnDefinition{ageColumn}
	}
	cols := make([]registry.Column, len(defs))
	for i, c := range defs {
		cols[i] = printerColumn(c)
	}
	return cols
}

// printerColumn is a version's additionalPrinterColumn, with upstream's
// cells: the first value the JSONPath finds; a string column prints it as
// text, the other types take a value of their type (an integer column a
// whole number, a number column any number) and a date column prints a
// timestamp's age; anything else is null (kubectl shows <none>). A path
// kplane cannot read prints nothing.
func printerColumn(c apiextensionsv1.CustomResourceColumnDefinition) registry.Column {
	path, err := parseJSONPath(c.JSONPath)
	var reads []string // nil: the whole object
	if err == nil {
		if m := path.member(); m != "" {
			reads = []string{m}
		}
	}
	desc := c.Description
	if desc == "" {
		desc = "Custom resource definition column (in JSONPath format): " + c.JSONPath
	}
	return registry.Column{
		Name: c.Name, Type: c.Type, Format: c.Format, Description: desc, Priority: c.Priority, Reads: reads,
		Value: func(o *unstructured.Unstructured) any {
			if err != nil {
				return nil
			}
			v, ok := path.first(o.Object)
			if !ok {
				return nil
			}
			return cellOf(c.Type, v)
		},
	}
}

// cellOf converts a value found for a column of type t.
func cellOf(t string, v any) any {
	switch t {
	case "string":
		if v == nil {
			return "<no value>" // a JSON null, as Go's template printer shows it
		}
		return text(v)
	case "integer":
		switch n := v.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
	case "number":
		switch n := v.(type) {
		case int64:
			return float64(n)
		case float64:
			return n
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	case "date":
		if s, ok := v.(string); ok {
			var ts metav1.Time
			if err := ts.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			if ts.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(time.Since(ts.Time))
		}
	}
	return nil
}

// text prints a value as JSONPath's text output does: an object or a list
// as its JSON, a string as it is, anything else as Go prints it.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any, []any:
		if b, err := json.Marshal(x); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}
