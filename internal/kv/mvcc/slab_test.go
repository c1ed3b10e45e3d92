package mvcc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
)

// The slab's copies are equal to what they copy, can't be appended into
// each other, and large ones are allocations of their own.
func TestSlab(t *testing.T) {
	var s slab
	var copies [][]byte
	var want [][]byte
	for i := range 2000 {
		b := bytes.Repeat([]byte{byte(i)}, i%700)
		want = append(want, b)
		copies = append(copies, s.bytes(b))
	}
	for i, c := range copies {
		if !bytes.Equal(c, want[i]) {
			t.Fatalf("copy %d differs", i)
		}
		if cap(c) != len(c) {
			t.Fatalf("copy %d: capacity %d, length %d", i, cap(c), len(c))
		}
		_ = append(c, 0xff) // must not reach copy i+1
	}
	for i, c := range copies {
		if !bytes.Equal(c, want[i]) {
			t.Fatalf("copy %d changed by an append to its neighbour", i)
		}
	}
	if s.bytes(nil) != nil || s.string(nil) != "" {
		t.Error("an empty copy is not empty")
	}
	big := bytes.Repeat([]byte("x"), slabMax+1)
	before := len(s.buf)
	if c := s.bytes(big); !bytes.Equal(c, big) || len(s.buf) != before {
		t.Error("a copy over slabMax came from the chunk")
	}
	if got := s.string([]byte("key")); got != "key" {
		t.Errorf("string = %q", got)
	}
}

// A store recovered from a snapshot and its log (the slab's two callers)
// holds the same keys, values and revisions as before, values and keys
// independent of the buffers they were read from and of each other.
func TestRecoveredFromSlabs(t *testing.T) {
	dir := t.TempDir()
	// Small snapshots: the first keys come back from a snapshot, the
	// rest from the log.
	s := open(t, Config{Dir: dir, SnapshotBytes: 4 << 10})
	for i := range 300 {
		mustCreate(t, s, fmt.Sprintf("/k/%03d", i), fmt.Sprintf("value-%d-%s", i, bytes.Repeat([]byte("v"), i)))
	}
	for i := 0; i < 300; i += 3 {
		mustUpdate(t, s, fmt.Sprintf("/k/%03d", i), fmt.Sprintf("updated-%d", i))
	}
	for i := 1; i < 300; i += 7 {
		mustDelete(t, s, fmt.Sprintf("/k/%03d", i))
	}
	mustCreate(t, s, "/k/empty", "")
	want, err := s.Range(ctx, "/k/", kv.RangeOptions{End: kv.PrefixEnd("/k/")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap")); len(snaps) == 0 {
		t.Fatal("no snapshot written: the test would not read one")
	}
	r := open(t, Config{Dir: dir, SnapshotBytes: 4 << 10})
	got, err := r.Range(ctx, "/k/", kv.RangeOptions{End: kv.PrefixEnd("/k/")})
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != want.Revision || len(got.KVs) != len(want.KVs) {
		t.Fatalf("recovered revision %d with %d keys, want %d with %d", got.Revision, len(got.KVs), want.Revision, len(want.KVs))
	}
	for i := range got.KVs {
		g, w := got.KVs[i], want.KVs[i]
		if g.Key != w.Key || !bytes.Equal(g.Value, w.Value) || g.CreateRevision != w.CreateRevision || g.ModRevision != w.ModRevision || g.Version != w.Version {
			t.Fatalf("recovered %+v, want %+v", g, w)
		}
	}
	// Appending to one recovered value leaves the next one alone.
	first := got.KVs[0].Value
	_ = append(first, bytes.Repeat([]byte("!"), 64)...)
	again, err := r.Range(ctx, "/k/", kv.RangeOptions{End: kv.PrefixEnd("/k/")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.KVs {
		if !bytes.Equal(again.KVs[i].Value, want.KVs[i].Value) {
			t.Fatalf("%s changed after an append to %s", again.KVs[i].Key, got.KVs[0].Key)
		}
	}
}
