package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kplane-dev/kplane/internal/registry"
)

// A token authentication webhook, as kube-apiserver's
// --authentication-token-webhook-config-file
// (k8s.io/apiserver's plugin/pkg/authenticator/token/webhook, read for
// the behaviour, written anew): a bearer token kplane's own
// authenticators do not accept is sent to the webhook as a TokenReview,
// and its status says whose it is.

// TokenWebhookConfig is how the webhook is called, as kube-apiserver's
// --authentication-token-webhook-* flags say.
type TokenWebhookConfig struct {
	// KubeConfigFile's current context names the webhook and the
	// credentials kplane presents, as for the authorization webhook.
	KubeConfigFile string
	// Version is the TokenReview version sent, v1 or v1beta1 (upstream's
	// default is v1beta1).
	Version string
	// CacheTTL is how long an answer (authenticated or not) is kept for
	// the same token and audiences (0: not kept).
	CacheTTL time.Duration
	// Backoff retries failed calls (zero: upstream's).
	Backoff wait.Backoff
	Logger  *slog.Logger
}

// TokenWebhook authenticates bearer tokens by asking a webhook.
type TokenWebhook struct {
	cfg     TokenWebhookConfig
	client  *reviewClient
	answers *cache.LRUExpireCache
}

// tokenAnswer is a kept answer.
type tokenAnswer struct {
	user      registry.User
	audiences []string
	ok        bool
}

// NewTokenWebhook reads cfg's kubeconfig and returns the authenticator
// that calls the webhook it names.
func NewTokenWebhook(cfg TokenWebhookConfig) (*TokenWebhook, error) {
	switch cfg.Version {
	case "":
		cfg.Version = "v1beta1"
	case "v1", "v1beta1":
	default:
		return nil, fmt.Errorf("unsupported authentication webhook version %q, supported versions are %q, %q", cfg.Version, "v1", "v1beta1")
	}
	client, err := newReviewClient(cfg.KubeConfigFile, 0, cfg.Backoff, "kplane-authentication")
	if err != nil {
		return nil, err
	}
	return &TokenWebhook{cfg: cfg, client: client, answers: cache.NewLRUExpireCache(4096)}, nil
}

// AuthenticateToken asks the webhook whose token is, for audiences
// wanted. The webhook's answer holds for the audiences it names among
// wanted or, if it names none, for those of wanted kplane's API itself
// has (implicit), as upstream's; with none left, the token is not
// authenticated. ok false with no error: the webhook does not know the
// token; an error: it said why, or could not be called. The user gets
// system:authenticated, as upstream's authenticators give it.
func (w *TokenWebhook) AuthenticateToken(ctx context.Context, token string, wanted, implicit []string) (registry.User, []string, bool, error) {
	sum := sha256.New()
	sum.Write([]byte(token))
	for _, a := range wanted {
		sum.Write([]byte{0})
		sum.Write([]byte(a))
	}
	key := string(sum.Sum(nil))
	if kept, ok := w.answers.Get(key); ok {
		a := kept.(tokenAnswer)
		return a.user, a.audiences, a.ok, nil
	}
	status, err := w.ask(ctx, token, wanted)
	if err != nil {
		if w.cfg.Logger != nil {
			w.cfg.Logger.Warn("failed calling the token authentication webhook", "err", err)
		}
		return registry.User{}, nil, false, err
	}
	var answer tokenAnswer
	got := implicit
	if len(status.Audiences) > 0 {
		got = status.Audiences
	}
	for _, a := range wanted {
		if slices.Contains(got, a) && !slices.Contains(answer.audiences, a) {
			answer.audiences = append(answer.audiences, a)
		}
	}
	switch {
	case len(wanted) > 0 && len(answer.audiences) == 0:
		answer.audiences = nil
	case !status.Authenticated && status.Error != "":
		return registry.User{}, nil, false, errors.New(status.Error) // not kept, as upstream's
	case status.Authenticated:
		u := status.User
		answer.ok = true
		answer.user = registry.User{Name: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}
		if u.Extra != nil {
			answer.user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				answer.user.Extra[k] = v
			}
		}
		answer.user = registry.Authenticated(answer.user)
	}
	if !answer.ok {
		answer.audiences = nil
	}
	if w.cfg.CacheTTL > 0 {
		w.answers.Add(key, answer, w.cfg.CacheTTL)
	}
	return answer.user, answer.audiences, answer.ok, nil
}

// ask posts a TokenReview of token for wanted.
func (w *TokenWebhook) ask(ctx context.Context, token string, wanted []string) (authenticationv1.TokenReviewStatus, error) {
	var body []byte
	var err error
	if w.cfg.Version == "v1" {
		body, err = json.Marshal(&authenticationv1.TokenReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "TokenReview"},
			Spec:     authenticationv1.TokenReviewSpec{Token: token, Audiences: wanted}})
	} else {
		body, err = json.Marshal(&authenticationv1beta1.TokenReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authenticationv1beta1.SchemeGroupVersion.String(), Kind: "TokenReview"},
			Spec:     authenticationv1beta1.TokenReviewSpec{Token: token, Audiences: wanted}})
	}
	if err != nil {
		return authenticationv1.TokenReviewStatus{}, err
	}
	var status authenticationv1.TokenReviewStatus
	err = w.client.post(ctx, body, func(data []byte, contentType string) error {
		// v1beta1's status reads as v1's: the same fields and names.
		var review struct {
			Status authenticationv1.TokenReviewStatus `json:"status"`
		}
		err := decodeReview(data, contentType, "authentication.k8s.io", w.cfg.Version, "TokenReview", &review)
		status = review.Status
		return err
	}, nil)
	return status, err
}
