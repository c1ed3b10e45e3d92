package storage

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The byte-at-a-time definitions the word scans must agree with.

func plainTextLoop(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

func plainRunLoop(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return len(s)
}

func stringEndLoop(b []byte) (int, bool) {
	escaped := false
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, escaped
		case '\\':
			escaped = true
			i++
		}
	}
	return -1, escaped
}

// randomBytes mixes long plain runs with every kind of byte the scans
// look for, at every offset within a word.
func randomBytes(r *rand.Rand) []byte {
	special := []byte{'"', '\\', '<', '>', '&', 0, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xa9, 0xe2, 0xff, '\n'}
	n := r.IntN(70)
	b := make([]byte, n)
	for i := range b {
		switch r.IntN(10) {
		case 0:
			b[i] = special[r.IntN(len(special))]
		case 1:
			b[i] = byte(r.IntN(256))
		default:
			b[i] = byte('a' + r.IntN(26))
		}
	}
	return b
}

func TestByteScansMatchTheLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := randomBytes(r)
		if got, want := plainText(b), plainTextLoop(b); got != want {
			t.Fatalf("plainText(%q) = %v, want %v", b, got, want)
		}
		if got, want := plainRun(string(b)), plainRunLoop(string(b)); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", b, got, want)
		}
		gotEnd, gotEsc := stringEnd(b)
		wantEnd, wantEsc := stringEndLoop(b)
		if gotEnd != wantEnd || (wantEnd >= 0 && gotEsc != wantEsc) {
			t.Fatalf("stringEnd(%q) = %d, %v; want %d, %v", b, gotEnd, gotEsc, wantEnd, wantEsc)
		}
	}
}

func TestStringEndEdges(t *testing.T) {
	for _, tc := range []struct {
		in      string
		end     int
		escaped bool
	}{
		{`"`, 0, false},
		{`abc"`, 3, false},
		{`abc`, -1, false},
		{`\"`, -1, true},
		{`\"x"`, 3, true},
		{`\\"`, 2, true},
		{`\`, -1, true},
		{`a\`, -1, true},
		{`a\\`, -1, true},
		{strings.Repeat(`\n`, 1000) + `"`, 2000, true},
		{strings.Repeat("x", 1000) + `\"` + `"`, 1002, true},
	} {
		end, esc := stringEnd([]byte(tc.in))
		if end != tc.end || (end >= 0 && esc != tc.escaped) {
			t.Errorf("stringEnd(%q) = %d, %v; want %d, %v", tc.in, end, esc, tc.end, tc.escaped)
		}
	}
}

func FuzzByteScans(f *testing.F) {
	f.Add([]byte(`plain text "quoted" \n <tag> & café`))
	f.Add(bytes.Repeat([]byte("x"), 100))
	f.Fuzz(func(t *testing.T, b []byte) {
		if plainText(b) != plainTextLoop(b) {
			t.Fatalf("plainText(%q)", b)
		}
		if plainRun(string(b)) != plainRunLoop(string(b)) {
			t.Fatalf("plainRun(%q)", b)
		}
		gotEnd, gotEsc := stringEnd(b)
		wantEnd, wantEsc := stringEndLoop(b)
		if gotEnd != wantEnd || (wantEnd >= 0 && gotEsc != wantEsc) {
			t.Fatalf("stringEnd(%q) = %d, %v; want %d, %v", b, gotEnd, gotEsc, wantEnd, wantEsc)
		}
	})
}

// BenchmarkByteScans: a ConfigMap's 1 KiB value, the word scans against
// the byte loops (go test -bench ByteScans ./internal/storage).
func BenchmarkByteScans(b *testing.B) {
	v := strings.Repeat("abcdefghij", 102) + `"`
	bv := []byte(v)
	// Configuration text as stored: an escaped newline every 21 bytes or
	// so, and an escaped quote.
	text := []byte(strings.Repeat(`listen = 10.0.1.2:8080\nserver.timeout = 30s\n`, 22) + `name = \"x\"` + `"`)
	for _, in := range []struct {
		name string
		b    []byte
	}{{"stringEnd", bv}, {"stringEnd/text", text}} {
		b.Run(in.name, func(b *testing.B) {
			for range b.N {
				stringEnd(in.b)
			}
		})
		b.Run(in.name+"/loop", func(b *testing.B) {
			for range b.N {
				stringEndLoop(in.b)
			}
		})
	}
	b.Run("plainText", func(b *testing.B) {
		for range b.N {
			plainText(bv[:len(bv)-1])
		}
	})
	b.Run("plainText/loop", func(b *testing.B) {
		for range b.N {
			plainTextLoop(bv[:len(bv)-1])
		}
	})
	b.Run("plainRun", func(b *testing.B) {
		for range b.N {
			plainRun(v[:len(v)-1])
		}
	})
	b.Run("plainRun/loop", func(b *testing.B) {
		for range b.N {
			plainRunLoop(v[:len(v)-1])
		}
	})
}
