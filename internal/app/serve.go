package app

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/app/pki"
	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
	"github.com/kplane-dev/kplane/internal/registry/flowcontrol"
	"github.com/kplane-dev/kplane/internal/registry/gc"
	"github.com/kplane-dev/kplane/internal/registry/jwt"
	"github.com/kplane-dev/kplane/internal/registry/migration"
	"github.com/kplane-dev/kplane/internal/registry/quota"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

// Config is `kplane serve`'s configuration.
type Config struct {
	StoreConfig
	// Listen is the address to serve on; port 0 picks a free port.
	// Default 127.0.0.1:6443.
	Listen string
	// CompactionInterval: each tick compacts the store to the revision
	// recorded at the previous tick, as kube-apiserver's
	// --etcd-compaction-interval. 0 turns it off.
	CompactionInterval time.Duration
	// CompactionMaxHistory bounds the bytes of old versions the embedded
	// and memory engines hold between compactions: past it the store is
	// compacted early (see compactor). 0 leaves them unbounded. etcd keeps
	// its history on disk, under its own quota.
	CompactionMaxHistory int64
	// Version is kplane's version, reported by /version.
	Version string
	// Profiling serves Go's profiles under /debug/pprof/ (authenticated).
	Profiling bool
	// ShutdownDelay, as kube-apiserver's --shutdown-delay-duration: once
	// asked to stop, kplane keeps serving this long with /readyz failing,
	// so that load balancers take it out of rotation before it stops
	// taking connections. 0 stops at once.
	ShutdownDelay time.Duration
	// AuthorizationMode is kube-apiserver's --authorization-mode: the
	// authorizers asked, in order, comma-separated, each once:
	// AlwaysAllow (alone, the default: every authenticated client may do
	// everything), AlwaysDeny, RBAC (the cluster's Roles and bindings) and
	// Webhook (AuthorizationWebhook's). The first to allow or deny a
	// request decides.
	AuthorizationMode string
	// AuthorizationWebhook is how the Webhook authorizer is called: the
	// --authorization-webhook-* flags.
	AuthorizationWebhook webhook.AuthorizationWebhookConfig
	// AuthorizationConfigFile is --authorization-config: an
	// AuthorizationConfiguration whose authorizers replace those of
	// AuthorizationMode and AuthorizationWebhook (which may then not be
	// set: AuthorizationFlagsSet), read again when it changes.
	AuthorizationConfigFile string
	AuthorizationFlagsSet   bool
	// RequestHeader are the --requestheader-* flags: front proxies
	// that name the user in headers.
	RequestHeader RequestHeaderFlags
	// ClusterSigningDuration is the longest a client certificate kplane
	// issues for a CertificateSigningRequest lasts, as
	// kube-controller-manager's --cluster-signing-duration (0: a year).
	ClusterSigningDuration time.Duration
	// EventTTL is how long an Event is kept after its last write, as
	// kube-apiserver's --event-ttl (0: forever; the flag's default is an
	// hour).
	EventTTL time.Duration
	// ResourceQuotaSyncPeriod is how often every ResourceQuota's objects
	// are counted again, as kube-controller-manager's
	// --resource-quota-sync-period (0: 5 minutes).
	ResourceQuotaSyncPeriod time.Duration
	// DisablePriorityAndFairness turns API Priority and Fairness off, as
	// kube-apiserver's --enable-priority-and-fairness=false: requests are
	// then limited by MaxRequestsInflight and MaxMutatingRequestsInflight
	// alone.
	DisablePriorityAndFairness bool
	// MaxRequestsInflight and MaxMutatingRequestsInflight are
	// kube-apiserver's flags: their sum is the seats priority and fairness
	// shares out (0 and 0: 400 and 200); without it, the limits of reads
	// and of the other requests (0: none).
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// EnableBootstrapTokenAuth is --enable-bootstrap-token-auth: bootstrap
	// tokens (Secrets in kube-system) authenticate, and expired ones are
	// deleted.
	EnableBootstrapTokenAuth bool
	// TokenAuthFile is --token-auth-file: a CSV file of static bearer
	// tokens (token, user, uid, "groups"), read at start.
	TokenAuthFile string
	// AuthenticationConfigFile is --authentication-config: an
	// AuthenticationConfiguration whose JWT authenticators take the
	// bearer tokens of external OpenID Connect issuers, read again when
	// it changes, and whose anonymous section (not with --anonymous-auth:
	// AnonymousAuthSet) says who may send requests without credentials.
	AuthenticationConfigFile string
	// OIDC are the legacy --oidc-* flags: one JWT authenticator (not
	// with AuthenticationConfigFile).
	OIDC OIDCFlags
	// TokenWebhook is --authentication-token-webhook-config-file and
	// its flags: a webhook asked about the bearer tokens that are not
	// kplane's service account tokens.
	TokenWebhook webhook.TokenWebhookConfig
	// AdmissionControlConfigFile, as kube-apiserver's
	// --admission-control-config-file: an AdmissionConfiguration whose
	// MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins
	// name the kubeconfig admission webhooks are called with. Empty:
	// webhooks are called anonymously.
	AdmissionControlConfigFile string
	// AuditPolicyFile and AuditLogPath, as --audit-policy-file and
	// --audit-log-path ("-": standard output): with both, each request
	// is written to the audit log at the level the policy gives it.
	// AuditLogMaxSize (MB, 0: 100), AuditLogMaxBackups and
	// AuditLogMaxAge (days) bound the rotated files, as
	// --audit-log-maxsize, --audit-log-maxbackup and --audit-log-maxage.
	AuditPolicyFile, AuditLogPath                       string
	AuditLogMaxSize, AuditLogMaxBackups, AuditLogMaxAge int
	// AuditLogMode is --audit-log-mode: blocking (the default: each event
	// written before the request goes on), blocking-strict (a request
	// whose first event is not written is refused) or batch (events
	// queued and written in batches, AuditLogBatch's, by a goroutine).
	AuditLogMode  string
	AuditLogBatch audit.BatchOptions
	// AuditWebhookConfigFile is --audit-webhook-config-file: a kubeconfig
	// naming a webhook the events are sent to as EventLists, in
	// AuditWebhookMode (batch by default, AuditWebhookBatch's), each
	// list retried after AuditWebhookInitialBackoff.
	AuditWebhookConfigFile     string
	AuditWebhookInitialBackoff time.Duration
	AuditWebhookMode           string
	AuditWebhookBatch          audit.BatchOptions
	// ServiceAccountIssuers, as kube-apiserver's --service-account-issuer
	// (repeated): the first is the issuer ("iss") of the tokens kplane
	// signs and the one OpenID discovery publishes; all are accepted.
	// Empty: core.ServiceAccountIssuer.
	ServiceAccountIssuers []string
	// APIAudiences, as --api-audiences: a bearer token must be for one of
	// them, and a token asked for no audience gets them. Empty: the
	// issuers.
	APIAudiences []string
	// ServiceAccountJWKSURI, as --service-account-jwks-uri: the https URL
	// the discovery document names for the keys. Empty: the server's own
	// /openid/v1/jwks.
	ServiceAccountJWKSURI string
	// ServiceAccountSigningKeyFile, as --service-account-signing-key-file:
	// a PEM RSA or ECDSA private key that signs the service account
	// tokens ("": the data directory's sa.key, made on first start).
	ServiceAccountSigningKeyFile string
	// ServiceAccountKeyFiles, as --service-account-key-file: PEM files of
	// public keys (or private keys, or certificates) whose tokens are
	// accepted besides those the signing key signs, and which
	// /openid/v1/jwks publishes.
	ServiceAccountKeyFiles []string
	// ServiceAccountMaxTokenExpiration, as
	// --service-account-max-token-expiration: a TokenRequest asking a
	// longer lifetime gets this one (with a warning). From an hour to 2^32
	// seconds; 0 leaves TokenRequest's own bound.
	ServiceAccountMaxTokenExpiration time.Duration
	// RefuseAnonymous, as kube-apiserver's --anonymous-auth=false, answers
	// every request without a credential 401. Otherwise such a request is
	// system:anonymous: with RBAC authorized by the roles bound to it (the
	// default policy lets it read /version and the health checks), with
	// AlwaysAllow let only to those.
	RefuseAnonymous bool
	// AnonymousAuthSet: --anonymous-auth was given.
	AnonymousAuthSet bool
	// TLSSANs are names (DNS names or IP addresses) the serving
	// certificate covers besides localhost, the loopback addresses and the
	// listen host: a load balancer's name, the machine's names for a
	// server listening on 0.0.0.0.
	TLSSANs []string
	// OnReady, if set, is called once the server is ready and the
	// kubeconfig written.
	OnReady func(Ready)
}

// The authorization modes.
const (
	AuthorizeAlways  = "AlwaysAllow"
	AuthorizeDeny    = "AlwaysDeny"
	AuthorizeRBAC    = "RBAC"
	AuthorizeWebhook = "Webhook"
)

// Ready says where a ready server is.
type Ready struct {
	URL        string // https://host:port
	Kubeconfig string // path of the kubeconfig
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("kplane serve needs a data directory (--data-dir) for its credentials and kubeconfig")
	}
	if c.CompactionInterval < 0 {
		return fmt.Errorf("--compaction-interval %v must not be negative", c.CompactionInterval)
	}
	if c.ShutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay-duration %v must not be negative", c.ShutdownDelay)
	}
	if c.CompactionMaxHistory < 0 {
		return fmt.Errorf("--compaction-max-history %d must not be negative", c.CompactionMaxHistory)
	}
	if _, err := c.authorizationModes(); err != nil {
		return err
	}
	if _, err := c.RequestHeader.validate(); err != nil {
		return err
	}
	switch {
	case c.AuthenticationConfigFile != "" && c.OIDC.Set:
		return errors.New("authentication-config file and oidc-* flags are mutually exclusive")
	case c.AuthenticationConfigFile == "" && c.OIDC.Set && (c.OIDC.IssuerURL == "" || c.OIDC.ClientID == ""):
		return errors.New("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set")
	}
	if v := c.TokenWebhook.Version; v != "" && v != "v1" && v != "v1beta1" {
		return fmt.Errorf("--authentication-token-webhook-version: unsupported authentication webhook version %q, supported versions are %q, %q", v, "v1", "v1beta1")
	}
	if c.AuditLogMode != "" {
		if err := audit.CheckMode("log", c.AuditLogMode, c.AuditLogBatch); err != nil {
			return fmt.Errorf("--audit-log-mode: %w", err)
		}
	}
	if c.AuditWebhookMode != "" {
		if err := audit.CheckMode("webhook", c.AuditWebhookMode, c.AuditWebhookBatch); err != nil {
			return fmt.Errorf("--audit-webhook-mode: %w", err)
		}
	}
	if c.TokenWebhook.CacheTTL < 0 {
		return fmt.Errorf("--authentication-token-webhook-cache-ttl %v must not be negative", c.TokenWebhook.CacheTTL)
	}
	if err := pki.CheckHosts(c.TLSSANs); err != nil {
		return fmt.Errorf("--tls-san: %v", err)
	}
	if err := c.validateServiceAccounts(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.listen()); err != nil {
		return fmt.Errorf("--listen %q: %v", c.Listen, err)
	}
	return c.StoreConfig.Validate()
}

// validateServiceAccounts checks the service account token flags as
// kube-apiserver does, with its words.
func (c Config) validateServiceAccounts() error {
	seen := map[string]bool{}
	for _, issuer := range c.ServiceAccountIssuers {
		if strings.Contains(issuer, ":") {
			if _, err := url.Parse(issuer); err != nil {
				return fmt.Errorf("--service-account-issuer %q contained a ':' but was not a valid URL: %v", issuer, err)
			}
		}
		switch {
		case issuer == "":
			return errors.New("--service-account-issuer should not be an empty string")
		case seen[issuer]:
			return fmt.Errorf("--service-account-issuer %q is already specified", issuer)
		}
		seen[issuer] = true
	}
	if slices.Contains(c.APIAudiences, "") {
		return errors.New("--api-audiences should not name an empty audience")
	}
	if c.ServiceAccountJWKSURI != "" {
		u, err := url.Parse(c.ServiceAccountJWKSURI)
		switch {
		case err != nil:
			return fmt.Errorf("--service-account-jwks-uri must be a valid URL: %v", err)
		case u.Scheme != "https":
			return fmt.Errorf("--service-account-jwks-uri requires https scheme, parsed as: %v", u)
		}
	}
	if m := c.ServiceAccountMaxTokenExpiration; m != 0 && (m < time.Hour || m > (1<<32)*time.Second) {
		return fmt.Errorf("--service-account-max-token-expiration %v must be between 1 hour and 2^32 seconds", m)
	}
	return nil
}

func (c Config) listen() string {
	if c.Listen == "" {
		return "127.0.0.1:6443"
	}
	return c.Listen
}

// Run serves the Kubernetes API until ctx ends, then shuts down cleanly:
// it stops taking requests, ends watches, lets writes in flight finish,
// stops the controllers and caches, and closes (flushes) the store.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The service account keys users give are read first: a bad one
	// stops kplane before anything starts.
	var signing crypto.Signer
	if f := cfg.ServiceAccountSigningKeyFile; f != "" {
		var err error
		if signing, err = readSigningKey(f); err != nil {
			return err
		}
	}
	checking, err := readPublicKeys(cfg.ServiceAccountKeyFiles)
	if err != nil {
		return err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	auditPolicy, auditLog, err := openAudit(cfg, log)
	if err != nil {
		return err
	}
	if auditLog != nil {
		defer auditLog.Close()
	}
	start := time.Now()
	host, _, _ := net.SplitHostPort(cfg.listen())
	// The credentials are made (the first time) while the store opens.
	type pkiResult struct {
		bundle *pki.Bundle
		err    error
	}
	pkiDone := make(chan pkiResult, 1)
	go func() {
		b, err := pki.Ensure(filepath.Join(cfg.DataDir, "pki"), append([]string{host}, cfg.TLSSANs...))
		pkiDone <- pkiResult{b, err}
	}()
	ln, err := net.Listen("tcp", cfg.listen())
	if err != nil {
		<-pkiDone
		return err
	}
	defer ln.Close()

	kvs, err := OpenStore(cfg.StoreConfig)
	if err != nil {
		return err
	}
	defer kvs.Close()
	store := storage.New(kvs)
	reg := registry.New(registry.Config{Store: store, Cache: watchcache.Config{Logger: log}, Logger: log})
	crds := &crd.Controller{Registry: reg, Logger: log}
	crdKind := crd.Kind()
	crdKind.Written = crds.Written // a CRD write returns once the controller has acted on it
	// The tokens' key is set once the credentials are loaded.
	tokens := &core.Tokens{
		Registry: reg, Issuers: cfg.ServiceAccountIssuers, APIAudiences: cfg.APIAudiences,
		MaxExpiration: cfg.ServiceAccountMaxTokenExpiration,
	}
	if cfg.TokenWebhook.KubeConfigFile != "" {
		twcfg := cfg.TokenWebhook
		twcfg.Logger = log
		tw, err := webhook.NewTokenWebhook(twcfg)
		if err != nil {
			return fmt.Errorf("--authentication-token-webhook-config-file: %w", err)
		}
		tokens.Webhook = tw
	}
	var proxies *proxyCAs
	var requestHeader *apiserver.RequestHeader
	if f := cfg.RequestHeader; f.ClientCAFile != "" {
		warnings, _ := f.validate()
		for _, w := range warnings {
			log.Warn(w)
		}
		if proxies, err = newProxyCAs(f.ClientCAFile, log); err != nil {
			return err
		}
		requestHeader = f.apiserver(proxies)
	}
	var clientCAs func() *x509.CertPool
	if proxies != nil {
		clientCAs = proxies.ownCAs
	}
	if cfg.EnableBootstrapTokenAuth {
		tokens.Bootstrap = &core.BootstrapTokens{Registry: reg}
	}
	if cfg.TokenAuthFile != "" {
		tf, err := core.ReadTokenFile(cfg.TokenAuthFile, log)
		if err != nil {
			return err
		}
		tokens.File = tf
	}
	// The JWT authenticators' discovery and key fetches run until kplane
	// stops.
	authnCtx, stopAuthn := context.WithCancel(context.Background())
	defer stopAuthn()
	jwtMetrics := &jwt.Metrics{}
	var authnFile *configAuthenticator
	anonymousPaths := []string(nil)
	refuseAnonymous := cfg.RefuseAnonymous
	if cfg.AuthenticationConfigFile != "" || cfg.OIDC.Set {
		authnFile, err = newConfigAuthenticator(authnCtx, cfg.AuthenticationConfigFile, &cfg.OIDC, cfg.AnonymousAuthSet, tokens.AllIssuers(), jwtMetrics, log)
		if err != nil {
			return err
		}
		tokens.JWT = authnFile
		if a := authnFile.anonymous; a != nil {
			refuseAnonymous = !a.Enabled
			if a.Enabled && len(a.Conditions) > 0 {
				anonymousPaths = a.Paths()
			}
		}
	}
	builtin := append(tokens.Install(core.Kinds()), crdKind)
	authz, err := newAuthorizers(&cfg, reg, log)
	if err != nil {
		return err
	}
	builtin = authz.install(builtin)
	// Admission webhooks: their configurations reload on every write.
	webhooks := &webhook.Webhooks{Registry: reg, Logger: log, APIServerID: apiServerID()}
	admissionCfg := &webhook.AdmissionConfig{}
	if f := cfg.AdmissionControlConfigFile; f != "" {
		var err error
		admissionCfg, err = webhook.ReadAdmissionConfig(f)
		if err != nil {
			return fmt.Errorf("--admission-control-config-file: %w", err)
		}
		webhooks.MutatingAuth, webhooks.ValidatingAuth = admissionCfg.MutatingAuth, admissionCfg.ValidatingAuth
		for _, name := range admissionCfg.Ignored {
			log.Warn("--admission-control-config-file configures an admission plugin kplane does not run; ignored", "plugin", name)
		}
	}
	if e, ok := authz.chain.(registry.Explainer); ok {
		webhooks.Authorizer = e.Explaining() // admission policies' authorizer checks
	}
	builtin = webhooks.Install(builtin)
	registry.SetTypeConverters(builtin...)
	for _, k := range builtin {
		if err := reg.Add(k); err != nil {
			return err
		}
	}
	// The files' configurations are read before anything is written, so
	// that a bad one stops kplane at once. kplane's own start-up writes
	// are not sent to them.
	if err := webhooks.LoadStatic(admissionCfg.Static); err != nil {
		return fmt.Errorf("--admission-control-config-file: %w", err)
	}
	if err := core.Bootstrap(ctx, reg); err != nil {
		return fmt.Errorf("creating the initial namespaces and the default roles: %w", err)
	}
	if err := (&core.RoleAggregation{Registry: reg, Logger: log}).Sync(ctx); err != nil {
		return fmt.Errorf("aggregating the default roles: %w", err)
	}
	// After the bootstrap's writes, which upstream's webhooks never see.
	if err := webhooks.Load(ctx); err != nil {
		return fmt.Errorf("reading the admission webhook configurations: %w", err)
	}
	reg.SetAdmission(webhooks)
	quotas, err := quota.New(quota.Config{Registry: reg, Logger: log, Resync: cfg.ResourceQuotaSyncPeriod})
	if err != nil {
		return err
	}
	reg.SetQuota(quotas)
	seats := cfg.MaxRequestsInflight + cfg.MaxMutatingRequestsInflight
	if seats <= 0 {
		seats = 600
	}
	// Off, the objects are kept still, as upstream's storage of the kinds
	// keeps them; only the requests are not classified.
	flow := flowcontrol.New(flowcontrol.Config{Registry: reg, Seats: seats, Logger: log, ObjectsOnly: cfg.DisablePriorityAndFairness})
	var classify *flowcontrol.Controller
	if !cfg.DisablePriorityAndFairness {
		classify = flow
	}
	conversions := &webhook.Conversions{}
	reg.SetConverter(conversions)

	// Every goroutine below is owned here: cancelled by stop, awaited by wg.
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil {
				log.Error("stopped with an error", "component", name, "err", err)
			}
		}()
	}
	goRun("registry", reg.Run)
	goRun("crd-controller", crds.Run)
	goRun("admission-webhooks", webhooks.Run)
	goRun("admission-manifests", webhooks.WatchStatic)
	goRun("namespace-controller", (&core.NamespaceController{Registry: reg, Logger: log}).Run)
	goRun("resourcequota-controller", quotas.Run)
	goRun("priority-and-fairness", flow.Run)
	if cfg.EnableBootstrapTokenAuth {
		goRun("token-cleaner", (&core.BootstrapTokenCleaner{Registry: reg, Logger: log}).Run)
	}
	if cfg.EventTTL > 0 {
		goRun("event-expiry", (&core.EventExpiry{Registry: reg, TTL: cfg.EventTTL, Logger: log}).Run)
	}
	goRun("storage-version-migrator", (&migration.Controller{Registry: reg, Logger: log}).Run)
	goRun("namespace-defaults", (&core.NamespaceDefaults{Registry: reg, Logger: log}).Run)
	goRun("clusterrole-aggregation", (&core.RoleAggregation{Registry: reg, Logger: log}).Run)
	var authorizer registry.Authorizer
	if authz.chain != nil {
		authorizer = authz.chain
	}
	if authz.file != nil {
		goRun("authorization-config", authz.file.run)
	}
	if authnFile != nil {
		goRun("authentication-config", func(ctx context.Context) error {
			authnFile.watch(ctx)
			return nil
		})
	}
	rbacSynced := closedChan
	if authz.rbac != nil {
		goRun("rbac", authz.rbac.Run)
		rbacSynced = authz.rbac.Synced()
	}
	collector, err := gc.New(gc.Config{Registry: reg, Logger: log})
	if err != nil {
		return err
	}
	goRun("garbage-collector", func(ctx context.Context) error {
		// Once every stored CRD is served, so its graph holds them all.
		select {
		case <-crds.Synced():
		case <-ctx.Done():
			return nil
		}
		return collector.Run(ctx)
	})
	compactor := newCompactor(kvs, cfg.CompactionMaxHistory, log)
	goRun("compactor", func(ctx context.Context) error {
		return compactor.run(ctx, cfg.CompactionInterval, time.Second)
	})

	api := apiserver.New(apiserver.Config{
		Registry:  reg,
		Version:   cfg.Version,
		Logger:    log,
		Profiling: cfg.Profiling,
		Metrics: slices.Concat(storeMetrics(cfg.Storage, kvs, compactor), conversionMetrics(conversions), admissionMetrics(webhooks), policyMetrics(webhooks), manifestMetrics(webhooks),
			authorizationMetrics(authz.metrics), authorizationConfigMetrics(authz.file, webhook.IDHash(webhooks.APIServerID)),
			authenticationConfigMetrics(authnFile, jwtMetrics, webhook.IDHash(webhooks.APIServerID))),
		HealthChecks: storeHealthChecks(cfg.Storage, kvs),
		Tokens:       tokens,
		Authorizer:   authorizer,
		AuditPolicy:  auditPolicy,
		AuditLog:     auditLog,
		AuditStrict:  cfg.AuditLogMode == audit.ModeBlockingStrict || cfg.AuditWebhookMode == audit.ModeBlockingStrict,

		RequestHeader:         requestHeader,
		ClientCAs:             clientCAs,
		RefuseAnonymous:       refuseAnonymous,
		AnonymousPaths:        anonymousPaths,
		ServiceAccountJWKSURI: cfg.ServiceAccountJWKSURI,
		FlowControl:           classify,
		MaxInflight:           apiserver.MaxInflight{ReadOnly: cfg.MaxRequestsInflight, Mutating: cfg.MaxMutatingRequestsInflight},
	})
	pr := <-pkiDone
	if pr.err != nil {
		return pr.err
	}
	bundle := pr.bundle
	if signing == nil {
		signing = bundle.ServiceAccountKey
	}
	if err := tokens.SetKeys(signing, checking); err != nil {
		return err
	}
	goRun("token-secrets", (&core.TokenSecrets{Registry: reg, Tokens: tokens, RootCA: bundle.CACertPEM, Logger: log}).Run)
	goRun("certificate-signer", (&core.CSRSigner{Registry: reg, CA: bundle.CACert, Key: bundle.CAKey, Duration: cfg.ClusterSigningDuration, Logger: log}).Run)
	// How kplane authenticates clients, published for servers that
	// delegate authentication to it (extension-apiserver-authentication).
	authInfo := &core.AuthenticationInfo{Registry: reg, ClientCA: func() []byte { return bundle.CACertPEM }, Logger: log}
	if proxies != nil {
		f := cfg.RequestHeader
		authInfo.RequestHeader = func() core.RequestHeaderInfo {
			return core.RequestHeaderInfo{CA: proxies.current(), AllowedNames: f.AllowedNames, UsernameHeaders: f.UsernameHeaders,
				UIDHeaders: f.UIDHeaders, GroupHeaders: f.GroupHeaders, ExtraHeaderPrefixes: f.ExtraHeaderPrefixes}
		}
		proxies.changed = authInfo.Notify
	}
	goRun("authentication-info", authInfo.Run)
	tlsConfig := bundle.ServerTLSConfig()
	if proxies != nil {
		proxies.setOwn(bundle.CACertPEM, bundle.CAPool)
		tlsConfig = proxies.tlsConfig(tlsConfig)
		goRun("requestheader-client-ca", func(ctx context.Context) error {
			proxies.watch(ctx)
			return nil
		})
	}
	srv := &http.Server{
		Handler:           api,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	// ServeTLS, not Serve on a TLS listener: it drops h2 from the
	// handshake's protocols when Go's HTTP/2 server is off
	// (GODEBUG=http2server=0), so that clients then speak HTTP/1.1
	// rather than h2 to a server that cannot answer it.
	go func() { served <- srv.ServeTLS(ln, "", "") }()

	ready := []<-chan struct{}{crds.Synced(), rbacSynced}
	// As upstream's priority-and-fairness post-start hook: the bootstrap
	// configuration is stored before kplane is ready.
	ready = append(ready, flow.Synced())
	// As upstream's RBAC bootstrap and authentication info hooks.
	ready = append(ready, authInfo.Synced())
	for _, synced := range ready {
		select {
		case <-synced:
		case <-ctx.Done():
		case err := <-served:
			return err
		}
	}
	url := "https://" + net.JoinHostPort(clientHost(host), portOf(ln.Addr()))
	kubeconfig := filepath.Join(cfg.DataDir, "kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, url, bundle); err != nil {
		return err
	}
	api.MarkStarted()
	log.Info("kplane is ready", "url", url, "kubeconfig", kubeconfig, "storage", cfg.Storage, "startup", time.Since(start).Round(time.Microsecond))
	if cfg.OnReady != nil {
		cfg.OnReady(Ready{URL: url, Kubeconfig: kubeconfig})
	}
	goRun("release-startup-garbage", func(ctx context.Context) error {
		// Start-up's garbage (replaying the log, filling the caches,
		// the collector's first lists) is collected and its pages given
		// back once, rather than held until the heap next grows.
		select {
		case <-collector.Synced():
			debug.FreeOSMemory()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			log.Info("start-up settled: every resource listed, start-up's garbage returned",
				"heapLiveBytes", m.HeapAlloc, "took", time.Since(start).Round(time.Millisecond))
		case <-ctx.Done():
		}
		return nil
	})

	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	api.MarkShuttingDown()
	if cfg.ShutdownDelay > 0 {
		log.Info("shutting down after --shutdown-delay-duration; serving meanwhile, with /readyz failing", "delay", cfg.ShutdownDelay)
		select {
		case <-time.After(cfg.ShutdownDelay):
		case err := <-served:
			return err
		}
	}
	log.Info("shutting down")
	api.StopWatches()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still running at shutdown", "err", err)
	}
	stop()
	wg.Wait()
	if err := kvs.Close(); err != nil && !errors.Is(err, kv.ErrClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// closedChan is a channel that is always ready.
var closedChan = func() <-chan struct{} { c := make(chan struct{}); close(c); return c }()

// clientHost is the host clients should dial for a listen host.
func clientHost(listenHost string) string {
	switch listenHost {
	case "", "0.0.0.0", "::":
		return "127.0.0.1"
	}
	return listenHost
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

// openAudit reads --audit-policy-file and opens the backends: the log
// (--audit-log-path) and the webhook (--audit-webhook-config-file). The
// policy and a backend are both needed for audit events, as
// kube-apiserver needs them; the backend is nil without.
func openAudit(cfg Config, log *slog.Logger) (*audit.Policy, audit.Backend, error) {
	hasBackend := cfg.AuditLogPath != "" || cfg.AuditWebhookConfigFile != ""
	switch {
	case cfg.AuditPolicyFile == "" && !hasBackend:
		return nil, nil, nil
	case cfg.AuditPolicyFile == "":
		log.Warn("--audit-log-path or --audit-webhook-config-file without --audit-policy-file: no audit events are written")
		return nil, nil, nil
	case !hasBackend:
		log.Warn("--audit-policy-file without --audit-log-path or --audit-webhook-config-file: no audit events are written")
		return nil, nil, nil
	}
	policy, err := audit.ReadPolicy(cfg.AuditPolicyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-policy-file: %w", err)
	}
	var backends audit.Backends
	if cfg.AuditLogPath != "" {
		w, err := audit.NewWriter(cfg.AuditLogPath, cfg.AuditLogMaxSize, cfg.AuditLogMaxBackups, cfg.AuditLogMaxAge)
		if err != nil {
			return nil, nil, fmt.Errorf("--audit-log-path: %w", err)
		}
		if cfg.AuditLogMode == audit.ModeBatch {
			b := cfg.AuditLogBatch
			if b == (audit.BatchOptions{}) {
				b = audit.BatchOptions{BufferSize: 10000, MaxBatchSize: 1} // upstream's log defaults
			}
			w.Batch(b)
		}
		backends = append(backends, w)
	}
	if f := cfg.AuditWebhookConfigFile; f != "" {
		wh, err := webhook.NewAuditWebhook(f, cfg.AuditWebhookInitialBackoff)
		if err != nil {
			backends.Close()
			return nil, nil, fmt.Errorf("--audit-webhook-config-file: %w", err)
		}
		var batch *audit.BatchOptions
		if cfg.AuditWebhookMode == "" || cfg.AuditWebhookMode == audit.ModeBatch {
			b := cfg.AuditWebhookBatch
			if b == (audit.BatchOptions{}) {
				b = audit.WebhookBatchDefaults
			}
			batch = &b
		}
		backends = append(backends, audit.NewWebhookBackend(wh.Send, batch, func(err error, events int) {
			log.Error("sending audit events to the webhook; they are lost", "events", events, "err", err)
		}))
	}
	if len(backends) == 1 {
		return policy, backends[0], nil
	}
	return policy, backends, nil
}
