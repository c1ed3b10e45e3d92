package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/app"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

const serveUsage = `Usage: kplane serve [flags]

Serve the Kubernetes API. On the first start kplane creates a CA, a serving
certificate and an admin credential in the data directory; once ready it
writes <data-dir>/kubeconfig, so that this works:

  kubectl --kubeconfig kplane-data/kubeconfig get namespaces

Flags:
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kplane serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serveUsage); fs.PrintDefaults() }
	var (
		cfg       app.Config
		endpoints string
		logLevel  string
		logFormat string
	)
	fs.StringVar(&cfg.DataDir, "data-dir", "./kplane-data", "directory for the store, the credentials and the kubeconfig")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:6443", "address to serve on (port 0 picks a free port)")
	fs.StringVar(&cfg.Storage, "storage", app.StorageEmbedded, "storage engine: embedded, memory (nothing on disk; for tests) or etcd")
	fs.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated etcd client URLs (--storage etcd)")
	fs.StringVar(&cfg.EtcdPrefix, "etcd-prefix", "/registry", "key prefix in etcd (--storage etcd)")
	fs.DurationVar(&cfg.CompactionInterval, "compaction-interval", 5*time.Minute, "compact the store to the revision of the previous tick every interval, as kube-apiserver; 0 turns it off")
	cfg.CompactionMaxHistory = 512 << 20
	fs.Var(byteSize{&cfg.CompactionMaxHistory}, "compaction-max-history", "compact early when the old versions the embedded or memory store holds pass this size (512Mi, 2Gi, ...); 0 leaves them to --compaction-interval")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay-duration", 0, "once asked to stop (SIGTERM, SIGINT), keep serving this long with /readyz failing, so load balancers stop sending requests first; as kube-apiserver's")
	fs.StringVar(&cfg.AuthorizationMode, "authorization-mode", app.AuthorizeAlways, "the authorizers asked, in order, comma-separated, as kube-apiserver's: AlwaysAllow (alone: every authenticated client may do everything), AlwaysDeny, RBAC (the cluster's Roles and bindings) and Webhook (a SubjectAccessReview webhook); the first to allow or deny decides")
	fs.StringVar(&cfg.AuthorizationWebhook.KubeConfigFile, "authorization-webhook-config-file", "", "kubeconfig of the Webhook authorizer: its current context's cluster server is the URL SubjectAccessReviews are posted to, its user the credentials kplane presents")
	fs.StringVar(&cfg.AuthorizationWebhook.Version, "authorization-webhook-version", "v1beta1", "the authorization.k8s.io version of the SubjectAccessReviews sent to the Webhook authorizer: v1 or v1beta1")
	fs.DurationVar(&cfg.AuthorizationWebhook.AuthorizedTTL, "authorization-webhook-cache-authorized-ttl", 5*time.Minute, "how long the Webhook authorizer's answers that allow are kept (0: not kept)")
	fs.DurationVar(&cfg.AuthorizationWebhook.UnauthorizedTTL, "authorization-webhook-cache-unauthorized-ttl", 30*time.Second, "how long the Webhook authorizer's answers that do not allow are kept (0: not kept)")
	fs.StringVar(&cfg.TokenWebhook.KubeConfigFile, "authentication-token-webhook-config-file", "", "kubeconfig of a token authentication webhook: a bearer token that is not one of kplane's service account tokens is sent to its current context's cluster server as a TokenReview, with its user's credentials, as kube-apiserver's")
	fs.StringVar(&cfg.TokenWebhook.Version, "authentication-token-webhook-version", "v1beta1", "the authentication.k8s.io version of the TokenReviews sent to the token authentication webhook: v1 or v1beta1")
	fs.DurationVar(&cfg.TokenWebhook.CacheTTL, "authentication-token-webhook-cache-ttl", 2*time.Minute, "how long the token authentication webhook's answers are kept (0: not kept)")
	fs.StringVar(&cfg.AuthorizationConfigFile, "authorization-config", "", "an AuthorizationConfiguration (apiserver.config.k8s.io/v1): the authorizers in order (several webhooks, with matchConditions and a failurePolicy, RBAC, AlwaysAllow, AlwaysDeny), read again when it changes, as kube-apiserver's; not with --authorization-mode or --authorization-webhook-*")
	fs.StringVar(&cfg.AuditPolicyFile, "audit-policy-file", "", "an audit.k8s.io/v1 Policy: the level each request is written to the audit log at, as kube-apiserver's")
	fs.StringVar(&cfg.AuditLogPath, "audit-log-path", "", "file the audit log's events are written to, one JSON line each (\"-\": standard output); needs --audit-policy-file")
	fs.IntVar(&cfg.AuditLogMaxSize, "audit-log-maxsize", 0, "megabytes the audit log reaches before it is rotated (0: 100)")
	fs.IntVar(&cfg.AuditLogMaxBackups, "audit-log-maxbackup", 0, "rotated audit logs kept (0: all)")
	fs.IntVar(&cfg.AuditLogMaxAge, "audit-log-maxage", 0, "days a rotated audit log is kept (0: no limit)")
	fs.StringVar(&cfg.AuditLogMode, "audit-log-mode", "blocking", "how audit events are written, as kube-apiserver's: blocking (each before the request goes on), blocking-strict (a request whose first event cannot be written is refused) or batch (queued and written by a goroutine; an event that finds the queue full is lost and counted)")
	fs.IntVar(&cfg.AuditLogBatch.BufferSize, "audit-log-batch-buffer-size", 10000, "events the queue holds (batch mode)")
	fs.IntVar(&cfg.AuditLogBatch.MaxBatchSize, "audit-log-batch-max-size", 1, "most events written at once (batch mode)")
	fs.DurationVar(&cfg.AuditLogBatch.MaxBatchWait, "audit-log-batch-max-wait", 0, "how long a batch waits to fill before it is written (batch mode; 0: what is queued is written at once)")
	fs.BoolVar(&cfg.AuditLogBatch.ThrottleEnable, "audit-log-batch-throttle-enable", false, "bound the batches written per second (batch mode)")
	fs.Float64Var(&cfg.AuditLogBatch.ThrottleQPS, "audit-log-batch-throttle-qps", 10, "batches written per second, on average, with the throttle (batch mode)")
	fs.IntVar(&cfg.AuditLogBatch.ThrottleBurst, "audit-log-batch-throttle-burst", 15, "batches written at once after a pause, with the throttle (batch mode)")
	fs.StringVar(&cfg.AuditWebhookConfigFile, "audit-webhook-config-file", "", "kubeconfig of a webhook the audit events are sent to, as audit.k8s.io/v1 EventLists, as kube-apiserver's; needs --audit-policy-file")
	fs.DurationVar(&cfg.AuditWebhookInitialBackoff, "audit-webhook-initial-backoff", 10*time.Second, "how long a list the audit webhook did not take waits before it is sent again (then 1.5 times longer, five sends in all)")
	fs.StringVar(&cfg.AuditWebhookMode, "audit-webhook-mode", audit.ModeBatch, "how audit events are sent to the webhook: batch (queued, sent in lists by goroutines), blocking or blocking-strict (each event before the request goes on)")
	fs.IntVar(&cfg.AuditWebhookBatch.BufferSize, "audit-webhook-batch-buffer-size", audit.WebhookBatchDefaults.BufferSize, "events the audit webhook's queue holds (batch mode)")
	fs.IntVar(&cfg.AuditWebhookBatch.MaxBatchSize, "audit-webhook-batch-max-size", audit.WebhookBatchDefaults.MaxBatchSize, "most events in one list sent to the audit webhook (batch mode)")
	fs.DurationVar(&cfg.AuditWebhookBatch.MaxBatchWait, "audit-webhook-batch-max-wait", audit.WebhookBatchDefaults.MaxBatchWait, "how long a list waits to fill before it is sent to the audit webhook (batch mode)")
	fs.BoolVar(&cfg.AuditWebhookBatch.ThrottleEnable, "audit-webhook-batch-throttle-enable", audit.WebhookBatchDefaults.ThrottleEnable, "bound the lists sent to the audit webhook per second (batch mode)")
	fs.Float64Var(&cfg.AuditWebhookBatch.ThrottleQPS, "audit-webhook-batch-throttle-qps", audit.WebhookBatchDefaults.ThrottleQPS, "lists sent to the audit webhook per second, on average, with the throttle (batch mode)")
	fs.IntVar(&cfg.AuditWebhookBatch.ThrottleBurst, "audit-webhook-batch-throttle-burst", audit.WebhookBatchDefaults.ThrottleBurst, "lists sent to the audit webhook at once after a pause, with the throttle (batch mode)")
	fs.StringVar(&cfg.AdmissionControlConfigFile, "admission-control-config-file", "", "an AdmissionConfiguration (apiserver.config.k8s.io/v1) whose MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins name a kubeconfig (kubeConfigFile, absolute) with the credentials to call admission webhooks with, by host, as kube-apiserver's")
	fs.StringVar(&cfg.RequestHeader.ClientCAFile, "requestheader-client-ca-file", "", "PEM bundle of the authorities whose client certificates identify front proxies: a request with one names its user in the --requestheader-* headers, as kube-apiserver's")
	listFlag := func(name, usage string, p *[]string) {
		fs.Func(name, usage+" (comma-separated; may be repeated)", func(v string) error {
			*p = append(*p, strings.Split(v, ",")...)
			return nil
		})
	}
	listFlag("requestheader-allowed-names", "common names a front proxy's certificate must have one of (none: any the authorities signed)", &cfg.RequestHeader.AllowedNames)
	listFlag("requestheader-username-headers", "request headers a front proxy names the user in, the first set winning (X-Remote-User is common)", &cfg.RequestHeader.UsernameHeaders)
	listFlag("requestheader-uid-headers", "request headers a front proxy names the user's uid in (X-Remote-Uid)", &cfg.RequestHeader.UIDHeaders)
	listFlag("requestheader-group-headers", "request headers a front proxy names the user's groups in, every value (X-Remote-Group)", &cfg.RequestHeader.GroupHeaders)
	listFlag("requestheader-extra-headers-prefix", "prefixes of the request headers a front proxy names the user's extra in: <prefix><key> (X-Remote-Extra-)", &cfg.RequestHeader.ExtraHeaderPrefixes)
	fs.DurationVar(&cfg.EventTTL, "event-ttl", time.Hour, "how long an Event is kept after it was last written, as kube-apiserver's flag (0 keeps Events forever)")
	fs.DurationVar(&cfg.ResourceQuotaSyncPeriod, "resource-quota-sync-period", 5*time.Minute, "how often the objects every ResourceQuota counts are counted again, as kube-controller-manager's flag (deletes and new quotas are counted at once)")
	enableAPF := fs.Bool("enable-priority-and-fairness", true, "classify every request by the FlowSchemas into PriorityLevelConfigurations, which share out the server's seats and queue or refuse (429) what they cannot serve, as kube-apiserver's API Priority and Fairness; false limits requests by --max-requests-inflight and --max-mutating-requests-inflight alone")
	fs.IntVar(&cfg.MaxRequestsInflight, "max-requests-inflight", 400, "with --max-mutating-requests-inflight, the seats priority and fairness shares out; without it, the most reads served at once (0: no limit), as kube-apiserver's flag")
	fs.IntVar(&cfg.MaxMutatingRequestsInflight, "max-mutating-requests-inflight", 200, "with --max-requests-inflight, the seats priority and fairness shares out; without it, the most other requests served at once (0: no limit), as kube-apiserver's flag")
	fs.DurationVar(&cfg.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "the longest a client certificate kplane issues for an approved CertificateSigningRequest (signer kubernetes.io/kube-apiserver-client) lasts, as kube-controller-manager's flag")
	fs.BoolVar(&cfg.EnableBootstrapTokenAuth, "enable-bootstrap-token-auth", false, "let bootstrap tokens (Secrets of type bootstrap.kubernetes.io/token in kube-system) authenticate, as kube-apiserver's flag, and delete them once expired, as kube-controller-manager's tokencleaner")
	fs.StringVar(&cfg.TokenAuthFile, "token-auth-file", "", "CSV file of static bearer tokens, as kube-apiserver's: token,user,uid[,\"group1,group2\"] per line, read at start")
	fs.StringVar(&cfg.AuthenticationConfigFile, "authentication-config", "", "an AuthenticationConfiguration (apiserver.config.k8s.io/v1): JWT authenticators for the bearer tokens of external OpenID Connect issuers (claim mappings and validation rules in CEL) and who may be anonymous, read again when it changes, as kube-apiserver's; not with the --oidc-* flags, nor --anonymous-auth if it has an anonymous section")
	oidcFlag := func(name, usage string, set func(string) error) {
		fs.Func(name, usage, func(v string) error {
			cfg.OIDC.Set = true
			return set(v)
		})
	}
	oidcString := func(name, usage string, p *string) {
		oidcFlag(name, usage, func(v string) error { *p = v; return nil })
	}
	oidcString("oidc-issuer-url", "the issuer (an https URL) whose OpenID Connect ID tokens are taken as bearer tokens, as kube-apiserver's legacy flag (with --oidc-client-id)", &cfg.OIDC.IssuerURL)
	oidcString("oidc-client-id", "the audience an OpenID Connect ID token must be for (with --oidc-issuer-url)", &cfg.OIDC.ClientID)
	oidcString("oidc-ca-file", "PEM file of the certificate authorities the issuer's certificate is checked with (default: the system's)", &cfg.OIDC.CAFile)
	oidcString("oidc-username-claim", "the ID token claim that is the username (default sub)", &cfg.OIDC.UsernameClaim)
	oidcString("oidc-username-prefix", "prefixed to the username: by default the issuer URL and \"#\" unless the claim is email; \"-\" for none", &cfg.OIDC.UsernamePrefix)
	oidcString("oidc-groups-claim", "the ID token claim that holds the user's groups (a string or a list)", &cfg.OIDC.GroupsClaim)
	oidcString("oidc-groups-prefix", "prefixed to each group from the groups claim", &cfg.OIDC.GroupsPrefix)
	oidcFlag("oidc-signing-algs", "comma-separated algorithms an ID token may be signed with (default RS256)", func(v string) error {
		cfg.OIDC.SigningAlgs = append(cfg.OIDC.SigningAlgs, strings.Split(v, ",")...)
		return nil
	})
	oidcFlag("oidc-required-claim", "key=value: a claim the ID token must hold with that value; may be repeated", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("malformed pair, expect string=string")
		}
		if cfg.OIDC.RequiredClaims == nil {
			cfg.OIDC.RequiredClaims = map[string]string{}
		}
		cfg.OIDC.RequiredClaims[k] = val
		return nil
	})
	fs.BoolFunc("anonymous-auth", "let requests without credentials in as system:anonymous (default true): with --authorization-mode RBAC or Webhook authorized as any user, as kube-apiserver; with AlwaysAllow alone only to /version and the health checks. =false answers them all 401", func(v string) error {
		on, err := strconv.ParseBool(v)
		cfg.RefuseAnonymous, cfg.AnonymousAuthSet = !on, true
		return err
	})
	fs.Func("tls-san", "comma-separated DNS names or IP addresses the serving certificate names besides localhost, 127.0.0.1, ::1 and the --listen host (a load balancer's name, this machine's names); may be repeated", func(v string) error {
		cfg.TLSSANs = append(cfg.TLSSANs, strings.Split(v, ",")...)
		return nil
	})
	fs.Func("service-account-issuer", "issuer (\"iss\") of the service account tokens kplane signs, and the one OpenID discovery publishes (an https URL for that); repeat it to accept more issuers' tokens, the first signing (default "+core.ServiceAccountIssuer+")", func(v string) error {
		cfg.ServiceAccountIssuers = append(cfg.ServiceAccountIssuers, v)
		return nil
	})
	fs.Func("api-audiences", "comma-separated audiences a service account token must have one of to be accepted by the API, given to tokens asked for none (default: the issuers)", func(v string) error {
		cfg.APIAudiences = append(cfg.APIAudiences, strings.Split(v, ",")...)
		return nil
	})
	fs.StringVar(&cfg.ServiceAccountSigningKeyFile, "service-account-signing-key-file", "", "PEM file of the RSA or ECDSA private key that signs service account tokens, as kube-apiserver's (default: the data directory's pki/sa.key, made on first start)")
	fs.Func("service-account-key-file", "PEM file of RSA or ECDSA public keys (or private keys, or certificates) whose service account tokens are accepted too, and published in /openid/v1/jwks; may be repeated", func(v string) error {
		cfg.ServiceAccountKeyFiles = append(cfg.ServiceAccountKeyFiles, v)
		return nil
	})
	fs.StringVar(&cfg.ServiceAccountJWKSURI, "service-account-jwks-uri", "", "https URL the OpenID discovery document names for the token keys (default: this server's /openid/v1/jwks)")
	fs.DurationVar(&cfg.ServiceAccountMaxTokenExpiration, "service-account-max-token-expiration", 0, "longest lifetime of a requested service account token (1h to 2^32s); longer requests are shortened, with a warning. 0: no bound but TokenRequest's")
	fs.BoolVar(&cfg.Profiling, "profiling", true, "serve Go's profiles under /debug/pprof/ to authenticated clients, as kube-apiserver's --profiling")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kplane serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "authorization-mode" || strings.HasPrefix(f.Name, "authorization-webhook-") {
			cfg.AuthorizationFlagsSet = true
		}
	})
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "kplane serve: --log-level %q: want debug, info, warn or error\n", logLevel)
		return 2
	}
	opts := &slog.HandlerOptions{Level: level}
	switch logFormat {
	case "text":
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, opts))
	case "json":
		cfg.Logger = slog.New(slog.NewJSONHandler(stderr, opts))
	default:
		fmt.Fprintf(stderr, "kplane serve: --log-format %q: want text or json\n", logFormat)
		return 2
	}
	if endpoints != "" {
		cfg.EtcdEndpoints = strings.Split(endpoints, ",")
	}
	cfg.DisablePriorityAndFairness = !*enableAPF
	for _, f := range []struct {
		name string
		n    int
	}{{"max-requests-inflight", cfg.MaxRequestsInflight}, {"max-mutating-requests-inflight", cfg.MaxMutatingRequestsInflight}} {
		if f.n < 0 {
			fmt.Fprintf(stderr, "kplane serve: --%s can not be negative value\n", f.name)
			return 2
		}
	}
	if *enableAPF && cfg.MaxRequestsInflight+cfg.MaxMutatingRequestsInflight <= 0 {
		fmt.Fprintln(stderr, "kplane serve: --max-requests-inflight plus --max-mutating-requests-inflight must be positive with --enable-priority-and-fairness")
		return 2
	}
	cfg.Version = version
	if err := app.Run(ctx, cfg); err != nil {
		fmt.Fprintf(stderr, "kplane serve: %v\n", err)
		return 1
	}
	return 0
}

// byteSize is a flag holding a number of bytes, written as a Kubernetes
// quantity: 512Mi, 2Gi, 1000000.
type byteSize struct{ p *int64 }

func (b byteSize) String() string {
	if b.p == nil {
		return ""
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return errors.New("want a size such as 512Mi or 2Gi")
	}
	n, ok := q.AsInt64()
	if !ok || n < 0 {
		return fmt.Errorf("want a whole number of bytes from 0 to %d", int64(math.MaxInt64))
	}
	*b.p = n
	return nil
}
