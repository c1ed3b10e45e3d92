package webhook_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// sarServer is an authorization webhook that records what it is sent and
// answers what answer returns.
type sarServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
	auths  []string
	raw    []string // the bodies as sent
	query  []string
	answer func(call int) (code int, body string)
}

func newSARServer(t testing.TB) *sarServer {
	s := &sarServer{answer: func(int) (int, string) { return 200, `{"status":{"allowed":true}}` }}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil || r.Method != http.MethodPost || r.URL.Path != "/authorize" ||
			r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not a SubjectAccessReview", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.raw = append(s.raw, string(data))
		s.query = append(s.query, r.URL.RawQuery)
		call, answer := len(s.bodies), s.answer
		s.mu.Unlock()
		code, resp := answer(call)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, resp)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sarServer) setAnswer(answer func(call int) (int, string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = answer
}

// calls returns the reviews sent so far.
func (s *sarServer) calls() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// kubeconfig writes a kubeconfig for the webhook, with a token user.
func (s *sarServer) kubeconfig(t testing.TB) string {
	caData := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
	path := filepath.Join(t.TempDir(), "authz.kubeconfig")
	writeKubeconfig(t, path, `
apiVersion: v1
kind: Config
clusters:
- name: authz
  cluster: {server: "`+s.URL+`/authorize", certificate-authority-data: `+caData+`}
users:
- name: kplane
  user: {token: s3cret}
contexts:
- name: authz
  context: {cluster: authz, user: kplane}
current-context: authz
`)
	return path
}

func newAuthorizationWebhook(t *testing.T, cfg webhook.AuthorizationWebhookConfig) *webhook.AuthorizationWebhook {
	t.Helper()
	if cfg.Backoff.Steps == 0 {
		cfg.Backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1.5, Steps: 5}
	}
	a, err := webhook.NewAuthorizationWebhook(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var alice = registry.User{Name: "alice", UID: "a-1", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"x", "y"}}}

// The webhook is sent a SubjectAccessReview of the configured version
// (v1beta1 names the groups "group"), with the user, the resource or
// path, and a list's selectors as the authorization API's requirements
// (in the parsed selectors' order, by key; h>1 is not one it can say),
// presenting the kubeconfig user's token; its status decides.
func TestAuthorizationWebhookQuestionAndAnswers(t *testing.T) {
	srv := newSARServer(t)
	ctx := context.Background()
	list := registry.Attributes{User: alice, Verb: "list", ResourceRequest: true, Namespace: "dev", APIVersion: "v1", Resource: "pods"}
	list.FieldSelector, list.LabelSelector = registry.SelectorAttributes("spec.nodeName=n1,metadata.name!=x", "a=b,c notin (d,e),f,!g,h>1")
	healthz := registry.Attributes{User: alice, Verb: "get", Path: "/healthz"}

	for _, version := range []string{"v1beta1", "v1"} {
		a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t), Version: version})
		before := len(srv.calls())
		for _, attrs := range []registry.Attributes{list, healthz} {
			if d, _, err := a.Authorize(ctx, attrs); d != registry.Allow || err != nil {
				t.Fatalf("%s: %v, %v", version, d, err)
			}
		}
		calls := srv.calls()[before:]
		if len(calls) != 2 {
			t.Fatalf("%s: %d calls", version, len(calls))
		}
		groups := "groups"
		if version == "v1beta1" {
			groups = "group"
		}
		want := `{"apiVersion":"authorization.k8s.io/` + version + `","kind":"SubjectAccessReview","metadata":{},"spec":{"extra":{"scopes":["x","y"]},"` + groups + `":["devs","system:authenticated"],` +
			`"resourceAttributes":{"fieldSelector":{"requirements":[{"key":"metadata.name","operator":"NotIn","values":["x"]},{"key":"spec.nodeName","operator":"In","values":["n1"]}]},` +
			`"labelSelector":{"requirements":[{"key":"a","operator":"In","values":["b"]},{"key":"c","operator":"NotIn","values":["d","e"]},{"key":"f","operator":"Exists"},{"key":"g","operator":"DoesNotExist"}]},` +
			`"namespace":"dev","resource":"pods","verb":"list","version":"v1"},"uid":"a-1","user":"alice"},"status":{"allowed":false}}`
		if got := canonical(t, calls[0]); got != want {
			t.Errorf("%s: sent\n%s\nwant\n%s", version, got, want)
		}
		want = `{"apiVersion":"authorization.k8s.io/` + version + `","kind":"SubjectAccessReview","metadata":{},"spec":{"extra":{"scopes":["x","y"]},"` + groups + `":["devs","system:authenticated"],` +
			`"nonResourceAttributes":{"path":"/healthz","verb":"get"},"uid":"a-1","user":"alice"},"status":{"allowed":false}}`
		if got := canonical(t, calls[1]); got != want {
			t.Errorf("%s: sent\n%s\nwant\n%s", version, got, want)
		}
	}
	if srv.auths[0] != "Bearer s3cret" || srv.query[0] != "timeout=30s" || !strings.HasSuffix(srv.raw[0], "}\n") || !strings.HasPrefix(srv.raw[0], `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1beta1","metadata":{},"spec":{"resourceAttributes":{"namespace":"dev","verb":"list","version":"v1","resource":"pods","fieldSelector":`) {
		t.Errorf("presented %q, query %q, body %q", srv.auths[0], srv.query[0], srv.raw[0])
	}

	a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t)})
	for i, c := range []struct {
		status  string
		want    registry.Decision
		reason  string
		wantErr string
	}{
		{`{"allowed":true,"reason":"ok"}`, registry.Allow, "ok", ""},
		{`{"allowed":false,"denied":true,"reason":"nope"}`, registry.Deny, "nope", ""},
		{`{"allowed":false,"reason":"no idea"}`, registry.NoOpinion, "no idea", ""},
		{`{"allowed":true,"denied":true,"reason":"both"}`, registry.Deny, "both", "webhook subject access review returned both allow and deny response"},
	} {
		srv.setAnswer(func(int) (int, string) { return 200, `{"status":` + c.status + `}` })
		attrs := healthz
		attrs.Path = "/case/" + string(rune('a'+i)) // a question not asked before
		d, reason, err := a.Authorize(ctx, attrs)
		if d != c.want || reason != c.reason || (err == nil) != (c.wantErr == "") || err != nil && err.Error() != c.wantErr {
			t.Errorf("%s: %v %q %v", c.status, d, reason, err)
		}
	}
	if _, incomplete, err := a.RulesFor(ctx, alice, "dev"); !incomplete || err == nil || err.Error() != "webhook authorizer does not support user rule resolution" {
		t.Errorf("rules: incomplete %v, %v", incomplete, err)
	}
}

// canonical is v as JSON with its keys in order.
func canonical(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// An answer is kept for the same question as long as its TTL says, an
// allowance's and a refusal's each; a TTL of 0 keeps none.
func TestAuthorizationWebhookKeepsAnswers(t *testing.T) {
	srv := newSARServer(t)
	ctx := context.Background()
	attrs := registry.Attributes{User: alice, Verb: "get", ResourceRequest: true, Namespace: "dev", APIVersion: "v1", Resource: "pods", Name: "p"}
	answer := func(status string) {
		srv.setAnswer(func(int) (int, string) { return 200, `{"status":` + status + `}` })
	}
	for _, c := range []struct {
		authorized, unauthorized time.Duration
		allowKept, denyKept      bool
	}{
		{time.Hour, 0, true, false},
		{0, time.Hour, false, true},
	} {
		a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t),
			AuthorizedTTL: c.authorized, UnauthorizedTTL: c.unauthorized})
		for _, first := range []string{`{"allowed":true}`, `{"denied":true}`} {
			attrs.Name += "x" // a new question
			answer(first)
			d1, _, _ := a.Authorize(ctx, attrs)
			answer(`{"allowed":false,"reason":"changed"}`)
			d2, reason, _ := a.Authorize(ctx, attrs)
			kept := c.allowKept
			if d1 == registry.Deny {
				kept = c.denyKept
			}
			if kept != (d2 == d1 && reason == "") {
				t.Errorf("TTLs %v/%v, first %s: then %v %q (kept: %v)", c.authorized, c.unauthorized, first, d2, reason, kept)
			}
		}
	}
}

// A call that fails in a way worth retrying (an answer of 500, 429 or
// 504) is tried again, up to the backoff's steps; one that fails
// otherwise (400, an answer that is not JSON, no server) is not. A
// failure is no opinion, with the error.
func TestAuthorizationWebhookFailures(t *testing.T) {
	srv := newSARServer(t)
	ctx := context.Background()
	attrs := registry.Attributes{User: alice, Verb: "get", Path: "/x"}
	a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t)})
	for _, c := range []struct {
		name      string
		answer    func(call int) (int, string)
		calls     int
		want      registry.Decision
		errSubstr string
	}{
		{"500 then allowed", func(call int) (int, string) {
			if call < 3 {
				return 500, "oops"
			}
			return 200, `{"status":{"allowed":true}}`
		}, 3, registry.Allow, ""},
		{"no kind, allowed", func(int) (int, string) { return 200, `{"status":{"allowed":true}}` }, 1, registry.Allow, ""},
		{"429 always", func(int) (int, string) { return 429, "slow down" }, 5, registry.NoOpinion, "the server has received too many requests and has asked us to try again later"},
		{"500 always", func(int) (int, string) { return 500, "oops" }, 5, registry.NoOpinion, `an error on the server ("oops") has prevented the request from succeeding`},
		{"400", func(int) (int, string) { return 400, "bad" }, 1, registry.NoOpinion, "the server rejected our request for an unknown reason"},
		{"403", func(int) (int, string) { return 403, "forbidden boom" }, 1, registry.NoOpinion, "forbidden boom"},
		{"not JSON", func(int) (int, string) { return 200, `{"status": {"allowed": tru }}` }, 1, registry.NoOpinion,
			"couldn't get version/kind; json parse error: invalid character ' ' in literal true (expecting 'e')"},
		{"empty", func(int) (int, string) { return 200, "" }, 1, registry.NoOpinion, "0-length response with status code: 200 and content type: application/json"},
		{"another kind", func(int) (int, string) {
			return 200, `{"apiVersion":"authorization.k8s.io/v1beta1","kind":"TokenReview"}`
		}, 1, registry.NoOpinion,
			`no kind "TokenReview" is registered for version "authorization.k8s.io/v1beta1" in scheme "pkg/runtime/scheme.go:111"`},
		{"another version", func(int) (int, string) {
			return 200, `{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","status":{"allowed":true}}`
		}, 1, registry.NoOpinion, "converting (v1.SubjectAccessReview) to (v1beta1.SubjectAccessReview): unknown conversion"},
	} {
		before := len(srv.calls())
		srv.setAnswer(c.answer)
		attrs.Path += "x"
		d, _, err := a.Authorize(ctx, attrs)
		calls := len(srv.calls()) - before
		if d != c.want || calls != c.calls || (err == nil) != (c.errSubstr == "") || err != nil && !strings.Contains(err.Error(), c.errSubstr) {
			t.Errorf("%s: %v after %d calls, %v", c.name, d, calls, err)
		}
	}
	// A failure is not kept: the next call asks again.
	srv.setAnswer(func(int) (int, string) { return 200, `{"status":{"allowed":true}}` })
	if d, _, err := a.Authorize(ctx, attrs); d != registry.Allow || err != nil {
		t.Errorf("after a failure: %v, %v", d, err)
	}
	kc := srv.kubeconfig(t)
	srv.Close()
	a = newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: kc})
	if d, _, err := a.Authorize(ctx, attrs); d != registry.NoOpinion || err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("no server: %v, %v", d, err)
	}
}

// A kubeconfig that does not name an https webhook with a trust kplane
// can use is refused when read.
func TestAuthorizationWebhookKubeconfigRefused(t *testing.T) {
	dir := t.TempDir()
	// withContext is a kubeconfig of cluster, its current context's.
	withContext := func(cluster string) string {
		return `{clusters: [{name: a, cluster: ` + cluster + `}], contexts: [{name: c, context: {cluster: a}}], current-context: c}`
	}
	for _, c := range []struct{ config, want string }{
		{`clusters: []`, "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable"},
		{`clusters: [{name: a, cluster: {server: "https://x/"}}]`, "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable"},
		{`{clusters: [{name: a, cluster: {server: "https://x/"}}], current-context: c}`, `current-context "c" is not among its contexts`},
		{`{clusters: [{name: a, cluster: {server: "https://x/"}}], contexts: [{name: c, context: {cluster: b}}], current-context: c}`, `context "c" names cluster "b", which it does not hold`},
		{withContext(`{server: "http://x/"}`), `cluster "a": server "http://x/" must be an https URL`},
		{withContext(`{server: "https://x/", insecure-skip-tls-verify: true, certificate-authority-data: eA==}`), "specifying a root certificates file with the insecure flag is not allowed"},
		{withContext(`{server: "https://x/", certificate-authority: missing.crt}`), "missing.crt: no such file or directory"},
		{withContext(`{server: "https://x/", certificate-authority-data: ` + base64.StdEncoding.EncodeToString([]byte("junk")) + `}`), "unable to load root certificates"},
	} {
		path := filepath.Join(dir, "kc")
		if err := os.WriteFile(path, []byte(c.config), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := webhook.NewAuthorizationWebhook(webhook.AuthorizationWebhookConfig{KubeConfigFile: path}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.config, err, c.want)
		}
	}
	if _, err := webhook.NewAuthorizationWebhook(webhook.AuthorizationWebhookConfig{KubeConfigFile: filepath.Join(dir, "none")}); err == nil || err.Error() != "stat "+filepath.Join(dir, "none")+": no such file or directory" {
		t.Errorf("no file: %v", err)
	}
	if _, err := webhook.NewAuthorizationWebhook(webhook.AuthorizationWebhookConfig{KubeConfigFile: filepath.Join(dir, "kc"), Version: "v2"}); err == nil ||
		err.Error() != `unsupported webhook authorizer version "v2", supported versions are "v1", "v1beta1"` {
		t.Errorf("version v2: %v", err)
	}
}

// With matchConditions, the webhook is asked only when all are true of
// the request (as a v1 SubjectAccessReview spec); a false one is no
// opinion without a call; one that fails to evaluate is the failure
// policy's decision, with upstream's error. A failed call under
// failurePolicy Deny denies.
func TestAuthorizationWebhookMatchConditions(t *testing.T) {
	srv := newSARServer(t)
	ctx := context.Background()
	compile := func(exprs ...string) []*cel.AuthorizationMatchCondition {
		var out []*cel.AuthorizationMatchCondition
		for _, e := range exprs {
			c, err := cel.CompileAuthorizationMatchCondition(e)
			if err != nil {
				t.Fatalf("%s: %v", e, err)
			}
			out = append(out, c)
		}
		return out
	}
	conditions := compile(
		"has(request.resourceAttributes) && request.resourceAttributes.namespace == 'dev'",
		"!('system:masters' in request.groups)",
		"!has(request.resourceAttributes.labelSelector) || request.resourceAttributes.labelSelector.requirements.all(r, r.key != 'secret')",
	)
	pods := registry.Attributes{User: alice, Verb: "list", ResourceRequest: true, Namespace: "dev", APIVersion: "v1", Resource: "pods"}
	for _, deny := range []bool{false, true} {
		a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t), MatchConditions: conditions, FailurePolicyDeny: deny})
		for _, c := range []struct {
			name   string
			change func(*registry.Attributes)
			called bool
		}{
			{"matching", func(*registry.Attributes) {}, true},
			{"another namespace", func(a *registry.Attributes) { a.Namespace = "prod" }, false},
			{"a non-resource request", func(a *registry.Attributes) { *a = registry.Attributes{User: alice, Verb: "get", Path: "/metrics"} }, false},
			{"a label selector on secret", func(a *registry.Attributes) {
				_, a.LabelSelector = registry.SelectorAttributes("", "secret=x")
			}, false},
			{"a label selector on app", func(a *registry.Attributes) {
				_, a.LabelSelector = registry.SelectorAttributes("", "app=x")
				a.Name = "other" // a new question
			}, true},
		} {
			attrs := pods
			c.change(&attrs)
			before := len(srv.calls())
			d, _, err := a.Authorize(ctx, attrs)
			called := len(srv.calls()) > before
			want := registry.NoOpinion
			if c.called {
				want = registry.Allow
			}
			if called != c.called || d != want || err != nil {
				t.Errorf("deny %v, %s: called %v, %v, %v", deny, c.name, called, d, err)
			}
			if c.called {
				attrs.Name += "-again" // not kept
				pods.Name += "x"
			}
		}
	}

	// A condition that does not evaluate (no such extra).
	failing := compile("request.extra['team'][0] == 'a'")
	for _, deny := range []bool{false, true} {
		a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t), MatchConditions: failing, FailurePolicyDeny: deny})
		before := len(srv.calls())
		d, _, err := a.Authorize(ctx, pods)
		want := registry.NoOpinion
		if deny {
			want = registry.Deny
		}
		if d != want || len(srv.calls()) != before || err == nil ||
			err.Error() != "cel evaluation error: expression 'request.extra['team'][0] == 'a'' resulted in error: no such key: team" {
			t.Errorf("deny %v, a condition that fails: %v, %v", deny, d, err)
		}
	}

	// A failed call under failurePolicy Deny.
	kc := srv.kubeconfig(t)
	a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: kc, FailurePolicyDeny: true})
	srv.setAnswer(func(int) (int, string) { return 400, "no" })
	if d, _, err := a.Authorize(ctx, pods); d != registry.Deny || err == nil {
		t.Errorf("a failed call under Deny: %v, %v", d, err)
	}
}

// BenchmarkAuthorizationWebhook asks the webhook authorizer about a
// list with a label selector: answered from what it keeps (the cost
// every request pays once the webhook has answered: the question's JSON
// as the key), and with nothing kept (a call to a webhook on this
// machine over HTTP/2, each time).
func BenchmarkAuthorizationWebhook(b *testing.B) {
	srv := newSARServer(b)
	attrs := registry.Attributes{User: alice, Verb: "list", ResourceRequest: true, Namespace: "dev", APIVersion: "v1", Resource: "pods"}
	attrs.FieldSelector, attrs.LabelSelector = registry.SelectorAttributes("", "app=web")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ttl  time.Duration
	}{{"kept", time.Hour}, {"called", 0}} {
		kc := srv.kubeconfig(b)
		a, err := webhook.NewAuthorizationWebhook(webhook.AuthorizationWebhookConfig{KubeConfigFile: kc, AuthorizedTTL: c.ttl})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, _, err := a.Authorize(ctx, attrs); d != registry.Allow || err != nil {
					b.Fatal(d, err)
				}
			}
		})
	}
}

// The metrics count each call (each retry) by result, the questions a
// webhook failing open could not answer, and its match conditions'
// evaluations, exclusions and failures.
func TestAuthorizationWebhookMetrics(t *testing.T) {
	srv := newSARServer(t)
	ctx := context.Background()
	m := &webhook.AuthorizationMetrics{}
	cond, err := cel.CompileAuthorizationMatchCondition("request.extra['team'][0] == 'a' || request.user != 'skip'")
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: srv.kubeconfig(t), Name: "w", Metrics: m,
		MatchConditions: []*cel.AuthorizationMatchCondition{cond}})
	attrs := registry.Attributes{User: registry.User{Name: "bob", Extra: map[string][]string{"team": {"a"}}}, Verb: "get", Path: "/a"}
	a.Authorize(ctx, attrs) // allowed: one call
	srv.setAnswer(func(call int) (int, string) { return 500, "oops" })
	attrs.Path = "/b"
	a.Authorize(ctx, attrs) // five calls, failed open
	attrs.User = registry.User{Name: "skip"}
	a.Authorize(ctx, attrs) // the condition fails (no extra) ...
	attrs.User = registry.User{Name: "skip", Extra: map[string][]string{"team": {"b"}}}
	a.Authorize(ctx, attrs) // ... is false

	got := m.Series()
	total := func(ss []webhook.Series) string {
		var out []string
		for _, s := range ss {
			out = append(out, strings.Join(s.Labels, ",")+"="+strconv.FormatUint(s.Total(), 10))
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ name, got, want string }{
		{"calls", total(got.Calls), "name,w,result,error=5 name,w,result,success=1"},
		{"fail open", total(got.FailOpen), "name,w,result,error=1"},
		{"match evaluations", total(got.MatchTimes), "name,w,type,Webhook=4"},
		{"match errors", total(got.MatchErrors), "name,w,type,Webhook=1"},
		{"match exclusions", total(got.MatchExclusions), "name,w,type,Webhook=1"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

// A kubeconfig with insecure-skip-tls-verify calls the webhook without
// checking its certificate, as client-go does.
func TestAuthorizationWebhookInsecure(t *testing.T) {
	srv := newSARServer(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, kc, `{clusters: [{name: a, cluster: {server: "`+srv.URL+`/authorize", insecure-skip-tls-verify: true}}], contexts: [{name: c, context: {cluster: a}}], current-context: c}`)
	a := newAuthorizationWebhook(t, webhook.AuthorizationWebhookConfig{KubeConfigFile: kc})
	if d, _, err := a.Authorize(context.Background(), registry.Attributes{User: alice, Verb: "get", Path: "/x"}); d != registry.Allow || err != nil {
		t.Errorf("%v %v", d, err)
	}
}
