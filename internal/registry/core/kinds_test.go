package core

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// configMapKeyErrors answers as validation.IsConfigMapKey for any key:
// random keys over the allowed characters and a few others, of lengths
// around the limit, and the dot cases.
func TestConfigMapKeyErrorsMatchesTheLibrary(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	alphabet := "-._aZ09/ é\x00"
	keys := []string{"", ".", "..", "...", "..a", ".a", "a..", "a.b", strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat(".", 3)}
	for range 20000 {
		n := rng.IntN(8)
		if rng.IntN(50) == 0 {
			n = 250 + rng.IntN(6)
		}
		var b strings.Builder
		for range n {
			if rng.IntN(4) == 0 {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			} else {
				b.WriteByte("abcXYZ789-._"[rng.IntN(12)])
			}
		}
		keys = append(keys, b.String())
	}
	for _, k := range keys {
		if got, want := configMapKeyErrors(k), validation.IsConfigMapKey(k); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %v, want %v", k, got, want)
		}
	}
}

// RBAC names are checked as apimachinery's path-segment rule checks
// them, message for message.
func TestPathSegmentName(t *testing.T) {
	for _, name := range []string{"", "a", ".", "..", "...", "a.b", "a/b", "a%b", "/%", "%", "./", "..%"} {
		for _, prefix := range []bool{false, true} {
			//lint:ignore SA1019 the deprecated function is the reference
			got, want := pathSegmentName(name, prefix), path.ValidatePathSegmentName(name, prefix)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q, prefix %v: %q, want %q", name, prefix, got, want)
			}
		}
	}
}

// A Lease stored with coordinated leader election's fields keeps them on
// update, and they are checked as upstream's ValidateLeaseSpec checks
// them (its path for the strategy repeats "strategy").
func TestLeaseElectionFieldsOfAStoredLease(t *testing.T) {
	old := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"strategy": "OldestEmulationVersion", "preferredHolder": "x"}}}
	next := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"strategy": "Bogus", "preferredHolder": "x"}}}
	dropLeaseElectionFields(next, old)
	var got []string
	for _, e := range validateLease(next) {
		got = append(got, e.Error())
	}
	if want := []string{`spec.strategy.strategy: Unsupported value: "Bogus": supported values: "OldestEmulationVersion"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("errors %q, want %q", got, want)
	}
	unstructured.SetNestedField(next.Object, "example.com/mine", "spec", "strategy")
	if errs := validateLease(next); len(errs) != 0 {
		t.Errorf("a qualified strategy: %v", errs)
	}
	unstructured.RemoveNestedField(next.Object, "spec", "strategy")
	if errs := validateLease(next); len(errs) != 1 || errs[0].Error() != "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined" {
		t.Errorf("a holder without a strategy: %v", errs)
	}
}
