package core_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// A token file is read as upstream's: at least three columns, groups a
// quoted comma-separated fourth, empty tokens skipped, the last of a
// repeated token winning; its users are for the API's audiences.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := slog.New(slog.DiscardHandler)
	path := write("tokens.csv", "t1,alice,1001,\"devs,ops\"\nt2,bob,1002\n,nobody,0\nt3,carol,1003,\"\"\nt2,bob2,1004,system:masters,ignored\n")
	tf, err := core.ReadTokenFile(path, log)
	if err != nil {
		t.Fatal(err)
	}
	api := []string{"https://kubernetes.default.svc"}
	for _, c := range []struct {
		token  string
		wanted []string
		want   *registry.User
	}{
		{"t1", api, &registry.User{Name: "alice", UID: "1001", Groups: []string{"devs", "ops", "system:authenticated"}}},
		{"t2", api, &registry.User{Name: "bob2", UID: "1004", Groups: []string{"system:masters", "system:authenticated"}}},
		{"t3", api, &registry.User{Name: "carol", UID: "1003", Groups: []string{"", "system:authenticated"}}},
		{"", api, nil},
		{"t4", api, nil},
		{"t1", []string{"other"}, nil},
	} {
		u, auds, ok, err := tf.AuthenticateToken(context.Background(), c.token, c.wanted, api)
		switch {
		case err != nil:
			t.Errorf("%q: %v", c.token, err)
		case c.want == nil && ok:
			t.Errorf("%q for %q: authenticated as %+v", c.token, c.wanted, u)
		case c.want != nil && (!ok || u.Name != c.want.Name || u.UID != c.want.UID || !slices.Equal(u.Groups, c.want.Groups) || !slices.Equal(auds, api)):
			t.Errorf("%q: %+v %q %v, want %+v", c.token, u, auds, ok, *c.want)
		}
	}
	for name, c := range map[string]struct{ content, err string }{
		"short.csv": {"t1,alice\n", "token file '" + filepath.Join(dir, "short.csv") + "' must have at least 3 columns (token, user name, user uid), found 2"},
		"quote.csv": {"t1,al\"ice,1\n", `parse error on line 1, column 6: bare " in non-quoted-field`},
	} {
		if _, err := core.ReadTokenFile(write(name, c.content), log); err == nil || err.Error() != c.err {
			t.Errorf("%s: %v, want %s", name, err, c.err)
		}
	}
	if _, err := core.ReadTokenFile(filepath.Join(dir, "none.csv"), log); err == nil || !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
