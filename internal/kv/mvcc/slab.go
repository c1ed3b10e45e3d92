package mvcc

// slab copies the keys and values a recovery reads (from the snapshot
// and the log) into large shared chunks, where each would otherwise be
// an allocation of its own, rounded up to Go's next size class (a
// 519-byte value takes 576 bytes; ~8 % of a store of small objects).
//
// A chunk stays alive while any key or value in it does, so the memory
// recovery allocated is not given back until everything it loaded has
// been replaced or deleted (and compacted): at most what the store held
// when it opened. Writes after recovery allocate as before, so keys
// written often don't pin chunks of cold ones.
//
// Not safe for concurrent use: recovery runs before any other goroutine.
type slab struct {
	buf []byte
}

const (
	// slabChunk is the size of one chunk.
	slabChunk = 256 << 10
	// slabMax is the largest copy made from a chunk; larger ones are
	// allocations of their own (the rounding is a smaller share of them).
	slabMax = 4 << 10
)

// bytes returns a copy of b. The copy's capacity is its length, so an
// append to it cannot write into its neighbour.
func (s *slab) bytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > slabMax {
		return append([]byte(nil), b...)
	}
	if cap(s.buf)-len(s.buf) < len(b) {
		s.buf = make([]byte, 0, slabChunk)
	}
	n := len(s.buf)
	s.buf = append(s.buf, b...)
	return s.buf[n:len(s.buf):len(s.buf)]
}

// string returns b as a string in the slab.
func (s *slab) string(b []byte) string { return view(s.bytes(b)) }
