package storage

import (
	"encoding/hex"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// unescape decodes the body of a JSON string, the bytes between its
// quotes, to the value encoding/json gives it: escapes replaced, a UTF-16
// surrogate pair joined into one rune, and a lone surrogate and each byte
// of invalid UTF-8 made U+FFFD. ok is false for what encoding/json
// refuses (a control byte, an unknown or unfinished escape): the caller
// leaves those to encoding/json for its error. Records hold JSON escapes
// wherever a value has lines or quotes; going through encoding/json for
// each such string (a validity scan, then the decode) was most of a table
// row's cost for ConfigMaps of configuration text.
func unescape(body []byte) (v string, ok bool) {
	var out strings.Builder // its bytes become the string: one allocation
	out.Grow(len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c >= 0x20 && c < utf8.RuneSelf && c != '\\':
			j := i + 1
			for j < len(body) && body[j] >= 0x20 && body[j] < utf8.RuneSelf && body[j] != '\\' {
				j++
			}
			out.Write(body[i:j])
			i = j
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				out.WriteRune(utf8.RuneError)
			} else {
				out.Write(body[i : i+n])
			}
			i += n
		case c < 0x20:
			return "", false
		default: // a backslash
			if i+1 == len(body) {
				return "", false
			}
			switch e := body[i+1]; e {
			case '"', '\\', '/':
				out.WriteByte(e)
			case 'b':
				out.WriteByte('\b')
			case 'f':
				out.WriteByte('\f')
			case 'n':
				out.WriteByte('\n')
			case 'r':
				out.WriteByte('\r')
			case 't':
				out.WriteByte('\t')
			case 'u':
				r, ok := hexRune(body[i:])
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// Only a high half followed by an escaped low half is
					// a pair; anything else leaves this half alone.
					if lo, ok := hexRune(body[i:]); ok {
						if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
							out.WriteRune(pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out.WriteRune(r)
				continue
			default:
				return "", false
			}
			i += 2
		}
	}
	return out.String(), true
}

// hexRune reads the rune of a \uXXXX escape at the start of b.
func hexRune(b []byte) (rune, bool) {
	var v [2]byte
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	if _, err := hex.Decode(v[:], b[2:6]); err != nil {
		return 0, false
	}
	return rune(v[0])<<8 | rune(v[1]), true
}
