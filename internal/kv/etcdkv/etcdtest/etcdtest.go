package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds tools/etcd once per process and returns the binary's path.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			build.err = err
			return
		}
		dir, err := TempDir("kplane-etcd-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "etcd")
		cmd := exec.Command("go", "build", "-o", build.path, ".")
		cmd.Dir = filepath.Join(root, "tools", "etcd")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("building tools/etcd: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("etcdtest: %v", build.err)
	}
	return build.path
}

// TempDir makes a directory for this test process's build outputs,
// which outlive any one test (a binary built once per process), so no
// t.TempDir can hold them. Its name carries the process id: the ones
// left by processes that have exited (no cleanup runs when a test binary
// is killed or times out) are removed first.
func TempDir(prefix string) (string, error) {
	if old, err := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*")); err == nil {
		for _, d := range old {
			pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), prefix), "-")
			if n, err := strconv.Atoi(pid); ok && err == nil && n != os.Getpid() && !alive(n) {
				os.RemoveAll(d)
			}
		}
	}
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// repoRoot finds the directory of kplane's go.mod above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/kplane-dev/kplane\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no kplane go.mod above the working directory")
		}
		dir = parent
	}
}

// Server is a running etcd.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	client  string
	peer    string
	logFile string
	cmd     *exec.Cmd
	done    chan error
	stores  atomic.Int64
}

// Start builds (once) and starts an etcd server, stopped at the end of t.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir()}
	addrs := freeAddrs(t, 2)
	s.client, s.peer = "http://"+addrs[0], "http://"+addrs[1]
	s.logFile = filepath.Join(s.dir, "etcd.log")
	s.start()
	t.Cleanup(s.Kill)
	return s
}

// freeAddrs returns n distinct free addresses: their listeners are held
// until all are chosen, so that a port freed by one cannot be the next's
// (the client and peer URLs once got the same port, and etcd exited).
func freeAddrs(t testing.TB, n int) []string {
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

func (s *Server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin,
		"--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client", s.client, "--listen-peer", s.peer,
		"--log-file", s.logFile)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("etcdtest: starting etcd: %v", err)
	}
	s.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(s.cmd, s.done)
	c := s.Client(s.t)
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "/health")
		cancel()
		if err == nil {
			return
		}
		select {
		case err := <-s.done:
			s.t.Fatalf("etcdtest: etcd exited: %v\n%s", err, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("etcdtest: etcd not serving after 60s: %v\n%s", err, s.logTail())
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logFile)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Endpoints are the server's client URLs.
func (s *Server) Endpoints() []string { return []string{s.client} }

// Client returns a new client of the server; the caller closes it.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewStore returns an etcd engine on this server with a prefix of its own,
// closed at the end of t. Stores share the server's revision counter.
func (s *Server) NewStore(t testing.TB) kv.Store {
	t.Helper()
	st, err := etcdkv.New(etcdkv.Config{
		Endpoints:      s.Endpoints(),
		Prefix:         fmt.Sprintf("/kplane-test/%d", s.stores.Add(1)),
		RequestTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Kill stops the server with SIGKILL and waits for it. Idempotent.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts a killed server again, with the same data and ports.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}
