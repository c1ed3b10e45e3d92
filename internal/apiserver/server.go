package apiserver

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/flowcontrol"
)

// KubernetesMinor is the Kubernetes minor version whose API kplane
// implements; /version reports it so that clients see no skew.
const KubernetesMinor = "37"

// Config configures a Server.
type Config struct {
	Registry *registry.Registry
	// Version is kplane's own version, reported as the build metadata of
	// gitVersion ("v1.37.0+kplane.<Version>").
	Version string
	// Anonymous lets requests without a client certificate in (tests over
	// plain HTTP). Off by default.
	Anonymous bool
	// RefuseAnonymous answers every request without a credential 401, as
	// kube-apiserver's --anonymous-auth=false. Otherwise such a request
	// is system:anonymous (group system:unauthenticated): authorized by
	// Authorizer if there is one, as upstream's, and without one let only
	// to /version and the health checks (upstream's AlwaysAllow would let
	// it do everything).
	RefuseAnonymous bool
	// RequestHeader, if set, takes the users front proxies name
	// (--requestheader-*); ClientCAs then verifies the other client
	// certificates, which the TLS handshake verified against both.
	RequestHeader *RequestHeader
	ClientCAs     func() *x509.CertPool
	// AnonymousPaths, if not nil, are the only paths a request without
	// credentials may be let in to (the anonymous conditions of
	// --authentication-config): elsewhere it is 401, as upstream's.
	AnonymousPaths []string
	// MaxBodyBytes bounds request bodies (413 beyond). Default 3 MiB, as
	// kube-apiserver.
	MaxBodyBytes int64
	// MinWatchTimeout is the base of a watch's server-side timeout when
	// the client sets none: a random duration in [1, 2)× this, as
	// kube-apiserver's --min-request-timeout. Default 30 minutes.
	MinWatchTimeout time.Duration
	// FlowControl, if set, is API Priority and Fairness: every
	// authenticated request is classified and waits for a seat of its
	// priority level, or is refused with 429.
	FlowControl *flowcontrol.Controller
	// MaxInflight limits the requests served at once when FlowControl is
	// not set.
	MaxInflight MaxInflight
	// Logger; nil discards.
	Logger *slog.Logger
	// Profiling serves Go's profiles under /debug/pprof/ to authenticated
	// clients, as kube-apiserver's --profiling does.
	Profiling bool
	// Metrics are served on /metrics after the server's own: the store's
	// figures, which only the caller knows.
	Metrics []Metric
	// HealthChecks run in /livez, /readyz and /healthz after ping, as
	// kube-apiserver runs its etcd check there.
	HealthChecks []HealthCheck
	// Tokens, if set, authenticates the bearer tokens of requests without
	// a client certificate (service account tokens), and publishes how to
	// check them (/.well-known/openid-configuration, /openid/v1/jwks) if
	// its issuer is an https URL without query or fragment, as OpenID
	// discovery requires.
	Tokens Tokens
	// ServiceAccountJWKSURI, if set, is the jwks_uri the discovery document
	// names, as kube-apiserver's --service-account-jwks-uri; unset, it is
	// /openid/v1/jwks on the host the client asked.
	ServiceAccountJWKSURI string
	// Authorizer, if set, decides what each authenticated request may do
	// (--authorization-mode=RBAC: core.RBAC); a request it refuses gets
	// 403. Unset, every authenticated request may do everything.
	Authorizer registry.Authorizer
	// AuditPolicy and AuditLog, if AuditLog is set, write the audit log
	// (auditlog.go): the events of each request at the level the policy
	// gives it. AuditStrict (--audit-log-mode=blocking-strict) refuses a
	// request whose first event cannot be written.
	AuditPolicy *audit.Policy
	AuditLog    audit.Backend
	AuditStrict bool
}

// Tokens checks bearer tokens: core.Tokens.
type Tokens interface {
	// AuthenticateToken returns the user token names, for one of the
	// audiences wanted (none: the API server's own), or why it does not.
	AuthenticateToken(ctx context.Context, token string, wanted []string) (registry.User, []string, error)
	// Issuer names the issuer of the tokens, JWKS their public keys.
	Issuer() string
	JWKS() ([]byte, error)
}

// Server serves the Kubernetes API. It is an http.Handler.
type Server struct {
	cfg           Config
	started       atomic.Bool // start-up has finished: /readyz may pass
	shuttingDown  atomic.Bool // shutdown has begun: /readyz fails
	mux           *http.ServeMux
	stopping      context.Context // done once StopWatches is called
	stopWatches   context.CancelFunc
	openapi       openAPICache // the published documents, rebuilt when the kinds change
	requests      requestMetrics
	inflight      inflightRequests
	limited       inflightLimit // Config.MaxInflight's counts
	watchEvents   watchEventMetrics
	healthPaths   []string   // /livez, /livez/ping, ...: for the index
	slis          healthSLIs // the health checks' results, for /metrics/slis
	impersonation impersonation
	auditIDs      auditIDs
	auth          authMetrics
	auditRejected atomic.Uint64 // requests refused for an event not written
	auditLevels   [len(auditLevelNames)]atomic.Uint64
	// explaining is Config.Authorizer saying why it allows, for the
	// audit log (Config.Authorizer if it cannot).
	explaining registry.Authorizer
	// openID: the OpenID discovery documents are served (Config.Tokens).
	openID bool
}

// New returns a server; its health checks fail until MarkStarted.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 3 << 20
	}
	if cfg.MinWatchTimeout == 0 {
		cfg.MinWatchTimeout = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), explaining: cfg.Authorizer}
	if e, ok := cfg.Authorizer.(registry.Explainer); ok {
		s.explaining = e.Explaining()
	}
	s.stopping, s.stopWatches = context.WithCancel(context.Background())
	s.installHealth()
	s.mux.HandleFunc("/version", s.version)
	s.mux.HandleFunc("/api", s.legacyVersions)
	s.mux.HandleFunc("/api/", s.resources)
	s.mux.HandleFunc("/apis", s.groups)
	s.mux.HandleFunc("/apis/", s.resources)
	s.mux.HandleFunc("/openapi/v2", s.openAPIV2)
	s.mux.HandleFunc("/openapi/v3", s.openAPIV3Root)
	s.mux.HandleFunc("/openapi/v3/", s.openAPIV3)
	s.mux.HandleFunc("/metrics", s.serveMetrics)
	s.mux.HandleFunc("/metrics/slis", s.serveSLIs)
	if cfg.Tokens != nil {
		// Upstream too serves the documents only for such an issuer.
		err := discoverableIssuer(cfg.Tokens.Issuer())
		if s.openID = err == nil; err != nil {
			cfg.Logger.Error("service account issuer discovery not served", "err", err)
		}
	}
	if s.openID {
		s.mux.HandleFunc("/.well-known/openid-configuration", s.openIDConfiguration)
		s.mux.HandleFunc("/.well-known/openid-configuration/", s.openIDConfiguration)
		s.mux.HandleFunc("/openid/v1/jwks", s.openIDKeys)
		s.mux.HandleFunc("/openid/v1/jwks/", s.openIDKeys)
	}
	if cfg.FlowControl != nil {
		for _, dump := range []string{"dump_priority_levels", "dump_queues", "dump_requests"} {
			s.mux.HandleFunc("/debug/api_priority_and_fairness/"+dump, s.flowControlDump)
		}
	}
	if cfg.Profiling {
		s.mux.HandleFunc("/debug/pprof/", pprof.Index)
		s.mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.mux.HandleFunc("/", s.index)
	return s
}

// index answers / with the paths served, as kube-apiserver's root does.
// Any other path not served gets Go's plain-text 404, as there.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	paths := []string{"/api", "/api/v1", "/apis", "/apis/", "/metrics", "/metrics/slis", "/openapi/v2", "/openapi/v3", "/openapi/v3/", "/version"}
	if s.openID {
		paths = append(paths, "/.well-known/openid-configuration", "/openid/v1/jwks")
	}
	paths = append(paths, s.healthPaths...)
	for _, g := range s.servedGroups() {
		if g.name == "" {
			continue
		}
		paths = append(paths, "/apis/"+g.name)
		for _, v := range g.versions {
			paths = append(paths, "/apis/"+g.name+"/"+v)
		}
	}
	slices.Sort(paths)
	indentedJSON(w, &metav1.RootPaths{Paths: paths})
}

// StopWatches ends every watch stream (cleanly, as a server timeout
// would: clients rewatch elsewhere or later). Other requests are not
// affected: http.Server.Shutdown lets them finish.
func (s *Server) StopWatches() { s.stopWatches() }

// MarkStarted marks start-up finished: the health checks may pass.
func (s *Server) MarkStarted() { s.started.Store(true) }

// MarkShuttingDown makes /readyz fail from now on, so that load balancers
// stop sending requests while those in flight finish.
func (s *Server) MarkShuttingDown() { s.shuttingDown.Store(true) }

// public paths need no credentials without an authorizer, as
// kube-apiserver's role system:public-info-viewer lets anyone read them.
// A single health check (/readyz/etcd) says why it fails, and needs them.
func public(path string) bool { return registry.PublicPath(path) }

// noCache is the Cache-Control of every answer, shared: net/http and the
// handlers replace a header's values, never change them in place.
var noCache = []string{"no-cache, private"}

// ServeHTTP authenticates the request, then routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h := w.Header()
	// No answer may be kept by a shared cache, as upstream's
	// WithCacheControl: the handlers whose answers may be (the OpenAPI
	// documents by hash, the OpenID discovery) set their own.
	if h["Cache-Control"] == nil {
		h["Cache-Control"] = noCache
	}
	// Every answer names its request, as upstream's WithAuditInit: the
	// client's Audit-ID as sent, or a new one. The ID is in the audit log
	// and the request log, for a client's report to point at.
	var auditID string
	if v := r.Header["Audit-Id"]; len(v) > 0 { // the servers canonicalize keys; Get would again
		auditID = v[0]
	}
	if auditID == "" {
		auditID = s.auditIDs.new()
	}
	h["Audit-Id"] = []string{auditID}
	// A front proxy's certificate names its user in headers
	// (RequestHeader); any other certificate must be of kplane's own
	// authority, which the handshake alone does not say when it also
	// took the proxies' authority.
	proxied, certFailed := false, false
	if rh := s.cfg.RequestHeader; rh != nil && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		u, ok, err := rh.authenticate(r)
		switch {
		case ok:
			u = registry.Authenticated(u)
			r = r.WithContext(registry.WithUser(r.Context(), u))
			s.auth.authenticated("success", u, time.Since(start))
			proxied = true
		case verifyClient(r, s.cfg.ClientCAs()) != nil:
			s.cfg.Logger.Debug("client certificate refused", "proxy", err)
			certFailed = true
		}
	}
	switch {
	case proxied:
	case r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || certFailed:
		// No client certificate of kplane's: a bearer token, or no one.
		authed, ok := s.authenticateToken(r)
		switch {
		case !ok:
			// A token that is not valid fails every request, even one
			// anyone may send, as upstream's.
			s.auth.authenticated("error", registry.User{}, time.Since(start))
			s.auditFailedAuthentication(r, auditID, start)
			refuse(w, r, apierrors.NewUnauthorized("Unauthorized"))
			return
		case authed != nil:
			r = authed
			u, _ := registry.UserFrom(r.Context())
			s.auth.authenticated("success", u, time.Since(start))
		case s.cfg.Anonymous:
			// Let in as is (tests over plain HTTP).
			s.auth.authenticated("success", registry.User{Name: "system:anonymous"}, time.Since(start))
		case certFailed, s.cfg.RefuseAnonymous, s.cfg.Authorizer == nil && !public(r.URL.Path),
			s.cfg.AnonymousPaths != nil && !slices.Contains(s.cfg.AnonymousPaths, r.URL.Path):
			// A certificate that names no one fails as a bad token does.
			s.auth.authenticated("failure", registry.User{}, time.Since(start))
			s.auditFailedAuthentication(r, auditID, start)
			refuse(w, r, apierrors.NewUnauthorized("Unauthorized"))
			return
		default:
			s.auth.authenticated("success", registry.User{Name: "system:anonymous"}, time.Since(start))
		}
	default:
		// The TLS handshake checked the certificate.
		s.auth.authenticated("success", registry.User{Name: r.TLS.VerifiedChains[0][0].Subject.CommonName}, 0)
	}
	rec, err := s.startAudit(r, auditID, start)
	if err != nil && s.cfg.AuditStrict {
		// --audit-log-mode=blocking-strict: a request whose first event
		// is not written is not served, as upstream's.
		s.auditRejected.Add(1)
		internalError(w, r, errors.New("failed to store audit event"))
		return
	}
	if rec != nil {
		aw := &auditWriter{ResponseWriter: w, rec: rec, watch: isWatch(r)}
		aw.keep = rec.ev.Level == audit.LevelRequestResponse && !aw.watch
		w = aw
		r = r.WithContext(registry.WithAuditAnnotations(withAudit(r.Context(), rec), rec.annotate))
		defer rec.finish(aw)
	}
	if r = s.impersonate(w, r); r == nil {
		return
	}
	rec.impersonated(r)
	// Priority and fairness, after impersonation and before
	// authorization, as upstream's filters: a request may wait here for
	// a seat, or be refused.
	var ticket *flowcontrol.Ticket
	if fc := s.cfg.FlowControl; fc != nil {
		if ticket = s.admit(w, r, fc, start); ticket == nil {
			return
		}
		defer ticket.Finish()
	} else if s.cfg.MaxInflight != (MaxInflight{}) {
		release, ok := s.limit(w, r, start)
		if !ok {
			return
		}
		defer release()
	}
	if r = s.authorize(w, r, rec); r == nil {
		return
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodPatch:
		growStackMore()
	default:
		growStack()
	}
	kind := kindOf(r)
	s.inflight.add(kind, 1, start)
	sw := &statusWriter{ResponseWriter: w, inflight: true, accept: r.Header.Get("Accept"), ticket: ticket}
	defer func() {
		// Deferred: a handler's panic (net/http recovers it) must not
		// leave the request counted for ever.
		if sw.inflight {
			s.inflight.add(kind, -1, time.Now())
		}
	}()
	if pretty := apiPath(r.URL.Path) && !isWatch(r) && prettyRequested(r); pretty {
		pw := &prettyWriter{ResponseWriter: sw}
		s.route(pw, r)
		pw.finish()
	} else {
		s.route(sw, r)
	}
	end := time.Now()
	if sw.series != nil {
		sw.series.observe(sw.code, end.Sub(start), ticket.Waited()+sw.webhooks.Total())
		if sw.sized {
			sw.series.observeSize(sw.written)
		}
	}
	if s.cfg.Logger.Enabled(r.Context(), slog.LevelDebug) {
		s.cfg.Logger.Debug("request", "verb", r.Method, "uri", r.URL.RequestURI(), "code", sw.code, "latency", end.Sub(start), "auditID", auditID)
	}
}

// growStack makes the goroutine's stack big enough for a write request
// while the stack is still shallow. Each request runs on a new goroutine
// whose stack starts small; decoding, the field manager and validation
// nest deep enough to grow it several times, and each growth copies (and
// walks) every frame then on the stack: 8 % of the server's CPU under
// creates. Growing it here, with a dozen frames, copies little (2.6 %
// left in the profile, growStack included). Reads don't: watches are
// long-lived and many.
//
//go:noinline
func growStack() {
	var pad [growStackBytes]byte
	touch(pad[:])
}

// growStackBytes is the frame that makes the runtime grow the stack to
// 16 KiB, enough for a create, and a size the runtime keeps cached per P
// (a 16 KiB frame, growing it to 32 KiB, cost more than it saved).
const growStackBytes = 8 << 10

// growStackMore grows the stack to 32 KiB, for updates and patches: the
// field manager's comparison of the live and new objects recurses
// through both, and took a status update of a custom resource past
// 16 KiB (stack growth was 9 % of the server's CPU under such updates).
//
//go:noinline
func growStackMore() {
	var pad [growStackBytes * 2]byte
	touch(pad[:])
}

//go:noinline
func touch(b []byte) { b[0] = 1 }

// statusWriter remembers the response code for the request log and the
// request metrics, counts the body's bytes for the latter, passes Flush
// through for watches, and holds what the request accepts for its errors.
type statusWriter struct {
	http.ResponseWriter
	code     int
	series   *requestSeries // the request's metrics, once it is known to be for a resource
	inflight bool           // counted in Server.inflight: until it ends, or turns out to be a watch
	sized    bool           // the response's size is counted (apiserver_response_sizes)
	written  int64          // bytes of the body written
	accept   string         // the request's Accept, for the form of an error (writeError)
	// ticket holds the request's priority-and-fairness seat: until it
	// ends, or turns out to be a watch.
	ticket *flowcontrol.Ticket
	// webhooks is the time admission webhooks took (warnings puts it in
	// the write's context), left out of the latency SLI.
	webhooks registry.WebhookTime
}

func (w *statusWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Info is what /version reports.
func (s *Server) Info() version.Info {
	v := s.cfg.Version
	if v == "" {
		v = "dev"
	}
	// The emulated version is the served one; it is compatible with the
	// release before, as upstream's default --min-compatibility-version.
	prev, _ := strconv.Atoi(KubernetesMinor)
	return version.Info{
		Major: "1", Minor: KubernetesMinor,
		EmulationMajor: "1", EmulationMinor: KubernetesMinor,
		MinCompatibilityMajor: "1", MinCompatibilityMinor: strconv.Itoa(prev - 1),
		GitVersion: "v1." + KubernetesMinor + ".0+kplane." + v,
		GitCommit:  "", GitTreeState: "clean",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		refuse(w, r, errMethodNotAllowed) // indented for curl, as upstream's router's
		return
	}
	if !routeProduces(r.Header.Get("Accept"), "application/json") {
		// Upstream's route produces JSON alone; its 406 is negotiated
		// (YAML or protobuf when asked).
		refuse(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
			Message: "406: Not Acceptable\n\nAvailable representations: application/json",
			Details: &metav1.StatusDetails{},
		}})
		return
	}
	indentedJSON(w, s.Info())
}

// requestContext bounds a non-watch request.
func requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 60*time.Second)
}

// writeContext is requestContext for a write. While admission webhooks
// are configured, or for a kind whose writes record who sends them
// (byUser: Kind.WritesByUser), it also carries who sent the write
// (registry.UserFrom).
func (s *Server) writeContext(r *http.Request, byUser bool) (context.Context, context.CancelFunc) {
	ctx, cancel := requestContext(r)
	if !byUser && !s.cfg.Registry.AdmissionActive() {
		return ctx, cancel
	}
	if _, ok := registry.UserFrom(r.Context()); !ok {
		ctx = registry.WithUserFunc(ctx, func() registry.User { return requestUser(r) })
	}
	return ctx, cancel
}
