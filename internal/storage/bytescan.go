package storage

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// The scans below read eight bytes at a time where the byte-at-a-time
// loop they replace spent most of a create's string handling: a
// ConfigMap's values are long runs of plain ASCII. Each falls back to the
// byte loop at the first byte it cannot vouch for, so the two agree by
// construction; bytescan_test.go checks them against the loops anyway.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// hasLess reports whether any byte of w is less than n (n ≤ 128).
func hasLess(w uint64, n byte) bool { return (w-ones*uint64(n))&^w&highs != 0 }

// hasByte reports whether any byte of w equals c.
func hasByte(w uint64, c byte) bool {
	x := w ^ (ones * uint64(c))
	return (x-ones)&^x&highs != 0
}

// plainText reports whether b is valid UTF-8 without control bytes.
func plainText(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if w&highs != 0 || hasLess(w, 0x20) {
			break
		}
	}
	for _, c := range b[i:] {
		if c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b[i:])
}

// plainRun returns the length of the leading run of s that a JSON string
// holds as it is: ASCII from 0x20 without '"', '\\', '<', '>' and '&',
// the last three escaped as encoding/json does.
func plainRun(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&highs != 0 || hasLess(w, 0x20) || hasByte(w, '"') || hasByte(w, '\\') ||
			hasByte(w, '<') || hasByte(w, '>') || hasByte(w, '&') {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return i
}

// stringEnd returns the index in b, the bytes after a string's opening
// quote, of its closing quote, and whether the string has escapes; -1 if
// it is not closed.
func stringEnd(b []byte) (end int, escaped bool) {
	// Two passes, each vectorised: one for the first quote, one for a
	// backslash before it. Most strings have no escape and end there.
	q := bytes.IndexByte(b, '"')
	if q < 0 {
		return -1, false
	}
	if bytes.IndexByte(b[:q], '\\') < 0 {
		return q, false
	}
	// A backslash escapes the byte after it, so a position just after a
	// byte other than a backslash is never inside an escape: a quote ends
	// the string when the run of backslashes before it is even. Text with
	// a newline every line is then still read about once, not a search
	// per escape.
	for {
		k := q
		for k > 0 && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q, true
		}
		j := bytes.IndexByte(b[q+1:], '"')
		if j < 0 {
			return -1, true
		}
		q += 1 + j
	}
}
