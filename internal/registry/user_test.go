package registry_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry"
)

// A context is kplane's own when it carries no user or acts as a
// controller, whose user it still shows.
func TestInternal(t *testing.T) {
	ctx := context.Background()
	if !registry.Internal(ctx) {
		t.Error("a context without a user is not internal")
	}
	client := registry.WithUser(ctx, registry.User{Name: "alice"})
	if registry.Internal(client) {
		t.Error("a client's context is internal")
	}
	gc := registry.AsController(ctx, registry.ControllerUser("generic-garbage-collector"))
	u, ok := registry.UserFrom(gc)
	if !registry.Internal(gc) || !ok || u.Name != "system:serviceaccount:kube-system:generic-garbage-collector" ||
		!slices.Equal(u.Groups, []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}) {
		t.Errorf("a controller's context: internal %v, user %+v (%v)", registry.Internal(gc), u, ok)
	}
	if u, _ := registry.UserFrom(registry.AsController(ctx, registry.APIServerUser)); u.Name != "system:apiserver" || u.UID == "" ||
		!slices.Equal(u.Groups, []string{"system:authenticated", "system:masters"}) {
		t.Errorf("kube-apiserver's own user: %+v", u)
	}
}
