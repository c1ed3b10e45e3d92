package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry"
)

// fakeTokens knows one token, refuses another with an error, and
// records what it was asked.
type fakeTokens struct {
	name, known, refused string
	asked                *[]string
}

func (f fakeTokens) AuthenticateToken(_ context.Context, token string, wanted, implicit []string) (registry.User, []string, bool, error) {
	*f.asked = append(*f.asked, f.name+":"+token+":"+strings.Join(wanted, ",")+"/"+strings.Join(implicit, ","))
	switch token {
	case f.known:
		return registry.User{Name: f.name + "-user"}, wanted, true, nil
	case f.refused:
		return registry.User{}, nil, false, errors.New(f.name + " refuses")
	}
	return registry.User{}, nil, false, nil
}

// Tokens that are not kplane's go to the JWT authenticators, then the
// webhook, as upstream's chain: the first to know one decides; kplane's
// own never leave; the refusals are aggregated in order.
func TestTokenChain(t *testing.T) {
	f := newTokenFixture(t)
	var asked []string
	f.tokens.JWT = fakeTokens{name: "jwt", known: "j", refused: "bad", asked: &asked}
	f.tokens.Webhook = fakeTokens{name: "webhook", known: "w", refused: "bad", asked: &asked}
	for _, c := range []struct {
		token, wantUser, wantErr, wantAsked string
		wanted                              []string
	}{
		{token: "j", wantUser: "jwt-user", wantAsked: "jwt:j:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local"},
		{token: "w", wantUser: "webhook-user", wantAsked: "jwt:w:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local webhook:w:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local"},
		{token: "w", wanted: []string{"aud"}, wantUser: "webhook-user", wantAsked: "jwt:w:aud/https://kubernetes.default.svc.cluster.local webhook:w:aud/https://kubernetes.default.svc.cluster.local"},
		{token: "bad", wantErr: "[jwt refuses, webhook refuses]", wantAsked: "jwt:bad:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local webhook:bad:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local"},
		{token: "nobody", wantErr: ErrNotServiceAccountToken.Error(), wantAsked: "jwt:nobody:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local webhook:nobody:https://kubernetes.default.svc.cluster.local/https://kubernetes.default.svc.cluster.local"},
	} {
		asked = nil
		u, _, err := f.tokens.AuthenticateToken(context.Background(), c.token, c.wanted)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if u.Name != c.wantUser || gotErr != c.wantErr || strings.Join(asked, " ") != c.wantAsked {
			t.Errorf("%s: user %q, error %q, asked %q\nwant %q, %q, %q", c.token, u.Name, gotErr, strings.Join(asked, " "), c.wantUser, c.wantErr, c.wantAsked)
		}
	}
	// A service account token is kplane's alone.
	asked = nil
	if u, _, err := f.tokens.AuthenticateToken(context.Background(), f.token(`{}`), nil); err != nil || u.Name != "system:serviceaccount:ns:robot" || len(asked) != 0 {
		t.Errorf("a service account token: %q %v, others asked %q", u.Name, err, asked)
	}
	// The static tokens are asked first: a token they know goes no
	// further.
	f.tokens.File = fakeTokens{name: "file", known: "f", asked: &asked}
	asked = nil
	if u, _, err := f.tokens.AuthenticateToken(context.Background(), "f", nil); err != nil || u.Name != "file-user" || len(asked) != 1 {
		t.Errorf("a static token: %q %v, asked %q", u.Name, err, asked)
	}
	asked = nil
	if u, _, err := f.tokens.AuthenticateToken(context.Background(), "w", nil); err != nil || u.Name != "webhook-user" || len(asked) != 3 || asked[0][:5] != "file:" {
		t.Errorf("a token the file does not know: %q %v, asked %q", u.Name, err, asked)
	}
}
