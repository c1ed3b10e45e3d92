package webhook_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// BenchmarkCreateThroughWebhooks is a ConfigMap create through the
// registry with no webhook configured, with one that does not match it,
// and with a validating and a mutating one that do (over HTTPS to a
// server in this process, which also takes its share of the CPU).
func BenchmarkCreateThroughWebhooks(b *testing.B) {
	for _, c := range []struct {
		name  string
		setup func(e *env)
	}{
		{"none", func(*env) {}},
		{"unmatched", func(e *env) {
			e.configure("Validating", "other", map[string]any{"name": "other.example.com", "path": "/allow",
				"objectSelector": map[string]any{"matchLabels": map[string]any{"never": "yes"}}})
		}},
		{"validating", func(e *env) {
			e.configure("Validating", "v", map[string]any{"name": "v.example.com", "path": "/allow"})
		}},
		{"mutating", func(e *env) {
			e.configure("Mutating", "m", map[string]any{"name": "m.example.com", "path": "/label-seen"})
		}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkCreates(b, c.setup) })
	}
}

// benchmarkCreates creates ConfigMaps through the registry, after setup.
func benchmarkCreates(b *testing.B, setup func(e *env)) {
	e := newEnv(b)
	setup(e)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := e.createConfigMap(fmt.Sprintf("c%d", i), nil, registry.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateThroughPolicies is a ConfigMap create through the
// registry with a ValidatingAdmissionPolicy bound that does not match it,
// and with ones that do: a plain validation, one with a variable and a
// messageExpression, two plain ones, and one reading a ConfigMap
// parameter.
func BenchmarkCreateThroughPolicies(b *testing.B) {
	for _, c := range []struct {
		name  string
		setup func(e *env)
	}{
		{"unmatched", func(e *env) {
			e.policy("p", map[string]any{"matchConstraints": labelled("never", "yes"),
				"validations": []any{map[string]any{"expression": "true"}}})
			e.binding("p", "p", []any{"Deny"}, nil)
		}},
		{"validation", func(e *env) {
			e.policy("p", map[string]any{"validations": []any{map[string]any{"expression": "size(object.data) <= 10"}}})
			e.binding("p", "p", []any{"Deny"}, nil)
		}},
		{"variables", func(e *env) {
			e.policy("p", map[string]any{
				"variables": []any{map[string]any{"name": "keys", "expression": "has(object.data) ? size(object.data) : 0"}},
				"validations": []any{map[string]any{"expression": "variables.keys <= 10",
					"messageExpression": "'too many keys: ' + string(variables.keys)"}},
			})
			e.binding("p", "p", []any{"Deny"}, nil)
		}},
		{"two", func(e *env) {
			for _, name := range []string{"p1", "p2"} {
				e.policy(name, map[string]any{"validations": []any{map[string]any{"expression": "size(object.data) <= 10"}}})
				e.binding(name, name, []any{"Deny"}, nil)
			}
		}},
		{"params", func(e *env) {
			if err := e.createIn("default", withData(configMap("limits", nil), map[string]any{"max": "10"}), nil); err != nil {
				b.Fatal(err)
			}
			e.policy("p", map[string]any{"paramKind": map[string]any{"apiVersion": "v1", "kind": "ConfigMap"},
				"validations": []any{map[string]any{"expression": "size(object.data) <= int(params.data.max)"}}})
			e.binding("p", "p", []any{"Deny"}, map[string]any{"paramRef": map[string]any{"name": "limits", "parameterNotFoundAction": "Deny"}})
		}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkCreates(b, c.setup) })
	}
}

// BenchmarkCreateThroughMutatingPolicies is a ConfigMap create through
// the registry with a MutatingAdmissionPolicy bound that does not match
// it, and with ones that do: an apply configuration adding a label, a
// JSON Patch doing the same, and both in one policy.
func BenchmarkCreateThroughMutatingPolicies(b *testing.B) {
	const apply = "Object{metadata: Object.metadata{labels: {'seen': 'yes'}}}"
	const patch = "[JSONPatch{op: 'add', path: '/metadata/labels', value: {'patched': 'yes'}}]"
	for _, c := range []struct {
		name  string
		setup func(e *env)
	}{
		{"unmatched", func(e *env) {
			e.mutatingPolicy("p", map[string]any{"matchConstraints": labelled("never", "yes"), "mutations": []any{applyConfiguration(apply)}})
			e.mutatingBinding("p", "p", nil)
		}},
		{"apply", func(e *env) {
			e.mutatingPolicy("p", map[string]any{"mutations": []any{applyConfiguration(apply)}})
			e.mutatingBinding("p", "p", nil)
		}},
		{"jsonpatch", func(e *env) {
			e.mutatingPolicy("p", map[string]any{"mutations": []any{jsonPatch(patch)}})
			e.mutatingBinding("p", "p", nil)
		}},
		{"both", func(e *env) {
			e.mutatingPolicy("p", map[string]any{"mutations": []any{jsonPatch(patch), applyConfiguration(apply)}})
			e.mutatingBinding("p", "p", nil)
		}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkCreates(b, c.setup) })
	}
}

// BenchmarkLoadPolicies reads every admission configuration again, as
// each write of one does, with 50 policies bound, none of them changed.
func BenchmarkLoadPolicies(b *testing.B) {
	e := newEnv(b)
	for i := range 50 {
		name := fmt.Sprintf("p%d", i)
		e.policy(name, map[string]any{
			"variables":   []any{map[string]any{"name": "keys", "expression": "has(object.data) ? size(object.data) : 0"}},
			"validations": []any{map[string]any{"expression": "variables.keys <= 10", "messageExpression": "'too many keys: ' + string(variables.keys)"}},
		})
		e.binding(name, name, []any{"Deny"}, nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := e.w.Load(e.ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadThroughConversionWebhook reads Widgets (a kind whose
// versions a conversion webhook converts): a get and a list of 100 in the
// storage version, which call nothing, and in the other version, which
// the memo of conversions answers once each object has been converted;
// and the conversion itself, one HTTPS call (to a server in this process)
// with 1 or 100 objects, what a read of objects not converted before
// costs.
func BenchmarkReadThroughConversionWebhook(b *testing.B) {
	c := newConverter(b)
	ctx, res := c.widgets(b, "/convert", "v1")
	for i := range 100 {
		if _, err := res.Create(ctx, "v1", "default", widget("v1", fmt.Sprintf("w%d", i), "nginx:1"), registry.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, v := range []string{"v1", "v2"} {
		b.Run("get/"+v, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := res.Get(ctx, v, "default", "w0", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, v := range []string{"v1", "v2"} {
		b.Run("list100/"+v, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := res.List(ctx, v, "default", registry.ListOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	list, err := res.List(ctx, "v1", "default", registry.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
	}
	conv := &webhook.Conversions{}
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("convert%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := conv.Convert(ctx, res.Kind(), objs[:n], "v2"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
