package app

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The chain of --authorization-config follows its file: a good change
// is put in force (and counted, with the new file's hash), a bad one
// (it does not read, or drops a type but Webhook the first had) is
// logged and counted and leaves the chain as it was.
func TestAuthorizationConfigReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authz.yaml")
	write := func(authorizers string) {
		t.Helper()
		// Written aside and renamed, as an editor or a ConfigMap does.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\nauthorizers: "+authorizers+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// A webhook that denies everything, for the reload to put first.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":{"allowed":false,"denied":true,"reason":"closed"}}`)
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	if err := os.WriteFile(kc, []byte(`{clusters: [{name: c, cluster: {server: "`+srv.URL+`", certificate-authority-data: `+ca+`}}], contexts: [{name: c, context: {cluster: c}}], current-context: c}`), 0o600); err != nil {
		t.Fatal(err)
	}
	closed := `{type: Webhook, name: closed, webhook: {timeout: 3s, subjectAccessReviewVersion: v1, failurePolicy: Deny, connectionInfo: {type: KubeConfigFile, kubeConfigFile: ` + kc + `}}}`
	write(`[{type: AlwaysDeny, name: alwaysdeny}, {type: AlwaysAllow, name: alwaysallow}]`)
	var logs strings.Builder
	cfg := &Config{AuthorizationConfigFile: path}
	a, err := newAuthorizers(cfg, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	a.file.interval = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.file.run(ctx) }()
	defer func() { cancel(); <-done }()

	bob := registry.Attributes{User: registry.User{Name: "bob", Groups: []string{"system:authenticated"}}, Verb: "get", Path: "/x"}
	decision := func() (registry.Decision, string) {
		d, reason, _ := a.chain.Authorize(ctx, bob)
		return d, reason
	}
	if d, _ := decision(); d != registry.Allow {
		t.Fatalf("at start: %v", d)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s\n%s", what, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	counts := func() (success, failure uint64, hash string) {
		a.file.reloads.mu.Lock()
		defer a.file.reloads.mu.Unlock()
		return a.file.reloads.counts["success"], a.file.reloads.counts["failure"], a.file.reloads.hash
	}
	_, _, firstHash := counts()

	// The webhook put first: denied, with its reason.
	write(`[` + closed + `, {type: AlwaysDeny, name: alwaysdeny}, {type: AlwaysAllow, name: alwaysallow}]`)
	waitFor("the reload", func() bool { d, _ := decision(); return d == registry.Deny })
	if _, reason := decision(); reason != "closed" {
		t.Errorf("after the reload: %q", reason)
	}
	if s, f, hash := counts(); s != 1 || f != 0 || hash == firstHash || !strings.HasPrefix(hash, "sha256:") {
		t.Errorf("after a good reload: %d successes, %d failures, hash %q (was %q)", s, f, hash, firstHash)
	}

	// Bad files: the chain stays.
	for i, bad := range []string{
		`[` + closed + `, {type: AlwaysAllow, name: alwaysallow}]`, // AlwaysDeny dropped
		`[{type: Bogus, name: x}]`,
		`[{type: AlwaysDeny, name: alwaysdeny, extra: 1}]`,
	} {
		write(bad)
		waitFor("the failure "+bad, func() bool { _, f, _ := counts(); return f == uint64(i+1) })
		if d, _ := decision(); d != registry.Deny {
			t.Errorf("after %s: %v", bad, d)
		}
	}
	if !strings.Contains(logs.String(), "missing required types: [AlwaysDeny]") || !strings.Contains(logs.String(), `Unsupported value: \"Bogus\"`) ||
		!strings.Contains(logs.String(), `strict decoding error: unknown field \"authorizers[0].extra\"`) {
		t.Errorf("the failures' log:\n%s", logs.String())
	}
}
