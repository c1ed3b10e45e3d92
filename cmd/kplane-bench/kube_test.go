package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestKubeVersionFromGoMod(t *testing.T) {
	v, err := kubeModuleVersion([]byte("module x\n\nrequire (\n\tk8s.io/component-base v0.37.2\n\tk8s.io/kubernetes v1.37.2\n)\n"))
	if err != nil || v != "v1.37.2" {
		t.Errorf("version = %q, %v; want v1.37.2", v, err)
	}
	if _, err := kubeModuleVersion([]byte("module x\n")); err == nil {
		t.Error("a go.mod without k8s.io/kubernetes gave a version")
	}
	flags, err := kubeVersionFlags("v1.37.2")
	if err != nil || len(flags) != 2 || flags[0] != "-ldflags" {
		t.Fatalf("flags = %q, %v", flags, err)
	}
	for _, want := range []string{"version.gitVersion=v1.37.2", "version.gitMajor=1 ", "version.gitMinor=37 "} {
		if !strings.Contains(flags[1], want) {
			t.Errorf("ldflags %q lack %q", flags[1], want)
		}
	}
	if _, err := kubeVersionFlags("master"); err == nil {
		t.Error("a version without major and minor was stamped")
	}
}

// The repository's tools/kube-apiserver names the version it builds.
func TestToolsKubeAPIServerNamesItsVersion(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "tools", "kube-apiserver", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubeModuleVersion(b); err != nil {
		t.Error(err)
	}
}

func TestKubeFilesFitKubeArgs(t *testing.T) {
	dir := t.TempDir()
	kubeconfig, err := kubeFiles(dir, "127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	args := kubeArgs(dir, "6443", "http://127.0.0.1:2379")
	// Every file a flag names was written.
	for _, a := range args {
		if name, path, ok := strings.Cut(a, "="); ok && strings.HasPrefix(path, dir) {
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	for _, want := range []string{"--secure-port=6443", "--bind-address=127.0.0.1", "--etcd-servers=http://127.0.0.1:2379", "--authorization-mode=Node,RBAC"} {
		if !slices.Contains(args, want) {
			t.Errorf("no %s in %q", want, args)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The serving pair loads and verifies for 127.0.0.1 against the CA.
	pair, err := tls.X509KeyPair(read("serving.crt"), read("serving.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(read("ca.crt")) {
		t.Fatal("ca.crt holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("serving certificate for 127.0.0.1: %v", err)
	}
	// The service account key is a private key kube-apiserver can sign with.
	block, _ := pem.Decode(read("sa.key"))
	if block == nil {
		t.Fatal("sa.key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("sa.key: %v", err)
	}
	// sa.pub is its public half, which kube-apiserver verifies tokens with.
	if block, _ = pem.Decode(read("sa.pub")); block == nil || block.Type != "PUBLIC KEY" {
		t.Fatal("sa.pub is not a PEM public key")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatalf("sa.pub: %v", err)
	}
	if !key.(*ecdsa.PrivateKey).PublicKey.Equal(pub) {
		t.Error("sa.pub is not sa.key's public key")
	}
	// The kubeconfig reaches the server with a system:masters client
	// certificate from the same CA.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host = %s", cfg.Host)
	}
	client, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(client.Certificate[0])
	if !slices.Contains(cert.Subject.Organization, "system:masters") {
		t.Errorf("client certificate's groups = %v", cert.Subject.Organization)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
}

// TestCompareKubeTiny runs compare's kube mode against a built
// kube-apiserver, two rounds beside the memory mode, and checks that
// every scenario ran against it with its figures and that the table
// pairs the rounds. Building kube-apiserver takes minutes, so the test
// runs only when KPLANE_BENCH_KUBE_APISERVER names a built binary
// (tools/kube-apiserver; see docs/benchmarks.md), and not in CI.
func TestCompareKubeTiny(t *testing.T) {
	kube := os.Getenv("KPLANE_BENCH_KUBE_APISERVER")
	if kube == "" || testing.Short() {
		t.Skip("KPLANE_BENCH_KUBE_APISERVER is not set: no kube-apiserver to run")
	}
	dir := t.TempDir()
	bin := releaseKplane(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path := filepath.Join(dir, "compare.json")
	var stdout, stderr bytes.Buffer
	args := append([]string{"compare", "--modes", "memory,kube", "--rounds", "2", "--kplane-bin", bin, "--kube-apiserver-bin", kube, "--json", path}, tiny...)
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	seen := map[string]int{}
	for _, r := range readLines(t, path) {
		if r.Mode != "kube" {
			continue
		}
		checkSane(t, r, "kube", true)
		seen[r.Name]++
		if r.Name == "memory" && r.Extra["kube_apiserver_rss_bytes"] == nil {
			t.Errorf("memory: no kube-apiserver RSS of its own in %v", r.Extra)
		}
	}
	for _, name := range []string{"start-to-ready", "create", "get", "update-conflicts", "merge-patch", "apply", "list-consistent",
		"list-table", "list-metadata", "watch", "informer-sync", "cr-create", "cr-status", "cr-list", "memory"} {
		if seen[name] != 2 {
			t.Errorf("kube: %d %s lines, want one per round", seen[name], name)
		}
	}
	if !strings.Contains(stdout.String(), "kube: kube-apiserver v1.") {
		t.Errorf("the table does not name kube-apiserver's version:\n%s", stdout.String())
	}
	// Two rounds paired with kube's: the ratio's spread follows it.
	for _, l := range strings.Split(stdout.String(), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "create" && f[1] == "ops/s" {
			if !strings.Contains(l, "x (") {
				t.Errorf("create row without the rounds' spread: %q", l)
			}
			return
		}
	}
	t.Errorf("no create row in\n%s", stdout.String())
}

// TestMetricsFromKubeAPIServer runs the bench against a kube-apiserver
// through its kubeconfig alone, as a user would a cluster elsewhere: the
// server figures come from its /metrics, and agree in kind with what its
// process tells /proc. Like TestCompareKubeTiny, it needs
// KPLANE_BENCH_KUBE_APISERVER.
func TestMetricsFromKubeAPIServer(t *testing.T) {
	kube := os.Getenv("KPLANE_BENCH_KUBE_APISERVER")
	if kube == "" || testing.Short() {
		t.Skip("KPLANE_BENCH_KUBE_APISERVER is not set: no kube-apiserver to run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ep, endpoint, err := startEtcd(ctx, etcdtest.Binary(t), filepath.Join(dir, "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	defer ep.stop(10 * time.Second)
	kp, kubeconfig, _, err := startKube(ctx, kube, endpoint, filepath.Join(dir, "kube"))
	if err != nil {
		t.Fatal(err)
	}
	defer kp.stop(30 * time.Second)
	path := filepath.Join(dir, "load.json")
	var stdout, stderr bytes.Buffer
	args := append([]string{"--kubeconfig", kubeconfig, "--scenario", "create,get,list", "--json", path}, tiny...)
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	rss, err := procs{kp.pid()}.rss()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range readLines(t, path) {
		checkSane(t, r, "external", true)
		if r.Extra["server_figures"] != "metrics" {
			t.Errorf("%s: server figures from %v, want metrics", r.Name, r.Extra["server_figures"])
		}
		// kube-apiserver's RSS, not etcd's or both: within a factor of
		// what /proc said at the end.
		if got := float64(*r.RSSBytes); got < float64(rss)/2 || got > float64(rss)*2 {
			t.Errorf("%s: rss %v from /metrics, /proc says %v", r.Name, got, rss)
		}
		if s, ok := r.Extra["metrics_scrape_cpu_seconds"].(float64); !ok || s < 0 {
			t.Errorf("%s: metrics_scrape_cpu_seconds %v", r.Name, r.Extra["metrics_scrape_cpu_seconds"])
		}
	}
}
