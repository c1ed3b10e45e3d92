package mvcc

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// The crash test runs a writer in a child process (this test binary again,
// running TestCrashChild), kills it with SIGKILL at a random moment, and
// checks that the store it leaves behind holds every write the child saw
// acknowledged. It repeats that on one directory, so later rounds recover
// from logs and snapshots that earlier kills cut short.

const crashDirEnv = "KPLANE_CRASH_CHILD_DIR"

func hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// TestCrashChild is the child's body; in a normal run it does nothing.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	s, err := Open(Config{Dir: dir, SnapshotBytes: 64 << 10})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	var outMu sync.Mutex
	ack := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		outMu.Lock()
		os.Stdout.WriteString(line) // one write(2) per line
		outMu.Unlock()
	}
	for w := 0; w < 8; w++ {
		go func(seed int64) {
			rnd := rand.New(rand.NewSource(seed))
			for {
				key := fmt.Sprintf("/crash/%02d", rnd.Intn(50))
				cur, err := s.Range(ctx, key, kv.RangeOptions{})
				if err != nil {
					fmt.Fprintln(os.Stderr, "range:", err)
					os.Exit(3)
				}
				value := make([]byte, rnd.Intn(8<<10))
				rnd.Read(value)
				var r kv.WriteResponse
				switch {
				case len(cur.KVs) == 0:
					r, err = s.Create(ctx, key, value)
				case rnd.Intn(4) == 0:
					r, err = s.Delete(ctx, key, cur.KVs[0].ModRevision)
				default:
					r, err = s.Update(ctx, key, value, cur.KVs[0].ModRevision)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "write:", err)
					os.Exit(3)
				}
				switch {
				case !r.Succeeded:
				case r.KV == nil:
					ack("del %d %s", r.Revision, key)
				default:
					ack("put %d %s %d %d %s", r.Revision, key, r.KV.CreateRevision, r.KV.Version, hash(value))
				}
				if rnd.Intn(400) == 0 {
					if rev, compacted := s.Revision(); rev-200 > compacted {
						if err := s.Compact(ctx, rev-200); err == nil {
							ack("compact %d", rev-200)
						}
					}
				}
			}
		}(int64(w))
	}
	select {} // until killed
}

type ackedWrite struct {
	del             bool
	key             string
	create, version int64
	hash            string
}

func TestCrashRecovery(t *testing.T) {
	rounds := 25
	if testing.Short() {
		rounds = 5
	}
	dir := t.TempDir()
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	var lastCurrent int64 = 1
	var maxCompacted int64
	var total, durableUnacked int
	for round := 1; round <= rounds; round++ {
		acks, compacted := runChild(t, dir, time.Duration(20+rnd.Intn(280))*time.Millisecond)
		maxCompacted = max(maxCompacted, compacted)
		var logs bytes.Buffer
		start := time.Now()
		s, err := Open(Config{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("round %d: reopening: %v\n%s", round, err, logs.String())
		}
		reopen := time.Since(start)
		current, compactRev := s.Revision()
		fail := func(format string, args ...any) {
			t.Helper()
			entries, _ := os.ReadDir(dir)
			var files []string
			for _, e := range entries {
				fi, _ := e.Info()
				files = append(files, fmt.Sprintf("%s(%d)", e.Name(), fi.Size()))
			}
			s.Close()
			t.Fatalf("round %d: %s\nfiles: %v\nrecovery log:\n%s", round, fmt.Sprintf(format, args...), files, logs.String())
		}
		var maxAck int64
		for rev := range acks {
			maxAck = max(maxAck, rev)
		}
		if current < maxAck || current < lastCurrent {
			fail("recovered revision %d, but %d was acknowledged and %d recovered before", current, maxAck, lastCurrent)
		}
		if compactRev < maxCompacted {
			fail("compaction point %d, but %d was acknowledged", compactRev, maxCompacted)
		}
		// 1. Every acknowledged write is there, exactly.
		for rev, a := range acks {
			if rev < compactRev {
				continue
			}
			r, err := s.Range(ctx, a.key, kv.RangeOptions{Revision: rev})
			if err != nil {
				fail("reading %s at %d: %v", a.key, rev, err)
			}
			if a.del {
				if r.Count != 0 {
					fail("acknowledged delete of %s at %d is missing", a.key, rev)
				}
				continue
			}
			if r.Count != 1 {
				fail("acknowledged put of %s at %d is missing", a.key, rev)
			}
			got := r.KVs[0]
			if got.ModRevision != rev || got.CreateRevision != a.create || got.Version != a.version || hash(got.Value) != a.hash {
				fail("acknowledged put of %s at %d reads back as mod %d create %d version %d", a.key, rev, got.ModRevision, got.CreateRevision, got.Version)
			}
		}
		// 2. A watch resumed where the previous round's recovery left off
		// delivers every revision since, agreeing with the acknowledgements.
		from := max(lastCurrent+1, compactRev)
		if current >= from {
			events := collect(t, s, from, current)
			for i, ev := range events {
				rev := from + int64(i)
				if ev.KV.ModRevision != rev {
					fail("resumed watch: event %d at revision %d, want %d", i, ev.KV.ModRevision, rev)
				}
				if ev.PrevKV == nil && !ev.IsCreate() {
					fail("resumed watch: event at %d without its previous value", rev)
				}
				if a, ok := acks[rev]; ok {
					if (ev.Type == kv.Delete) != a.del || ev.KV.Key != a.key || (!a.del && hash(ev.KV.Value) != a.hash) {
						fail("resumed watch: event at %d is %s %s, acknowledged as %+v", rev, ev.Type, ev.KV.Key, a)
					}
				} else if rev > lastCurrent {
					durableUnacked++
				}
			}
		}
		t.Logf("round %d: %d acknowledged writes verified, recovered revision %d (compacted %d), reopened in %v",
			round, len(acks), current, compactRev, reopen)
		total += len(acks)
		lastCurrent = current
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
	}
	t.Logf("%d rounds, %d acknowledged writes verified, %d durable writes killed before their acknowledgement", rounds, total, durableUnacked)
}

// runChild starts the writer, kills it with SIGKILL delay after its first
// acknowledgement, and returns what it acknowledged.
func runChild(t *testing.T, dir string, delay time.Duration) (map[int64]ackedWrite, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := make(map[int64]ackedWrite)
	var compacted int64
	first := make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		r := bufio.NewReader(out)
		once := sync.Once{}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				// A line without its newline was cut by the kill: not an ack.
				if err == io.EOF {
					err = nil
				}
				readDone <- err
				return
			}
			once.Do(func() { close(first) })
			f := strings.Fields(line)
			rev, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "put":
				c, _ := strconv.ParseInt(f[3], 10, 64)
				v, _ := strconv.ParseInt(f[4], 10, 64)
				acks[rev] = ackedWrite{key: f[2], create: c, version: v, hash: f[5]}
			case "del":
				acks[rev] = ackedWrite{del: true, key: f[2]}
			case "compact":
				compacted = max(compacted, rev)
			}
		}
	}()
	select {
	case <-first:
	case err := <-readDone:
		cmd.Wait()
		t.Fatalf("the child ended before acknowledging anything (%v): %s", err, stderr.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child acknowledged nothing in 30s: %s", stderr.String())
	}
	time.Sleep(delay) // the kill lands at a random moment: deliberate, not synchronisation
	cmd.Process.Kill()
	if err := <-readDone; err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); !ok || !ws.Signaled() {
		t.Fatalf("the child exited by itself (%v) instead of being killed: %s", werr, stderr.String())
	}
	return acks, compacted
}
