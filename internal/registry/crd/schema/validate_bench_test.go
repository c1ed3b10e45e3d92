package schema

import (
	"context"
	"testing"
)

// validWidget is a Widget of testdata/widgets.yaml that passes every
// check, as an operator writes one.
const validWidget = `
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default, labels: {app: w}}
spec:
  image: registry.example.com/widget:1.0
  replicas: 3
  tier: cache
  ratio: 0.5
  batch: 10
  email: ops@example.com
  ports: [{name: http, port: 80}, {name: https, port: 443, protocol: TCP}]
  tags: [a, b]
  selector: {app: w}
  limits: {cpu: {max: 4, min: 1}}
  maxUnavailable: 25%
  cpu: 500m
  note: null
  schedule: {start: "2024-01-02T03:04:05Z", timeout: 1h}
  template: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}
  config: {level: 2, anything: {goes: here}}
status:
  readyReplicas: 3
  phase: Running
  conditions: [{type: Ready, status: "True", lastTransitionTime: "2024-01-02T03:04:05Z"}]
`

// BenchmarkValidate is the schema part of a custom resource's create
// (no old object) and of a status update (ratcheting against the old
// object), for a valid Widget.
func BenchmarkValidate(b *testing.B) {
	s := widget(b)
	obj := parse(b, validWidget)
	old := parse(b, validWidget)
	old["status"].(map[string]any)["readyReplicas"] = int64(2)
	for _, c := range []struct {
		name string
		old  map[string]any
	}{{"create", nil}, {"update", old}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs := s.Validate(context.Background(), obj, c.old); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

// BenchmarkPrune is the pruning of a valid Widget (nothing to remove, the
// common case) as a create's body goes through it.
func BenchmarkPrune(b *testing.B) {
	s := widget(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		obj := parse(b, validWidget)
		b.StartTimer()
		if unknown := s.Prune(obj); len(unknown) > 0 {
			b.Fatal(unknown)
		}
	}
}
