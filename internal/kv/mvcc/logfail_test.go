//go:build linux

package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

const logFailDirEnv = "KPLANE_LOGFAIL_CHILD_DIR"

// TestLogFailureChild is the child of TestLogFailureStopsTheStore. In a
// normal run it does nothing.
func TestLogFailureChild(t *testing.T) {
	dir := os.Getenv(logFailDirEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	for i := range 3 {
		r, err := s.Create(ctx, fmt.Sprintf("/k%d", i), []byte(fmt.Sprint("v", i)))
		if err != nil || !r.Succeeded {
			fmt.Println("write before the limit:", err)
			os.Exit(3)
		}
		fmt.Println("acked", r.Revision)
	}
	// From now on no write reaches the log: the kernel refuses any write
	// past the first byte of a file (EFBIG), as it refuses writes to a
	// full disk (ENOSPC). Go ignores SIGXFSZ, so the write fails instead.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("getrlimit:", err)
		os.Exit(3)
	}
	lim.Cur = 1
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(3)
	}
	_, err = s.Create(ctx, "/after", []byte("never durable"))
	fmt.Println("write:", err)
	_, err = s.Range(ctx, "/k0", kv.RangeOptions{})
	fmt.Println("range:", err)
	_, err = s.Update(ctx, "/k1", []byte("again"), 2)
	fmt.Println("update:", err)
	fmt.Println("close:", s.Close())
}

// When the write-ahead log fails (here the file size limit; in life a
// full disk or an I/O error), the write that met it fails, and so does
// every request after it, reads included, with an error that says why:
// none is acknowledged that is not durable. Reopened, the store holds
// every acknowledged write and nothing else.
func TestLogFailureStopsTheStore(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogFailureChild$", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), logFailDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var acked []string
	got := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, " ")
		if k == "acked" {
			acked = append(acked, v)
			continue
		}
		got[k] = v
	}
	if len(acked) != 3 {
		t.Fatalf("acknowledged %v before the limit:\n%s", acked, out)
	}
	const why = "the write-ahead log failed and the store stopped"
	for _, k := range []string{"write:", "range:", "update:", "close:"} {
		if !strings.Contains(got[k], why) || !strings.Contains(got[k], "file too large") {
			t.Errorf("%s %q, want an error saying %q and why", k, got[k], why)
		}
	}

	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	r, err := s.Range(ctx, "/", kv.RangeOptions{End: kv.PrefixEnd("/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range r.KVs {
		keys = append(keys, fmt.Sprintf("%s=%s@%d", kv.Key, kv.Value, kv.ModRevision))
	}
	want := fmt.Sprintf("/k0=v0@%s /k1=v1@%s /k2=v2@%s", acked[0], acked[1], acked[2])
	if strings.Join(keys, " ") != want || fmt.Sprint(r.Revision) != acked[2] {
		t.Errorf("reopened: %v at revision %d, want %s at %s", keys, r.Revision, want, acked[2])
	}
	// And it takes writes again, after the last acknowledged revision.
	w, err := s.Create(ctx, "/after", []byte("now"))
	if err != nil || fmt.Sprint(w.Revision-1) != acked[2] {
		t.Errorf("write after reopening: %+v %v", w, err)
	}
	if errors.Is(err, kv.ErrClosed) {
		t.Error("the reopened store is stopped")
	}
}
