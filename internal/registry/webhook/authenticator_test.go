package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// A token is sent as a TokenReview of the configured version, with the
// audiences asked; the answer's user (with system:authenticated) holds
// for the audiences it names among those asked, or the API's own if it
// names none; an unknown token is not authenticated, one the webhook
// refuses with a reason is an error, and answers (not errors) are kept
// for the TTL.
func TestTokenWebhook(t *testing.T) {
	srv := newSARServer(t) // answers whatever answer says; records bodies
	ctx := context.Background()
	api := []string{"https://kubernetes.default.svc"}
	answer := func(status string) {
		srv.setAnswer(func(int) (int, string) { return 200, `{"status":` + status + `}` })
	}
	for _, version := range []string{"v1beta1", "v1"} {
		w, err := webhook.NewTokenWebhook(webhook.TokenWebhookConfig{KubeConfigFile: srv.kubeconfig(t), Version: version, CacheTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		answer(`{"authenticated":true,"user":{"username":"alice","uid":"u1","groups":["devs"],"extra":{"scopes":["a"]}}}`)
		u, auds, ok, err := w.AuthenticateToken(ctx, "tok-"+version, api, api)
		if !ok || err != nil || u.Name != "alice" || u.UID != "u1" || strings.Join(u.Groups, ",") != "devs,system:authenticated" ||
			u.Extra["scopes"][0] != "a" || strings.Join(auds, ",") != api[0] {
			t.Errorf("%s: %+v %v %v %v", version, u, auds, ok, err)
		}
		calls := srv.calls()
		got, _ := json.Marshal(calls[len(calls)-1])
		if want := `{"apiVersion":"authentication.k8s.io/` + version + `","kind":"TokenReview","metadata":{},"spec":{"audiences":["https://kubernetes.default.svc"],"token":"tok-` + version + `"},"status":{"user":{}}}`; string(got) != want {
			t.Errorf("%s: sent %s\nwant %s", version, got, want)
		}
		// Kept: the webhook is not asked again.
		before := len(srv.calls())
		if _, _, ok, _ := w.AuthenticateToken(ctx, "tok-"+version, api, api); !ok || len(srv.calls()) != before {
			t.Errorf("%s: asked again (%d calls), ok %v", version, len(srv.calls())-before, ok)
		}
	}

	w, err := webhook.NewTokenWebhook(webhook.TokenWebhookConfig{KubeConfigFile: srv.kubeconfig(t), CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		token, status string
		wanted        []string
		ok            bool
		auds, err     string
		kept          bool
	}{
		{"unknown", `{"authenticated":false}`, api, false, "", "", true},
		{"refused", `{"authenticated":false,"error":"bad token"}`, api, false, "", "bad token", false},
		{"other-audience", `{"authenticated":true,"user":{"username":"bob"},"audiences":["something-else"]}`, api, false, "", "", true},
		{"named-audience", `{"authenticated":true,"user":{"username":"bob"},"audiences":["b","a"]}`, []string{"a", "b", "c"}, true, "a,b", "", true},
		{"no-audience", `{"authenticated":true,"user":{"username":"bob","groups":["system:authenticated"]}}`, []string{"x", api[0]}, true, api[0], "", true},
	} {
		answer(c.status)
		u, auds, ok, err := w.AuthenticateToken(ctx, c.token, c.wanted, api)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if ok != c.ok || strings.Join(auds, ",") != c.auds || gotErr != c.err {
			t.Errorf("%s: %+v %v %v %q", c.token, u, auds, ok, gotErr)
		}
		if ok && strings.Count(strings.Join(u.Groups, ","), "system:authenticated") != 1 {
			t.Errorf("%s: groups %v", c.token, u.Groups)
		}
		before := len(srv.calls())
		w.AuthenticateToken(ctx, c.token, c.wanted, api)
		if kept := len(srv.calls()) == before; kept != c.kept {
			t.Errorf("%s: kept %v", c.token, kept)
		}
	}
	// A webhook that fails: the error, not kept.
	srv.setAnswer(func(int) (int, string) { return 400, "no" })
	if _, _, ok, err := w.AuthenticateToken(ctx, "failing", api, api); ok || err == nil || err.Error() != "the server rejected our request for an unknown reason" {
		t.Errorf("a failed call: %v %v", ok, err)
	}
	if _, err := webhook.NewTokenWebhook(webhook.TokenWebhookConfig{KubeConfigFile: srv.kubeconfig(t), Version: "v2"}); err == nil ||
		err.Error() != `unsupported authentication webhook version "v2", supported versions are "v1", "v1beta1"` {
		t.Errorf("v2: %v", err)
	}
}
