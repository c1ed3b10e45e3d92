package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
)

var ctx = context.Background()

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// kplaneBinary builds cmd/kplane once per test process.
func kplaneBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := etcdtest.TempDir("kplane-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "kplane")
		// The release build's tags (README): without gRPC's tracing.
		// KPLANE_E2E_RACE=1 builds the server with the race detector,
		// so that the suite drives a race-checked kplane serve: a race
		// makes it exit 66, which the shutdown check reports.
		args := []string{"build", "-tags", "grpcnotrace", "-o", binary}
		if os.Getenv("KPLANE_E2E_RACE") == "1" {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/kplane")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kplane: %v\n%s", err, out)
		}
		consultSources(root)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// consultSources looks at every file the binary is built from, so that
// go test's cache, which keys a package's result on the files its tests
// consult, runs the suite again when the server's code changed: the
// build above happens in another process, which the cache does not see.
func consultSources(root string) {
	for _, f := range []string{"go.mod", "go.sum"} {
		os.Stat(filepath.Join(root, f))
	}
	for _, dir := range []string{"cmd", "internal"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				os.Stat(path)
			}
			return nil
		})
	}
}

// server is a running `kplane serve`.
type server struct {
	t          testing.TB
	args       []string
	flags      []string // storage and other flags given to startServer
	dir        string
	kubeconfig string
	addr       string // host:port it listens on
	cmd        *exec.Cmd
	log        *syncBuffer
	exited     chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// engine names a storage engine the suite runs on.
type engine struct {
	name  string
	flags func(t testing.TB) []string
}

var engines = []engine{
	{"embedded", func(testing.TB) []string { return []string{"--storage", "embedded"} }},
	{"etcd", func(t testing.TB) []string {
		srv := etcdtest.Start(t)
		return []string{"--storage", "etcd", "--etcd-endpoints", strings.Join(srv.Endpoints(), ","),
			"--etcd-prefix", "/registry-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")}
	}},
}

// forEachEngine runs f against a fresh server on every engine.
func forEachEngine(t *testing.T, f func(t *testing.T, s *server), extra ...string) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s := startServer(t, append(e.flags(t), extra...)...)
			f(t, s)
		})
	}
}

// startServer starts `kplane serve` on a free port in a fresh data dir
// and waits until it has written its kubeconfig (it is then ready).
func startServer(t testing.TB, flags ...string) *server {
	t.Helper()
	return startServerIn(t, t.TempDir(), flags...)
}

// startServerIn is startServer on the data dir dir, which may hold
// credentials already (<dir>/pki).
func startServerIn(t testing.TB, dir string, flags ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, flags: flags}
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	s.args = append([]string{"serve", "--data-dir", s.dir, "--log-level", "debug"}, flags...)
	s.start("127.0.0.1:0")
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("kplane serve did not shut down cleanly: %v\n%s", err, s.log.String())
		}
	})
	return s
}

func (s *server) start(listen string) {
	s.t.Helper()
	os.Remove(s.kubeconfig)
	s.log = &syncBuffer{}
	s.cmd = exec.Command(kplaneBinary(s.t), append(s.args, "--listen", listen)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(s.cmd, s.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(s.kubeconfig); err == nil {
			break
		}
		select {
		case err := <-s.exited:
			s.t.Fatalf("kplane serve exited before it was ready: %v\n%s", err, s.log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("kplane serve not ready after 60s\n%s", s.log.String())
		}
	}
	u, err := url.Parse(s.config().Host)
	if err != nil {
		s.t.Fatal(err)
	}
	s.addr = u.Host
}

// stop sends SIGTERM and waits for a clean exit (status 0).
func (s *server) stop() error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-s.exited:
		return err
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		return errors.New("no exit 30s after SIGTERM")
	}
}

// restart stops the server and starts it again on the same data dir and
// the same port, so clients reconnect on their own.
func (s *server) restart() {
	s.t.Helper()
	if err := s.stop(); err != nil {
		s.t.Fatalf("stopping: %v\n%s", err, s.log.String())
	}
	// The port is free again once the process is gone; another process
	// could take it, which would fail start loudly.
	if l, err := net.Listen("tcp", s.addr); err == nil {
		l.Close()
	}
	s.start(s.addr)
}

// config is a client-go config for the server's admin.
func (s *server) config() *rest.Config {
	s.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return cfg
}

// kubectl runs the real kubectl against the server.
func (s *server) kubectl(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", s.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(s.dir, "kubectl-cache"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// mustKubectl fails the test when kubectl fails.
func (s *server) mustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := s.kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// eventually waits for cond, polling, failing after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %v; last state: %s", what, timeout, last)
}

// writeBehind writes an object straight into the server's store with
// `kplane kv put`, as if another writer had: the server must be stopped
// (the embedded store is locked while it runs).
func (s *server) writeBehind(t testing.TB, key, value string) {
	t.Helper()
	args := []string{"kv", "--data-dir", s.dir}
	for i := 0; i+1 < len(s.flags); i += 2 {
		switch s.flags[i] {
		case "--storage", "--etcd-endpoints", "--etcd-prefix":
			args = append(args, s.flags[i], s.flags[i+1])
		}
	}
	out, err := exec.Command(kplaneBinary(t), append(args, "put", key, value)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kplane kv put: %v\n%s", err, out)
	}
}
