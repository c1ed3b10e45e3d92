package registry

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
)

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

// WithUserFunc returns ctx carrying the user f returns, found only when
// asked for (by UserFrom): for writes, whose admission webhooks are told
// who sent them, while most never ask.
func WithUserFunc(ctx context.Context, f func() User) context.Context {
	return context.WithValue(ctx, userKey{}, f)
}

type internalKey struct{}

// AsController returns ctx acting as one of kplane's own controllers,
// shown to admission (webhooks' userInfo, policies' request.userInfo) as
// u: the user the same controller acts as upstream (ControllerUser,
// APIServerUser). Its writes are kplane's own (Internal).
func AsController(ctx context.Context, u User) context.Context {
	return context.WithValue(WithUser(ctx, u), internalKey{}, true)
}

// Internal reports whether ctx is kplane's own rather than a client's:
// it carries no user, or acts as a controller (AsController). Checks of
// what a client may do (RBAC's escalation checks, who may name policy
// parameters) do not apply to it.
func Internal(ctx context.Context) bool {
	if internal, _ := ctx.Value(internalKey{}).(bool); internal {
		return true
	}
	_, ok := UserFrom(ctx)
	return !ok
}

// ControllerUser is the user kube-controller-manager's controller name
// acts as when it runs with --use-service-account-credentials, as
// kubeadm runs it: the service account kube-system/name (kplane keeps no
// such account, so the user has no uid).
func ControllerUser(name string) User {
	return User{
		Name:   "system:serviceaccount:kube-system:" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
	}
}

// KubeControllerManager is the user of kube-controller-manager's own
// credentials, which the controllers that must run before any service
// account token exists (the tokens controller) act as.
var KubeControllerManager = User{Name: "system:kube-controller-manager", Groups: []string{"system:authenticated"}}

// APIServerUser is the user kube-apiserver's own controllers act as
// (its loopback client's): in system:masters, with a uid made at start.
var APIServerUser = User{Name: "system:apiserver", UID: string(uuid.NewUUID()), Groups: []string{"system:authenticated", "system:masters"}}

// Authenticated is u with the group system:authenticated, as upstream's
// authenticated group adder gives it to every user an authenticator
// names: not to system:anonymous, nor to a user already in it or in
// system:unauthenticated.
func Authenticated(u User) User {
	if u.Name == "system:anonymous" || slices.Contains(u.Groups, "system:authenticated") || slices.Contains(u.Groups, "system:unauthenticated") {
		return u
	}
	u.Groups = append(slices.Clone(u.Groups), "system:authenticated")
	return u
}

// AgnosticAudiences are the audiences an authenticator whose tokens name
// none holds a user for, as upstream's audience-agnostic wrapper gives
// them: those of the API server's own (implicit) that were asked
// (wanted), in the API server's order. None: the token is not for this
// request.
func AgnosticAudiences(wanted, implicit []string) []string {
	var auds []string
	for _, a := range implicit {
		if slices.Contains(wanted, a) {
			auds = append(auds, a)
		}
	}
	return auds
}

// UserFrom returns the user ctx carries, and whether it carries one.
func UserFrom(ctx context.Context) (User, bool) {
	switch u := ctx.Value(userKey{}).(type) {
	case User:
		return u, true
	case func() User:
		return u(), true
	}
	return User{}, false
}

type createByNameKey struct{}

// withCreateByName marks ctx as a create by a PUT to the object's own
// path (Kind.CreateOnUpdate), not a POST to its collection.
func withCreateByName(ctx context.Context) context.Context {
	return context.WithValue(ctx, createByNameKey{}, true)
}

// CreatedByName reports whether a create (Kind.Admit with no old
// object) is a PUT to the object's own path, whose request names the
// object, rather than a POST to its collection, whose request names
// none: upstream authorizes some checks on the request's name.
func CreatedByName(ctx context.Context) bool {
	by, _ := ctx.Value(createByNameKey{}).(bool)
	return by
}

type warnKey struct{}

// WithWarnings returns ctx carrying warn, which AddWarning calls: the API
// server passes one that adds a Warning header to the answer.
func WithWarnings(ctx context.Context, warn func(msg string)) context.Context {
	return context.WithValue(ctx, warnKey{}, warn)
}

// AddWarning tells the client msg in a Warning header, as upstream's
// warning.AddWarning, if ctx carries a way to (WithWarnings).
func AddWarning(ctx context.Context, msg string) {
	if warn, ok := ctx.Value(warnKey{}).(func(string)); ok {
		warn(msg)
	}
}

type auditKey struct{}

// WithAuditAnnotations returns ctx carrying annotate, which
// AddAuditAnnotation calls: the API server passes one that adds the
// annotation to the request's audit event.
func WithAuditAnnotations(ctx context.Context, annotate func(key, value string)) context.Context {
	return context.WithValue(ctx, auditKey{}, annotate)
}

// AddAuditAnnotation annotates the request's audit event with key and
// value, as upstream's admission attributes' AddAnnotation, if ctx
// carries a way to (WithAuditAnnotations).
func AddAuditAnnotation(ctx context.Context, key, value string) {
	if annotate, ok := ctx.Value(auditKey{}).(func(string, string)); ok {
		annotate(key, value)
	}
}

type webhookTimeKey struct{}

// WebhookTime is the time a request's admission webhooks took, which the
// request's latency SLI leaves out, as upstream's: the mutating webhooks'
// calls summed (they run one after another), and the longest of the
// validating ones' (they run at once).
type WebhookTime struct {
	mutating, validating atomic.Int64 // nanoseconds
}

// Total is the time to leave out.
func (t *WebhookTime) Total() time.Duration {
	return time.Duration(t.mutating.Load() + t.validating.Load())
}

// WithWebhookTime returns ctx carrying t, which TrackWebhook adds to.
func WithWebhookTime(ctx context.Context, t *WebhookTime) context.Context {
	return context.WithValue(ctx, webhookTimeKey{}, t)
}

// TrackWebhook counts a call of an admission webhook that took d in the
// WebhookTime ctx carries, if any.
func TrackWebhook(ctx context.Context, mutating bool, d time.Duration) {
	t, ok := ctx.Value(webhookTimeKey{}).(*WebhookTime)
	if !ok {
		return
	}
	if mutating {
		t.mutating.Add(int64(d))
		return
	}
	for {
		old := t.validating.Load()
		if int64(d) <= old || t.validating.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}
