package apiserver

import (
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
)

// Every version of every built-in kind has a protobuf form, as from
// kube-apiserver: client-go's typed clients in kube-controller-manager and
// kubelet send protobuf bodies, which a kind without one would refuse.
func TestEveryBuiltInKindHasProtobuf(t *testing.T) {
	kinds := append(core.Kinds(), core.Namespace(), crd.Kind())
	checked := 0
	for _, k := range kinds {
		if k.Typed == nil {
			continue
		}
		for _, v := range k.Versions {
			checked++
			if !protoCapable(k, v) {
				t.Errorf("%s has no protobuf form", k.GroupVersionKind(v))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d kinds checked", checked)
	}
}
