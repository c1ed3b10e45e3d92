package registry_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kplane-dev/kplane/internal/registry"
)

// BenchmarkDecode decodes a create body of a 1 KiB ConfigMap as the HTTP
// layer does: through the Go type (strict), into an object.
func BenchmarkDecode(b *testing.B) {
	k := &registry.Kind{Kind: "ConfigMap", Versions: []string{"v1"}, Resource: "configmaps",
		Typed: func() runtime.Object { return &corev1.ConfigMap{} }}
	body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-00001","namespace":"default","labels":{"app":"kplane-bench"}},"data":{"payload":"` + strings.Repeat("x", 1024) + `"}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		obj, strict, err := registry.Decode(k, body)
		if err != nil || len(strict) > 0 || obj.GetName() != "cm-00001" {
			b.Fatal(err, strict)
		}
	}
}
