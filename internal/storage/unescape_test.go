package storage

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// checkUnescape fails t unless unescape agrees with encoding/json on the
// string whose body is body: the same value, or both refusing it.
func checkUnescape(t *testing.T, body []byte) {
	t.Helper()
	if end, _ := stringEnd(append(append([]byte{}, body...), '"')); end != len(body) {
		return // an unescaped quote ends the string early: not a body
	}
	var want string
	err := json.Unmarshal(append(append([]byte{'"'}, body...), '"'), &want)
	got, ok := unescape(body)
	switch {
	case err != nil && ok:
		t.Fatalf("%q: unescape took it as %q, encoding/json refuses it: %v", body, got, err)
	case err == nil && !ok:
		t.Fatalf("%q: unescape refused it, encoding/json gives %q", body, want)
	case err == nil && got != want:
		t.Fatalf("%q: unescape gives %q, encoding/json %q", body, got, want)
	}
}

func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, body := range []string{
		``, `plain`, `a\nb\tc\r\b\f\/\\\"`, `\u0041\u00e9\u2028\uFFFD\u0000`, `\ud83d\ude00`, `x\ud83d`, `\ud83dx`,
		`\ude00\ud83d`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`, `\ud83d\uzzzz`, `\ud83d\`, `\u12`, `\u12g4`, `\x41`, `\'`,
		`\`, "tab\there", "nul\x00", "\xff", "a\xc3", "\xed\xa0\x80", "é😀", "\xef\xbf\xbd", `\u00`, `ok\`,
	} {
		checkUnescape(t, []byte(body))
	}
	// Random bodies from the pieces strings are made of.
	pieces := []string{"a", "Z", " ", "é", "😀", "\xff", "\x01", "\t", `\n`, `\t`, `\"`, `\\`, `\/`, `\u0041`,
		`\u00e9`, `\ud83d`, `\ude00`, `\uD83D`, `\uDE00`, `\u`, `\`, `\q`, "\xed\xa0\x80", `\u2028`, "<>&"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b []byte
		for range rng.IntN(8) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		checkUnescape(t, b)
	}
}

func FuzzUnescape(f *testing.F) {
	for _, s := range []string{`a\nb`, `\ud83d\ude00`, `\u00e9`, "\xff", `\ud800\u0041`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkUnescape)
}
