package correlate

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func mapList(keys ...string) apiextensionsv1.JSONSchemaProps {
	lt := "map"
	return apiextensionsv1.JSONSchemaProps{
		Type: "array", XListType: &lt, XListMapKeys: keys,
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"name": {Type: "string"}, "port": {Type: "integer"},
			},
		}},
	}
}

// schema: spec with a string, a map of strings, an atomic list, a
// list-type=map list, and a field kept by preserve-unknown-fields.
var schema = &apiextensionsv1.JSONSchemaProps{
	Type: "object",
	Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"image":  {Type: "string"},
				"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
				"tags":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
				"ports":  mapList("name"),
				"extra":  {Type: "object", XPreserveUnknownFields: ptr(true)},
			},
		},
	},
}

func ptr[T any](v T) *T { return &v }

func TestPairsFollowTheSchema(t *testing.T) {
	old := obj("spec", obj(
		"image", "a",
		"labels", obj("tier", "web"),
		"tags", []any{"x", "y"},
		"ports", []any{obj("name", "http", "port", int64(80)), obj("name", "https", "port", int64(443))},
		"extra", obj("anything", int64(1)),
	))
	cur := obj("spec", obj(
		"image", "b",
		"labels", obj("tier", "web"),
		"tags", []any{"x", "y"},
		"ports", []any{obj("name", "https", "port", int64(443)), obj("name", "http", "port", int64(8080)), obj("name", "new", "port", int64(1))},
		"extra", obj("anything", int64(1)),
	))
	root := New(cur, old, schema)
	spec := root.Key("spec")
	if spec == nil || spec.Unchanged() || root.Unchanged() {
		t.Fatalf("spec pair %v, unchanged %v; want a changed pair", spec, spec.Unchanged())
	}
	if p := spec.Key("image"); p == nil || p.Unchanged() || p.Value() != "b" {
		t.Errorf("image: %+v", p)
	}
	if p := spec.Key("labels").Key("tier"); p == nil || !p.Unchanged() {
		t.Error("a map value (additionalProperties) did not pair unchanged")
	}
	if p := spec.Key("tags"); p == nil || !p.Unchanged() {
		t.Error("an equal atomic list is not unchanged")
	}
	if p := spec.Key("tags").Index(0); p != nil {
		t.Error("an atomic list's item paired")
	}
	ports := spec.Key("ports")
	if p := ports.Index(0); p == nil || !p.Unchanged() || p.Key("name").Value() != "https" {
		t.Errorf("https, moved, did not pair unchanged with its old item: %+v", p)
	}
	if p := ports.Index(1); p == nil || p.Unchanged() {
		t.Errorf("http, its port changed, is not a changed pair: %+v", p)
	}
	if p := ports.Index(2); p != nil {
		t.Error("a new item paired")
	}
	if p := ports.Index(3); p != nil {
		t.Error("an index past the end paired")
	}
	if p := spec.Key("extra"); p == nil || p.Unchanged() {
		t.Error("a value with fields the schema does not describe counts as unchanged")
	}
	if p := spec.Key("missing"); p != nil {
		t.Error("a field in neither object paired")
	}
	if spec.Key("ports") != ports {
		t.Error("a child is not kept: asked twice, two pairs")
	}
}

func TestUnchanged(t *testing.T) {
	for _, c := range []struct {
		name     string
		cur, old any
		want     bool
	}{
		{"both null", nil, nil, true},
		{"null and a value", nil, "a", false},
		{"equal scalars", int64(1), int64(1), true},
		{"1 is not 1.0", int64(1), float64(1), false},
		{"a map list reordered", []any{obj("name", "b"), obj("name", "a")}, []any{obj("name", "a"), obj("name", "b")}, true},
		{"a map list shorter", []any{obj("name", "a")}, []any{obj("name", "a"), obj("name", "b")}, false},
		{"an object and a list", obj(), []any{}, false},
	} {
		s := mapList("name")
		if got := New(c.cur, c.old, &s).Unchanged(); got != c.want {
			t.Errorf("%s: Unchanged = %v, want %v", c.name, got, c.want)
		}
	}
	var nilPair *Pair
	if nilPair.Unchanged() || nilPair.Key("a") != nil || nilPair.Index(0) != nil {
		t.Error("a nil pair is unchanged or has children")
	}
}
