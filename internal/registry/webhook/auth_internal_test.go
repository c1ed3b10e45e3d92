package webhook

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The user a webhook call takes is found as kube-apiserver finds it: by
// host and port, then "*." and a suffix of the host, then without a
// port of 443, then "*", then the current context's.
func TestWebhookAuthFindsUsersAsKubeAPIServer(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "token", "from-file\n")
	kc := writeFile(t, dir, "kubeconfig", `
apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {user: current}
users:
- {name: "hook.example.com:8443", user: {token: exact}}
- {name: "*.example.com:8443", user: {token: star-port}}
- {name: "*.ns.svc", user: {token: star-ns}}
- {name: "web.other.svc", user: {tokenFile: token}}
- {name: "*", user: {token: star}}
- {name: current, user: {token: current}}
`)
	auth, err := LoadWebhookAuth(kc)
	if err != nil {
		t.Fatal(err)
	}
	for hostPort, want := range map[string]string{
		"hook.example.com:8443":  "exact",
		"other.example.com:8443": "star-port",
		"a.b.example.com:8443":   "star-port",
		"web.ns.svc:443":         "star-ns", // without the port of 443
		"web.ns.svc:8443":        "star",    // a port other than 443 is kept
		"web.other.svc:443":      "from-file",
		"127.0.0.1:9443":         "star",
	} {
		if got := token(auth.For(hostPort)); got != want {
			t.Errorf("%s: %q, want %q", hostPort, got, want)
		}
	}

	// Without "*", the current context's user; without either, none.
	kc = writeFile(t, dir, "kubeconfig2", `
current-context: c
contexts: [{name: c, context: {user: current}}]
users: [{name: current, user: {token: current}}]
`)
	if auth, err = LoadWebhookAuth(kc); err != nil || token(auth.For("x:1")) != "current" {
		t.Errorf("current context: %v %q", err, token(auth.For("x:1")))
	}
	if (&WebhookAuth{}).For("x:1") != nil || (*WebhookAuth)(nil).For("x:1") != nil {
		t.Error("no kubeconfig: want anonymous")
	}
	// What kplane cannot do is refused when the file is read.
	kc = writeFile(t, dir, "kubeconfig3", `users: [{name: "*", user: {auth-provider: {name: oidc}}}]`)
	if _, err := LoadWebhookAuth(kc); err == nil || !strings.Contains(err.Error(), "auth provider not supported") {
		t.Errorf("auth provider: %v", err)
	}
}

// token is the bearer token c sends.
func token(c *Credentials) string {
	req, _ := http.NewRequest(http.MethodPost, "https://x", nil)
	c.apply(req)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
}

func TestReadAdmissionConfig(t *testing.T) {
	dir := t.TempDir()
	kc := writeFile(t, dir, "kubeconfig", `users: [{name: "*", user: {token: t}}]`)
	writeFile(t, dir, "validating.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: WebhookAdmissionConfiguration
kubeConfigFile: `+kc+`
`)
	cfg := writeFile(t, dir, "admission.yaml", `
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kc+`
- name: ValidatingAdmissionWebhook
  path: validating.yaml
- name: EventRateLimit
  path: nowhere.yaml
- name: ValidatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ValidatingAdmissionPolicyConfiguration
    staticManifestsDir: `+dir+`
- name: MutatingAdmissionPolicy
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: MutatingAdmissionPolicyConfiguration
`)
	got, err := ReadAdmissionConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if token(got.MutatingAuth.For("a:1")) != "t" || token(got.ValidatingAuth.For("a:1")) != "t" || len(got.Ignored) != 1 || got.Ignored[0] != "EventRateLimit" {
		t.Errorf("mutating %v, validating %v, ignored %v", got.MutatingAuth, got.ValidatingAuth, got.Ignored)
	}
	if want := (StaticDirs{ValidatingPolicies: dir}); got.Static != want {
		t.Errorf("static directories %+v, want %+v", got.Static, want)
	}
	file := writeFile(t, dir, "file", "")
	for name, content := range map[string]string{
		"relative": `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: ValidatingAdmissionWebhook, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration, kubeConfigFile: kubeconfig}}]}`,
		"unknown":  `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugin: []}`,
		"kind":     `{apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration}`,
		"missing":  `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: ValidatingAdmissionWebhook, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration, staticManifestsDir: /no/such/dir}}]}`,
		"notdir":   `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: MutatingAdmissionWebhook, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration, staticManifestsDir: ` + file + `}}]}`,
		"reldir":   `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: MutatingAdmissionPolicy, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: MutatingAdmissionPolicyConfiguration, staticManifestsDir: policies}}]}`,
		"polkind":  `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: ValidatingAdmissionPolicy, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: WebhookAdmissionConfiguration}}]}`,
		"polfield": `{apiVersion: apiserver.config.k8s.io/v1, kind: AdmissionConfiguration, plugins: [{name: ValidatingAdmissionPolicy, configuration: {apiVersion: apiserver.config.k8s.io/v1, kind: ValidatingAdmissionPolicyConfiguration, kubeConfigFile: /x}}]}`,
	} {
		want := map[string]string{
			"relative": `kubeConfigFile: Invalid value: "kubeconfig": must be an absolute file path`,
			"unknown":  `unknown field "plugin"`,
			"kind":     `want AdmissionConfiguration`,
			"missing":  `plugin ValidatingAdmissionWebhook: staticManifestsDir: Invalid value: "/no/such/dir": unable to read: stat /no/such/dir: no such file or directory`,
			"notdir":   `plugin MutatingAdmissionWebhook: staticManifestsDir: Invalid value: "` + file + `": must be a directory`,
			"reldir":   `plugin MutatingAdmissionPolicy: staticManifestsDir: Invalid value: "policies": must be an absolute file path`,
			"polkind":  `plugin ValidatingAdmissionPolicy: apiserver.config.k8s.io/v1 WebhookAdmissionConfiguration: want apiserver.config.k8s.io/v1 ValidatingAdmissionPolicyConfiguration`,
			"polfield": `plugin ValidatingAdmissionPolicy: strict decoding error: unknown field "kubeConfigFile"`,
		}[name]
		if _, err := ReadAdmissionConfig(writeFile(t, dir, name+".yaml", content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}

// A token file is read again once what was read is 50 s old, as
// client-go's cached file token source reads it, so that a rotated
// token (a projected one) is sent; while it cannot be read, the last
// token read is, or the inline token.
func TestTokenFileReadAgain(t *testing.T) {
	now := time.Now()
	tokenFileNow = func() time.Time { return now }
	t.Cleanup(func() { tokenFileNow = time.Now })
	dir := t.TempDir()
	writeFile(t, dir, "token", "one\n")
	auth, err := LoadWebhookAuth(writeFile(t, dir, "kubeconfig", `users: [{name: "*", user: {tokenFile: token}}]`))
	if err != nil {
		t.Fatal(err)
	}
	c := auth.For("x:1")
	if got := token(c); got != "one" {
		t.Fatalf("token %q", got)
	}
	writeFile(t, dir, "token", "two")
	now = now.Add(49 * time.Second)
	if got := token(c); got != "one" {
		t.Errorf("after 49 s: %q, want the token read", got)
	}
	now = now.Add(time.Second)
	if got := token(c); got != "two" {
		t.Errorf("after 50 s: %q, want the file's new token", got)
	}
	if err := os.Remove(filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if got := token(c); got != "two" {
		t.Errorf("the file gone: %q, want the last token read", got)
	}
	// With an inline token too, the file's wins once read; an unreadable
	// file leaves the inline one.
	auth, err = LoadWebhookAuth(writeFile(t, dir, "kubeconfig2", `users: [{name: "*", user: {token: inline, tokenFile: token}}]`))
	if err != nil || token(auth.For("x:1")) != "inline" {
		t.Errorf("inline token and a missing file: %v %q", err, token(auth.For("x:1")))
	}
	writeFile(t, dir, "token", "three")
	if got := token(auth.For("x:1")); got != "three" {
		t.Errorf("inline token and a file: %q, want the file's", got)
	}
	if _, err := LoadWebhookAuth(writeFile(t, dir, "kubeconfig3", `users: [{name: "*", user: {tokenFile: gone}}]`)); err == nil {
		t.Error("a token file that cannot be read, and no inline token, was taken")
	}
}
