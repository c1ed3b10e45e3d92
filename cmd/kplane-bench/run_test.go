package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// tiny are sizes that run every scenario in a few seconds.
var tiny = []string{"--workers", "4", "--creates", "50", "--gets", "50", "--updates", "40", "--patches", "40", "--apply-workers", "2", "--applies", "20",
	"--objects", "60", "--list-repeat", "2", "--page-size", "25", "--watchers", "5", "--watch-updates", "20",
	"--custom-resources", "30", "--scenario-timeout", "60s"}

// readLines parses a file of JSON lines.
func readLines(t *testing.T, path string) []Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// checkSane fails on a result that errs or whose figures make no sense.
func checkSane(t *testing.T, r Result, mode string, serverVisible bool) {
	t.Helper()
	if r.Error != "" {
		t.Errorf("%s: %s", r.Name, r.Error)
	}
	if r.Mode != mode {
		t.Errorf("%s: mode %q, want %q", r.Name, r.Mode, mode)
	}
	if r.Ops <= 0 || (r.Name != "memory" && (r.Seconds <= 0 || r.OpsPerSec <= 0)) {
		t.Errorf("%s: ops %d in %v s (%v/s)", r.Name, r.Ops, r.Seconds, r.OpsPerSec)
	}
	if (r.P50ms == nil) != (r.P99ms == nil) || (r.P50ms != nil && (*r.P50ms < 0 || *r.P99ms < *r.P50ms)) {
		t.Errorf("%s: p50 %v, p99 %v", r.Name, r.P50ms, r.P99ms)
	}
	if serverVisible && (r.RSSBytes == nil || *r.RSSBytes < 1<<20) {
		t.Errorf("%s: rss %v", r.Name, r.RSSBytes)
	}
	timed := r.Name != "memory" && r.Name != "start-to-ready"
	if serverVisible && timed && (r.ServerCPUPerOp == nil || *r.ServerCPUPerOp < 0) {
		t.Errorf("%s: server cpu per op %v", r.Name, r.ServerCPUPerOp)
	}
	if timed && (r.ClientCPUPerOp == nil || *r.ClientCPUPerOp < 0) {
		t.Errorf("%s: client cpu per op %v", r.Name, r.ClientCPUPerOp)
	}
	if timed && r.IdlePercent != nil && (*r.IdlePercent < 0 || *r.IdlePercent > 100) {
		t.Errorf("%s: idle %v %%", r.Name, *r.IdlePercent)
	}
	if !serverVisible && (r.ServerCPUPerOp != nil || r.RSSBytes != nil) {
		t.Errorf("%s: server figures without a server pid or /metrics", r.Name)
	}
}

// releaseKplane builds ./cmd/kplane into dir as compare does. The
// release build (-trimpath, no cgo) shares nothing with the test's build
// cache: on a fresh machine, while the other packages' tests build, it
// takes minutes, so only the runs after it are bounded.
func releaseKplane(t *testing.T, dir string) string {
	t.Helper()
	bin, err := kplaneFor(t.Context(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestCompareMemoryTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kplane: not in -short")
	}
	dir := t.TempDir()
	bin := releaseKplane(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("compare reports every scenario with server figures", func(t *testing.T) {
		path := filepath.Join(dir, "compare.json")
		var stdout, stderr bytes.Buffer
		args := append([]string{"compare", "--modes", "memory", "--kplane-bin", bin, "--json", path}, tiny...)
		if code := run(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
		got := map[string]Result{}
		for _, r := range readLines(t, path) {
			got[r.Name] = r
			checkSane(t, r, "memory", true)
		}
		for _, name := range []string{"start-to-ready", "create", "get", "update-conflicts", "merge-patch", "apply", "apply-unchanged",
			"list-consistent", "list-rv0", "list-paged", "list-table", "list-metadata", "list-bytes", "watch", "informer-sync", "cr-create", "cr-status", "cr-status-unchanged", "cr-list", "memory"} {
			if _, ok := got[name]; !ok {
				t.Errorf("no %s line", name)
			}
		}
		if r := got["watch"]; r.Ops != 5*20 || r.Extra["lost"] != 0.0 || r.Extra["duplicated"] != 0.0 {
			t.Errorf("watch: %d deliveries, extra %v; want 100, none lost or duplicated", r.Ops, r.Extra)
		}
		if r := got["cr-create"]; r.Ops != 30 {
			t.Errorf("cr-create: %d ops, want 30", r.Ops)
		}
		if r := got["cr-status"]; r.Ops != 30 || r.Conflicts != 0 {
			t.Errorf("cr-status: %d ops, %d conflicts; want 30, none", r.Ops, r.Conflicts)
		}
		if r := got["cr-list"]; r.Ops != 2 || r.Extra["objects"] != 30.0 {
			t.Errorf("cr-list: %d lists of %v objects; want 2 of 30", r.Ops, r.Extra["objects"])
		}
		if r := got["merge-patch"]; r.Conflicts != 0 {
			t.Errorf("merge-patch: %d conflicts", r.Conflicts)
		}
		if r := got["list-paged"]; r.Extra["pages"].(float64) < 3 {
			t.Errorf("list-paged: %v pages of 25 for ≥ 60 items", r.Extra["pages"])
		}
		for _, name := range []string{"list-table", "list-metadata", "list-bytes"} {
			if r := got[name]; r.Error != "" || r.Extra["items"].(float64) < 60 {
				t.Errorf("%s: %v items, error %q", name, r.Extra["items"], r.Error)
			}
		}
		if r := got["get"]; r.Protocol != "HTTP/2.0" && os.Getenv("DISABLE_HTTP2") == "" {
			t.Errorf("get over %q, want HTTP/2.0 as client-go comes", r.Protocol)
		}
		if !bytes.Contains(stdout.Bytes(), []byte("; over HTTP/")) {
			t.Errorf("the title does not name the protocol:\n%s", stdout.String())
		}
		if !bytes.Contains(stdout.Bytes(), []byte("memory/ref")) {
			t.Errorf("no comparison table:\n%s", stdout.String())
		}
	})

	t.Run("compare --rounds runs every mode once per round", func(t *testing.T) {
		path := filepath.Join(dir, "rounds.json")
		var stdout, stderr bytes.Buffer
		args := append([]string{"compare", "--modes", "memory", "--rounds", "2", "--kplane-bin", bin, "--json", path}, tiny...)
		args = append(args, "--scenario", "create")
		if code := run(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
		var rounds []int
		for _, r := range readLines(t, path) {
			checkSane(t, r, "memory", true)
			if r.Name == "create" {
				rounds = append(rounds, r.Round)
			}
		}
		if !slices.Equal(rounds, []int{1, 2}) {
			t.Errorf("create lines of rounds %v, want [1 2]", rounds)
		}
		if !strings.Contains(stdout.String(), "medians of 2 rounds") || !strings.Contains(stdout.String(), "x (") {
			t.Errorf("no table of medians with the rounds' spread:\n%s", stdout.String())
		}
	})

	t.Run("scale runs again on the data dir it kept", func(t *testing.T) {
		keep := t.TempDir()
		for i, want := range []string{"seeded 300 objects", "already holds the 300 objects"} {
			path := filepath.Join(t.TempDir(), "scale.json")
			var stdout, stderr bytes.Buffer
			args := []string{"scale", "--sizes", "300", "--pages", "2", "--kplane-bin", bin, "--keep", keep, "--json", path}
			if i == 1 { // walked twice, as client-go comes (protobuf)
				args = append(args, "--walks", "2", "--protobuf")
			}
			if code := run(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("run %d: exit %d\n%s\n%s", i, code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("run %d: stderr lacks %q:\n%s", i, want, stderr.String())
			}
			got := map[string]Result{}
			for _, r := range readLines(t, path) {
				got[r.Name] = r
			}
			if r := got["list-all-paged"]; r.Extra["items"] != 300.0 {
				t.Errorf("run %d: the walk listed %v items, want 300", i, r.Extra["items"])
			}
			if r, ok := got["list-all-paged-again"]; ok != (i == 1) || (ok && (r.Extra["items"] != 300.0 || r.Extra["protobuf"] != true)) {
				t.Errorf("run %d: the second walk: %v %+v", i, ok, r)
			}
			if r := got["watch-create-to-event"]; r.Ops != scaleWatchObjects {
				t.Errorf("run %d: %d watch deliveries, want %d", i, r.Ops, scaleWatchObjects)
			}
		}
		var stdout, stderr bytes.Buffer
		args := []string{"scale", "--sizes", "300", "--data-bytes", "100", "--kplane-bin", bin, "--keep", keep}
		if code := run(ctx, args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "holds ConfigMaps of 64 bytes of data, not 100") {
			t.Errorf("a kept data dir of other objects: exit %d, want 1 and the reason:\n%s", code, stderr.String())
		}
	})

	t.Run("crds creates, restarts and reports every step", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crds.json")
		var stdout, stderr bytes.Buffer
		args := []string{"crds", "--count", "12", "--fields", "3", "--kplane-bin", bin, "--json", path}
		if code := run(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
		got := map[string]Result{}
		for _, r := range readLines(t, path) {
			got[r.Name] = r
		}
		for _, name := range []string{"start-to-ready (empty)", "create and establish", "restart to ready", "restart to every CRD served",
			"first create of a kind", "second create", "first /openapi/v3", "first /openapi/v2", "second /openapi/v2"} {
			r, ok := got[name]
			if !ok || r.Seconds <= 0 || r.Error != "" {
				t.Errorf("%s: %+v", name, r)
			}
		}
		if r := got["create and establish"]; r.Ops != 12 || r.ServerCPUPerOp == nil || r.RSSBytes == nil {
			t.Errorf("create and establish: %+v, want 12 ops with server figures", r)
		}
		if !strings.Contains(stdout.String(), "| restart to every CRD served |") {
			t.Errorf("no table:\n%s", stdout.String())
		}
	})

	t.Run("an external kubeconfig gets server figures from the pid, from /metrics, or n/a", func(t *testing.T) {
		p, kubeconfig, _, err := startKplane(ctx, bin, t.TempDir(), []string{"--storage", "memory"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := p.stop(30 * time.Second); err != nil {
				t.Errorf("kplane serve: %v\n%s", err, p.logTail())
			}
		}()
		for _, c := range []struct {
			pid, metrics, from string // from: where the server figures come from
		}{
			{"", "--server-metrics=false", ""},
			{"", "--server-metrics", "metrics"},
			{strconv.Itoa(p.pid()), "--server-metrics", "pid"},
		} {
			path := filepath.Join(t.TempDir(), "load.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"--kubeconfig", kubeconfig, "--scenario", "create,get,watch", "--server-pid", c.pid, c.metrics, "--json", path}, tiny...)
			if code := run(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			lines := readLines(t, path)
			if len(lines) != 3 {
				t.Errorf("%d lines, want 3", len(lines))
			}
			for _, r := range lines {
				checkSane(t, r, "external", c.from != "")
				if got, _ := r.Extra["server_figures"].(string); (got == "metrics") != (c.from == "metrics") {
					t.Errorf("--server-pid %q %s: %s's server figures from %q, want %q", c.pid, c.metrics, r.Name, got, c.from)
				}
			}
		}
		// lists-at-once, named alone: every client's list held every
		// ConfigMap (else the scenario fails), and the server's RSS was
		// sampled while they were in flight.
		{
			path := filepath.Join(t.TempDir(), "lists.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"--kubeconfig", kubeconfig, "--scenario", "lists-at-once", "--list-clients", "6",
				"--server-pid", strconv.Itoa(p.pid()), "--json", path}, tiny...)
			if code := run(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("lists-at-once: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			lines := readLines(t, path)
			if len(lines) != 1 || lines[0].Name != "lists-at-once" || lines[0].Ops != 6 {
				t.Fatalf("lists-at-once: %+v", lines)
			}
			r := lines[0]
			checkSane(t, r, "external", true)
			peak, _ := r.Extra["server_rss_peak_bytes"].(float64)
			size, _ := r.Extra["bytes"].(float64)
			if peak <= 0 || size < 60*1024 || r.Extra["clients"] != float64(6) {
				t.Errorf("lists-at-once: peak RSS %v, %v bytes per list, extra %v", peak, size, r.Extra)
			}
		}
		// Every line names the protocol the server answered in: HTTP/2
		// as client-go comes, HTTP/1.1 with --http1.
		t.Setenv("DISABLE_HTTP2", "") // client-go's own switch, which would make both HTTP/1.1
		for _, c := range []struct{ flag, want string }{{"--http1=false", "HTTP/2.0"}, {"--http1", "HTTP/1.1"}} {
			path := filepath.Join(t.TempDir(), "proto.json")
			var stdout, stderr bytes.Buffer
			args := append([]string{"--kubeconfig", kubeconfig, "--scenario", "get,watch,informer-sync", c.flag, "--json", path}, tiny...)
			if code := run(ctx, args, &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d\n%s\n%s", c.flag, code, stdout.String(), stderr.String())
			}
			lines := readLines(t, path)
			if len(lines) != 3 {
				t.Errorf("%s: %d lines, want 3", c.flag, len(lines))
			}
			for _, r := range lines {
				checkSane(t, r, "external", true) // from /metrics
				if r.Protocol != c.want {
					t.Errorf("%s: %s over %q, want %s", c.flag, r.Name, r.Protocol, c.want)
				}
			}
		}
		// A namespace of the user's, given again: the second run takes
		// over the first's bulk ConfigMaps (top-ups don't recreate them)
		// and its targets.
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(cfg)
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reused"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		reuse := []string{"--kubeconfig", kubeconfig, "--namespace", "reused", "--scenario", "create,get,update-conflicts,merge-patch,list,watch"}
		for i := range 2 {
			path := filepath.Join(t.TempDir(), "reuse.json")
			var stdout, stderr bytes.Buffer
			if code := run(ctx, append(append(reuse, "--json", path), tiny...), &stdout, &stderr); code != 0 {
				t.Fatalf("run %d in a reused namespace: exit %d\n%s\n%s", i, code, stdout.String(), stderr.String())
			}
			for _, r := range readLines(t, path) {
				checkSane(t, r, "external", true)
				// 50 creates a run, topped up to 60 by the first; the
				// targets of the scenarios before (and, in the second
				// run, after).
				if want := []float64{60 + 2, 110 + 3}[i]; r.Name == "list-consistent" && r.Extra["items"] != want {
					t.Errorf("run %d: listed %v items, want %v", i, r.Extra["items"], want)
				}
			}
		}
		// Another --payload than the bulk ConfigMaps hold is refused. In a
		// namespace of its own, the text payload, the default, is what gets
		// stored.
		var pOut, pErr bytes.Buffer
		if code := run(ctx, append(append(reuse, "--payload", "letters"), tiny...), &pOut, &pErr); code != 1 || !strings.Contains(pErr.String(), "holds bulk ConfigMaps of another --payload than letters") {
			t.Errorf("a reused namespace with another payload: exit %d, want 1 and the reason:\n%s", code, pErr.String())
		}
		if code := run(ctx, []string{"--kubeconfig", kubeconfig, "--payload", "lorem"}, &pOut, &pErr); code != 2 {
			t.Errorf("--payload lorem: exit %d, want 2", code)
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "text"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		textPath := filepath.Join(t.TempDir(), "text.json")
		textArgs := append([]string{"--kubeconfig", kubeconfig, "--namespace", "text", "--scenario", "create", "--json", textPath}, tiny...)
		if code := run(ctx, textArgs, &pOut, &pErr); code != 0 {
			t.Fatalf("the default payload: exit %d\n%s", code, pErr.String())
		}
		if lines := readLines(t, textPath); len(lines) != 1 || lines[0].Extra["payload"] != "text" {
			t.Errorf("the default payload: %+v, want one create tagged with the text payload", lines)
		}
		for i := range 2 {
			cm, err := cs.CoreV1().ConfigMaps("text").Get(ctx, bulkName(i), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := cm.Data["payload"]; got != payloadText.value(i) || got == letters {
				t.Errorf("%s holds %.40q…, want the text payload of object %d", cm.Name, got, i)
			}
		}
		if err := cs.CoreV1().ConfigMaps("reused").Delete(ctx, "cm-00003", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var gapOut, gapErr bytes.Buffer
		if code := run(ctx, append(reuse, tiny...), &gapOut, &gapErr); code != 1 || !strings.Contains(gapErr.String(), "holds 109 bulk ConfigMaps (app=kplane-bench), but not cm-00003") {
			t.Errorf("a reused namespace with a gap: exit %d, want 1 and the reason:\n%s", code, gapErr.String())
		}

		// --cpuprofile writes a profile of the bench itself (gzipped
		// protobuf, as runtime/pprof writes it).
		prof := filepath.Join(t.TempDir(), "client.pprof")
		var stdout, stderr bytes.Buffer
		args := append([]string{"--kubeconfig", kubeconfig, "--scenario", "create", "--cpuprofile", prof, "--json", filepath.Join(t.TempDir(), "p.json")}, tiny...)
		if code := run(ctx, args, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
		if data, err := os.ReadFile(prof); err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Errorf("--cpuprofile wrote %d bytes (%v), not a gzipped profile", len(data), err)
		}
		if code := run(ctx, []string{"--kubeconfig", kubeconfig, "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir")}, &stdout, &stderr); code != 1 {
			t.Errorf("an unwritable --cpuprofile: exit %d, want 1", code)
		}
	})
}
