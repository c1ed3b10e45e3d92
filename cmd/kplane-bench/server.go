package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// process is a server the bench started, logging to a file.
type process struct {
	cmd     *exec.Cmd
	done    chan error // receives Wait's result once
	exited  error
	logPath string
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan error, 1), logPath: logPath}
	go func() { err := cmd.Wait(); log.Close(); p.done <- err }()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits for the exit, killing the process after
// grace. It returns the exit error of an unclean exit. Idempotent.
func (p *process) stop(grace time.Duration) error {
	if p.done == nil {
		return p.exited
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case p.exited = <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
		p.exited = fmt.Errorf("no exit %v after SIGTERM; killed", grace)
	}
	p.done = nil
	return p.exited
}

// exitedEarly reports whether the process has exited, without waiting.
func (p *process) exitedEarly() (error, bool) {
	select {
	case err := <-p.done:
		p.done, p.exited = nil, err
		return err, true
	default:
		return nil, false
	}
}

// logTail is the end of the process's log, for error messages.
// waitLog waits until the process's log holds substr, for at most
// limit, and reports whether it came.
func (p *process) waitLog(ctx context.Context, substr string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(p.logPath); err == nil && bytes.Contains(b, []byte(substr)) {
			return true
		}
		if _, exited := p.exitedEarly(); exited || time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// repoRoot finds kplane's module root at or above the working directory.
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
			return "", errors.New("no kplane go.mod at or above the working directory: run compare inside the repository")
		}
		dir = parent
	}
}

// goBuild runs `go build -o out pkg` in dir, as a release build:
// CGO_ENABLED=0, a static binary without libc (as etcd and Kubernetes
// ship theirs), which idles in ~1.7 MB less (libc and ld.so); and the
// grpcnotrace tag, which leaves out gRPC's request tracing
// (golang.org/x/net/trace, never served by kplane), whose pages are
// html/templates: executing templates looks methods up by name, which
// keeps every exported method of every linked type in the binary.
// 53 → 43 MB of binary, ~3 MB less at idle.
// extra are more flags for go build (kube-apiserver's version stamp).
func goBuild(ctx context.Context, dir, pkg, out string, extra ...string) error {
	args := append([]string{"build", "-trimpath", "-tags", "grpcnotrace", "-o", out}, extra...)
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
	}
	return nil
}

// kplaneFor returns bin, or when it is empty a release build of
// ./cmd/kplane made in dir.
func kplaneFor(ctx context.Context, bin, dir string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin = filepath.Join(dir, "kplane")
	return bin, goBuild(ctx, root, "./cmd/kplane", bin)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startEtcd starts tools/etcd's binary in dir on free loopback ports
// (fsync on: etcd's default) and waits until it answers /health.
func startEtcd(ctx context.Context, bin, dir string) (p *process, endpoint string, err error) {
	client, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	peer, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	endpoint = "http://" + client
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	p, err = startProcess(bin, []string{"--data-dir", filepath.Join(dir, "data"),
		"--listen-client", endpoint, "--listen-peer", "http://" + peer,
		"--log-file", filepath.Join(dir, "etcd.log")}, filepath.Join(dir, "etcd.out"))
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", endpoint+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, endpoint, nil
			}
		}
		if err, ok := p.exitedEarly(); ok {
			return nil, "", fmt.Errorf("etcd exited: %v\n%s", err, p.logTail())
		}
		select {
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil, "", fmt.Errorf("etcd not healthy after 60s\n%s", p.logTail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startKplane runs `kplane serve` on a free port with a fresh data dir
// and returns once it is ready: it has written dir/kubeconfig and /readyz
// answers 200. ready is the time from exec to that.
func startKplane(ctx context.Context, bin, dir string, flags []string) (p *process, kubeconfig string, ready time.Duration, err error) {
	kubeconfig = filepath.Join(dir, "data", "kubeconfig")
	args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, flags...)
	// The kubeconfig of an earlier run on this data dir names its port:
	// wait for the new server's.
	if err := os.Remove(kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t0 := time.Now()
	p, err = startProcess(bin, args, filepath.Join(dir, "kplane.log"))
	if err != nil {
		return nil, "", 0, err
	}
	fail := func(err error) (*process, string, time.Duration, error) {
		p.stop(10 * time.Second)
		return nil, "", 0, fmt.Errorf("%v\n%s", err, p.logTail())
	}
	var client *http.Client
	var host string
	// Poll tightly: the target start-up time is 100 ms.
	for {
		if err, ok := p.exitedEarly(); ok {
			return fail(fmt.Errorf("kplane serve exited before it was ready: %v", err))
		}
		if client == nil {
			if cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig); err == nil {
				if c, err := rest.HTTPClientFor(cfg); err == nil {
					client, host = c, cfg.Host
				}
			}
		}
		if client != nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", host+"/readyz", nil)
			if resp, err := client.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					client.CloseIdleConnections()
					return p, kubeconfig, time.Since(t0), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fail(errors.New("kplane serve not ready after 60s"))
		case <-time.After(time.Millisecond):
		}
	}
}
