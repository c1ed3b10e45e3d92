package core

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Bootstrap tokens, as Kubernetes defines them (k8s.io/cluster-bootstrap):
// "<id>.<secret>", held by the Secret kube-system/bootstrap-token-<id> of
// type bootstrap.kubernetes.io/token.
const (
	bootstrapTokenType     = "bootstrap.kubernetes.io/token"
	bootstrapTokenPrefix   = "bootstrap-token-"
	bootstrapDefaultGroup  = "system:bootstrappers"
	bootstrapUserPrefix    = "system:bootstrap:"
	bootstrapTokenNS       = "kube-system"
	bootstrapUsageAuthnKey = "usage-bootstrap-authentication"
)

var (
	bootstrapToken      = regexp.MustCompile(`\A([a-z0-9]{6})\.([a-z0-9]{16})\z`)
	bootstrapGroup      = regexp.MustCompile(`\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z`)
	secretsResource     = schema.GroupResource{Resource: "secrets"}
	bootstrapTokenField = fields.OneTermEqualSelector("type", bootstrapTokenType)
)

// BootstrapTokens authenticates bootstrap tokens, as kube-apiserver's
// --enable-bootstrap-token-auth does: a token "<id>.<secret>" whose Secret
// kube-system/bootstrap-token-<id> is of the bootstrap token type, holds
// that token-id and token-secret, has not expired, is not being deleted,
// and has usage-bootstrap-authentication "true" is the user
// system:bootstrap:<id>, in system:bootstrappers and the groups of its
// auth-extra-groups (each system:bootstrappers:…). Any other token is not
// one of these (not authenticated, no error), as upstream. It is asked
// after the service account tokens and before the JWT authenticators, and
// valid for the API server's audiences.
type BootstrapTokens struct {
	Registry *registry.Registry
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// AuthenticateToken implements TokenAuthenticator.
func (b *BootstrapTokens) AuthenticateToken(ctx context.Context, token string, wanted, implicit []string) (registry.User, []string, bool, error) {
	m := bootstrapToken.FindStringSubmatch(token)
	if m == nil {
		return registry.User{}, nil, false, nil
	}
	id, secret := m[1], m[2]
	res, ok := b.Registry.Get(secretsResource)
	if !ok {
		return registry.User{}, nil, false, nil
	}
	obj, err := res.Get(ctx, "v1", bootstrapTokenNS, bootstrapTokenPrefix+id, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		return registry.User{}, nil, false, nil
	}
	if err != nil {
		return registry.User{}, nil, false, err
	}
	data := secretData(obj)
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	typ, _, _ := unstructured.NestedString(obj.Object, "type")
	if obj.GetDeletionTimestamp() != nil || typ != bootstrapTokenType || data == nil ||
		subtle.ConstantTimeCompare([]byte(data["token-secret"]), []byte(secret)) != 1 || data["token-id"] != id ||
		bootstrapExpired(data, now()) || data[bootstrapUsageAuthnKey] != "true" {
		return registry.User{}, nil, false, nil
	}
	groups := []string{bootstrapDefaultGroup}
	if extra := data["auth-extra-groups"]; extra != "" {
		for _, g := range strings.Split(extra, ",") {
			if !bootstrapGroup.MatchString(g) {
				return registry.User{}, nil, false, nil
			}
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	auds := registry.AgnosticAudiences(wanted, implicit)
	if len(auds) == 0 {
		return registry.User{}, nil, false, nil
	}
	return registry.Authenticated(registry.User{Name: bootstrapUserPrefix + id, Groups: groups}), auds, true, nil
}

// secretData is a Secret's data, decoded (nil without data).
func secretData(obj *unstructured.Unstructured) map[string]string {
	raw, ok := obj.Object["data"].(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, _ := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err == nil {
			out[k] = string(b)
		}
	}
	return out
}

// bootstrapExpiry is a bootstrap token's expiration, and false without
// one; an expiration that does not parse has passed (upstream's rule).
func bootstrapExpiry(data map[string]string) (time.Time, bool) {
	s := data["expiration"]
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, true
	}
	return t, true
}

func bootstrapExpired(data map[string]string, now time.Time) bool {
	at, ok := bootstrapExpiry(data)
	return ok && !at.After(now)
}

// BootstrapTokenCleaner deletes bootstrap token Secrets once they expire,
// as kube-controller-manager's tokencleaner does (kubeadm turns it on;
// kplane runs it with --enable-bootstrap-token-auth): each Secret of the
// bootstrap token type in kube-system with an expiration is deleted then
// (at once if it does not parse), conditional on its uid.
type BootstrapTokenCleaner struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run works until ctx ends.
func (c *BootstrapTokenCleaner) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.ControllerUser("token-cleaner"))
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	res, ok := c.Registry.Get(secretsResource)
	if !ok {
		<-ctx.Done()
		return nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, "v1", bootstrapTokenNS, registry.ListOptions{ListOptions: storage.ListOptions{
			Predicate: storage.Predicate{Field: bootstrapTokenField}}})
		if err != nil {
			c.Logger.Warn("token cleaner: watch", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		c.follow(ctx, res, w, timer)
		w.Stop()
	}
	return nil
}

func (c *BootstrapTokenCleaner) follow(ctx context.Context, res *registry.Resource, w watch.Interface, timer *time.Timer) {
	followExpiring(ctx, w, timer, c.Now, func(x *expiries, ev watch.Event) {
		u, isObj := ev.Object.(runtime.Unstructured)
		if !isObj || ev.Type == watch.Bookmark {
			return
		}
		obj := &unstructured.Unstructured{Object: u.UnstructuredContent()}
		if at, expires := bootstrapExpiry(secretData(obj)); ev.Type != watch.Deleted && expires {
			x.set(obj.GetNamespace(), obj.GetName(), obj.GetUID(), "", at)
		} else {
			x.drop(obj.GetNamespace(), obj.GetName())
		}
	}, func(due *expiry) bool {
		uid := due.uid
		_, _, err := res.Delete(ctx, "v1", due.ns, due.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
			registry.WriteOptions{FieldManager: controllerManager})
		switch {
		case err == nil:
			c.Logger.Info("expired bootstrap token deleted", "secret", due.ns+"/"+due.name)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		default:
			c.Logger.Warn("token cleaner: deleting", "secret", due.ns+"/"+due.name, "err", err)
			return false
		}
		return true
	})
}
