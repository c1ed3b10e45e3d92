package schema

import (
	"context"
	"reflect"
	"testing"
)

// Expected answers: kubernetes/kubernetes staging/src/k8s.io/
// apiextensions-apiserver pkg/apiserver/validation/ratcheting.go (an
// error in a value deep-equal to its correlated old value becomes a
// warning), k8s.io/apiserver pkg/cel/common/equality.go (fields
// correlate by name, list-type=map items by key, other list items not
// at all), pkg/registry/customresource/strategy.go ValidateUpdate (list
// set/map checks skipped when the old object fails them) and KEP-4008
// https://github.com/kubernetes/enhancements/tree/master/keps/sig-api-machinery/4008-crd-ratcheting
func TestValidateRatchets(t *testing.T) {
	for _, c := range []struct {
		name, old, new string
		want           []string
	}{
		{"unchanged invalid field allowed",
			`{spec: {image: abc, replicas: 11}}`,
			`{spec: {image: abcd, replicas: 11}}`,
			nil},
		{"changed invalid field refused",
			`{spec: {image: abc, replicas: 11}}`,
			`{spec: {image: abc, replicas: 12}}`,
			[]string{"spec.replicas: Invalid value: 12: spec.replicas in body should be less than or equal to 10"}},
		{"newly invalid field refused",
			`{spec: {image: abc}}`,
			`{spec: {image: abc, tier: gpu}}`,
			[]string{`spec.tier: Unsupported value: "gpu": supported values: "frontend", "backend", "cache"`}},
		{"map list item correlated by key across reordering",
			`{spec: {image: abc, ports: [{name: a, port: 70000}, {name: b, port: 2}]}}`,
			`{spec: {image: abc, ports: [{name: b, port: 3}, {name: a, port: 70000}]}}`,
			nil},
		{"map list item changed refused",
			`{spec: {image: abc, ports: [{name: a, port: 70000}]}}`,
			`{spec: {image: abc, ports: [{name: a, port: 70001}]}}`,
			[]string{"spec.ports[0].port: Invalid value: 70001: spec.ports[0].port in body should be less than or equal to 65535"}},
		{"atomic list items do not correlate",
			`{spec: {image: abc, tags: [abcdefghijkl]}}`,
			`{spec: {image: abc, tags: [abcdefghijkl, b]}}`,
			[]string{"spec.tags[0]: Too long: may not be more than 10 bytes"}},
		{"unchanged missing required field allowed",
			`{spec: {replicas: 1}}`,
			`{spec: {replicas: 1}, status: {phase: Running}}`,
			nil},
		{"duplicates kept when old had them",
			`{spec: {image: abc, tags: [a, a]}}`,
			`{spec: {image: abc, tags: [a, a, b]}}`,
			nil},
		{"duplicates refused when old had none",
			`{spec: {image: abc, tags: [a]}}`,
			`{spec: {image: abc, tags: [a, a]}}`,
			[]string{`spec.tags[1]: Duplicate value: "a"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := errorStrings(widget(t).Validate(context.Background(), parse(t, c.new), parse(t, c.old)))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
