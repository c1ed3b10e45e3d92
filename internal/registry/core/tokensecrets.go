package core

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// TokenSecrets keeps the Secrets of type kubernetes.io/service-account-token
// as kube-controller-manager's tokens controller keeps them, for the
// clients that still take a long-lived token from such a Secret (CI
// systems, Argo CD's cluster secrets, older dashboards):
//   - a Secret that names (annotation kubernetes.io/service-account.name)
//     a ServiceAccount that exists gets a token that never expires
//     (LegacyIssuer), the namespace, the CA (ca.crt) and the account's
//     uid (annotation kubernetes.io/service-account.uid). The token is
//     valid while the Secret holds it;
//   - a Secret that names an account that does not exist, or exists with
//     another uid, is deleted;
//   - deleting an account deletes its token Secrets.
//
// Upstream no longer makes such a Secret for every ServiceAccount (since
// v1.24), and neither does kplane: a user makes one. Not done: upstream's
// tracking of their use (the label kubernetes.io/legacy-token-last-used)
// and its clean-up of unused ones it made itself.
type TokenSecrets struct {
	Registry *registry.Registry
	Tokens   *Tokens
	// RootCA is the CA certificate (PEM) written as ca.crt.
	RootCA []byte
	Logger *slog.Logger
	// Retry is how long a failed watch waits before it starts again.
	// Default 1 s.
	Retry time.Duration
}

// Run works until ctx ends.
func (c *TokenSecrets) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.KubeControllerManager) // as upstream's tokens controller
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return followAgain(ctx, c.Registry, c.Logger, c.Retry, "token secrets", "secrets", "serviceaccounts", c.follow)
}

// tokenSecrets selects the Secrets of the type this controller keeps.
var tokenSecrets = fields.OneTermEqualSelector("type", string(corev1.SecretTypeServiceAccountToken))

// follow watches the token Secrets and the ServiceAccounts until a watch
// ends. The Secrets' initial events sync every one once.
func (c *TokenSecrets) follow(ctx context.Context, secrets, accounts *registry.Resource) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := registry.ListOptions{}
	opts.Predicate.Field = tokenSecrets
	sw, err := secrets.Watch(wctx, "v1", "", opts)
	if err != nil {
		return err
	}
	defer sw.Stop()
	aw, err := accounts.Watch(wctx, "v1", "", registry.ListOptions{})
	if err != nil {
		return err
	}
	defer aw.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-sw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			// The event's object may be shared with other watchers
			// (storage.Shared): sync only reads it.
			if u, isObj := ev.Object.(runtime.Unstructured); isObj && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				c.sync(ctx, secrets, accounts, &unstructured.Unstructured{Object: u.UnstructuredContent()})
			}
		case ev, ok := <-aw.ResultChan():
			if !ok || ev.Type == watch.Error {
				return watchEnded(ev)
			}
			if sa, isObj := ev.Object.(metav1.Object); isObj && ev.Type == watch.Deleted {
				c.deleteTokens(ctx, secrets, sa.GetNamespace(), sa.GetName(), sa.GetUID())
			}
		}
	}
}

// sync fills a token Secret, or deletes it if its account is gone. A
// write that loses a race is left to the event that follows it.
func (c *TokenSecrets) sync(ctx context.Context, secrets, accounts *registry.Resource, s *unstructured.Unstructured) {
	if s.GetDeletionTimestamp() != nil {
		return
	}
	ns, ann := s.GetNamespace(), s.GetAnnotations()
	sa, err := accounts.Get(ctx, "v1", ns, ann[corev1.ServiceAccountNameKey], metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && ann[corev1.ServiceAccountUIDKey] != "" && ann[corev1.ServiceAccountUIDKey] != string(sa.GetUID())):
		c.delete(ctx, secrets, s)
		return
	case err != nil:
		c.Logger.Warn("token secrets: reading the service account", "secret", ns+"/"+s.GetName(), "err", err)
		return
	}
	data, _, _ := unstructured.NestedStringMap(s.Object, "data")
	ca, _ := base64.StdEncoding.DecodeString(data[corev1.ServiceAccountRootCAKey])
	needsCA := len(c.RootCA) > 0 && !bytes.Equal(ca, c.RootCA)
	needsNamespace := data[corev1.ServiceAccountNamespaceKey] == ""
	needsToken := data[corev1.ServiceAccountTokenKey] == ""
	if !needsCA && !needsNamespace && !needsToken {
		return
	}
	next := s.DeepCopy()
	if data == nil {
		data = map[string]string{}
	}
	if needsCA {
		data[corev1.ServiceAccountRootCAKey] = base64.StdEncoding.EncodeToString(c.RootCA)
	}
	if needsNamespace {
		data[corev1.ServiceAccountNamespaceKey] = base64.StdEncoding.EncodeToString([]byte(ns))
	}
	if needsToken {
		token, err := c.Tokens.legacyToken(sa, s.GetName())
		if err != nil {
			c.Logger.Warn("token secrets: signing a token", "secret", ns+"/"+s.GetName(), "err", err)
			return
		}
		data[corev1.ServiceAccountTokenKey] = base64.StdEncoding.EncodeToString([]byte(token))
	}
	if err := unstructured.SetNestedStringMap(next.Object, data, "data"); err != nil {
		return
	}
	ann = next.GetAnnotations()
	ann[corev1.ServiceAccountUIDKey] = string(sa.GetUID())
	next.SetAnnotations(ann)
	// next carries s's resourceVersion: a Secret changed meanwhile is a
	// conflict, and its own event syncs it again.
	if _, err := secrets.Update(ctx, "v1", ns, s.GetName(), next, registry.WriteOptions{FieldManager: controllerManager}); err != nil &&
		!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		c.Logger.Warn("token secrets: filling a token secret", "secret", ns+"/"+s.GetName(), "err", err)
	}
}

// deleteTokens deletes the token Secrets of the deleted account
// ns/name: those naming it, with its uid or none.
func (c *TokenSecrets) deleteTokens(ctx context.Context, secrets *registry.Resource, ns, name string, uid types.UID) {
	opts := registry.ListOptions{}
	opts.Predicate.Field = tokenSecrets
	list, err := secrets.List(ctx, "v1", ns, opts)
	if err != nil {
		c.Logger.Warn("token secrets: listing the tokens of a deleted service account", "serviceAccount", ns+"/"+name, "err", err)
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		ann := s.GetAnnotations()
		if ann[corev1.ServiceAccountNameKey] == name && (ann[corev1.ServiceAccountUIDKey] == "" || ann[corev1.ServiceAccountUIDKey] == string(uid)) {
			c.delete(ctx, secrets, s)
		}
	}
}

// delete deletes the token Secret s, if it is still that Secret (its uid).
func (c *TokenSecrets) delete(ctx context.Context, secrets *registry.Resource, s *unstructured.Unstructured) {
	uid := s.GetUID()
	_, _, err := secrets.Delete(ctx, "v1", s.GetNamespace(), s.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
		registry.WriteOptions{FieldManager: controllerManager})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.Logger.Warn("token secrets: deleting the token secret of a missing service account", "secret", s.GetNamespace()+"/"+s.GetName(), "err", err)
	}
}
