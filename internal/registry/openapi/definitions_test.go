package openapi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func TestTypeConverterAcceptsServedKinds(t *testing.T) {
	defs := servedDefinitions(t)
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		t.Fatal(err)
	}
	// Every kind is indexed by its GVK: converting an empty object of each
	// finds its type.
	for gvk := range served() {
		u := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind, "metadata": map[string]any{"resourceVersion": "1"}}
		if _, err := tc.ObjectToTyped(unstructuredOf(u)); err != nil {
			t.Errorf("%v: %v", gvk, err)
		}
	}
}

// Published documents are JSON: the definitions survive a JSON round trip
// and still convert.
func TestDefinitionsRoundTripJSON(t *testing.T) {
	raw, err := json.Marshal(servedDefinitions(t))
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]*spec.Schema
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if _, err := managedfields.NewTypeConverter(back, false); err != nil {
		t.Fatal(err)
	}
}

// Spot checks against the definitions Kubernetes publishes
// (api/openapi-spec in kubernetes/kubernetes).
func TestPublishedShapes(t *testing.T) {
	defs := servedDefinitions(t)
	const (
		meta = "io.k8s.apimachinery.pkg.apis.meta.v1."
		core = "io.k8s.api.core.v1."
	)
	prop := func(def, field string) spec.Schema {
		t.Helper()
		d, ok := defs[def]
		if !ok {
			t.Fatalf("no definition %s", def)
		}
		p, ok := d.Properties[field]
		if !ok {
			t.Fatalf("%s has no property %s", def, field)
		}
		return p
	}
	refTo := func(p spec.Schema) string { return strings.TrimPrefix(p.Ref.String(), V2RefPrefix) }

	t.Run("ConfigMap data is a map of strings", func(t *testing.T) {
		p := prop(core+"ConfigMap", "data")
		if !p.Type.Contains("object") || p.AdditionalProperties == nil || !p.AdditionalProperties.Schema.Type.Contains("string") {
			t.Errorf("data = %+v", p)
		}
		if p := prop(core+"ConfigMap", "binaryData"); p.AdditionalProperties.Schema.Format != "byte" {
			t.Errorf("binaryData values = %+v, want string/byte", p.AdditionalProperties.Schema)
		}
	})
	t.Run("ConfigMap, ObjectMeta and LeaseSpec require nothing", func(t *testing.T) {
		for _, name := range []string{core + "ConfigMap", meta + "ObjectMeta", "io.k8s.api.coordination.v1.LeaseSpec", "io.k8s.api.coordination.v1.Lease"} {
			if r := defs[name].Required; len(r) != 0 {
				t.Errorf("%s requires %v", name, r)
			}
		}
	})
	t.Run("required fields", func(t *testing.T) {
		for name, want := range map[string][]string{
			"io.k8s.api.rbac.v1.Subject":     {"kind", "name"},
			"io.k8s.api.rbac.v1.RoleRef":     {"kind", "name"},
			"io.k8s.api.rbac.v1.PolicyRule":  {"verbs"},
			"io.k8s.api.rbac.v1.RoleBinding": {"roleRef"},
			core + "Event":                   {"metadata", "involvedObject"},
			meta + "OwnerReference":          {"apiVersion", "kind", "name", "uid"},
			core + "ConfigMapList":           {"items"},
		} {
			if got := defs[name].Required; !reflect.DeepEqual(got, want) {
				t.Errorf("%s requires %v, want %v", name, got, want)
			}
		}
	})
	t.Run("ownerReferences is a map keyed by uid", func(t *testing.T) {
		p := prop(meta+"ObjectMeta", "ownerReferences")
		if p.Extensions[extListType] != "map" || !reflect.DeepEqual(p.Extensions[extListMapKeys], []any{"uid"}) ||
			p.Extensions[extPatchStrategy] != "merge" || p.Extensions[extPatchMergeKey] != "uid" {
			t.Errorf("ownerReferences extensions = %v", p.Extensions)
		}
		if refTo(*p.Items.Schema) != meta+"OwnerReference" || defs[meta+"OwnerReference"].Extensions[extMapType] != "atomic" {
			t.Errorf("ownerReferences items = %v, want atomic OwnerReference", p.Items.Schema.Ref.String())
		}
	})
	t.Run("finalizers is a set, managedFields atomic", func(t *testing.T) {
		if p := prop(meta+"ObjectMeta", "finalizers"); p.Extensions[extListType] != "set" || p.Extensions[extPatchStrategy] != "merge" {
			t.Errorf("finalizers extensions = %v", p.Extensions)
		}
		if p := prop(meta+"ObjectMeta", "managedFields"); p.Extensions[extListType] != "atomic" {
			t.Errorf("managedFields extensions = %v", p.Extensions)
		}
	})
	t.Run("ServiceAccount secrets and Namespace conditions are keyed lists", func(t *testing.T) {
		for _, c := range []struct{ def, field, key string }{
			{core + "ServiceAccount", "secrets", "name"},
			{core + "NamespaceStatus", "conditions", "type"},
			{"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus", "conditions", "type"},
		} {
			p := prop(c.def, c.field)
			if p.Extensions[extListType] != "map" || !reflect.DeepEqual(p.Extensions[extListMapKeys], []any{c.key}) {
				t.Errorf("%s.%s extensions = %v, want a map keyed by %s", c.def, c.field, p.Extensions, c.key)
			}
		}
		if p := prop(core+"ServiceAccount", "imagePullSecrets"); p.Extensions[extListType] != "atomic" {
			t.Errorf("imagePullSecrets extensions = %v, want atomic", p.Extensions)
		}
	})
	t.Run("timestamps are date-time strings", func(t *testing.T) {
		p := prop(meta+"ObjectMeta", "creationTimestamp")
		if refTo(p) != meta+"Time" {
			t.Fatalf("creationTimestamp = %+v, want a $ref to Time", p)
		}
		for _, name := range []string{meta + "Time", meta + "MicroTime"} {
			if d := defs[name]; !d.Type.Contains("string") || d.Format != "date-time" {
				t.Errorf("%s = %v/%s, want string/date-time", name, d.Type, d.Format)
			}
		}
	})
	t.Run("Lease durations are int32", func(t *testing.T) {
		p := prop("io.k8s.api.coordination.v1.LeaseSpec", "leaseDurationSeconds")
		if !p.Type.Contains("integer") || p.Format != "int32" {
			t.Errorf("leaseDurationSeconds = %v/%s, want integer/int32", p.Type, p.Format)
		}
		if p := prop(meta+"ObjectMeta", "generation"); p.Format != "int64" {
			t.Errorf("generation format = %q, want int64", p.Format)
		}
	})
	t.Run("free-form types", func(t *testing.T) {
		if d := defs[meta+"FieldsV1"]; !d.Type.Contains("object") || len(d.Properties) != 0 {
			t.Errorf("FieldsV1 = %+v, want a free-form object", d)
		}
		if d := defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON"]; len(d.Type) != 0 {
			t.Errorf("apiextensions JSON type = %v, want none (any value)", d.Type)
		}
	})
	t.Run("descriptions", func(t *testing.T) {
		if d := defs[core+"ConfigMap"].Description; !strings.HasPrefix(d, "ConfigMap holds configuration data") {
			t.Errorf("ConfigMap description = %q", d)
		}
		if d := prop(core+"ConfigMap", "metadata").Description; !strings.Contains(d, "metadata") {
			t.Errorf("ConfigMap.metadata description = %q", d)
		}
		if d := prop(core+"ConfigMap", "kind").Description; !strings.HasPrefix(d, "Kind is a string value") {
			t.Errorf("ConfigMap.kind description (from TypeMeta) = %q", d)
		}
		crd := "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
		if defs[crd].Description == "" || prop(crd, "spec").Description == "" || defs[meta+"Time"].Description == "" {
			t.Error("types without SwaggerDoc (CRD, Time) have no description")
		}
	})
	t.Run("defaults", func(t *testing.T) {
		if d := prop(core+"ConfigMap", "metadata").Default; !reflect.DeepEqual(d, map[string]any{}) {
			t.Errorf("metadata default = %#v, want {}", d)
		}
		if d := prop(meta+"OwnerReference", "uid").Default; d != "" {
			t.Errorf("OwnerReference.uid default = %#v, want \"\"", d)
		}
		if d := prop(meta+"ObjectMeta", "creationTimestamp").Default; d != nil {
			t.Errorf("creationTimestamp default = %#v, want none (Time decodes null)", d)
		}
	})
	t.Run("group-version-kind", func(t *testing.T) {
		want := []any{map[string]any{"group": "", "version": "v1", "kind": "ConfigMap"}}
		if got := defs[core+"ConfigMap"].Extensions[extGVK]; !reflect.DeepEqual(got, want) {
			t.Errorf("ConfigMap GVK = %v, want %v", got, want)
		}
		if _, ok := defs[meta+"ObjectMeta"].Extensions[extGVK]; ok {
			t.Error("ObjectMeta has a GVK")
		}
	})
}

// JSONSchemaProps refers to itself; its definition ends in a $ref.
func TestRecursiveType(t *testing.T) {
	defs := servedDefinitions(t)
	const props = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps"
	p := defs[props].Properties["not"]
	if p.Ref.String() != V2RefPrefix+props {
		t.Errorf("JSONSchemaProps.not = %+v, want a $ref to itself", p)
	}
	if p := defs[props].Properties["properties"]; p.AdditionalProperties.Schema.Ref.String() != V2RefPrefix+props {
		t.Errorf("JSONSchemaProps.properties values = %+v, want a $ref to JSONSchemaProps", p)
	}
}

func TestRefPrefix(t *testing.T) {
	defs, err := Definitions(map[schema.GroupVersionKind]runtime.Object{
		corev1.SchemeGroupVersion.WithKind("ConfigMap"): &corev1.ConfigMap{},
	}, V3RefPrefix)
	if err != nil {
		t.Fatal(err)
	}
	metadata := defs["io.k8s.api.core.v1.ConfigMap"].Properties["metadata"]
	if got := metadata.Ref.String(); got != V3RefPrefix+"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Errorf("metadata $ref = %q", got)
	}
	if _, err := managedfields.NewTypeConverter(defs, false); err != nil {
		t.Error(err)
	}
}

// One Go type served under several GVKs lists them all, sorted.
func TestSharedType(t *testing.T) {
	v1 := apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	v2 := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v2", Kind: "CustomResourceDefinition"}
	defs, err := Definitions(map[schema.GroupVersionKind]runtime.Object{
		v2: &apiextensionsv1.CustomResourceDefinition{},
		v1: &apiextensionsv1.CustomResourceDefinition{},
	}, V2RefPrefix)
	if err != nil {
		t.Fatal(err)
	}
	got := defs["io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"].Extensions[extGVK].([]any)
	if len(got) != 2 || got[0].(map[string]any)["version"] != "v1" || got[1].(map[string]any)["version"] != "v2" {
		t.Errorf("GVKs = %v, want v1 then v2", got)
	}
}

type intKeys struct {
	runtime.Object `json:"-"`
	M              map[int]string `json:"m"`
}

type clash struct {
	runtime.Object `json:"-"`
}

func (clash) OpenAPIModelName() string { return "io.k8s.api.core.v1.ConfigMap" }

func TestErrors(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "X"}
	if _, err := Definitions(map[schema.GroupVersionKind]runtime.Object{gvk: &intKeys{}}, V2RefPrefix); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("map with int keys: err = %v, want ErrUnsupportedType", err)
	}
	if _, err := Definitions(map[schema.GroupVersionKind]runtime.Object{gvk: nil}, V2RefPrefix); err == nil {
		t.Error("nil object: no error")
	}
	_, err := Definitions(map[schema.GroupVersionKind]runtime.Object{
		gvk: &clash{},
		corev1.SchemeGroupVersion.WithKind("ConfigMap"): &corev1.ConfigMap{},
	}, V2RefPrefix)
	if !errors.Is(err, ErrNameClash) {
		t.Errorf("two types named io.k8s.api.core.v1.ConfigMap: err = %v, want ErrNameClash", err)
	}
}

func TestModelName(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{corev1.ConfigMap{}, "io.k8s.api.core.v1.ConfigMap"},
		{intKeys{}, "com.github.kplane-dev.kplane.internal.registry.openapi.intKeys"},
	} {
		if got := modelName(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("modelName(%T) = %q, want %q", c.v, got, c.want)
		}
	}
}
