package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openLog(t testing.TB, dir string, logs *bytes.Buffer) *Log {
	t.Helper()
	var h slog.Handler = slog.DiscardHandler
	if logs != nil {
		h = slog.NewTextHandler(logs, nil)
	}
	l, err := Open(Options{Dir: dir, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// replayAll opens dir and returns every record replayed from segment 0.
func replayAll(t testing.TB, dir string, logs *bytes.Buffer) (*Log, [][]byte) {
	t.Helper()
	l := openLog(t, dir, logs)
	var recs [][]byte
	if _, err := l.Replay(0, func(r []byte) error {
		recs = append(recs, append([]byte(nil), r...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return l, recs
}

func record(i int) []byte {
	return bytes.Repeat([]byte{byte(i)}, i*37%1000)
}

func write(t testing.TB, l *Log, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := l.Append(record(i)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

func check(t testing.TB, recs [][]byte, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("replayed %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if !bytes.Equal(r, record(i)) {
			t.Fatalf("record %d differs", i)
		}
	}
}

func segments(t testing.TB, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	return m
}

func TestRecordsSurviveReopenAndRotation(t *testing.T) {
	dir := t.TempDir()
	l, recs := replayAll(t, dir, nil)
	check(t, recs, 0)
	write(t, l, 0, 50)
	if _, err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	write(t, l, 50, 100)
	if _, err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	write(t, l, 100, 120)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, dir)); n != 3 {
		t.Fatalf("%d segments, want 3", n)
	}
	l, recs = replayAll(t, dir, nil)
	check(t, recs, 120)
	write(t, l, 120, 130)
	l.Close()
	_, recs = replayAll(t, dir, nil)
	check(t, recs, 130)
}

func TestTornTailIsCutAtEveryOffset(t *testing.T) {
	src := t.TempDir()
	l, _ := replayAll(t, src, nil)
	write(t, l, 0, 10)
	l.Close()
	seg := segments(t, src)[0]
	full, _ := os.ReadFile(seg)
	lastLen := headerLen + len(record(9))
	intact := len(full) - lastLen
	for cut := intact + 1; cut < len(full); cut++ {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.Base(seg))
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		l, recs := replayAll(t, dir, &logs)
		check(t, recs, 9)
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "torn write") {
			t.Fatalf("cut at %d: no torn-tail warning in %q", cut, logs.String())
		}
		if fi, _ := os.Stat(path); fi.Size() != int64(intact) {
			t.Fatalf("cut at %d: file is %d bytes, want truncated to %d", cut, fi.Size(), intact)
		}
		write(t, l, 9, 10)
		l.Close()
		_, recs = replayAll(t, dir, nil)
		check(t, recs, 10)
	}
}

func TestCorruptionBeforeTheEndStopsThereAndSetsLaterSegmentsAside(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	write(t, l, 0, 10)
	if _, err := l.Rotate(); err != nil {
		t.Fatal(err)
	}
	write(t, l, 10, 20)
	l.Close()
	segs := segments(t, dir)
	first, _ := os.ReadFile(segs[0])
	// Flip a byte inside record 5's payload.
	off := len(segmentMagic)
	for i := 0; i < 5; i++ {
		off += headerLen + len(record(i))
	}
	first[off+headerLen+1] ^= 0xff
	os.WriteFile(segs[0], first, 0o600)

	var logs bytes.Buffer
	_, recs := replayAll(t, dir, &logs)
	check(t, recs, 5)
	if !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("no error logged: %q", logs.String())
	}
	if _, err := os.Stat(segs[1] + ".corrupt"); err != nil {
		t.Fatalf("the later segment was not set aside: %v", err)
	}
	if _, err := os.Stat(segs[1]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the later segment is still in place: %v", err)
	}
}

func TestCorruptLengthIsDamage(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	write(t, l, 0, 4)
	l.Close()
	seg := segments(t, dir)[0]
	data, _ := os.ReadFile(seg)
	off := len(segmentMagic) + headerLen + len(record(0))
	binary.LittleEndian.PutUint32(data[off:], 0xffffffff)
	os.WriteFile(seg, data, 0o600)
	_, recs := replayAll(t, dir, nil)
	check(t, recs, 1)
}

func TestReplaySkipsSegmentsBelowFrom(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	write(t, l, 0, 3)
	seg, err := l.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, nil)
	var recs []string
	if _, err := l.Replay(seg, func(r []byte) error { recs = append(recs, string(r)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(recs) != "[after]" {
		t.Fatalf("replay from segment %d gave %q", seg, recs)
	}
}

func writeSnapshot(t testing.TB, l *Log, seg uint64, n int) {
	t.Helper()
	err := l.WriteSnapshot(SnapshotMeta{Segment: seg, Data: []byte("meta")}, func(emit func([]byte) error) error {
		for i := 0; i < n; i++ {
			if err := emit(record(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func loadSnapshot(l *Log) (SnapshotMeta, bool, [][]byte, error) {
	var recs [][]byte
	meta, found, err := l.LoadSnapshot(func(r []byte) error {
		recs = append(recs, append([]byte(nil), r...))
		return nil
	})
	return meta, found, recs, err
}

func TestSnapshots(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	write(t, l, 0, 5)
	seg1, _ := l.Rotate()
	writeSnapshot(t, l, seg1, 10)
	write(t, l, 5, 10)
	seg2, _ := l.Rotate()
	writeSnapshot(t, l, seg2, 1000)
	l.Close()

	if n := len(segments(t, dir)); n != 1 {
		t.Fatalf("%d segments after the snapshot, want only the one it doesn't cover", n)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v, want only the newest", snaps)
	}
	l = openLog(t, dir, nil)
	meta, found, recs, err := loadSnapshot(l)
	if err != nil || !found || meta.Segment != seg2 || string(meta.Data) != "meta" {
		t.Fatalf("LoadSnapshot = %+v, %v, %v", meta, found, err)
	}
	check(t, recs, 1000)

	t.Run("a leftover temporary file is removed and ignored", func(t *testing.T) {
		tmp := filepath.Join(dir, snapName(seg2+5)+".tmp")
		os.WriteFile(tmp, []byte("partial"), 0o600)
		l := openLog(t, dir, nil)
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("temporary file still there: %v", err)
		}
		if meta, _, _, err := loadSnapshot(l); err != nil || meta.Segment != seg2 {
			t.Fatalf("LoadSnapshot = %+v, %v", meta, err)
		}
	})
	t.Run("a failing writer leaves no snapshot", func(t *testing.T) {
		err := l.WriteSnapshot(SnapshotMeta{Segment: seg2 + 9}, func(emit func([]byte) error) error {
			return errors.New("stop")
		})
		if err == nil {
			t.Fatal("WriteSnapshot succeeded")
		}
		if m, _ := filepath.Glob(filepath.Join(dir, snapName(seg2+9)+"*")); len(m) != 0 {
			t.Fatalf("left %v", m)
		}
	})
	t.Run("damage is an error naming the file", func(t *testing.T) {
		data, _ := os.ReadFile(snaps[0])
		flipped := append([]byte(nil), data...)
		flipped[len(flipped)/2] ^= 1
		for name, damaged := range map[string][]byte{"a flipped byte": flipped, "a cut-off trailer": data[:len(data)-3]} {
			os.WriteFile(snaps[0], damaged, 0o600)
			_, _, _, err := loadSnapshot(openLog(t, dir, nil))
			if err == nil || !strings.Contains(err.Error(), filepath.Base(snaps[0])) {
				t.Fatalf("%s: LoadSnapshot error %v, want one naming the file", name, err)
			}
		}
	})
}

// framedSize is the bytes records from..to-1 take in a segment.
func framedSize(from, to int) int64 {
	var n int64
	for i := from; i < to; i++ {
		n += int64(headerLen + len(record(i)))
	}
	return n
}

// The engine snapshots when Size reaches SnapshotSize: both must hold
// across a restart, or a store restarted often would never snapshot and
// its log would grow without end.
func TestSizesCarryAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	if l.Size() != 0 || l.SnapshotSize() != 0 {
		t.Fatalf("a new log: Size %d, SnapshotSize %d, want 0 and 0", l.Size(), l.SnapshotSize())
	}
	write(t, l, 0, 20)
	if got, want := l.Size(), framedSize(0, 20); got != want {
		t.Fatalf("Size after 20 records = %d, want %d", got, want)
	}
	seg, err := l.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if l.Size() != 0 {
		t.Fatalf("Size after Rotate = %d, want 0", l.Size())
	}
	writeSnapshot(t, l, seg, 300)
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	fi, err := os.Stat(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.SnapshotSize() != fi.Size() {
		t.Fatalf("SnapshotSize = %d, the file has %d bytes", l.SnapshotSize(), fi.Size())
	}
	write(t, l, 20, 45)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, dir, nil)
	meta, _, _, err := loadSnapshot(l)
	if err != nil {
		t.Fatal(err)
	}
	if l.SnapshotSize() != fi.Size() {
		t.Fatalf("SnapshotSize after LoadSnapshot = %d, want the file's %d", l.SnapshotSize(), fi.Size())
	}
	if _, err := l.Replay(meta.Segment, func([]byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Size(), framedSize(20, 45); got != want {
		t.Fatalf("Size after replaying the 25 records logged since the snapshot = %d, want %d", got, want)
	}
	write(t, l, 45, 50)
	if got, want := l.Size(), framedSize(20, 50); got != want {
		t.Fatalf("Size after 5 more = %d, want %d", got, want)
	}
	l.Close()
}

// FuzzReplay feeds arbitrary bytes as a segment: Replay must not panic,
// and must return only records whose framing is intact, in order, from the
// start of the segment.
func FuzzReplay(f *testing.F) {
	var valid []byte
	valid = append(valid, segmentMagic...)
	for i := 0; i < 5; i++ {
		valid = frame(valid, record(i))
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-4])
	f.Add([]byte(segmentMagic))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, segName(1)), data, 0o600)
		l := openLog(t, dir, nil)
		off := len(segmentMagic)
		_, err := l.Replay(0, func(rec []byte) error {
			want := frame(nil, rec)
			if off+len(want) > len(data) || !bytes.Equal(data[off:off+len(want)], want) {
				t.Fatalf("replayed a record that is not intact at offset %d", off)
			}
			off += len(want)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	})
}

func BenchmarkAppendSync(b *testing.B) {
	for _, size := range []int{256, 4096} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("size=%d/batch=%d", size, batch), func(b *testing.B) {
				l, _ := replayAll(b, b.TempDir(), nil)
				defer l.Close()
				rec := make([]byte, size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for j := 0; j < batch; j++ {
						l.Append(rec)
					}
					if err := l.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// crashCopy copies dir's files as a crash would leave them: whatever was
// written, preallocated zeros included, without Close's trimming.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// crashedWithTen writes records 0..9 and copies the log as a crash would
// leave it (preallocated zeros and all). It returns the copy, its
// segment's path and contents, and where record n starts in them.
func crashedWithTen(t *testing.T, n int) (dir, seg string, data []byte, off int) {
	t.Helper()
	src := t.TempDir()
	l, _ := replayAll(t, src, nil)
	write(t, l, 0, 10)
	dir = crashCopy(t, src)
	l.Close()
	seg = filepath.Join(dir, filepath.Base(segments(t, src)[0]))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	off = len(segmentMagic)
	for i := 0; i < n; i++ {
		off += headerLen + len(record(i))
	}
	return dir, seg, data, off
}

// A segment is filled with zeros ahead of its records; after a crash the
// zeros read as the end of the log, quietly, and appends go on from there.
func TestPreallocatedTailIsTheEnd(t *testing.T) {
	dir := t.TempDir()
	l, _ := replayAll(t, dir, nil)
	write(t, l, 0, 20)
	seg := segments(t, dir)[0]
	used := int64(len(segmentMagic))
	for i := 0; i < 20; i++ {
		used += int64(headerLen + len(record(i)))
	}
	if fi, _ := os.Stat(seg); fi.Size() < used+minPrealloc/2 {
		t.Fatalf("segment is %d bytes for %d of records: not preallocated", fi.Size(), used)
	}
	crashed := crashCopy(t, dir)
	l.Close()
	if fi, _ := os.Stat(seg); fi.Size() != used {
		t.Fatalf("Close left the segment at %d bytes, want %d", fi.Size(), used)
	}

	var logs bytes.Buffer
	l2, recs := replayAll(t, crashed, &logs)
	check(t, recs, 20)
	if logs.Len() != 0 {
		t.Fatalf("replaying a preallocated tail logged %q", logs.String())
	}
	write(t, l2, 20, 30)
	again := crashCopy(t, crashed)
	_, recs = replayAll(t, again, nil)
	check(t, recs, 30)
	l2.Close()
}

// A batch cut short inside the preallocated zeros is a torn tail: cut and
// warned about, and what follows the cut is new records only.
func TestTornTailInPreallocatedSpace(t *testing.T) {
	crashed, seg, data, off := crashedWithTen(t, 9)
	// Record 9's last bytes never reached the disk.
	clear(data[off+headerLen+len(record(9))/2 : off+headerLen+len(record(9))])
	os.WriteFile(seg, data, 0o600)

	var logs bytes.Buffer
	l2, recs := replayAll(t, crashed, &logs)
	check(t, recs, 9)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "torn write") {
		t.Fatalf("no torn-tail warning: %q", logs.String())
	}
	write(t, l2, 9, 12)
	_, recs = replayAll(t, crashCopy(t, crashed), nil)
	check(t, recs, 12)
	l2.Close()
}

// Records after a damaged one never come back, even when appends resume
// before them in preallocated space: the damage is cut off, not skipped.
func TestNoStaleRecordsAfterDamage(t *testing.T) {
	crashed, seg, data, off := crashedWithTen(t, 5)
	clear(data[off : off+headerLen]) // record 5's header zeroed; 6..9 intact after it
	os.WriteFile(seg, data, 0o600)

	l2, recs := replayAll(t, crashed, nil)
	check(t, recs, 5)
	write(t, l2, 5, 6) // one record, shorter than what was cut
	_, recs = replayAll(t, crashCopy(t, crashed), nil)
	check(t, recs, 6)
	l2.Close()
}

// Preallocation is an optimisation: when its zeros cannot be written (a
// full disk), the log appends without them and loses nothing.
func TestPreallocationFailureIsNotFatal(t *testing.T) {
	defer func(orig func(*os.File, []byte, int64) (int, error)) { writeAt = orig }(writeAt)
	writeAt = func(*os.File, []byte, int64) (int, error) { return 0, errors.New("no space left on device") }
	dir := t.TempDir()
	var logs bytes.Buffer
	l, _ := replayAll(t, dir, &logs)
	write(t, l, 0, 30)
	if !strings.Contains(logs.String(), "cannot preallocate") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	if n := strings.Count(logs.String(), "cannot preallocate"); n != 1 {
		t.Fatalf("warned %d times for one segment", n)
	}
	_, recs := replayAll(t, crashCopy(t, dir), nil)
	check(t, recs, 30)
	l.Close()
}
