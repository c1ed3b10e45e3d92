package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplane-dev/kplane/internal/app/pki"
)

// The kube mode runs the upstream kube-apiserver (tools/kube-apiserver,
// its own module) on a real etcd (tools/etcd), so that compare measures
// kplane against the real thing on the same machine, in the same run.
// It is set up as kubeadm sets up a cluster's API server, minus what a
// single machine without nodes has no use for: client certificates
// signed by a CA of the run's own for authentication, Node and RBAC
// authorization, the default admission plugins, and a signing key for
// service account tokens. The bench's client presents a certificate in
// group system:masters, as it does to kplane.

// kubeModuleVersion is the k8s.io/kubernetes version tools/kube-apiserver's
// go.mod requires, from the go.mod's text.
func kubeModuleVersion(gomod []byte) (string, error) {
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+\S*)`).FindSubmatch(gomod)
	if m == nil {
		return "", errors.New("no k8s.io/kubernetes requirement")
	}
	return string(m[1]), nil
}

// kubeVersionFlags stamp kube-apiserver's /version with v, as the
// release builds of Kubernetes do (a plain go build reports
// v0.0.0-master).
func kubeVersionFlags(v string) ([]string, error) {
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.`).FindStringSubmatch(v)
	if m == nil {
		return nil, fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH", v)
	}
	const pkg = "k8s.io/component-base/version"
	return []string{"-ldflags", strings.Join([]string{
		"-X " + pkg + ".gitVersion=" + v,
		"-X " + pkg + ".gitMajor=" + m[1],
		"-X " + pkg + ".gitMinor=" + m[2],
		"-X " + pkg + ".gitTreeState=clean",
	}, " ")}, nil
}

// buildKube builds tools/kube-apiserver to out, with the same release
// flags as kplane's build. The first build compiles Kubernetes: minutes.
func buildKube(ctx context.Context, root, out string) error {
	dir := filepath.Join(root, "tools", "kube-apiserver")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	v, err := kubeModuleVersion(gomod)
	if err != nil {
		return fmt.Errorf("%s: %v", filepath.Join(dir, "go.mod"), err)
	}
	flags, err := kubeVersionFlags(v)
	if err != nil {
		return err
	}
	return goBuild(ctx, dir, ".", out, flags...)
}

// kubeArgs are kube-apiserver's flags for a server on 127.0.0.1:port
// with its files in dir (written by kubeFiles).
func kubeArgs(dir, port, etcdEndpoint string) []string {
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--etcd-servers=" + etcdEndpoint,
		"--bind-address=127.0.0.1",
		"--secure-port=" + port,
		"--tls-cert-file=" + f("serving.crt"),
		"--tls-private-key-file=" + f("serving.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/12",
	}
}

// kubeFiles writes what kubeArgs names into dir: a CA, a serving
// certificate for 127.0.0.1 and localhost, and the service account
// signing key and its public half; and a kubeconfig (kubeconfig) for https://addr with a
// client certificate in group system:masters.
func kubeFiles(dir, addr string) (kubeconfig string, err error) {
	b, err := pki.Ensure(filepath.Join(dir, "pki"), nil)
	if err != nil {
		return "", err
	}
	servingKey, err := x509.MarshalPKCS8PrivateKey(b.Serving.PrivateKey)
	if err != nil {
		return "", err
	}
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	saKey, err := x509.MarshalPKCS8PrivateKey(sa)
	if err != nil {
		return "", err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return "", err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"ca.crt", b.CACertPEM},
		{"serving.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Serving.Certificate[0]})},
		{"serving.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: servingKey})},
		{"sa.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: saKey})},
		{"sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return "", err
		}
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	return kubeconfig, pki.WriteKubeconfig(kubeconfig, "https://"+addr, b)
}

// startKube runs kube-apiserver on a free port against etcdEndpoint, with
// its files in dir, and returns once /readyz answers 200. ready is the
// time from exec to that.
func startKube(ctx context.Context, bin, etcdEndpoint, dir string) (p *process, kubeconfig string, ready time.Duration, err error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", 0, err
	}
	if kubeconfig, err = kubeFiles(dir, addr); err != nil {
		return nil, "", 0, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, "", 0, err
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, "", 0, err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	p, err = startProcess(bin, kubeArgs(dir, port, etcdEndpoint), filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, "", 0, err
	}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", cfg.Host+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, kubeconfig, time.Since(t0), nil
			}
		}
		if err, ok := p.exitedEarly(); ok {
			return nil, "", 0, fmt.Errorf("kube-apiserver exited before it was ready: %v\n%s", err, p.logTail())
		}
		select {
		case <-ctx.Done():
			p.stop(10 * time.Second)
			return nil, "", 0, fmt.Errorf("kube-apiserver not ready after 2m\n%s", p.logTail())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
