package core

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// ServiceAccountIssuer is the default issuer ("iss") of the service
// account tokens kplane signs, and then the audience a token is for when
// its request names none: what kubeadm passes kube-apiserver as
// --service-account-issuer, so that tools that expect a cluster's default
// find it.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// Token lifetimes a TokenRequest may ask for, as upstream bounds them:
// an hour unless it says otherwise, ten minutes at least, 2^32 seconds at
// most.
const (
	defaultTokenSeconds = 3600
	minTokenSeconds     = 600
	maxTokenSeconds     = 1 << 32
)

// tokenLeeway is the clock skew a token's times are checked with, and how
// long a token outlives the deletion of its service account or secret
// (a deletion held by finalizers), as upstream allows.
const tokenLeeway = time.Minute

// Tokens issues service account tokens and checks them, as
// kube-apiserver's TokenRequest API and service account authenticator do:
//   - serviceaccounts/token (a TokenRequest) signs a token for a service
//     account, for the audiences and the lifetime asked, optionally bound
//     to a Secret: it is valid while the service account (and the
//     secret) it names exist with the uids it names;
//   - AuthenticateToken checks one, for the API server's bearer tokens
//     and for TokenReview (authentication.k8s.io/v1), which tells a
//     client (a metrics endpoint's auth filter, kube-rbac-proxy) who a
//     token names.
//
// A token carries the user system:serviceaccount:<namespace>:<name>, in
// the groups system:serviceaccounts and system:serviceaccounts:<namespace>.
// Deleting its service account revokes it.
type Tokens struct {
	// Registry holds the service accounts and secrets tokens name.
	Registry *registry.Registry
	// Issuers are the issuers ("iss") of the tokens accepted, as
	// kube-apiserver's --service-account-issuer: the first signs new
	// tokens, the others are accepted (to move to a new issuer without
	// refusing the tokens already out). Empty: ServiceAccountIssuer.
	Issuers []string
	// APIAudiences are the API server's own audiences, as
	// kube-apiserver's --api-audiences: a bearer token must be for one of
	// them, and a TokenRequest or TokenReview naming none gets them.
	// Empty: the issuers.
	APIAudiences []string
	// MaxExpiration, if not zero, shortens a token's lifetime to at most
	// this, with a warning, as --service-account-max-token-expiration.
	MaxExpiration time.Duration
	// File, if set, holds static tokens (--token-auth-file), asked
	// first.
	File TokenAuthenticator
	// Bootstrap, if set, is asked about a token that is not a valid
	// service account token, before JWT (--enable-bootstrap-token-auth:
	// BootstrapTokens).
	Bootstrap TokenAuthenticator
	// JWT, if set, is asked about a token that is not a valid service
	// account token: the JWT authenticators of external issuers
	// (--authentication-config, --oidc-*).
	JWT TokenAuthenticator
	// Webhook, if set, is asked about a token neither they nor JWT
	// know (--authentication-token-webhook-config-file), as upstream's
	// chain of token authenticators asks it last.
	Webhook TokenAuthenticator

	key atomic.Pointer[jwsKeys]
	// now is the clock (nil: time.Now), for tests.
	now func() time.Time

	mu struct {
		sync.Mutex
		// verified remembers the claims of tokens whose signature checked
		// out, by token: checking a signature costs as much as 15 GETs of
		// a ConfigMap, and a client sends the same token with every
		// request. Only the signature's check is skipped; the times,
		// audiences and objects a token names are checked every time.
		// Bounded by maxVerified: when full, it starts over.
		verified map[string]*tokenClaims
	}
}

const maxVerified = 4096

// SetKey sets the key tokens are signed and checked with (the data
// directory's sa.key): until it is set, no token is issued or accepted.
func (t *Tokens) SetKey(priv *ecdsa.PrivateKey) error { return t.SetKeys(priv, nil) }

// SetKeys sets the key tokens are signed with (an RSA or ECDSA private
// key, as --service-account-signing-key-file) and the public keys they
// are checked with besides its own (as --service-account-key-file).
func (t *Tokens) SetKeys(signing crypto.Signer, check []crypto.PublicKey) error {
	ks, err := newJWSKeys(signing, check)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	t.key.Store(ks)
	t.mu.Lock()
	t.mu.verified = nil // checked with other keys
	t.mu.Unlock()
	return nil
}

// JWKS is the public keys as a JSON Web Key Set, which /openid/v1/jwks
// publishes so that others can check kplane's tokens themselves.
func (t *Tokens) JWKS() ([]byte, error) {
	k := t.key.Load()
	if k == nil {
		return nil, errors.New("no service account key")
	}
	return k.jwks()
}

// AllIssuers are the issuers of the service account tokens accepted:
// an external issuer may not be one of them.
func (t *Tokens) AllIssuers() []string { return t.issuers() }

// Issuer is the issuer of the tokens kplane signs.
func (t *Tokens) Issuer() string { return t.issuers()[0] }

func (t *Tokens) issuers() []string {
	if len(t.Issuers) == 0 {
		return []string{ServiceAccountIssuer}
	}
	return t.Issuers
}

func (t *Tokens) apiAudiences() []string {
	if len(t.APIAudiences) == 0 {
		return t.issuers()
	}
	return t.APIAudiences
}

// Install serves the tokens among kinds, the built-in kinds (Kinds): it
// gives the ServiceAccount kind its token subresource, and returns kinds
// with TokenReview added.
func (t *Tokens) Install(kinds []*registry.Kind) []*registry.Kind {
	for _, k := range kinds {
		if k.Group == "" && k.Resource == "serviceaccounts" {
			k.ReviewSubresources = map[string]*registry.Kind{"token": {
				Group: authenticationv1.GroupName, Versions: []string{"v1"}, Kind: "TokenRequest", Resource: "tokenrequests",
				Singular: "tokenrequest", Namespaced: true,
				Typed:   func() runtime.Object { return &authenticationv1.TokenRequest{} },
				Default: defaultTokenRequest,
				Review:  t.request,
			}}
		}
	}
	return append(kinds, &registry.Kind{
		Group: authenticationv1.GroupName, Versions: []string{"v1"}, Kind: "TokenReview", Resource: "tokenreviews",
		Singular: "tokenreview",
		Typed:    func() runtime.Object { return &authenticationv1.TokenReview{} },
		Review:   t.review,
	})
}

// defaultTokenRequest sets a TokenRequest's default lifetime, which
// upstream's decoding sets (so the sender owns it).
func defaultTokenRequest(obj *unstructured.Unstructured) {
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		spec = map[string]any{}
		obj.Object["spec"] = spec
	}
	if spec["expirationSeconds"] == nil {
		spec["expirationSeconds"] = int64(defaultTokenSeconds)
	}
}

func (t *Tokens) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

var tokenRequestKind = schema.GroupKind{Group: authenticationv1.GroupName, Kind: "TokenRequest"}

// request answers a TokenRequest for the service account name, checking
// what upstream checks in its order: the name and uid sent must be the
// service account's, the lifetime in bounds, the bound object a Secret
// that exists (with the uid sent, if any). kplane serves no Pods or Nodes,
// so a token bound to one is refused as one missing. The answer is the
// request with the token, as upstream's: its metadata as sent, with the
// service account's name, namespace and uid, and the time it was made.
func (t *Tokens) request(ctx context.Context, name string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	var req authenticationv1.TokenRequest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &req); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(tokenRequestKind, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "name"), req.Name, "must match the service account name if specified"),
		})
	}
	ns := obj.GetNamespace()
	sa, err := t.get(ctx, "serviceaccounts", ns, name)
	if err != nil {
		return nil, err
	}
	if req.UID != "" && req.UID != sa.GetUID() {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: authenticationv1.GroupName, Resource: "TokenRequest"}, name,
			fmt.Errorf("the UID in the token request (%s) does not match the UID of the service account (%s)", req.UID, sa.GetUID()))
	}
	seconds := int64(defaultTokenSeconds)
	if req.Spec.ExpirationSeconds != nil {
		seconds = *req.Spec.ExpirationSeconds
	}
	switch path := field.NewPath("spec", "expirationSeconds"); {
	case seconds < minTokenSeconds:
		return nil, apierrors.NewInvalid(tokenRequestKind, "", field.ErrorList{field.Invalid(path, seconds, "may not specify a duration less than 10 minutes")})
	case seconds > maxTokenSeconds:
		return nil, apierrors.NewInvalid(tokenRequestKind, "", field.ErrorList{field.Invalid(path, seconds, "may not specify a duration larger than 2^32 seconds")})
	}
	// Validating admission sees the request as upstream's does: its
	// audiences defaulted, named after the service account, created now,
	// with no status; before the object it is bound to is looked up.
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = t.apiAudiences()
	}
	now := t.clock().Truncate(time.Second)
	req.Name, req.Namespace, req.UID = name, ns, sa.GetUID()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	shown, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&req)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	seen := &unstructured.Unstructured{Object: shown}
	seen.SetGroupVersionKind(tokenRequestKind.WithVersion("v1"))
	if err := admit(seen); err != nil {
		return nil, err
	}
	var secret *ref
	if b := req.Spec.BoundObjectRef; b != nil {
		if secret, err = t.boundSecret(ctx, ns, b); err != nil {
			return nil, err
		}
	}
	if max := int64(t.MaxExpiration / time.Second); max > 0 && seconds > max {
		registry.AddWarning(ctx, fmt.Sprintf("requested expiration of %d seconds shortened to %d seconds", seconds, max))
		seconds = max
	}
	key := t.key.Load()
	if key == nil {
		return nil, apierrors.NewServiceUnavailable("no key to sign service account tokens with yet")
	}
	expiry := now.Add(time.Duration(seconds) * time.Second)
	token, err := key.signing.sign(&tokenClaims{
		Audience: req.Spec.Audiences, Expiry: expiry.Unix(), IssuedAt: now.Unix(), Issuer: t.Issuer(),
		ID: string(uuid.NewUUID()),
		Kubernetes: &kubernetesClaims{
			Namespace: ns, Secret: secret,
			ServiceAccount: &ref{Name: name, UID: string(sa.GetUID())},
		},
		NotBefore: now.Unix(), Subject: serviceAccountUser(ns, name),
	})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %w", err))
	}
	req.Spec.ExpirationSeconds = &seconds
	req.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(expiry)}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&req)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	answer := &unstructured.Unstructured{Object: out}
	answer.SetGroupVersionKind(tokenRequestKind.WithVersion("v1"))
	return answer, nil
}

// boundSecret checks the object a token is to be bound to, and returns
// the reference to it the token carries.
func (t *Tokens) boundSecret(ctx context.Context, ns string, b *authenticationv1.BoundObjectReference) (*ref, error) {
	gvk := schema.FromAPIVersionAndKind(b.APIVersion, b.Kind)
	resource := map[string]string{"Pod": "pods", "Secret": "secrets", "Node": "nodes"}[gvk.Kind]
	if gvk.Group != "" || resource == "" {
		return nil, apierrors.NewBadRequest("cannot bind token to object of type " + gvk.String())
	}
	if b.Name == "" {
		return nil, apierrors.NewBadRequest("Name parameter required.")
	}
	if resource != "secrets" {
		// kplane serves no Pods or Nodes: none exists to bind to.
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, b.Name)
	}
	s, err := t.get(ctx, "secrets", ns, b.Name)
	if err != nil {
		return nil, err
	}
	if b.UID != "" && b.UID != s.GetUID() {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: gvk.Kind}, b.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", b.UID))
	}
	return &ref{Name: b.Name, UID: string(s.GetUID())}, nil
}

// get reads a core object, as it is now: a token is refused from the
// moment its service account is deleted (upstream's authenticator reads
// its informers' caches, and remembers a token it accepted for ten
// seconds).
func (t *Tokens) get(ctx context.Context, resource, ns, name string) (*unstructured.Unstructured, error) {
	res, ok := t.Registry.Get(schema.GroupResource{Resource: resource})
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
	}
	return res.Get(ctx, "v1", ns, name, metav1.GetOptions{})
}

// LegacyIssuer is the issuer of the long-lived tokens kplane writes into
// Secrets of type kubernetes.io/service-account-token (TokenSecrets), as
// kube-controller-manager's tokens controller writes them.
const LegacyIssuer = "kubernetes/serviceaccount"

// tokenClaims are a token's claims, in the order of their names (as
// upstream's tokens have them): a bound token's, or a legacy one's
// (LegacyIssuer), which names its Secret and has no audiences or times.
type tokenClaims struct {
	Audience   audiences         `json:"aud,omitempty"`
	Expiry     int64             `json:"exp,omitempty"`
	IssuedAt   int64             `json:"iat,omitempty"`
	Issuer     string            `json:"iss"`
	ID         string            `json:"jti,omitempty"`
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`

	LegacyNamespace          string `json:"kubernetes.io/serviceaccount/namespace,omitempty"`
	LegacySecretName         string `json:"kubernetes.io/serviceaccount/secret.name,omitempty"`
	LegacyServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name,omitempty"`
	LegacyServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid,omitempty"`

	NotBefore int64  `json:"nbf,omitempty"`
	Subject   string `json:"sub"`
}

// kubernetesClaims are what a token names: its service account, and the
// objects it is bound to.
type kubernetesClaims struct {
	Namespace      string `json:"namespace,omitempty"`
	Node           *ref   `json:"node,omitempty"`
	Pod            *ref   `json:"pod,omitempty"`
	Secret         *ref   `json:"secret,omitempty"`
	ServiceAccount *ref   `json:"serviceaccount,omitempty"`
}

type ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// audiences is the "aud" claim: an array, or one string (RFC 7519 4.1.3).
type audiences []string

func (a *audiences) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audiences{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

func serviceAccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// ErrNotServiceAccountToken is AuthenticateToken's error for a token that
// is not a service account token of kplane's: not a JWS, or of another
// issuer. Other errors say why one of kplane's is not valid.
var ErrNotServiceAccountToken = errors.New("not a service account token of this server")

// AuthenticateToken returns the user a service account token names, and
// the audiences it is valid for among those asked (none: the API
// server's, APIAudiences), if kplane signed it, it has not
// expired, one of its audiences is asked, and its service account (and
// the secret it is bound to) exist with the uids it names, or are being
// deleted for less than a minute. The errors are kube-apiserver's.
func (t *Tokens) AuthenticateToken(ctx context.Context, token string, wanted []string) (registry.User, []string, error) {
	if t.File != nil {
		// The static tokens come first, as upstream orders them.
		asked := wanted
		if len(asked) == 0 {
			asked = t.apiAudiences()
		}
		if u, valid, ok, _ := t.File.AuthenticateToken(ctx, token, asked, t.apiAudiences()); ok {
			return u, valid, nil
		}
	}
	u, valid, err := t.authenticateServiceAccount(ctx, token, wanted)
	if err == nil || (t.Bootstrap == nil && t.JWT == nil && t.Webhook == nil) {
		return u, valid, err
	}
	if len(wanted) == 0 {
		wanted = t.apiAudiences()
	}
	// The others in upstream's order: bootstrap tokens, the JWT
	// authenticators, then the webhook. The first to know the token decides; if none does, their
	// reasons, as upstream's union gives them (a token that is not one
	// of kplane's has none from it).
	var errs []error
	if !errors.Is(err, ErrNotServiceAccountToken) {
		errs = append(errs, err)
	}
	for _, other := range []TokenAuthenticator{t.Bootstrap, t.JWT, t.Webhook} {
		if other == nil {
			continue
		}
		u, valid, ok, oerr := other.AuthenticateToken(ctx, token, wanted, t.apiAudiences())
		if ok {
			return u, valid, nil
		}
		if oerr != nil {
			errs = append(errs, oerr)
		}
	}
	if len(errs) == 0 {
		return registry.User{}, nil, ErrNotServiceAccountToken
	}
	return registry.User{}, nil, utilerrors.NewAggregate(errs)
}

// TokenAuthenticator authenticates the tokens kplane's service account
// authenticator does not (jwt's authenticators, webhook.TokenWebhook):
// ok false with no error is a token it does not know. wanted are the
// audiences asked (a TokenReview's, or implicit), implicit the API
// server's.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string, wanted, implicit []string) (u registry.User, audiences []string, ok bool, err error)
}

// authenticateServiceAccount is AuthenticateToken for kplane's own
// service account tokens.
func (t *Tokens) authenticateServiceAccount(ctx context.Context, token string, wanted []string) (registry.User, []string, error) {
	t.mu.Lock()
	c := t.mu.verified[token]
	t.mu.Unlock()
	if c == nil {
		var err error
		if c, err = t.verify(token); err != nil {
			return registry.User{}, nil, err
		}
	}
	apiAudiences := t.apiAudiences()
	tokenAudiences := []string(c.Audience)
	if len(tokenAudiences) == 0 {
		tokenAudiences = apiAudiences
	}
	if len(wanted) == 0 {
		wanted = apiAudiences
	}
	var valid []string // in the order asked, repeats kept, as upstream's
	for _, a := range wanted {
		if slices.Contains(tokenAudiences, a) {
			valid = append(valid, a)
		}
	}
	if len(valid) == 0 {
		return registry.User{}, nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAudiences, wanted)
	}
	if c.Issuer == LegacyIssuer {
		u, err := t.legacyUser(ctx, token, c)
		return u, valid, err
	}
	now := t.clock()
	switch {
	case c.NotBefore != 0 && now.Add(tokenLeeway).Before(time.Unix(c.NotBefore, 0)):
		return registry.User{}, nil, errors.New("service account token is not valid yet")
	case c.Expiry != 0 && now.Add(-tokenLeeway).After(time.Unix(c.Expiry, 0)):
		return registry.User{}, nil, errors.New("service account token has expired")
	case c.IssuedAt != 0 && now.Add(tokenLeeway).Before(time.Unix(c.IssuedAt, 0)):
		return registry.User{}, nil, errors.New("service account token claims could not be validated due to unexpected validation error")
	}
	k := c.Kubernetes
	if k == nil || k.ServiceAccount == nil {
		return registry.User{}, nil, errors.New("service account token claims could not be validated due to unexpected private claim")
	}
	deletedBefore := now.Add(-tokenLeeway)
	gone := func(obj *unstructured.Unstructured) bool {
		d := obj.GetDeletionTimestamp()
		return d != nil && d.Time.Before(deletedBefore)
	}
	sa, err := t.get(ctx, "serviceaccounts", k.Namespace, k.ServiceAccount.Name)
	switch {
	case err != nil:
		return registry.User{}, nil, err
	case gone(sa):
		return registry.User{}, nil, fmt.Errorf("service account %s/%s has been deleted", k.Namespace, k.ServiceAccount.Name)
	case string(sa.GetUID()) != k.ServiceAccount.UID:
		return registry.User{}, nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.GetUID(), k.ServiceAccount.UID)
	}
	if k.Secret != nil {
		s, err := t.get(ctx, "secrets", k.Namespace, k.Secret.Name)
		switch {
		case err != nil, gone(s):
			return registry.User{}, nil, errors.New("service account token has been invalidated")
		case string(s.GetUID()) != k.Secret.UID:
			return registry.User{}, nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", s.GetUID(), k.Secret.UID)
		}
	}
	if k.Pod != nil || k.Node != nil {
		// kplane serves neither, and so signs no token bound to one.
		return registry.User{}, nil, errors.New("service account token has been invalidated")
	}
	u := registry.User{
		Name:   serviceAccountUser(k.Namespace, k.ServiceAccount.Name),
		UID:    k.ServiceAccount.UID,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + k.Namespace, "system:authenticated"},
	}
	if c.ID != "" {
		u.Extra = map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=" + c.ID}}
	}
	return u, valid, nil
}

// verify checks that token is one kplane signed and returns its claims,
// remembering them (mu.verified).
func (t *Tokens) verify(token string) (*tokenClaims, error) {
	tok, err := splitJWS(token)
	if err != nil {
		return nil, ErrNotServiceAccountToken
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(tok.Payload, &unverified); err != nil || (!slices.Contains(t.issuers(), unverified.Issuer) && unverified.Issuer != LegacyIssuer) {
		return nil, ErrNotServiceAccountToken
	}
	key := t.key.Load()
	if key == nil {
		return nil, errors.New("invalid signature, no keys found")
	}
	if err := key.verify(tok); err != nil {
		if errors.Is(err, errNotJWS) {
			err = ErrNotServiceAccountToken
		}
		return nil, err
	}
	c := &tokenClaims{}
	if err := json.Unmarshal(tok.Payload, c); err != nil {
		return nil, fmt.Errorf("service account token claims could not be read: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.key.Load() != key {
		return c, nil // the key changed meanwhile: not for the new one's cache
	}
	if t.mu.verified == nil || len(t.mu.verified) >= maxVerified {
		t.mu.verified = make(map[string]*tokenClaims)
	}
	t.mu.verified[token] = c
	return c, nil
}

// legacyUser checks a legacy token (LegacyIssuer) as upstream's legacy
// validator does, with its errors: its claims must name a service account
// and a Secret, the Secret must exist, not be deleted, and hold this very
// token, and the service account must exist with the uid named.
func (t *Tokens) legacyUser(ctx context.Context, token string, c *tokenClaims) (registry.User, error) {
	ns, secretName, name, uid := c.LegacyNamespace, c.LegacySecretName, c.LegacyServiceAccountName, c.LegacyServiceAccountUID
	switch {
	case c.Subject == "":
		return registry.User{}, errors.New("sub claim is missing")
	case ns == "":
		return registry.User{}, errors.New("namespace claim is missing")
	case secretName == "":
		return registry.User{}, errors.New("secretName claim is missing")
	case name == "":
		return registry.User{}, errors.New("serviceAccountName claim is missing")
	case uid == "":
		return registry.User{}, errors.New("serviceAccountUID claim is missing")
	case c.Subject != serviceAccountUser(ns, name):
		return registry.User{}, errors.New("sub claim is invalid")
	}
	secret, err := t.get(ctx, "secrets", ns, secretName)
	if err != nil || secret.GetDeletionTimestamp() != nil {
		//lint:ignore ST1005 upstream's words, which TokenReview shows
		return registry.User{}, errors.New("Token has been invalidated")
	}
	held, _, _ := unstructured.NestedString(secret.Object, "data", corev1.ServiceAccountTokenKey)
	if stored, err := base64.StdEncoding.DecodeString(held); err != nil || subtle.ConstantTimeCompare(stored, []byte(token)) == 0 {
		//lint:ignore ST1005 upstream's words, which TokenReview shows
		return registry.User{}, errors.New("Token does not match server's copy")
	}
	sa, err := t.get(ctx, "serviceaccounts", ns, name)
	switch {
	case err != nil:
		return registry.User{}, err
	case sa.GetDeletionTimestamp() != nil:
		return registry.User{}, fmt.Errorf("ServiceAccount %s/%s has been deleted", ns, name)
	case string(sa.GetUID()) != uid:
		return registry.User{}, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.GetUID(), uid)
	}
	return registry.User{
		Name:   serviceAccountUser(ns, name),
		UID:    uid,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}, nil
}

// legacyToken signs a legacy token for the service account sa, to be held
// by the Secret secretName (TokenSecrets): it names both, and never
// expires; it is valid while the Secret holds it.
func (t *Tokens) legacyToken(sa *unstructured.Unstructured, secretName string) (string, error) {
	key := t.key.Load()
	if key == nil {
		return "", errors.New("no key to sign service account tokens with yet")
	}
	return key.signing.sign(&tokenClaims{
		Issuer:                   LegacyIssuer,
		LegacyNamespace:          sa.GetNamespace(),
		LegacySecretName:         secretName,
		LegacyServiceAccountName: sa.GetName(),
		LegacyServiceAccountUID:  string(sa.GetUID()),
		Subject:                  serviceAccountUser(sa.GetNamespace(), sa.GetName()),
	})
}

// review answers a TokenReview: whether the token is valid, and for whom,
// as upstream's does (the question echoed, with its status). A token that
// is not valid is no error: the status says why.
func (t *Tokens) review(ctx context.Context, _ string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	var tr authenticationv1.TokenReview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &tr); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	if err := admit(obj); err != nil {
		return nil, err
	}
	status := map[string]any{"user": map[string]any{}}
	u, valid, err := t.AuthenticateToken(ctx, tr.Spec.Token, tr.Spec.Audiences)
	switch {
	case errors.Is(err, ErrNotServiceAccountToken):
		status["error"] = "invalid bearer token"
	case err != nil:
		// Upstream's aggregate, flattened: "[invalid bearer token, <why>, ...]".
		status["error"] = utilerrors.NewAggregate([]error{errors.New("invalid bearer token"), err}).Error()
	default:
		status["authenticated"] = true
		status["user"] = userInfo(u)
		status["audiences"] = anyStrings(valid)
	}
	obj.Object["status"] = status
	return obj, nil
}

// userInfo is u as a UserInfo's JSON (authentication.k8s.io/v1).
func userInfo(u registry.User) map[string]any {
	info := map[string]any{"username": u.Name}
	if u.UID != "" {
		info["uid"] = u.UID
	}
	if len(u.Groups) > 0 {
		info["groups"] = anyStrings(u.Groups)
	}
	if len(u.Extra) > 0 {
		extra := map[string]any{}
		for k, vs := range u.Extra {
			extra[k] = anyStrings(vs)
		}
		info["extra"] = extra
	}
	return info
}

// anyStrings is ss as a JSON array of an unstructured object.
func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
