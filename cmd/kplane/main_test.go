package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestKVDemoGivesSeed002Numbers runs `kplane kv demo` on a fresh directory
// and checks the numbers etcd gives for the same sequence on a fresh
// cluster (first write at revision 2).
func TestKVDemoGivesSeed002Numbers(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"kv", "--data-dir", dir, "demo"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	type kvJSON struct {
		Key            string `json:"key"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Version        int64  `json:"version"`
		Value          string `json:"value"`
	}
	type answer struct {
		Step   string
		Header struct{ Revision int64 }
		KV     *kvJSON  `json:"kv"`
		KVs    []kvJSON `json:"kvs"`
	}
	var lines []answer
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var v answer
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("bad JSON line %q: %v", l, err)
		}
		if v.Step == "" {
			lines = append(lines, v)
		}
	}
	// put k1, put k2, get k1, put k1, get k1, get k2, del k1, get k1 --rev=2, put k1
	want := []string{
		"rev 2 k1 c2 m2 v1 v1",
		"rev 3 k2 c3 m3 v1 v2",
		"rev 3 k1 c2 m2 v1 v1",
		"rev 4 k1 c2 m4 v2 nv1",
		"rev 4 k1 c2 m4 v2 nv1",
		"rev 4 k2 c3 m3 v1 v2",
		"rev 5",
		"rev 2 k1 c2 m2 v1 v1",
		"rev 6 k1 c6 m6 v1 dnv1",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d answers, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		got := "rev " + itoa(l.Header.Revision)
		e := l.KV
		if e == nil && len(l.KVs) == 1 {
			e = &l.KVs[0]
		}
		if e != nil {
			got += " " + e.Key + " c" + itoa(e.CreateRevision) + " m" + itoa(e.ModRevision) + " v" + itoa(e.Version) + " " + e.Value
		}
		if got != want[i] {
			t.Errorf("answer %d = %q, want %q", i, got, want[i])
		}
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	for _, args := range [][]string{{}, {"nope"}, {"kv", "--storage", "memory", "nope"}, {"kv", "--storage", "memory", "put", "k"}} {
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("kplane %v exited %d, want 2", args, code)
		}
	}
	if code := run(context.Background(), []string{"kv", "--storage", "bogus", "get", "k"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "unknown storage") {
		t.Errorf("a bad --storage: exit %d, stderr %q", code, errOut.String())
	}
}

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"512Mi": 512 << 20, "2Gi": 2 << 30, "1G": 1e9, "1000000": 1e6, "0": 0} {
		var n int64 = -1
		if err := (byteSize{&n}).Set(in); err != nil || n != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"-1", "0.5", "1.5x", "", "lots"} {
		n := int64(7)
		if err := (byteSize{&n}).Set(in); err == nil || n != 7 {
			t.Errorf("Set(%q) = %d, %v; want an error and the value unchanged", in, n, err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--compaction-max-history", "lots"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "want a size such as 512Mi") {
		t.Errorf("a bad --compaction-max-history: exit %d, stderr %q", code, errOut.String())
	}
}

func TestServeRefusesANegativeShutdownDelay(t *testing.T) {
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	code := run(context.Background(), []string{"serve", "--data-dir", dir, "--shutdown-delay-duration", "-1s"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--shutdown-delay-duration -1s must not be negative") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused configuration left %d files in the data dir", len(entries))
	}
}

// --service-account-issuer may be repeated, and --api-audiences and
// --tls-san take comma-separated lists (repeated too): what they gather
// reaches the configuration's checks, which refuse before anything
// starts.
func TestServeListFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--service-account-issuer", "https://a", "--service-account-issuer", "https://b", "--service-account-issuer", "https://a"},
			`kplane serve: --service-account-issuer "https://a" is already specified`},
		{[]string{"--api-audiences", "api,x", "--api-audiences", "y,"},
			"kplane serve: --api-audiences should not name an empty audience"},
		{[]string{"--tls-san", "kplane.example.com,10.0.0.1", "--tls-san", "lb.example.com,not a name"},
			`kplane serve: --tls-san: pki: host "not a name" is neither an IP address nor a DNS name`},
		{[]string{"--service-account-max-token-expiration", "59m"},
			"kplane serve: --service-account-max-token-expiration 59m0s must be between 1 hour and 2^32 seconds"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"serve", "--storage", "memory", "--data-dir", t.TempDir()}, c.args...)
		if code := run(context.Background(), args, &out, &errOut); code != 1 || strings.TrimSpace(errOut.String()) != c.err {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut.String(), c.err)
		}
	}
}
