package webhook_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// An AuthorizationConfiguration is refused as kube-apiserver v1.37.2
// refused the same files at start (testdata: each file, with KUBECONFIG
// and DIR standing for a kubeconfig and a directory, and the error it
// printed), word for word.
func TestAuthorizationConfigRefusedAsKubeAPIServer(t *testing.T) {
	data, err := os.ReadFile("testdata/authorization-config-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ Name, Config, Error string }
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte("current-context: c"), 0o600); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("KUBECONFIG", kc, "DIR", dir)
	for _, c := range cases {
		_, err := webhook.ParseAuthorizationConfig([]byte(fill.Replace(c.Config)))
		if want := fill.Replace(c.Error); err == nil || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", c.Name, err, want)
		}
	}
	if len(cases) < 30 {
		t.Errorf("only %d cases", len(cases))
	}
}

// A good configuration gives the authorizers in order, the webhooks'
// fields defaulted as upstream's (5m and 30s TTLs; caching turned off
// by its flags).
func TestAuthorizationConfigRead(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte("current-context: c"), 0o600); err != nil {
		t.Fatal(err)
	}
	entries, err := webhook.ParseAuthorizationConfig([]byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: first
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    cacheUnauthorizedRequests: false
    connectionInfo: {type: KubeConfigFile, kubeConfigFile: ` + kc + `}
    matchConditions: [{expression: "request.user != 'admin'"}, {expression: "has(request.resourceAttributes)"}]
- {type: RBAC, name: rbac}
- {type: AlwaysDeny, name: alwaysdeny}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 || entries[1].Type != "RBAC" || entries[1].Name != "rbac" || entries[2].Type != "AlwaysDeny" || entries[0].Webhook == nil {
		t.Fatalf("%+v", entries)
	}
	w := entries[0].Webhook
	if w.KubeConfigFile != kc || w.Version != "v1" || w.AuthorizedTTL.String() != "5m0s" || w.UnauthorizedTTL != 0 ||
		!w.FailurePolicyDeny || w.Timeout.String() != "3s" || len(w.MatchConditions) != 2 || w.Name != "first" {
		t.Errorf("%+v", w)
	}
	// The same configuration with a comment is the same; another
	// expression is not.
	parse := func(config string) []webhook.AuthorizerConfig {
		t.Helper()
		entries, err := webhook.ParseAuthorizationConfig([]byte(config))
		if err != nil {
			t.Fatal(err)
		}
		return entries
	}
	const base = `{apiVersion: apiserver.config.k8s.io/v1, kind: AuthorizationConfiguration, authorizers: [{type: Webhook, name: w, webhook: {timeout: 3s, subjectAccessReviewVersion: v1, matchConditionSubjectAccessReviewVersion: v1, failurePolicy: Deny, connectionInfo: {type: KubeConfigFile, kubeConfigFile: KC}, matchConditions: [{expression: "EXPR"}]}}]}`
	config := func(expr string) string { return strings.NewReplacer("KC", kc, "EXPR", expr).Replace(base) }
	if !webhook.SameAuthorizers(parse(config("request.user == 'a'")), parse("# a comment\n"+config("request.user == 'a'"))) {
		t.Error("a comment made another configuration")
	}
	if webhook.SameAuthorizers(parse(config("request.user == 'a'")), parse(config("request.user == 'b'"))) {
		t.Error("another expression made the same configuration")
	}
	if _, err := webhook.ParseAuthorizationConfig([]byte(`{apiVersion: apiserver.config.k8s.io/v1, kind: AuthorizationConfiguration, authorizers: [{type: Node, name: node}]}`)); err == nil ||
		err.Error() != "authorizer type Node is not one kplane has: it has AlwaysAllow, AlwaysDeny, RBAC and Webhook" {
		t.Errorf("Node: %v", err)
	}
}
