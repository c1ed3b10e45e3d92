package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// An authorization webhook, as kube-apiserver's --authorization-mode
// Webhook (k8s.io/apiserver's plugin/pkg/authorizer/webhook, read for
// the behaviour, written anew): each request kplane's other authorizers
// have not decided is sent to the webhook as a SubjectAccessReview, and
// its status decides.

// AuthorizationWebhookConfig is how the webhook is called, as
// kube-apiserver's --authorization-webhook-* flags say.
type AuthorizationWebhookConfig struct {
	// KubeConfigFile is --authorization-webhook-config-file: its current
	// context's cluster is the webhook (server is the URL posted to,
	// path and all), its user the credentials kplane presents.
	KubeConfigFile string
	// Version is the SubjectAccessReview version sent, v1 or v1beta1
	// (--authorization-webhook-version; upstream's default is v1beta1).
	Version string
	// AuthorizedTTL and UnauthorizedTTL are how long an answer that
	// allows, and one that does not, is kept for the same question (0:
	// not kept).
	AuthorizedTTL, UnauthorizedTTL time.Duration
	// Timeout bounds each call (0: 30 s).
	Timeout time.Duration
	// FailurePolicyDeny: a call that fails, or a match condition that
	// does not evaluate, denies (the chain stops there); otherwise it is
	// no opinion (the flags' webhook's policy).
	FailurePolicyDeny bool
	// MatchConditions must all be true of a request for the webhook to
	// be asked; a false one makes it no opinion (--authorization-config).
	MatchConditions []*cel.AuthorizationMatchCondition
	// Name is the webhook's, for the logs and metrics ("default" for the
	// flags' webhook).
	Name string
	// Metrics, if set, counts the calls and match conditions.
	Metrics *AuthorizationMetrics
	// Backoff is how a call that failed in a way worth retrying (a
	// connection reset, an answer of 500, 504 or 429, or one that asks
	// to retry later) is tried again; the zero value is upstream's: up to
	// five calls, 500 ms apart and then 1.5 times longer each time.
	Backoff wait.Backoff
	Logger  *slog.Logger
}

// AuthorizationWebhook is an authorizer that asks a webhook.
type AuthorizationWebhook struct {
	cfg     AuthorizationWebhookConfig
	client  *reviewClient
	answers *cache.LRUExpireCache
}

// maxCachedQuestion bounds the size of the request's own attributes of
// a question whose answer is kept: a larger one may be an attempt to
// fill the cache, as upstream's reasoning goes.
const maxCachedQuestion = 10000

// NewAuthorizationWebhook reads cfg's kubeconfig and returns the
// authorizer that calls the webhook it names.
func NewAuthorizationWebhook(cfg AuthorizationWebhookConfig) (*AuthorizationWebhook, error) {
	switch cfg.Version {
	case "":
		cfg.Version = "v1beta1"
	case "v1", "v1beta1":
	default:
		return nil, fmt.Errorf("unsupported webhook authorizer version %q, supported versions are %q, %q", cfg.Version, "v1", "v1beta1")
	}
	client, err := newReviewClient(cfg.KubeConfigFile, cfg.Timeout, cfg.Backoff, "kplane-authorization")
	if err != nil {
		return nil, err
	}
	return &AuthorizationWebhook{cfg: cfg, client: client, answers: cache.NewLRUExpireCache(8192)}, nil
}

// Authorize asks the webhook about a, unless it answered the same
// question lately. A call that fails is no opinion, with the error.
func (w *AuthorizationWebhook) Authorize(ctx context.Context, a registry.Attributes) (registry.Decision, string, error) {
	onError := registry.NoOpinion
	if w.cfg.FailurePolicyDeny {
		onError = registry.Deny
	}
	spec := subjectAccessReviewSpec(a)
	if matches, err := w.matches(ctx, &spec); err != nil {
		return onError, "", err
	} else if !matches {
		return registry.NoOpinion, "", nil
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return onError, "", err
	}
	var status authorizationv1.SubjectAccessReviewStatus
	if kept, ok := w.answers.Get(string(key)); ok {
		status = kept.(authorizationv1.SubjectAccessReviewStatus)
	} else {
		if status, err = w.ask(ctx, spec); err != nil {
			if w.cfg.Logger != nil {
				w.cfg.Logger.Warn("failed calling the authorization webhook", "webhook", w.cfg.Name, "err", err)
			}
			return onError, "", err
		}
		ttl := w.cfg.UnauthorizedTTL
		if status.Allowed {
			ttl = w.cfg.AuthorizedTTL
		}
		if ttl > 0 && questionSize(a) < maxCachedQuestion {
			w.answers.Add(string(key), status, ttl)
		}
	}
	switch {
	case status.Allowed && status.Denied:
		return registry.Deny, status.Reason, errors.New("webhook subject access review returned both allow and deny response")
	case status.Denied:
		return registry.Deny, status.Reason, nil
	case status.Allowed:
		return registry.Allow, status.Reason, nil
	}
	return registry.NoOpinion, status.Reason, nil
}

// matches evaluates the match conditions over spec, as upstream's
// matcher: false at the first that is false; else an error if any did
// not evaluate (all of their errors); else true.
func (w *AuthorizationWebhook) matches(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	if len(w.cfg.MatchConditions) == 0 {
		return true, nil
	}
	fieldSelector, labelSelector := false, false
	for _, c := range w.cfg.MatchConditions {
		fieldSelector = fieldSelector || c.UsesFieldSelector
		labelSelector = labelSelector || c.UsesLabelSelector
	}
	request := matchRequest(spec, fieldSelector, labelSelector)
	start := time.Now()
	var errs []error
	for _, c := range w.cfg.MatchConditions {
		ok, err := c.Eval(ctx, request)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !ok:
			w.cfg.Metrics.matched(w.cfg.Name, time.Since(start), true, len(errs) > 0)
			return false, nil
		}
	}
	w.cfg.Metrics.matched(w.cfg.Name, time.Since(start), false, len(errs) > 0)
	if len(errs) > 0 {
		return false, utilerrors.NewAggregate(errs)
	}
	return true, nil
}

// matchRequest is spec as upstream shows it to match conditions: the
// user's fields always (extra empty if none), every resource attribute
// (empty ones too), and the selectors only to expressions that name
// them.
func matchRequest(spec *authorizationv1.SubjectAccessReviewSpec, fieldSelector, labelSelector bool) map[string]any {
	extra := map[string]any{}
	for k, v := range spec.Extra {
		extra[k] = []string(v)
	}
	groups := spec.Groups
	if groups == nil {
		groups = []string{}
	}
	req := map[string]any{"user": spec.User, "groups": groups, "uid": spec.UID, "extra": extra}
	if r := spec.ResourceAttributes; r != nil {
		ra := map[string]any{
			"namespace": r.Namespace, "verb": r.Verb, "group": r.Group, "version": r.Version,
			"resource": r.Resource, "subresource": r.Subresource, "name": r.Name,
		}
		if fieldSelector && r.FieldSelector != nil && len(r.FieldSelector.Requirements) > 0 {
			var reqs []any
			for _, q := range r.FieldSelector.Requirements {
				reqs = append(reqs, map[string]any{"key": q.Key, "operator": string(q.Operator), "values": q.Values})
			}
			ra["fieldSelector"] = map[string]any{"requirements": reqs}
		}
		if labelSelector && r.LabelSelector != nil && len(r.LabelSelector.Requirements) > 0 {
			var reqs []any
			for _, q := range r.LabelSelector.Requirements {
				reqs = append(reqs, map[string]any{"key": q.Key, "operator": string(q.Operator), "values": q.Values})
			}
			ra["labelSelector"] = map[string]any{"requirements": reqs}
		}
		req["resourceAttributes"] = ra
	}
	if n := spec.NonResourceAttributes; n != nil {
		req["nonResourceAttributes"] = map[string]any{"verb": n.Verb, "path": n.Path}
	}
	return req
}

// RulesFor cannot list a webhook's rules: they are incomplete, as
// upstream's.
func (w *AuthorizationWebhook) RulesFor(context.Context, registry.User, string) ([]rbacv1.PolicyRule, bool, error) {
	return nil, true, errors.New("webhook authorizer does not support user rule resolution")
}

// ask posts spec as a SubjectAccessReview of the configured version, and
// returns the status the webhook answers, retrying as Backoff says.
func (w *AuthorizationWebhook) ask(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	var body []byte
	var err error
	if w.cfg.Version == "v1" {
		body, err = json.Marshal(&authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"}, Spec: spec})
	} else {
		body, err = json.Marshal(&authorizationv1beta1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1beta1.SchemeGroupVersion.String(), Kind: "SubjectAccessReview"}, Spec: v1beta1Spec(spec)})
	}
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	var status authorizationv1.SubjectAccessReviewStatus
	var result string // the last call's, for the metrics
	err = w.client.post(ctx, body, func(data []byte, contentType string) error {
		var review struct {
			Status authorizationv1.SubjectAccessReviewStatus `json:"status"`
		}
		err := decodeReview(data, contentType, "authorization.k8s.io", w.cfg.Version, "SubjectAccessReview", &review)
		status = review.Status
		return err
	}, func(d time.Duration, err error) {
		result = w.cfg.Metrics.call(ctx, w.cfg.Name, d, err)
	})
	if err != nil && !w.cfg.FailurePolicyDeny && ctx.Err() == nil {
		w.cfg.Metrics.failedOpen(w.cfg.Name, result)
	}
	return status, err
}

// subjectAccessReviewSpec is the question a asks.
func subjectAccessReviewSpec(a registry.Attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: a.User.Name, UID: a.User.UID, Groups: a.User.Groups}
	if len(a.User.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(a.User.Extra))
		for k, v := range a.User.Extra {
			spec.Extra[k] = v
		}
	}
	if !a.ResourceRequest {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Namespace: a.Namespace, Verb: a.Verb, Group: a.APIGroup, Version: a.APIVersion,
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
	}
	if len(a.FieldSelector) > 0 {
		spec.ResourceAttributes.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: a.FieldSelector}
	}
	if len(a.LabelSelector) > 0 {
		spec.ResourceAttributes.LabelSelector = &authorizationv1.LabelSelectorAttributes{Requirements: a.LabelSelector}
	}
	return spec
}

// v1beta1Spec is spec in v1beta1, whose fields are v1's but for the
// groups' name.
func v1beta1Spec(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewSpec {
	out := authorizationv1beta1.SubjectAccessReviewSpec{User: spec.User, UID: spec.UID, Groups: spec.Groups}
	if len(spec.Extra) > 0 {
		out.Extra = make(map[string]authorizationv1beta1.ExtraValue, len(spec.Extra))
		for k, v := range spec.Extra {
			out.Extra[k] = authorizationv1beta1.ExtraValue(v)
		}
	}
	if n := spec.NonResourceAttributes; n != nil {
		out.NonResourceAttributes = &authorizationv1beta1.NonResourceAttributes{Path: n.Path, Verb: n.Verb}
	}
	if r := spec.ResourceAttributes; r != nil {
		out.ResourceAttributes = &authorizationv1beta1.ResourceAttributes{
			Namespace: r.Namespace, Verb: r.Verb, Group: r.Group, Version: r.Version,
			Resource: r.Resource, Subresource: r.Subresource, Name: r.Name,
			FieldSelector: r.FieldSelector, LabelSelector: r.LabelSelector,
		}
	}
	return out
}

// questionSize is the size of what the request itself says in a.
func questionSize(a registry.Attributes) int {
	return len(a.Namespace) + len(a.Verb) + len(a.APIGroup) + len(a.APIVersion) +
		len(a.Resource) + len(a.Subresource) + len(a.Name) + len(a.Path)
}
