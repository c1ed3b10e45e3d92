package openapi

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	extensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TestMatchesPublishedDefinitions compares the definitions built here with
// the ones kube-openapi's generator wrote for apiextensions-apiserver:
// every apiextensions.k8s.io/v1 type of a CRD and every apimachinery type
// they share with the other kinds (ObjectMeta, ManagedFieldsEntry, Time,
// Status, LabelSelector...).
func TestMatchesPublishedDefinitions(t *testing.T) {
	ours := servedDefinitions(t)
	theirs := extensionsopenapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(V2RefPrefix + name)
	})
	compared := 0
	for _, name := range sortedKeys(ours) {
		def, ok := theirs[name]
		if !ok {
			continue
		}
		compared++
		want := &def.Schema
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			want = &v2 // ours are OpenAPI v2's (a Quantity's type is string there)
		}
		for _, d := range diffSchema(name, ours[name], want) {
			t.Error(d)
		}
	}
	if compared < 30 {
		t.Errorf("compared %d definitions, want the CRD's and metav1's (30 or more)", compared)
	}
}

// diffSchema lists the differences between two schemas that matter to
// server-side apply and to kubectl: types, formats, properties, required
// fields, defaults, descriptions, refs and x-kubernetes extensions other
// than the group-version-kind (which the published table only sets for
// the kinds the apiextensions-apiserver itself serves).
func diffSchema(path string, ours, theirs *spec.Schema) []string {
	var out []string
	add := func(what string, a, b any) {
		out = append(out, fmt.Sprintf("%s: %s = %#v, published %#v", path, what, a, b))
	}
	if !slices.Equal(ours.Type, theirs.Type) {
		add("type", ours.Type, theirs.Type)
	}
	if ours.Format != theirs.Format {
		add("format", ours.Format, theirs.Format)
	}
	if ours.Ref.String() != theirs.Ref.String() {
		add("$ref", ours.Ref.String(), theirs.Ref.String())
	}
	if ours.Description != theirs.Description {
		add("description", ours.Description, theirs.Description)
	}
	if !reflect.DeepEqual(ours.Default, theirs.Default) {
		add("default", ours.Default, theirs.Default)
	}
	if !slices.Equal(sorted(ours.Required), sorted(theirs.Required)) {
		add("required", ours.Required, theirs.Required)
	}
	for _, ext := range []string{extListType, extListMapKeys, extMapType, extPatchStrategy, extPatchMergeKey} {
		a, b := ours.Extensions[ext], theirs.Extensions[ext]
		if ext == extListType && b == nil && a == listAtomic {
			continue // an unmarked list is atomic; this package says so
		}
		if !reflect.DeepEqual(a, b) {
			add(ext, a, b)
		}
	}
	for _, name := range union(sortedKeys(ours.Properties), sortedKeys(theirs.Properties)) {
		a, aok := ours.Properties[name]
		b, bok := theirs.Properties[name]
		if !aok || !bok {
			add("property "+name, aok, bok)
			continue
		}
		out = append(out, diffSchema(path+"."+name, &a, &b)...)
	}
	var ai, bi *spec.Schema
	if ours.Items != nil {
		ai = ours.Items.Schema
	}
	if theirs.Items != nil {
		bi = theirs.Items.Schema
	}
	out = append(out, diffSub(path+"[]", ai, bi)...)
	var ap, bp *spec.Schema
	if ours.AdditionalProperties != nil {
		ap = ours.AdditionalProperties.Schema
	}
	if theirs.AdditionalProperties != nil {
		bp = theirs.AdditionalProperties.Schema
	}
	out = append(out, diffSub(path+"{}", ap, bp)...)
	return out
}

func diffSub(path string, a, b *spec.Schema) []string {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil || b == nil:
		return []string{fmt.Sprintf("%s: present = %v, published %v", path, a != nil, b != nil)}
	}
	return diffSchema(path, a, b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func union(a, b []string) []string {
	return slices.Compact(sorted(append(slices.Clone(a), b...)))
}
