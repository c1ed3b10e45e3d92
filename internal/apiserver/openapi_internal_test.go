package apiserver

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
)

// A build after some kinds changed keeps the v3 documents of the group
// versions whose kinds did not change, and its documents are byte for
// byte a fresh build's: the changed group's, the new one's, the kept
// ones and the index.
func TestOpenAPIRebuildsOnlyChangedGroups(t *testing.T) {
	custom := func(group, kind, field string) *registry.Kind {
		s := &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
			"spec": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
				field: {SchemaProps: spec.SchemaProps{Type: []string{"string"}}}}}}}}}
		return &registry.Kind{Group: group, Versions: []string{"v1"}, Kind: kind, ListKind: kind + "List",
			Resource: kind + "s", Singular: kind, Namespaced: true, Status: true,
			OpenAPI: func(v string) *spec.Schema { return s }}
	}
	builtins := append(core.Kinds(), crd.Kind())
	a, b := custom("a.example.com", "alpha", "x"), custom("b.example.com", "beta", "y")
	before, err := buildOpenAPI(append(builtins[:len(builtins):len(builtins)], a, b), nil, "v1.0.0", time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	// b's CRD changed, c is new.
	after := append(builtins[:len(builtins):len(builtins)], a, custom("b.example.com", "beta", "z"), custom("c.example.com", "gamma", "w"))
	inc, err := buildOpenAPI(after, before, "v1.0.0", time.Unix(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	full, err := buildOpenAPI(after, nil, "v1.0.0", time.Unix(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(inc.v3) != len(full.v3) || !bytes.Equal(mustJSON(t, inc.root), mustJSON(t, full.root)) {
		t.Fatalf("the index differs:\n%s\n%s", mustJSON(t, inc.root), mustJSON(t, full.root))
	}
	for path, d := range full.v3 {
		if !bytes.Equal(mustJSON(t, inc.v3[path]), mustJSON(t, d)) {
			t.Errorf("%s differs from a fresh build's", path)
		}
	}
	for path, kept := range map[string]bool{"apis/a.example.com/v1": true, "api/v1": true, "apis/b.example.com/v1": false} {
		if got := inc.v3[path] == before.v3[path]; got != kept {
			t.Errorf("%s kept: %v, want %v", path, got, kept)
		}
	}
	if bytes.Equal(mustJSON(t, inc.v3["apis/b.example.com/v1"]), mustJSON(t, before.v3["apis/b.example.com/v1"])) {
		t.Error("the changed group's document did not change")
	}
}

// mustJSON is d's JSON, expanded.
func mustJSON(t *testing.T, d *openAPIDoc) []byte {
	t.Helper()
	data, err := d.json()
	if err != nil {
		t.Fatal(err)
	}
	return data
}
