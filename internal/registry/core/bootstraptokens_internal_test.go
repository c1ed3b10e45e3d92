package core

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bootstrapSecret is the JSON of a bootstrap token Secret named for id,
// with data (stringData) and type typ.
func bootstrapSecret(name, typ string, data map[string]string) string {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": name}, "type": typ, "stringData": data})
	return string(b)
}

// Bootstrap tokens authenticate as upstream's authenticator lets them:
// the Secret's type, token-id and token-secret, expiration,
// usage-bootstrap-authentication and extra groups all checked; anything
// wrong is a token it does not know.
func TestBootstrapTokens(t *testing.T) {
	f := newTokenFixture(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := &BootstrapTokens{Registry: f.reg, Now: func() time.Time { return now }}
	f.tokens.Bootstrap = b
	good := map[string]string{"token-id": "abcdef", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true",
		"auth-extra-groups": "system:bootstrappers:workers,system:bootstrappers:kubeadm:default-node-token", "expiration": "2026-11-29T00:00:00Z"}
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-abcdef", bootstrapTokenType, good))
	with := func(id string, change map[string]string, typ string) {
		data := map[string]string{}
		for k, v := range good {
			data[k] = v
		}
		data["token-id"] = id
		for k, v := range change {
			if v == "-" {
				delete(data, k)
			} else {
				data[k] = v
			}
		}
		f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-"+id, typ, data))
	}
	with("expird", map[string]string{"expiration": "2026-11-28T11:59:59Z"}, bootstrapTokenType)
	with("badexp", map[string]string{"expiration": "tomorrow"}, bootstrapTokenType)
	with("nouse0", map[string]string{"usage-bootstrap-authentication": "-"}, bootstrapTokenType)
	with("badgrp", map[string]string{"auth-extra-groups": "workers"}, bootstrapTokenType)
	with("opaque", nil, "Opaque")
	with("noexpy", map[string]string{"expiration": "-", "auth-extra-groups": "-"}, bootstrapTokenType)
	last := f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-otheri", bootstrapTokenType,
		map[string]string{"token-id": "wrong0", "token-secret": "0123456789abcdef", "usage-bootstrap-authentication": "true"}))
	// The authenticator reads the watch cache, as upstream's reads an
	// informer: wait for it to hold the secrets.
	if _, err := f.res("secrets").List(f.ctx, "v1", "kube-system", registry.ListOptions{ListOptions: storage.ListOptions{
		ResourceVersion: last.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ token, want string }{
		{"abcdef.0123456789abcdef", "system:bootstrap:abcdef [system:bootstrappers system:bootstrappers:kubeadm:default-node-token system:bootstrappers:workers system:authenticated]"},
		{"noexpy.0123456789abcdef", "system:bootstrap:noexpy [system:bootstrappers system:authenticated]"},
		{"abcdef.0123456789abcdee", ""}, // another secret
		{"abcdef.0123456789ABCDEF", ""}, // not the format
		{"abcdef0123456789abcdef", ""},
		{"expird.0123456789abcdef", ""},
		{"badexp.0123456789abcdef", ""}, // an expiration that does not parse has passed
		{"nouse0.0123456789abcdef", ""},
		{"badgrp.0123456789abcdef", ""},
		{"opaque.0123456789abcdef", ""},
		{"otheri.0123456789abcdef", ""}, // token-id not the name's
		{"nosuch.0123456789abcdef", ""},
	} {
		u, auds, ok, err := b.AuthenticateToken(context.Background(), c.token, []string{"api"}, []string{"api"})
		got := ""
		if ok {
			got = fmt.Sprint(u.Name, " ", u.Groups)
		}
		if got != c.want || err != nil || ok != (len(auds) == 1) {
			t.Errorf("%s: %q %v %v, want %q", c.token, got, auds, err, c.want)
		}
	}
	// Not for another audience.
	if _, _, ok, _ := b.AuthenticateToken(context.Background(), "abcdef.0123456789abcdef", []string{"vault"}, []string{"api"}); ok {
		t.Error("a bootstrap token authenticated for another audience")
	}
	// In the chain, after the service account tokens.
	if u, _, err := f.tokens.AuthenticateToken(context.Background(), "abcdef.0123456789abcdef", nil); err != nil || u.Name != "system:bootstrap:abcdef" {
		t.Errorf("through the chain: %v %v", u, err)
	}
}

// The cleaner deletes bootstrap token Secrets when they expire (at once
// when their expiration does not parse), and no others.
func TestBootstrapTokenCleaner(t *testing.T) {
	f := newTokenFixture(t)
	now := time.Now().UTC()
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-past00", bootstrapTokenType, map[string]string{"expiration": now.Add(-time.Hour).Format(time.RFC3339)}))
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-badexp", bootstrapTokenType, map[string]string{"expiration": "soon"}))
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-soon00", bootstrapTokenType, map[string]string{"expiration": now.Add(1500 * time.Millisecond).Format(time.RFC3339)}))
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-later0", bootstrapTokenType, map[string]string{"expiration": now.Add(time.Hour).Format(time.RFC3339)}))
	f.create("secrets", "kube-system", bootstrapSecret("bootstrap-token-never0", bootstrapTokenType, map[string]string{"token-id": "never0"}))
	f.create("secrets", "kube-system", bootstrapSecret("other", "Opaque", map[string]string{"expiration": now.Add(-time.Hour).Format(time.RFC3339)}))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&BootstrapTokenCleaner{Registry: f.reg, Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	names := func() string {
		list, err := f.res("secrets").List(f.ctx, "v1", "kube-system", registry.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list.Items {
			out = append(out, s.GetName())
		}
		return fmt.Sprint(out)
	}
	deadline := time.Now().Add(30 * time.Second) // a failure bound, not a timing assertion
	for names() != "[bootstrap-token-later0 bootstrap-token-never0 other]" {
		if time.Now().After(deadline) {
			t.Fatalf("left: %s", names())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
