package registry_test

import (
	"context"
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// fixed answers the same to everything, and lists the rules it holds.
type fixed struct {
	d       registry.Decision
	reason  string
	err     error
	rules   []rbacv1.PolicyRule
	partial bool
	asked   *int
}

func (f fixed) Authorize(context.Context, registry.Attributes) (registry.Decision, string, error) {
	if f.asked != nil {
		*f.asked++
	}
	return f.d, f.reason, f.err
}

func (f fixed) RulesFor(context.Context, registry.User, string) ([]rbacv1.PolicyRule, bool, error) {
	return f.rules, f.partial, f.err
}

// A union's first authorizer to allow or deny decides, with its own
// reason and error; the ones after it are not asked. If none does, the
// request is not allowed, with every reason after its authorizer's name,
// one per line, and every error.
func TestUnion(t *testing.T) {
	ctx := context.Background()
	bob := registry.Attributes{User: registry.User{Name: "bob", Groups: []string{"system:authenticated"}}, Verb: "get", Path: "/x"}
	var asked int
	last := registry.Named{Name: "last", Authorizer: fixed{d: registry.Allow, reason: "last allows", asked: &asked}}
	down := errors.New("webhook down")
	for _, c := range []struct {
		name   string
		u      registry.Union
		want   registry.Decision
		reason string
		err    string
		asked  int
	}{
		{"the first allows", registry.Union{{Name: "a", Authorizer: fixed{d: registry.Allow, reason: "yes"}}, last}, registry.Allow, "yes", "", 0},
		{"the first denies", registry.Union{{Name: "a", Authorizer: fixed{d: registry.Deny, reason: "no", err: down}}, last}, registry.Deny, "no", "webhook down", 0},
		{"no opinion, then allowed", registry.Union{{Name: "a", Authorizer: fixed{reason: "dunno", err: down}}, last}, registry.Allow, "last allows", "", 1},
		{"nobody decides", registry.Union{
			{Name: "rbac", Authorizer: fixed{reason: "RBAC: role missing"}},
			{Name: "quiet", Authorizer: fixed{}},
			{Name: "default", Authorizer: fixed{reason: "not here", err: down}},
			{Name: "other", Authorizer: fixed{err: errors.New("timeout")}},
		}, registry.NoOpinion, "rbac: RBAC: role missing\ndefault: not here", "[webhook down, timeout]", 0},
		{"always deny, then allowed", registry.Union{{Name: "alwaysdeny", Authorizer: registry.AlwaysDeny{}}, last}, registry.Allow, "last allows", "", 1},
		{"always deny", registry.Union{{Name: "alwaysdeny", Authorizer: registry.AlwaysDeny{}}}, registry.NoOpinion, "alwaysdeny: Everything is forbidden.", "", 0},
	} {
		asked = 0
		d, reason, err := c.u.Authorize(ctx, bob)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if d != c.want || reason != c.reason || gotErr != c.err || asked != c.asked {
			t.Errorf("%s: %v %q %q, the last asked %d times", c.name, d, reason, gotErr, asked)
		}
	}
}

// system:masters is allowed first; AlwaysAllow allows any authenticated
// user but a request without credentials only to read /version and the
// health checks.
func TestBuiltinAuthorizers(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		authz registry.Authorizer
		user  registry.User
		want  registry.Decision
	}{
		{registry.Privileged, registry.User{Name: "admin", Groups: []string{"system:masters", "system:authenticated"}}, registry.Allow},
		{registry.Privileged, registry.User{Name: "bob", Groups: []string{"system:authenticated"}}, registry.NoOpinion},
		{registry.AlwaysAllow{}, registry.User{Name: "bob", Groups: []string{"system:authenticated"}}, registry.Allow},
		{registry.AlwaysAllow{}, registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, registry.NoOpinion},
		{registry.AlwaysAllow{}, registry.User{Name: "x", Groups: []string{"system:unauthenticated"}}, registry.NoOpinion},
		{registry.AlwaysDeny{}, registry.User{Name: "admin", Groups: []string{"system:masters"}}, registry.NoOpinion},
	} {
		if d, _, _ := c.authz.Authorize(ctx, registry.Attributes{User: c.user, Verb: "get", Path: "/"}); d != c.want {
			t.Errorf("%T for %s: %v, want %v", c.authz, c.user.Name, d, c.want)
		}
	}
	anonymous := registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	for _, c := range []struct {
		a    registry.Attributes
		want registry.Decision
	}{
		{registry.Attributes{User: anonymous, Verb: "get", Path: "/healthz"}, registry.Allow},
		{registry.Attributes{User: anonymous, Verb: "get", Path: "/version"}, registry.Allow},
		{registry.Attributes{User: anonymous, Verb: "post", Path: "/version"}, registry.NoOpinion},
		{registry.Attributes{User: anonymous, Verb: "get", Path: "/healthz/etcd"}, registry.NoOpinion},
		{registry.Attributes{User: anonymous, Verb: "get", ResourceRequest: true, Resource: "pods", Path: "/healthz"}, registry.NoOpinion},
	} {
		if d, _, _ := (registry.AlwaysAllow{}).Authorize(ctx, c.a); d != c.want {
			t.Errorf("AlwaysAllow for anonymous, %+v: %v, want %v", c.a, d, c.want)
		}
	}
}

// A union's rules are those of every authorizer that can list them,
// incomplete if any says so, with every error.
func TestUnionRules(t *testing.T) {
	get := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	list := rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	u := registry.Union{
		registry.Privileged, // lists none
		{Name: "rbac", Authorizer: fixed{rules: []rbacv1.PolicyRule{get}, err: errors.New("role missing")}},
		{Name: "alwaysdeny", Authorizer: registry.AlwaysDeny{}},
		{Name: "default", Authorizer: fixed{rules: []rbacv1.PolicyRule{list}, partial: true, err: errors.New("webhook authorizer does not support user rule resolution")}},
	}
	rules, incomplete, err := u.RulesFor(context.Background(), registry.User{Name: "bob"}, "dev")
	if len(rules) != 2 || rules[0].Verbs[0] != "get" || rules[1].Verbs[0] != "list" || !incomplete ||
		err == nil || err.Error() != "[role missing, webhook authorizer does not support user rule resolution]" {
		t.Errorf("%v, incomplete %v, %v", rules, incomplete, err)
	}
	if rules, incomplete, err := (registry.Union{{Name: "alwaysallow", Authorizer: registry.AlwaysAllow{}}}).RulesFor(context.Background(), registry.User{Name: "bob"}, "dev"); len(rules) != 2 || incomplete || err != nil {
		t.Errorf("AlwaysAllow: %v, %v, %v", rules, incomplete, err)
	}
}
