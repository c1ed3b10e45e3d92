package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// readyz asks the server's /readyz, without credentials, as a load
// balancer does.
func readyz(t *testing.T, s *server) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS(t, s)}, Timeout: 10 * time.Second}
	resp, err := hc.Get(s.config().Host + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// After SIGTERM with --shutdown-delay-duration, /readyz fails at once
// while the server goes on serving, /livez included, until the delay is
// over; then it stops cleanly.
func TestShutdownDelayKeepsServingWithReadyzFailing(t *testing.T) {
	s := startServer(t, "--storage", "memory", "--shutdown-delay-duration", "4s")
	cs := kubernetes.NewForConfigOrDie(s.config())
	ctx := context.Background()
	if code, body := readyz(t, s); code != http.StatusOK || body != "ok" {
		t.Fatalf("/readyz before: %d %q", code, body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The signal is handled asynchronously: /readyz fails within moments.
	deadline := time.Now().Add(3 * time.Second)
	code, body := readyz(t, s)
	for code == http.StatusOK && time.Now().Before(deadline) {
		code, body = readyz(t, s)
	}
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]shutdown failed: reason withheld\n") {
		t.Fatalf("/readyz after SIGTERM: %d %q", code, body)
	}
	// Still serving: reads, writes and the liveness check.
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list during the delay: %v", err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "during-the-delay"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create during the delay: %v", err)
	}
	if code, _, body := s.call(t, "GET", "/livez", "", nil); code != http.StatusOK || string(body) != "ok" {
		t.Errorf("/livez during the delay: %d %q", code, body)
	}
	select {
	case err := <-s.exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, s.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after the delay's start\n%s", s.log.String())
	}
	s.cmd = nil // stopped: the cleanup has nothing to do
	if !strings.Contains(s.log.String(), "shutting down after --shutdown-delay-duration") {
		t.Errorf("the log does not say why it kept serving:\n%s", s.log.String())
	}
}

// A second signal ends the process without waiting out the delay.
func TestSecondSignalEndsTheShutdownDelay(t *testing.T) {
	s := startServer(t, "--storage", "memory", "--shutdown-delay-duration", "10m")
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for code, _ := readyz(t, s); code == http.StatusOK; code, _ = readyz(t, s) {
		if time.Now().After(deadline) {
			t.Fatal("/readyz still passes after SIGTERM")
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after the second SIGTERM\n%s", s.log.String())
	}
	s.cmd = nil
}
