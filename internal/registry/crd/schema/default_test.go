package schema

import (
	"reflect"
	"testing"
)

// Expected answers: kubernetes/kubernetes staging/src/k8s.io/
// apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go
// (missing or non-nullable null fields get their default, top-down, in
// properties, items and additionalProperties) and the docs
// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#defaulting-and-nullable
// ("null values for fields that either don't specify the nullable flag,
// or give it a false value, will be pruned before defaulting happens";
// nullable fields keep null).
func TestDefault(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"top level and nested object defaulted",
			`{spec: {image: abc, schedule: {}}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: hello, owner: nobody, schedule: {window: {days: 7}}}}`},
		{"set values kept",
			`{spec: {image: abc, replicas: 5, tier: cache, note: hi, owner: me, schedule: {window: {days: 1}}}}`,
			`{spec: {image: abc, replicas: 5, tier: cache, note: hi, owner: me, schedule: {window: {days: 1}}}}`},
		{"array items defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, ports: [{name: a, port: 1}, {name: b, port: 2, protocol: UDP}]}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, ports: [{name: a, port: 1, protocol: TCP}, {name: b, port: 2, protocol: UDP}]}}`},
		{"additionalProperties values defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, limits: {cpu: {min: 1}, mem: {max: 5}}}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: x, owner: x, limits: {cpu: {min: 1, max: 100}, mem: {max: 5}}}}`},
		{"nullable null kept, non-nullable null defaulted",
			`{spec: {image: abc, replicas: 1, tier: backend, note: null, owner: null}}`,
			`{spec: {image: abc, replicas: 1, tier: backend, note: null, owner: nobody}}`},
		{"missing spec not created",
			`{status: {phase: Running}}`,
			`{status: {phase: Running}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			obj := parse(t, c.in)
			widget(t).Default(obj)
			if want := parse(t, c.want); !reflect.DeepEqual(obj, want) {
				t.Errorf("defaulted to\n%v\nwant\n%v", obj, want)
			}
		})
	}
}

func TestDefaultCopiesValues(t *testing.T) {
	s := widget(t)
	a, b := parse(t, `{spec: {image: abc, schedule: {}}}`), parse(t, `{spec: {image: abc, schedule: {}}}`)
	s.Default(a)
	s.Default(b)
	a["spec"].(map[string]any)["schedule"].(map[string]any)["window"].(map[string]any)["days"] = int64(1)
	if got := b["spec"].(map[string]any)["schedule"].(map[string]any)["window"].(map[string]any)["days"]; got != int64(7) {
		t.Fatalf("defaults share memory: %v", got)
	}
}
