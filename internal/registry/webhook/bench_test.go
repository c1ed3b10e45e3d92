package webhook_test

import (
	"fmt"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry"
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
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b)
			c.setup(e)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := e.createConfigMap(fmt.Sprintf("c%d", i), nil, registry.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
