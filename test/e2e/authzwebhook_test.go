package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1beta1 "k8s.io/api/authentication/v1beta1"
	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationv1beta1 "k8s.io/api/authorization/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// sarWebhook is an authorization webhook deciding by a rule the test
// sets, recording the reviews it gets.
type sarWebhook struct {
	*httptest.Server
	mu      sync.Mutex
	reviews []authorizationv1beta1.SubjectAccessReview
	decide  func(spec authorizationv1beta1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewStatus
}

func newSARWebhook(t *testing.T) *sarWebhook {
	w := &sarWebhook{}
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var rev authorizationv1beta1.SubjectAccessReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || r.Header.Get("Authorization") != "Bearer kplane-to-authz" {
			http.Error(rw, "who are you", http.StatusUnauthorized)
			return
		}
		w.mu.Lock()
		w.reviews = append(w.reviews, rev)
		rev.Status = w.decide(rev.Spec)
		w.mu.Unlock()
		json.NewEncoder(rw).Encode(&rev)
	}))
	w.Config.ErrorLog = log.New(io.Discard, "", 0)
	w.StartTLS()
	t.Cleanup(w.Close)
	return w
}

// kubeconfig writes the webhook's kubeconfig, and returns its path.
func (w *sarWebhook) kubeconfig(t *testing.T) string {
	caData := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.Certificate().Raw}))
	kc := filepath.Join(t.TempDir(), "authz.kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: authz, cluster: {server: "`+w.URL+`/authorize", certificate-authority-data: `+caData+`}}]
users: [{name: kplane, user: {token: kplane-to-authz}}]
contexts: [{name: authz, context: {cluster: authz, user: kplane}}]
current-context: authz
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// asked returns the reviews about user so far.
func (w *sarWebhook) asked(user string) []authorizationv1beta1.SubjectAccessReview {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []authorizationv1beta1.SubjectAccessReview
	for _, r := range w.reviews {
		if r.Spec.User == user {
			out = append(out, r)
		}
	}
	return out
}

// TestAuthorizationWebhook runs kplane serve with
// --authorization-mode=RBAC,Webhook, as kube-apiserver v1.37.2 answered
// the same requests with the same webhook: what RBAC does not allow is
// asked of the webhook (a v1beta1 SubjectAccessReview with the user and
// the request, a list's selectors too), whose allowance, refusal or
// silence decides, through kubectl and client-go; the access reviews
// answer by both; with the webhook down, a request RBAC does not allow
// is a 500 naming the failed call, and one it allows still passes.
func TestAuthorizationWebhook(t *testing.T) {
	const operator = "system:serviceaccount:team:operator"
	wh := newSARWebhook(t)
	wh.decide = func(spec authorizationv1beta1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewStatus {
		ra := spec.ResourceAttributes
		switch {
		case spec.User != operator || ra == nil:
			return authorizationv1beta1.SubjectAccessReviewStatus{}
		case ra.Resource == "configmaps" && (ra.Verb == "list" || ra.Verb == "get" || ra.Verb == "watch"):
			return authorizationv1beta1.SubjectAccessReviewStatus{Allowed: true, Reason: "operators read configmaps"}
		case ra.Resource == "configmaps" && ra.Verb == "delete":
			return authorizationv1beta1.SubjectAccessReviewStatus{Denied: true, Reason: "read-only today"}
		}
		return authorizationv1beta1.SubjectAccessReviewStatus{Reason: "not mine to say"}
	}
	kc := wh.kubeconfig(t)
	s := startServer(t, "--authorization-mode", "RBAC,Webhook", "--authorization-webhook-config-file", kc,
		"--authorization-webhook-cache-unauthorized-ttl", "0")
	ctx := context.Background()
	s.mustKubectl(t, "create", "namespace", "team")
	s.mustKubectl(t, "-n", "team", "create", "serviceaccount", "operator")
	s.mustKubectl(t, "-n", "team", "create", "configmap", "settings", "--from-literal=mode=fast")
	s.mustKubectl(t, "-n", "team", "create", "role", "secret-reader", "--verb=get", "--resource=secrets")
	s.mustKubectl(t, "-n", "team", "create", "rolebinding", "operator-secrets", "--role=secret-reader", "--serviceaccount=team:operator")
	s.mustKubectl(t, "-n", "team", "create", "secret", "generic", "key", "--from-literal=k=v")
	token := strings.TrimSpace(s.mustKubectl(t, "-n", "team", "create", "token", "operator", "--duration", "1h"))
	kubeconfig := tokenKubeconfig(t, s, token, "team")
	asOperator := func(args ...string) (string, string, error) {
		return s.kubectl(append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}
	if n := len(wh.asked("admin")) + len(wh.asked("kplane-admin")); n != 0 {
		t.Errorf("the admin's requests reached the webhook %d times", n)
	}

	// The webhook allows: the list passes, its selector sent along.
	if out, errOut, err := asOperator("get", "configmaps", "-l", "app=web,tier!=db", "-o", "name"); err != nil || out != "" {
		t.Fatalf("list allowed by the webhook: %q %v %s", out, err, errOut)
	}
	asked := wh.asked(operator)
	if len(asked) == 0 {
		t.Fatal("the webhook was not asked")
	}
	got, _ := json.Marshal(asked[len(asked)-1])
	if want := `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1beta1","metadata":{},"spec":{"resourceAttributes":{"namespace":"team","verb":"list","version":"v1","resource":"configmaps",` +
		`"labelSelector":{"requirements":[{"key":"app","operator":"In","values":["web"]},{"key":"tier","operator":"NotIn","values":["db"]}]}},` +
		`"user":"system:serviceaccount:team:operator","group":["system:serviceaccounts","system:serviceaccounts:team","system:authenticated"],`; !strings.HasPrefix(string(got), want) {
		t.Errorf("the webhook got\n%s\nwant it to begin\n%s", got, want)
	}

	// Its refusal is a 403 with its reason; its silence one with its
	// reason after its name.
	_, errOut, err := asOperator("delete", "configmap", "settings")
	if want := `Error from server (Forbidden): configmaps "settings" is forbidden: User "system:serviceaccount:team:operator" cannot delete resource "configmaps" in API group "" in the namespace "team": read-only today`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("delete refused by the webhook: %v %q, want %q", err, errOut, want)
	}
	_, errOut, err = asOperator("create", "configmap", "more")
	if want := `error: failed to create configmap: configmaps is forbidden: User "system:serviceaccount:team:operator" cannot create resource "configmaps" in API group "" in the namespace "team": default: not mine to say`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("create the webhook has no opinion on: %v %q, want %q", err, errOut, want)
	}

	// What RBAC allows is not asked of the webhook.
	before := len(wh.asked(operator))
	if _, errOut, err := asOperator("get", "secret", "key"); err != nil {
		t.Errorf("get allowed by RBAC: %v %s", err, errOut)
	}
	if n := len(wh.asked(operator)) - before; n != 0 {
		t.Errorf("a request RBAC allows reached the webhook %d times", n)
	}

	// The access reviews answer by both, with the webhook's reasons.
	admin := kubernetes.NewForConfigOrDie(s.config())
	for _, c := range []struct {
		verb   string
		status authorizationv1.SubjectAccessReviewStatus
	}{
		{"get", authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "operators read configmaps"}},
		{"delete", authorizationv1.SubjectAccessReviewStatus{Denied: true, Reason: "read-only today"}},
		{"patch", authorizationv1.SubjectAccessReviewStatus{Reason: "default: not mine to say"}},
	} {
		sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: operator, Groups: []string{"system:serviceaccounts"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: c.verb, Resource: "configmaps"}}}, metav1.CreateOptions{})
		if err != nil || sar.Status != c.status {
			t.Errorf("SubjectAccessReview of %s: %+v, %v, want %+v", c.verb, sar.Status, err, c.status)
		}
	}
	// The review is sent as asked: its groups alone, every version.
	asked = wh.asked(operator)
	if spec := asked[len(asked)-1].Spec; strings.Join(spec.Groups, ",") != "system:serviceaccounts" || spec.ResourceAttributes.Version != "*" {
		t.Errorf("a SubjectAccessReview's question reached the webhook as %+v", spec)
	}
	out, errOut, err := asOperator("auth", "can-i", "--list")
	if err != nil || !strings.Contains(errOut, "Warning: the list may be incomplete: webhook authorizer does not support user rule resolution") || !strings.Contains(out, "secrets") {
		t.Errorf("can-i --list: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := asOperator("auth", "can-i", "list", "configmaps"); err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i list configmaps: %q %v", out, err)
	}

	// The webhook down: what RBAC allows passes; the rest is a 500 that
	// names the failed call.
	wh.Close()
	if _, errOut, err := asOperator("get", "secret", "key"); err != nil {
		t.Errorf("get allowed by RBAC with the webhook down: %v %s", err, errOut)
	}
	_, errOut, err = asOperator("get", "configmap", "settings")
	host := strings.TrimPrefix(wh.URL, "https://")
	if want := `Error from server (InternalError): an error on the server ("Internal Server Error: \"/api/v1/namespaces/team/configmaps/settings\": Post \"https://` + host + `/authorize?timeout=30s\": dial tcp ` + host + `: connect: connection refused") has prevented the request from succeeding`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("with the webhook down: %v %q, want %q", err, errOut, want)
	}
	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: operator, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team", Verb: "update", Resource: "configmaps"}}}, metav1.CreateOptions{})
	if want := `Post "https://` + host + `/authorize?timeout=30s": dial tcp ` + host + `: connect: connection refused`; err != nil || sar.Status.Allowed || sar.Status.EvaluationError != want {
		t.Errorf("SubjectAccessReview with the webhook down: %+v, %v, want evaluationError %q", sar.Status, err, want)
	}
}

// TestAuthorizationConfig runs kplane serve with --authorization-config:
// two webhooks before RBAC, the first asked only about its namespace
// (matchConditions) and failing open, the second asked about the rest
// and failing closed; a change to the file applies while kplane runs,
// and the reloads are counted on /metrics.
func TestAuthorizationConfig(t *testing.T) {
	const operator = "system:serviceaccount:team:operator"
	teamHook, restHook := newSARWebhook(t), newSARWebhook(t)
	teamHook.decide = func(spec authorizationv1beta1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewStatus {
		return authorizationv1beta1.SubjectAccessReviewStatus{Allowed: spec.User == operator, Reason: "the team's own"}
	}
	restHook.decide = func(authorizationv1beta1.SubjectAccessReviewSpec) authorizationv1beta1.SubjectAccessReviewStatus {
		return authorizationv1beta1.SubjectAccessReviewStatus{Reason: "not mine to say"}
	}
	webhookEntry := func(name string, wh *sarWebhook, policy, conditions string) string {
		return `{type: Webhook, name: ` + name + `, webhook: {timeout: 5s, subjectAccessReviewVersion: v1beta1, matchConditionSubjectAccessReviewVersion: v1, ` +
			`failurePolicy: ` + policy + `, connectionInfo: {type: KubeConfigFile, kubeConfigFile: ` + wh.kubeconfig(t) + `}, matchConditions: [` + conditions + `]}}`
	}
	team := webhookEntry("team", teamHook, "NoOpinion", `{expression: "has(request.resourceAttributes) && request.resourceAttributes.namespace == 'team'"}`)
	rest := webhookEntry("rest", restHook, "Deny", `{expression: "!has(request.resourceAttributes) || request.resourceAttributes.namespace != 'team'"}`)
	config := filepath.Join(t.TempDir(), "authz.yaml")
	write := func(authorizers ...string) {
		if err := os.WriteFile(config, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers: ["+strings.Join(authorizers, ", ")+"]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(team, rest, `{type: RBAC, name: rbac}`)
	s := startServer(t, "--authorization-config", config)
	s.mustKubectl(t, "create", "namespace", "team")
	s.mustKubectl(t, "create", "namespace", "elsewhere")
	s.mustKubectl(t, "-n", "team", "create", "serviceaccount", "operator")
	token := strings.TrimSpace(s.mustKubectl(t, "-n", "team", "create", "token", "operator", "--duration", "1h"))
	kubeconfig := tokenKubeconfig(t, s, token, "team")
	asOperator := func(args ...string) (string, string, error) {
		return s.kubectl(append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	// In its namespace, the first webhook allows; the second is not asked.
	if _, errOut, err := asOperator("get", "configmaps"); err != nil {
		t.Fatalf("in team: %v %s", err, errOut)
	}
	for _, r := range restHook.asked(operator) {
		if ra := r.Spec.ResourceAttributes; ra != nil && ra.Namespace == "team" {
			t.Errorf("the second webhook was asked about the team's namespace: %+v", ra)
		}
	}
	// Elsewhere, the first is not asked; the second has no opinion, and
	// RBAC none either.
	before := len(teamHook.asked(operator))
	_, errOut, err := asOperator("-n", "elsewhere", "get", "configmaps")
	if want := `Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:team:operator" cannot list resource "configmaps" in API group "" in the namespace "elsewhere": rest: not mine to say`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("elsewhere: %v %q, want %q", err, errOut, want)
	}
	if n := len(teamHook.asked(operator)) - before; n != 0 {
		t.Errorf("the first webhook was asked %d times about another namespace", n)
	}

	// The second down: it fails closed.
	restHook.Close()
	_, errOut, err = asOperator("-n", "elsewhere", "get", "secrets")
	host := strings.TrimPrefix(restHook.URL, "https://")
	if want := `Internal Server Error: \"/api/v1/namespaces/elsewhere/secrets?limit=500\": Post \"https://` + host + `/authorize?timeout=5s\": dial tcp ` + host + `: connect: connection refused`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("the second webhook down: %v %q, want %q", err, errOut, want)
	}

	// The file changed: the second webhook dropped, applied while kplane
	// runs, and counted.
	write(team, `{type: RBAC, name: rbac}`)
	eventually(t, 70*time.Second, "the new authorization config", func() (bool, string) {
		_, errOut, _ := asOperator("-n", "elsewhere", "get", "secrets")
		want := `Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:team:operator" cannot list resource "secrets" in API group "" in the namespace "elsewhere"` + "\n"
		return strings.HasSuffix(errOut, want), errOut
	})
	metrics := s.mustKubectl(t, "get", "--raw", "/metrics")
	if !regexp.MustCompile(`(?m)^apiserver_authorization_config_controller_automatic_reloads_total\{apiserver_id_hash="sha256:[0-9a-f]{64}",status="success"\} 1$`).MatchString(metrics) ||
		!regexp.MustCompile(`(?m)^apiserver_authorization_config_controller_last_config_info\{apiserver_id_hash="sha256:[0-9a-f]{64}",hash="sha256:[0-9a-f]{64}"\} 1$`).MatchString(metrics) {
		t.Errorf("the reload metrics:\n%s", grepLines(metrics, "authorization_config"))
	}
	for _, want := range []string{
		`apiserver_authorization_decisions_total{decision="allowed",name="team",type="Webhook"} `,
		`apiserver_authorization_webhook_evaluations_total{name="rest",result="error"} `,
		`apiserver_authorization_webhook_evaluations_total{name="team",result="success"} `,
		`apiserver_authorization_match_condition_exclusions_total{name="team",type="Webhook"} `,
		`apiserver_authorization_webhook_duration_seconds_bucket{name="team",result="success",le="+Inf"} `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("no %s in\n%s", want, grepLines(metrics, "apiserver_authorization_"))
		}
	}
}

// TestTokenAuthenticationWebhook runs kplane serve with
// --authentication-token-webhook-config-file: a bearer token that is not
// one of kplane's service account tokens is sent to the webhook as a
// TokenReview, and the user it names is the request's (kubectl auth
// whoami, RBAC's 403s); kplane's own tokens are not sent; a
// TokenReview answers by both.
func TestTokenAuthenticationWebhook(t *testing.T) {
	var mu sync.Mutex
	var reviews []authenticationv1beta1.TokenReview
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var rev authenticationv1beta1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&rev); err != nil || r.Header.Get("Authorization") != "Bearer kplane-to-authz" {
			http.Error(rw, "who are you", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		reviews = append(reviews, rev)
		mu.Unlock()
		switch rev.Spec.Token {
		case "alice-token":
			rev.Status = authenticationv1beta1.TokenReviewStatus{Authenticated: true, User: authenticationv1beta1.UserInfo{
				Username: "alice", UID: "u1", Groups: []string{"devs"}, Extra: map[string]authenticationv1beta1.ExtraValue{"scopes": {"a"}}}}
		case "revoked-token":
			rev.Status = authenticationv1beta1.TokenReviewStatus{Error: "token revoked"}
		}
		json.NewEncoder(rw).Encode(&rev)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	kc := (&sarWebhook{Server: srv}).kubeconfig(t)
	s := startServer(t, "--authorization-mode", "RBAC", "--authentication-token-webhook-config-file", kc)
	asked := func() []authenticationv1beta1.TokenReview {
		mu.Lock()
		defer mu.Unlock()
		return append([]authenticationv1beta1.TokenReview(nil), reviews...)
	}

	alice := tokenKubeconfig(t, s, "alice-token", "default")
	out, errOut, err := s.kubectl("--kubeconfig", alice, "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
	if want := `{"extra":{"scopes":["a"]},"groups":["devs","system:authenticated"],"uid":"u1","username":"alice"}`; err != nil || out != want {
		t.Errorf("whoami with the webhook's token: %q %v %s, want %s", out, err, errOut, want)
	}
	if rs := asked(); len(rs) == 0 || rs[0].APIVersion != "authentication.k8s.io/v1beta1" || rs[0].Spec.Token != "alice-token" || len(rs[0].Spec.Audiences) != 1 {
		t.Errorf("the webhook got %+v", rs)
	}
	_, errOut, err = s.kubectl("--kubeconfig", alice, "get", "secrets")
	if want := `Error from server (Forbidden): secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "default"`; err == nil || !strings.Contains(errOut, want) {
		t.Errorf("RBAC for the webhook's user: %v %q", err, errOut)
	}
	for _, token := range []string{"unknown-token", "revoked-token"} {
		_, errOut, err := s.kubectl("--kubeconfig", tokenKubeconfig(t, s, token, "default"), "get", "--raw", "/version")
		if err == nil || !strings.Contains(errOut, "Unauthorized") {
			t.Errorf("%s: %v %q", token, err, errOut)
		}
	}

	// kplane's own tokens are not sent.
	s.mustKubectl(t, "create", "serviceaccount", "robot")
	before := len(asked())
	robot := tokenKubeconfig(t, s, strings.TrimSpace(s.mustKubectl(t, "create", "token", "robot")), "default")
	if _, errOut, err := s.kubectl("--kubeconfig", robot, "auth", "whoami"); err != nil {
		t.Errorf("a service account token: %v %s", err, errOut)
	}
	if n := len(asked()) - before; n != 0 {
		t.Errorf("a service account token was sent to the webhook %d times", n)
	}

	// A TokenReview answers by both.
	admin := kubernetes.NewForConfigOrDie(s.config())
	for token, want := range map[string]string{
		"alice-token":   `{"authenticated":true,"user":{"username":"alice","uid":"u1","groups":["devs","system:authenticated"],"extra":{"scopes":["a"]}},"audiences":["https://kubernetes.default.svc.cluster.local"]}`,
		"unknown-token": `{"user":{},"error":"invalid bearer token"}`,
		"revoked-token": `{"user":{},"error":"[invalid bearer token, token revoked]"}`,
	} {
		tr, err := admin.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		got, _ := json.Marshal(tr.Status)
		if err != nil || string(got) != want {
			t.Errorf("TokenReview of %s: %s %v, want %s", token, got, err, want)
		}
	}
}
