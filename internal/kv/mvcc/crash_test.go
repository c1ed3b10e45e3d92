package mvcc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// The crash test runs writers in a child process (this test binary again,
// running only TestCrashChild), kills it with SIGKILL at a random moment,
// and checks that the store it leaves behind holds every write the child
// saw acknowledged. It repeats that on one directory, so later rounds
// recover from logs and snapshots that earlier kills cut short.
//
// The child prints one line per acknowledged write, with a single write(2)
// each, after the call returned:
//
//	ack <rev> put <key> <create> <version> <prev mod> <sha256 of value>
//	ack <rev> del <key> 0 0 <prev mod> -
//	compact <rev>
//
// where prev mod is the ModRevision the key had before the write (0 for a
// create). A line the kill cut short has no newline and is not an ack.
// It also prints when the store starts a snapshot and when one is written
// (from the store's log), so that some rounds can kill it mid-snapshot:
//
//	snapshot started
//	snapshot written <nanoseconds it took>

const (
	crashDirEnv     = "KPLANE_CRASH_CHILD_DIR"
	crashSeedEnv    = "KPLANE_CRASH_CHILD_SEED"
	crashCompactEnv = "KPLANE_CRASH_CHILD_COMPACT"

	crashWriters = 8
	crashKeys    = 50
	// crashSnapshotBytes is small so that rotations and snapshots happen
	// many times per round, and kills land in the middle of them.
	crashSnapshotBytes = 64 << 10
)

func crashHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestCrashChild is the child's body. In a normal run it does nothing.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return // only a child started by TestCrashRecovery writes
	}
	die := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "crash child: %s: %v\n", what, err)
		os.Exit(3)
	}
	seed, err := strconv.ParseInt(os.Getenv(crashSeedEnv), 10, 64)
	if err != nil {
		die("seed", err)
	}
	// The parent holds our stdin open until it has killed us: if it dies
	// first, don't outlive it.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}()
	s, err := Open(Config{Dir: dir, SnapshotBytes: crashSnapshotBytes, Logger: slog.New(crashSnapshotLines{})})
	if err != nil {
		die("open", err)
	}
	compact := os.Getenv(crashCompactEnv) != ""
	for w := range crashWriters {
		go crashWriter(s, rand.New(rand.NewSource(seed*crashWriters+int64(w))), compact, die)
	}
	select {} // until killed
}

// crashSnapshotLines is the child's log: it prints the snapshots' start
// and end to stdout, one write(2) each, and drops the rest.
type crashSnapshotLines struct{}

func (crashSnapshotLines) Enabled(context.Context, slog.Level) bool { return true }
func (h crashSnapshotLines) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h crashSnapshotLines) WithGroup(string) slog.Handler          { return h }
func (crashSnapshotLines) Handle(_ context.Context, r slog.Record) error {
	switch r.Message {
	case "snapshot started":
		_, err := os.Stdout.WriteString("snapshot started\n")
		return err
	case "snapshot written":
		var took time.Duration
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "took" {
				took = a.Value.Duration()
			}
			return true
		})
		_, err := fmt.Fprintf(os.Stdout, "snapshot written %d\n", took.Nanoseconds())
		return err
	}
	return nil
}

// crashWriter writes forever: creates, updates with the current mod
// revision, deletes, and if compact now and then a compaction 200
// revisions back.
func crashWriter(s *Store, rnd *rand.Rand, compact bool, die func(string, error)) {
	ack := func(format string, args ...any) {
		// os.Stdout is unbuffered: one line, one write(2), shorter than
		// PIPE_BUF, so lines from different writers never interleave.
		if _, err := fmt.Fprintf(os.Stdout, format+"\n", args...); err != nil {
			die("stdout", err)
		}
	}
	for {
		key := fmt.Sprintf("/crash/%02d", rnd.Intn(crashKeys))
		cur, err := s.Range(ctx, key, kv.RangeOptions{})
		if err != nil {
			die("range", err)
		}
		var value []byte
		var r kv.WriteResponse
		switch {
		case len(cur.KVs) == 0:
			value = crashValue(rnd)
			r, err = s.Create(ctx, key, value)
		case rnd.Intn(4) == 0:
			r, err = s.Delete(ctx, key, cur.KVs[0].ModRevision)
		default:
			value = crashValue(rnd)
			r, err = s.Update(ctx, key, value, cur.KVs[0].ModRevision)
		}
		if err != nil {
			die("write", err)
		}
		if !r.Succeeded {
			continue // another writer got there first: try again
		}
		var prev int64
		if r.Prev != nil {
			prev = r.Prev.ModRevision
		}
		if r.KV == nil {
			ack("ack %d del %s 0 0 %d -", r.Revision, key, prev)
		} else {
			ack("ack %d put %s %d %d %d %s", r.Revision, key, r.KV.CreateRevision, r.KV.Version, prev, crashHash(value))
		}
		if compact && rnd.Intn(100) == 0 {
			current, compacted := s.Revision()
			if rev := current - 200; rev > compacted {
				switch err := s.Compact(ctx, rev); {
				case err == nil:
					ack("compact %d", rev)
				case errors.Is(err, kv.ErrCompacted):
					// Another writer compacted further meanwhile.
				default:
					die("compact", err)
				}
			}
		}
	}
}

// crashValue is random bytes: mostly small, a quarter up to 8 KiB.
func crashValue(rnd *rand.Rand) []byte {
	n := rnd.Intn(512)
	if rnd.Intn(4) == 0 {
		n = rnd.Intn(8 << 10)
	}
	b := make([]byte, n)
	rnd.Read(b)
	return b
}

// crashAck is one acknowledged write.
type crashAck struct {
	del             bool
	key             string
	create, version int64
	prev            int64 // the key's ModRevision before the write; 0 for a create
	hash            string
}

func (a crashAck) String() string {
	if a.del {
		return fmt.Sprintf("del %s (prev mod %d)", a.key, a.prev)
	}
	return fmt.Sprintf("put %s create %d version %d (prev mod %d) value %.12s", a.key, a.create, a.version, a.prev, a.hash)
}

// crashChildRun is what one child acknowledged before it was killed.
type crashChildRun struct {
	acks      map[int64]crashAck
	maxRev    int64         // highest acknowledged write
	compacted int64         // highest acknowledged compaction
	snapshots int           // snapshots started
	took      time.Duration // the last written snapshot's duration
}

func (c *crashChildRun) parse(line string) error {
	f := strings.Fields(line)
	switch {
	case len(f) == 2 && f[0] == "snapshot" && f[1] == "started":
		c.snapshots++
		return nil
	case len(f) == 3 && f[0] == "snapshot" && f[1] == "written":
		ns, err := strconv.ParseInt(f[2], 10, 64)
		c.took = time.Duration(ns)
		return err
	case len(f) == 2 && f[0] == "compact":
		rev, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return err
		}
		c.compacted = max(c.compacted, rev)
		return nil
	case len(f) == 8 && f[0] == "ack" && (f[2] == "put" || f[2] == "del"):
		var n [4]int64 // rev, create, version, prev
		for i, field := range []string{f[1], f[4], f[5], f[6]} {
			var err error
			if n[i], err = strconv.ParseInt(field, 10, 64); err != nil {
				return err
			}
		}
		rev := n[0]
		a := crashAck{del: f[2] == "del", key: f[3], create: n[1], version: n[2], prev: n[3], hash: f[7]}
		if _, dup := c.acks[rev]; dup {
			return fmt.Errorf("revision %d acknowledged twice", rev)
		}
		c.acks[rev] = a
		c.maxRev = max(c.maxRev, rev)
		return nil
	}
	return errors.New("not an acknowledgement")
}

func TestCrashRecovery(t *testing.T) {
	rounds := 25
	if testing.Short() {
		rounds = 5
	}
	// Not t.TempDir: a failing run keeps the directory as evidence.
	dir, err := os.MkdirTemp("", "kplane-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the store is kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	seed := time.Now().UnixNano()
	t.Logf("seed %d, directory %s", seed, dir)
	rnd := rand.New(rand.NewSource(seed))

	var (
		prevCurrent  int64 = 1 // a fresh store is at revision 1
		maxCompacted int64
		tot          struct {
			acks, verified, unacked, torn, snapshots, unfinished int
			atSnapshot, unfinishedAtSnapshot                     int
			reopen, maxReopen                                    time.Duration
		}
		took = 2 * time.Millisecond // how long the child's last snapshot took
	)
	for round := 1; round <= rounds; round++ {
		kill := crashKill{delay: time.Duration(20+rnd.Intn(281)) * time.Millisecond}
		if round%3 == 0 {
			// Kill a third of the children while they write a snapshot,
			// somewhere within as long as their last one took: a kill at
			// a random moment lands in one only now and then.
			kill = crashKill{atSnapshot: 1 + rnd.Intn(3), delay: time.Duration(rnd.Int63n(int64(took) + 1))}
		}
		// Compaction to 200 revisions back leaves little to check, so only
		// every other round compacts: the others check every ack.
		compact := round%2 == 0
		child, err := runCrashChild(dir, seed+int64(round), compact, kill)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if child.took > 0 {
			took = child.took
		}
		maxCompacted = max(maxCompacted, child.compacted)

		before := listDir(dir)
		var logs bytes.Buffer
		start := time.Now()
		s, err := Open(Config{
			Dir:           dir,
			SnapshotBytes: crashSnapshotBytes,
			Logger:        slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		reopen := time.Since(start)
		evidence := func() string {
			return fmt.Sprintf("files after the kill: %s\nfiles now: %s\nrecovery log:\n%s", before, listDir(dir), logs.String())
		}
		if err != nil {
			t.Fatalf("round %d: reopening after the kill: %v\n%s", round, err, evidence())
		}
		res, err := verifyCrashRecovery(s, child, prevCurrent, maxCompacted)
		if err == nil && strings.Contains(logs.String(), "level=ERROR") {
			// A killed process loses nothing it wrote: the only damage
			// recovery may find is a torn tail, logged at Warn.
			err = errors.New("recovery logged an error after a process kill")
		}
		if err != nil {
			s.Close()
			t.Fatalf("round %d (killed %v): %v\n%s", round, kill, err, evidence())
		}
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: close: %v", round, err)
		}
		// What the kill interrupted, as far as recovery can tell.
		torn := strings.Contains(logs.String(), "torn write")
		snapshot := strings.Contains(logs.String(), "snapshot=true")
		unfinished := strings.Contains(logs.String(), "unfinished snapshot")
		t.Logf("round %d: compact %v, killed %v; %d acks (%d verified, %d compacted away), %d durable unacked; "+
			"recovered revision %d, compacted %d; from snapshot %v, torn tail %v, unfinished snapshot %v; reopened in %v",
			round, compact, kill, len(child.acks), res.verified, len(child.acks)-res.verified, res.unacked,
			res.current, res.compacted, snapshot, torn, unfinished, reopen.Round(10*time.Microsecond))

		tot.acks += len(child.acks)
		tot.verified += res.verified
		tot.unacked += res.unacked
		tot.reopen += reopen
		tot.maxReopen = max(tot.maxReopen, reopen)
		if torn {
			tot.torn++
		}
		if snapshot {
			tot.snapshots++
		}
		if unfinished {
			tot.unfinished++
		}
		if kill.atSnapshot > 0 {
			tot.atSnapshot++
			if unfinished {
				tot.unfinishedAtSnapshot++
			}
		}
		prevCurrent = res.current
	}
	t.Logf("%d rounds: %d acknowledged writes, %d verified exactly (the rest compacted away), %d durable writes killed before their ack; "+
		"final revision %d, compacted %d; %d recoveries from a snapshot, %d torn tails, %d unfinished snapshots "+
		"(%d of the %d rounds killed at a snapshot); reopen mean %v, max %v",
		rounds, tot.acks, tot.verified, tot.unacked, prevCurrent, maxCompacted, tot.snapshots, tot.torn, tot.unfinished,
		tot.unfinishedAtSnapshot, tot.atSnapshot,
		(tot.reopen / time.Duration(rounds)).Round(10*time.Microsecond), tot.maxReopen.Round(10*time.Microsecond))
}

type crashResult struct {
	current, compacted int64
	verified           int // acks at or above the compaction point, all checked
	unacked            int // revisions written by the child without an ack
}

// verifyCrashRecovery checks a reopened store against what the child
// acknowledged, prevCurrent being the revision the previous round
// recovered and maxCompacted the highest compaction ever acknowledged.
func verifyCrashRecovery(s *Store, child crashChildRun, prevCurrent, maxCompacted int64) (crashResult, error) {
	current, compacted := s.Revision()
	res := crashResult{current: current, compacted: compacted}
	if current < child.maxRev {
		return res, fmt.Errorf("recovered revision %d, but revision %d was acknowledged", current, child.maxRev)
	}
	if current < prevCurrent {
		return res, fmt.Errorf("revision went back: recovered %d, after %d last round", current, prevCurrent)
	}
	if compacted < maxCompacted {
		return res, fmt.Errorf("compaction point %d, but compaction to %d was acknowledged", compacted, maxCompacted)
	}

	// Every acknowledged write at or above the compaction point reads back
	// exactly, and the key's state just before it is what the write saw.
	for _, rev := range slices.Sorted(maps.Keys(child.acks)) {
		if rev < compacted {
			continue
		}
		a := child.acks[rev]
		if err := checkCrashAck(s, rev, a, compacted); err != nil {
			return res, fmt.Errorf("acknowledged write at %d, %v: %w", rev, a, err)
		}
		res.verified++
	}
	// Every revision since the previous round is one write of this child.
	res.unacked = int(current-prevCurrent) - len(child.acks)

	// A watch resumed where the previous round left off delivers every
	// revision since, in order, agreeing with the acks.
	from := max(prevCurrent+1, compacted)
	events, err := watchCrashRange(s, from, current)
	if err != nil {
		return res, err
	}
	for i, ev := range events {
		rev := from + int64(i)
		if ev.KV.ModRevision != rev {
			return res, fmt.Errorf("watch from %d: event %d is at revision %d, want %d (a gap or a reordering)", from, i, ev.KV.ModRevision, rev)
		}
		if ev.PrevKV == nil && !ev.IsCreate() {
			return res, fmt.Errorf("watch from %d: %s %s at %d without its previous value", from, ev.Type, ev.KV.Key, rev)
		}
		a, ok := child.acks[rev]
		if !ok {
			continue
		}
		bad := ev.KV.Key != a.key || (ev.Type == kv.Delete) != a.del
		if !a.del {
			bad = bad || ev.KV.CreateRevision != a.create || ev.KV.Version != a.version || crashHash(ev.KV.Value) != a.hash
		}
		if a.prev != 0 {
			bad = bad || ev.PrevKV == nil || ev.PrevKV.Key != a.key || ev.PrevKV.ModRevision != a.prev
		}
		if bad {
			return res, fmt.Errorf("watch from %d: event at %d is %s %s create %d version %d prev %v, acknowledged as %v",
				from, rev, ev.Type, ev.KV.Key, ev.KV.CreateRevision, ev.KV.Version, ev.PrevKV, a)
		}
	}
	if want := current - from + 1; int64(len(events)) != want {
		return res, fmt.Errorf("watch from %d: %d events up to %d, want %d", from, len(events), current, want)
	}
	return res, nil
}

// checkCrashAck reads a's key at rev, and at rev-1 if that is retained.
func checkCrashAck(s *Store, rev int64, a crashAck, compacted int64) error {
	r, err := s.Range(ctx, a.key, kv.RangeOptions{Revision: rev})
	if err != nil {
		return err
	}
	switch {
	case a.del && len(r.KVs) != 0:
		e := r.KVs[0]
		return fmt.Errorf("the key is there at %d: mod %d create %d version %d", rev, e.ModRevision, e.CreateRevision, e.Version)
	case !a.del && len(r.KVs) != 1:
		return fmt.Errorf("the key is absent at %d", rev)
	case !a.del:
		e := r.KVs[0]
		if e.ModRevision != rev || e.CreateRevision != a.create || e.Version != a.version || crashHash(e.Value) != a.hash {
			return fmt.Errorf("reads back as mod %d create %d version %d value %.12s", e.ModRevision, e.CreateRevision, e.Version, crashHash(e.Value))
		}
	}
	if rev-1 < max(compacted, 1) {
		return nil
	}
	r, err = s.Range(ctx, a.key, kv.RangeOptions{Revision: rev - 1})
	switch {
	case err != nil:
		return err
	case a.prev == 0 && len(r.KVs) != 0:
		return fmt.Errorf("created, but the key is there at %d with mod %d", rev-1, r.KVs[0].ModRevision)
	case a.prev != 0 && (len(r.KVs) != 1 || r.KVs[0].ModRevision != a.prev):
		return fmt.Errorf("the key at %d is %+v, want mod %d", rev-1, r.KVs, a.prev)
	}
	return nil
}

// watchCrashRange watches every key from rev and returns the events up to
// until.
func watchCrashRange(s *Store, from, until int64) ([]kv.Event, error) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := s.Watch(wctx, "/", kv.WatchOptions{End: kv.PrefixEnd("/"), Revision: from})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var out []kv.Event
	for len(out) == 0 || out[len(out)-1].KV.ModRevision < until {
		r, ok := <-w.Responses()
		switch {
		case !ok:
			return out, fmt.Errorf("watch from %d ended after %d events, want events up to %d: %v", from, len(out), until, wctx.Err())
		case r.Err != nil:
			return out, fmt.Errorf("watch from %d ended after %d events: %w", from, len(out), r.Err)
		case len(r.Events) > 0 && r.Revision != r.Events[len(r.Events)-1].KV.ModRevision:
			return out, fmt.Errorf("watch from %d: response revision %d, last event at %d", from, r.Revision, r.Events[len(r.Events)-1].KV.ModRevision)
		}
		out = append(out, r.Events...)
	}
	return out, nil
}

// runCrashChild starts a writing child on dir, kills it with SIGKILL delay
// after its first acknowledgement, and returns what it acknowledged. A
// child that exits by itself, or says anything on stderr (a panic, a race
// report), is an error that quotes its stderr.
// crashKill says when a round kills its child: delay after its first
// acknowledgement or, when atSnapshot is above 0, delay after it starts
// its atSnapshot-th snapshot.
type crashKill struct {
	atSnapshot int
	delay      time.Duration
}

func (k crashKill) String() string {
	if k.atSnapshot > 0 {
		return fmt.Sprintf("%v into snapshot %d", k.delay.Round(time.Microsecond), k.atSnapshot)
	}
	return fmt.Sprintf("%v after the first ack", k.delay)
}

func runCrashChild(dir string, seed int64, compact bool, kill crashKill) (crashChildRun, error) {
	child := crashChildRun{acks: make(map[int64]crashAck)}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSeedEnv+"="+strconv.FormatInt(seed, 10))
	if compact {
		cmd.Env = append(cmd.Env, crashCompactEnv+"=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.StdinPipe(); err != nil { // closed by Wait, after the kill
		return child, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return child, err
	}
	if err := cmd.Start(); err != nil {
		return child, err
	}

	var readErr error
	first, snapped, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(stdout)
		acked, snapping := false, false
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				return // a line without its newline was cut by the kill
			}
			if err := child.parse(line); err != nil && readErr == nil {
				readErr = fmt.Errorf("the writing child printed %q: %v", line, err)
			}
			if !acked && len(child.acks) > 0 {
				acked = true
				close(first)
			}
			if !snapping && kill.atSnapshot > 0 && child.snapshots >= kill.atSnapshot {
				snapping = true
				close(snapped)
			}
		}
	}()

	trigger := first
	if kill.atSnapshot > 0 {
		trigger = snapped
	}
	timedOut := false
	select {
	case <-trigger:
		select {
		case <-time.After(kill.delay): // the kill lands at a random moment
		case <-done: // the child is gone already
		}
	case <-done:
	case <-time.After(30 * time.Second):
		timedOut = true
	}
	cmd.Process.Kill()
	<-done
	werr := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return child, fmt.Errorf("the writing child exited by itself (%v) instead of being killed; its stderr:\n%s", werr, stderr.String())
	}
	switch {
	case timedOut:
		return child, fmt.Errorf("the writing child did not get to the kill's moment (%v) in 30s; its stderr:\n%s", kill, stderr.String())
	case stderr.Len() > 0:
		return child, fmt.Errorf("the writing child wrote to stderr:\n%s", stderr.String())
	case readErr != nil:
		return child, readErr
	case len(child.acks) == 0:
		return child, errors.New("the writing child was killed before acknowledging anything")
	}
	return child, nil
}

// listDir renders dir's files with their sizes, for failure reports.
func listDir(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, " %s(%d)", e.Name(), fi.Size())
	}
	return b.String()
}
