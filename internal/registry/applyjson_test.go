package registry

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// checkApplyJSON fails t when applyJSON takes data and decodes it to
// anything but what yaml.Unmarshal (parseApply's decode) gives, or when
// YAML's strict decode, which parseApply skips for what applyJSON takes,
// would have refused it.
func checkApplyJSON(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := applyJSON(data)
	if !ok {
		return false
	}
	var want map[string]any
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatalf("%s: taken, but YAML refuses it: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", data, got, want)
	}
	if err := yaml.UnmarshalStrict(data, &map[string]any{}); err != nil {
		t.Fatalf("%s: taken, but YAML's strict decode refuses it: %v", data, err)
	}
	return true
}

// Apply configurations as JSON, as clients send them, and odd ones:
// random objects with integers, floats, exponents, escapes, non-ASCII and
// control characters, YAML's special words and keys, spaces, tabs and
// newlines, repeated members. What applyJSON takes decodes as YAML
// decodes it.
func TestApplyJSONMatchesYAML(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	strs := []string{"", "x", "nginx:1.27", "yes", "no", "on", "~", "null", "true", "1e3", "0x1F", "<<", "&a", "*a", "!tag",
		"a: b", "- x", "#c", "é", "\t", "\n", `q"uote`, `back\slash`, "\u2028", "\x7f", "  spaced  ", "{}", "[]",
		"a = 1\nb = two\n", "\r\n", "\x00", "\x1b[0m", "<&>", "😀", "tab\there"}
	nums := []any{0, 1, -1, 42, 1 << 40, int64(1) << 53, int64(1)<<62 + 1, 1.5, math.Copysign(0, -1), 1e3, 1e21, 0.1}
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.IntN(10); {
		case n < 3 && depth < 4:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[strs[rng.IntN(len(strs))]] = value(depth + 1)
			}
			return m
		case n < 4 && depth < 4:
			l := []any{}
			for range rng.IntN(3) {
				l = append(l, value(depth+1))
			}
			return l
		case n < 7:
			return strs[rng.IntN(len(strs))]
		case n < 9:
			return nums[rng.IntN(len(nums))]
		default:
			return []any{true, false, nil}[rng.IntN(3)]
		}
	}
	taken, escaped := 0, 0
	for i := range 5000 {
		obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": fmt.Sprint("a", i)}}
		for range rng.IntN(4) {
			obj[strs[rng.IntN(len(strs))]] = value(0)
		}
		if rng.IntN(3) == 0 { // as client-go sends one: plain
			obj = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "labels": map[string]any{"app": "x"}},
				"data": map[string]any{"k": strings.Repeat("v", rng.IntN(50)), "n": fmt.Sprint(i)}, "count": i}
		}
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		switch rng.IntN(8) {
		case 0: // indented, as a file
			data, _ = json.MarshalIndent(obj, "", "  ")
		case 1: // tabs
			data, _ = json.MarshalIndent(obj, "", "\t")
		case 2: // a repeated member
			data = append([]byte(`{"kind":"ConfigMap",`), data[1:]...)
		case 3: // a number as written by hand
			data = append([]byte(fmt.Sprintf(`{"x":%s,`, []string{"1E3", "1e+3", "-0", "007", "1.0", "12345678901234567890"}[rng.IntN(6)])), data[1:]...)
		}
		if checkApplyJSON(t, data) {
			taken++
			if strings.Contains(string(data), `\`) {
				escaped++
			}
		}
	}
	t.Logf("taken: %d of 5000, %d with escapes", taken, escaped)
	if taken < 1500 || escaped < 300 {
		t.Errorf("taken: %d of 5000, %d with escapes, want more", taken, escaped)
	}
	for _, body := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":"1"}}`,
		"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\"\n}\n",
		`{"a":"line\nline\ttab\r\b\f\"q\" \\"}`, `{"a":"\u00e9\u0000\u001f\u2028\uFFFD"}`, `{"k\n":"v"}`,
		`{"a":"é","ключ":"値😀"}`,
	} {
		if !checkApplyJSON(t, []byte(body)) {
			t.Errorf("%s: not taken", body)
		}
	}
	for _, body := range []string{
		`apiVersion: v1`, `{"a":1e3}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":"x\/y"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":"\udc00"}`, `{"a":"\u00g0"}`, `{"a":"\u00"}`, `{"a":"\x41"}`, `{"a":"\e"}`, `{"a":"\`, `{"\u003c\u003c":{"a":1}}`, `{"<<":{"a":1}}`, "{\"a\":\t1}",
		`{"a":-0}`, `{"a":1234567890123456}`, `[]`, `null`, `{"a":1}x`, strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		if checkApplyJSON(t, []byte(body)) {
			t.Errorf("%s: taken", body)
		}
	}
}

// FuzzApplyJSON: whatever applyJSON takes decodes as YAML decodes it.
func FuzzApplyJSON(f *testing.F) {
	for _, s := range []string{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":"1"}}`,
		`{"a":[1,-2,{"b":null}],"c":true}`, "{\n \"a\": \"b\"\n}", `{"a":1e3}`, `{"<<":{}}`,
		`{"a":"x\ny\t\"\u00e9\u2028"}`, `{"a":"\/\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkApplyJSON(t, data)
	})
}

// Every character outside ASCII, written as it is in a value and in a
// key: what applyJSON takes (yamlRune) decodes as YAML decodes it, and
// the characters YAML reads otherwise are left to YAML.
func TestApplyJSONCharacters(t *testing.T) {
	taken := 0
	for r := rune(0x80); r <= utf8.MaxRune; r++ {
		if r > 0xffff && r%61 != 0 { // every 61st beyond the BMP
			continue
		}
		c := string(r) // a surrogate half becomes U+FFFD
		body := []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"a` + c + `b":"x` + c + `y"}}`)
		if checkApplyJSON(t, body) {
			taken++
		} else if yamlRune(r) && (r < 0xd800 || r > 0xdfff) {
			t.Fatalf("U+%04X: not taken, though yamlRune takes it", r)
		}
	}
	for _, body := range []string{"{\"a\":\"x\u0085y\"}", "{\"a\":\"x\u2028y\"}", "{\"a\":\"\ufeff\"}", "{\"a\":\"\u0080\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\xed\xa0\x80\"}"} {
		if _, ok := applyJSON([]byte(body)); ok {
			t.Errorf("%q: taken", body)
		}
	}
	t.Logf("taken: %d characters", taken)
}
