package registry

import "context"

// User is who sent a request, as the API server authenticated them.
type User struct {
	Name   string
	UID    string // a service account's; empty for a certificate's user
	Groups []string
	Extra  map[string][]string
}

type userKey struct{}

// WithUser returns ctx carrying u, for the kinds whose answers depend on
// who asks (Kind.Review).
func WithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user ctx carries, and whether it carries one.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}
