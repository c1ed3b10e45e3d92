package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// upstreamAuthnCase is one case kube-apiserver v1.37.2 was started with
// (internal/registry/jwt/testdata): a configuration file, extra flags,
// and the error it printed ("" if it started).
type upstreamAuthnCase struct {
	Name       string   `json:"name"`
	Config     *string  `json:"config"`
	ConfigPath string   `json:"configPath"`
	Flags      []string `json:"flags"`
	Error      string   `json:"error"`
	Starts     bool     `json:"starts"`
}

// upstreamAuthnCases are the recorded start-ups.
func upstreamAuthnCases(t *testing.T) []upstreamAuthnCase {
	t.Helper()
	data, err := os.ReadFile("../registry/jwt/testdata/authentication-config-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []upstreamAuthnCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// The configurations kube-apiserver v1.37.2 refused at start-up are
// refused by kplane with the same words, and those it started with
// start kplane's authenticators. Cases that need flags kplane's start
// checks elsewhere (the legacy --oidc-* flags, --anonymous-auth) are
// played with those flags' equivalents.
func TestAuthenticationConfigUpstream(t *testing.T) {
	cases := upstreamAuthnCases(t)
	dir := t.TempDir()
	played := 0
	for _, c := range cases {
		path := filepath.Join(dir, c.Name+".yaml")
		switch {
		case c.Config != nil:
			if err := os.WriteFile(path, []byte(*c.Config), 0o600); err != nil {
				t.Fatal(err)
			}
		case len(c.Flags) == 1 && strings.HasPrefix(c.Flags[0], "--authentication-config=/"):
			// A file missing, a directory.
			path = strings.TrimPrefix(c.Flags[0], "--authentication-config=")
			if path != "/nonexistent.yaml" {
				path = dir
			}
			c.ConfigPath, c.Flags = strings.TrimPrefix(c.Flags[0], "--authentication-config="), nil
		default:
			continue // flags alone: TestOIDCFlagsUpstream
		}
		disallowed := []string{"https://kubernetes.default.svc"}
		anonymousFlag := false
		skip := false
		for _, f := range c.Flags {
			switch {
			case f == "--service-account-issuer=https://other.example":
				disallowed = append(disallowed, "https://other.example")
			case strings.HasPrefix(f, "--anonymous-auth="):
				anonymousFlag = true
			default:
				skip = true // oidc-* and egress flags: checked elsewhere or not kplane's
			}
		}
		if skip {
			continue
		}
		played++
		ctx, cancel := context.WithCancel(context.Background())
		a, err := newConfigAuthenticator(ctx, path, nil, anonymousFlag, disallowed, nil, slog.New(slog.DiscardHandler))
		got := ""
		if err != nil {
			got = err.Error()
		}
		want := strings.ReplaceAll(c.Error, c.ConfigPath, path)
		if c.Starts {
			want = ""
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, want)
		}
		if a != nil {
			a.current.Load().Stop()
		}
		cancel()
	}
	if played < 115 {
		t.Errorf("only %d cases played", played)
	}
}

// The legacy --oidc-* flags kube-apiserver v1.37.2 refused at start-up
// are refused by kplane with the same words, alone or with an
// --authentication-config, and those it started with start kplane's.
func TestOIDCFlagsUpstream(t *testing.T) {
	cases := upstreamAuthnCases(t)
	dir := t.TempDir()
	played := 0
	for _, c := range cases {
		var o OIDCFlags
		ok := len(c.Flags) > 0
		for _, f := range c.Flags {
			name, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			o.Set = o.Set || strings.HasPrefix(name, "oidc-")
			switch name {
			case "oidc-issuer-url":
				o.IssuerURL = v
			case "oidc-client-id":
				o.ClientID = v
			case "oidc-username-claim":
				o.UsernameClaim = v
			case "oidc-signing-algs":
				o.SigningAlgs = strings.Split(v, ",")
			case "oidc-ca-file":
				o.CAFile = v
			case "oidc-required-claim":
				k, val, pair := strings.Cut(v, "=")
				if !pair {
					ok = false // a flag parse error: cmd/kplane's
				}
				o.RequiredClaims = map[string]string{k: val}
			default:
				ok = false // --authorization-mode, --authentication-config, ...
			}
		}
		if !ok {
			continue
		}
		played++
		cfg := Config{StoreConfig: StoreConfig{DataDir: dir}, OIDC: o}
		if c.Config != nil {
			cfg.AuthenticationConfigFile = filepath.Join(dir, c.Name+".yaml")
			os.WriteFile(cfg.AuthenticationConfigFile, []byte(*c.Config), 0o600)
		}
		got := ""
		if err := cfg.Validate(); err != nil {
			got = err.Error()
		} else {
			ctx, cancel := context.WithCancel(context.Background())
			a, err := newConfigAuthenticator(ctx, cfg.AuthenticationConfigFile, &o, false, []string{"https://kubernetes.default.svc"}, nil, slog.New(slog.DiscardHandler))
			if err != nil {
				got = err.Error()
			} else {
				a.current.Load().Stop()
			}
			cancel()
		}
		want := c.Error
		if c.Starts {
			want = ""
		}
		if got != want {
			t.Errorf("%s %q:\n got %q\nwant %q", c.Name, c.Flags, got, want)
		}
	}
	if played < 15 {
		t.Errorf("only %d cases played", played)
	}
}
