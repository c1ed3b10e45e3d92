package apiserver

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http/httptest"
	"testing"
)

// writeRecorder records each write the response takes, and its flushes.
type writeRecorder struct {
	*httptest.ResponseRecorder
	writes  []int
	flushes int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.ResponseRecorder.Write(p)
}

func (w *writeRecorder) Flush() { w.flushes++ }

// events returns n watch events' worth of distinct bytes, size each.
func events(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = bytes.Repeat([]byte{byte('a' + i%26)}, size)
	}
	return out
}

func TestWatchOutHandsOverBurstsInChunks(t *testing.T) {
	rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
	out := watchOut{w: rec, flusher: rec}
	var want bytes.Buffer
	write := func(evs [][]byte) {
		t.Helper()
		for _, ev := range evs {
			if n, err := out.Write(ev); n != len(ev) || err != nil {
				t.Fatalf("Write: %d, %v; want %d, nil", n, err, len(ev))
			}
			want.Write(ev)
		}
	}

	// A burst of 100 events of 1,500 B: 150,000 bytes go to the response
	// in pieces of at least watchChunk, each handed over as soon as the
	// events gathered reach it, the rest at the flush.
	pieces, rest := 0, 0
	for range 100 {
		if rest += 1500; rest >= watchChunk {
			pieces, rest = pieces+1, 0
		}
	}
	write(events(100, 1500))
	if len(rec.writes) != pieces || pieces < 2 {
		t.Errorf("before the flush, writes of %v bytes; want %d (at least two)", rec.writes, pieces)
	}
	for _, n := range rec.writes {
		if n < watchChunk {
			t.Errorf("a piece of %d bytes handed over before the flush, less than %d", n, watchChunk)
		}
	}
	if rec.flushes != 0 {
		t.Errorf("%d flushes before the burst ended", rec.flushes)
	}
	out.flush()
	if len(rec.writes) != pieces+1 || rec.writes[pieces] != rest || rec.flushes != 1 || out.pending != nil {
		t.Errorf("after the flush: writes %v, %d flushes, buffer kept: %v; want a last write of %d, 1 flush, none kept", rec.writes, rec.flushes, out.pending != nil, rest)
	}
	first := len(rec.writes)

	// Three small events: nothing written until the flush, then one write.
	write(events(3, 200))
	if len(rec.writes) != first {
		t.Errorf("a small burst was written before its flush: %v", rec.writes[first:])
	}
	out.flush()
	if len(rec.writes) != first+1 || rec.writes[first] != 600 || rec.flushes != 2 {
		t.Errorf("a small burst: writes %v, %d flushes; want a last write of 600 and 2 flushes", rec.writes[first:], rec.flushes)
	}

	// An event larger than the chunk goes at once; a flush with nothing
	// gathered writes nothing.
	write(events(1, 5*watchChunk))
	if rec.writes[len(rec.writes)-1] != 5*watchChunk {
		t.Errorf("a large event: last write %d, want %d", rec.writes[len(rec.writes)-1], 5*watchChunk)
	}
	before := len(rec.writes)
	out.flush()
	if len(rec.writes) != before || out.pending != nil {
		t.Errorf("flushing an empty burst wrote %v", rec.writes[before:])
	}
	if !bytes.Equal(rec.Body.Bytes(), want.Bytes()) {
		t.Errorf("the response holds %d bytes, not the %d written, in order", rec.Body.Len(), want.Len())
	}
}

// Compressed, each flush still ends a gzip member, and the members read
// back as the events written, in order.
func TestWatchOutGzipMembersReadAsTheEvents(t *testing.T) {
	rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder()}
	out := watchOut{w: rec, flusher: rec, gzip: true}
	var want bytes.Buffer
	for burst := range 3 {
		for _, ev := range events(40*(burst+1), 1500) {
			out.Write(ev)
			want.Write(ev)
		}
		out.flush()
		if out.gz != nil || out.pending != nil {
			t.Fatalf("burst %d: the compressor or the buffer is kept after the flush", burst)
		}
	}
	if rec.flushes != 3 {
		t.Errorf("%d flushes, want 3", rec.flushes)
	}
	zr, err := gzip.NewReader(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("decompressed %d bytes, want the %d written, in order", len(got), want.Len())
	}
}
