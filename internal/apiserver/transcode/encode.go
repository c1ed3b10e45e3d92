package transcode

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// maxDepth is how deep JSON may nest, as encoding/json allows it.
const maxDepth = 10000

// Append appends to dst the protobuf message of the object data holds,
// as the type's generated Marshal writes it for the object encoding/json
// decodes from data. ok is false when the plan cannot tell that message
// exactly (see the package doc); dst is then returned as it was.
func (p *Plan) Append(dst, data []byte) (_ []byte, ok bool) {
	if len(data) > math.MaxInt32 {
		return dst, false
	}
	ix := indexes.Get().(*index)
	defer indexes.Put(ix)
	e := encoder{data: data, dst: dst, opens: ix.opens[:0], closes: ix.closes[:0]}
	defer func() { ix.opens, ix.closes = e.opens[:0], e.closes[:0] }()
	i := ws(data, 0)
	if i >= len(data) || data[i] != '{' {
		return dst, false
	}
	// First a pass that checks the JSON and notes where each object and
	// array ends; then the members of each object the message has are
	// found without reading what they hold again.
	end, ok := e.skip(i)
	if !ok || ws(data, end) != len(data) {
		return dst, false
	}
	e.indexed = true
	if _, ok := e.object(p.m, i); !ok {
		return dst, false
	}
	return e.dst, true
}

// index is where an object's objects and arrays start and end, kept
// for the next object.
type index struct{ opens, closes []int32 }

var indexes = sync.Pool{New: func() any { return new(index) }}

// encoder writes messages to dst from data's JSON.
type encoder struct {
	data  []byte
	dst   []byte
	depth int
	key   []byte // an escaped key, unescaped
	// opens and closes are where each object and array of data starts
	// and ends (the index after it), in the order they start; indexed:
	// they are complete.
	opens, closes []int32
	indexed       bool
}

// end returns the index after the object or array at data[i].
func (e *encoder) end(i int) int {
	at, _ := slices.BinarySearch(e.opens, int32(i))
	return int(e.closes[at])
}

// span is [start, end) of a JSON value in data; start 0 means no value
// (no member's value can start at the top object's brace).
type span struct{ start, end int }

// object writes message m's fields from the JSON object at data[i] and
// returns the index after it.
func (e *encoder) object(m *message, i int) (int, bool) {
	if m.bad || e.depth >= maxDepth {
		return 0, false
	}
	var buf [48]span
	var spans []span
	if m.slots <= len(buf) {
		spans = buf[:m.slots]
	} else {
		spans = make([]span, m.slots)
	}
	e.depth++
	defer e.leave()
	end, ok := e.members(i, func(key []byte, v span) bool {
		slot, found := m.keys[string(key)]
		if !found {
			// encoding/json would give the value to a field whose key
			// matches without regard to case.
			if slot, found = m.folds(key); !found {
				return true
			}
			if slot >= 0 {
				return false
			}
		}
		if slot < 0 {
			// A field the message leaves out (TypeMeta's, all strings):
			// encoding/json still refuses a value of another type.
			return e.data[v.start] == '"' || e.data[v.start] == 'n'
		}
		if spans[slot].start != 0 {
			return false // given twice: encoding/json's last wins, or merges
		}
		spans[slot] = v
		return true
	})
	if !ok {
		return 0, false
	}
	return end, e.fields(m, spans)
}

func (e *encoder) leave() { e.depth-- }

// folds returns the slot of the key of m's that key matches without
// regard to case (a superset of encoding/json's folding), if one does.
func (m *message) folds(key []byte) (slot int, found bool) {
	for _, name := range m.names {
		if (len(name) == len(key) || !isASCII(key)) && strings.EqualFold(name, string(key)) {
			return m.keys[name], true
		}
	}
	return 0, false
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fields writes m's fields in number order from the members' spans.
func (e *encoder) fields(m *message, spans []span) bool {
	for i := range m.fields {
		f := &m.fields[i]
		if f.inline {
			sub := f.value.msg
			e.dst = append(e.dst, f.tag...)
			at := e.open()
			if sub.bad || !e.fields(sub, spans[f.slot:f.slot+sub.slots]) {
				return false
			}
			e.close(at)
			continue
		}
		var v span
		if f.slot >= 0 {
			v = spans[f.slot]
		}
		if v.start == 0 || e.data[v.start] == 'n' {
			// Absent or null: the zero value (encoding/json leaves a
			// field null sets as it was, or nil).
			e.dst = append(e.dst, f.zero...)
			continue
		}
		if !e.value(&f.value, f.tag, v) {
			return false
		}
	}
	return true
}

// value writes tag and the value at v, not null, as c says.
func (e *encoder) value(c *coder, tag []byte, v span) bool {
	raw := e.data[v.start:v.end]
	switch c.kind {
	case kString:
		if raw[0] != '"' {
			return false
		}
		e.dst = append(e.dst, tag...)
		return e.str(raw[1 : len(raw)-1])
	case kBytes:
		if raw[0] != '"' {
			return false
		}
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') >= 0 {
			return false
		}
		e.dst = append(e.dst, tag...)
		at := e.open()
		n := len(e.dst)
		e.dst = append(e.dst, make([]byte, base64.StdEncoding.DecodedLen(len(s)))...)
		w, err := base64.StdEncoding.Decode(e.dst[n:], s)
		if err != nil {
			return false
		}
		e.dst = e.dst[:n+w]
		e.close(at)
		return true
	case kInt:
		n, ok := parseInt(raw, c.bits)
		if !ok {
			return false
		}
		e.dst = protowire.AppendVarint(append(e.dst, tag...), uint64(n))
		return true
	case kBool:
		var b byte
		switch raw[0] {
		case 't':
			b = 1
		case 'f':
		default:
			return false
		}
		e.dst = append(append(e.dst, tag...), b)
		return true
	case kFloat:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return false
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return false
		}
		e.dst = binary.LittleEndian.AppendUint64(append(e.dst, tag...), math.Float64bits(f))
		return true
	case kMessage:
		if raw[0] != '{' {
			return false
		}
		e.dst = append(e.dst, tag...)
		at := e.open()
		if _, ok := e.object(c.msg, v.start); !ok {
			return false
		}
		e.close(at)
		return true
	case kTime:
		sec, zero, ok := parseTime(raw)
		if !ok {
			return false
		}
		e.dst = append(e.dst, tag...)
		if zero {
			e.dst = append(e.dst, 0)
			return true
		}
		// metav1.Time's Marshal: a Timestamp of the seconds (nanos 0).
		e.dst = protowire.AppendVarint(e.dst, uint64(1+protowire.SizeVarint(uint64(sec))+2))
		e.dst = append(protowire.AppendVarint(append(e.dst, 0x08), uint64(sec)), 0x10, 0)
		return true
	case kFields:
		// metav1.FieldsV1 keeps the value's JSON as it is, in field 1.
		e.dst = protowire.AppendVarint(append(e.dst, tag...), uint64(1+protowire.SizeBytes(len(raw))))
		e.dst = protowire.AppendBytes(append(e.dst, 0x0a), raw)
		return true
	case kSpecial:
		p := reflect.New(c.typ)
		if json.Unmarshal(raw, p.Interface()) != nil {
			return false
		}
		b, err := p.Interface().(marshaler).Marshal()
		if err != nil {
			return false
		}
		e.dst = protowire.AppendBytes(append(e.dst, tag...), b)
		return true
	case kList:
		if raw[0] != '[' {
			return false
		}
		_, ok := e.elements(v.start, func(el span) bool { return e.element(c.elem, tag, el) })
		return ok
	case kMap:
		if raw[0] != '{' {
			return false
		}
		return e.entries(c, tag, v.start)
	}
	return false
}

// element writes tag and a list's element or a map's value, as value
// does; a null one is the zero value of its type, which the generated
// code writes in full, except a nil []byte, which it leaves out.
func (e *encoder) element(c *coder, tag []byte, v span) bool {
	if e.data[v.start] != 'n' {
		return e.value(c, tag, v)
	}
	switch c.kind {
	case kBytes:
		return true
	case kString:
		e.dst = append(append(e.dst, tag...), 0)
		return true
	case kSpecial:
		return e.value(c, tag, v) // its UnmarshalJSON takes null
	}
	return false
}

// entries writes a JSON object's members as map entries: key in field
// 1, value in field 2. The generated Marshal sorts the keys, so a map
// whose JSON keys are out of order (or given twice) is refused.
func (e *encoder) entries(c *coder, tag []byte, i int) bool {
	var prevBuf [64]byte
	var prev []byte
	first := true
	_, ok := e.members(i, func(key []byte, v span) bool {
		if !first && bytes.Compare(prev, key) >= 0 || !utf8.Valid(key) {
			return false
		}
		first = false
		prev = append(prevBuf[:0], key...)
		e.dst = append(e.dst, tag...)
		at := e.open()
		e.dst = protowire.AppendBytes(append(e.dst, 0x0a), key)
		if !e.element(c.elem, c.valueTag, v) {
			return false
		}
		e.close(at)
		return true
	})
	return ok
}

// str writes the length and bytes of a JSON string's contents (raw,
// between its quotes), unescaped.
func (e *encoder) str(raw []byte) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		if !utf8.Valid(raw) {
			return false // encoding/json would write U+FFFD for the bad bytes
		}
		e.dst = protowire.AppendBytes(e.dst, raw)
		return true
	}
	at := e.open()
	var ok bool
	if e.dst, ok = unquote(e.dst, raw); !ok {
		return false
	}
	e.close(at)
	return true
}

// open writes a one-byte length to be set by close, and returns where
// the contents start.
func (e *encoder) open() int {
	e.dst = append(e.dst, 0)
	return len(e.dst)
}

// close sets the length of what was written since open, moving it
// along when the length takes more than one byte.
func (e *encoder) close(at int) {
	n := len(e.dst) - at
	if n < 0x80 {
		e.dst[at-1] = byte(n)
		return
	}
	extra := protowire.SizeVarint(uint64(n)) - 1
	for range extra {
		e.dst = append(e.dst, 0)
	}
	copy(e.dst[at+extra:], e.dst[at:at+n])
	protowire.AppendVarint(e.dst[:at-1], uint64(n))
}

// members calls f with each member of the JSON object at data[i] (its
// key unescaped, its value's span), and returns the index after the
// object; false if the JSON is malformed or f said so.
func (e *encoder) members(i int, f func(key []byte, v span) bool) (int, bool) {
	d := e.data
	i = ws(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return 0, false
		}
		end, escaped, ok := e.stringEnd(i)
		if !ok {
			return 0, false
		}
		key := d[i+1 : end-1]
		i = ws(d, end)
		if i >= len(d) || d[i] != ':' {
			return 0, false
		}
		i = ws(d, i+1)
		start := i
		if i, ok = e.skip(i); !ok {
			return 0, false
		}
		// Unescaped after the value is skipped, which may use e.key.
		// A key is not checked for UTF-8 here: one that is not matches
		// no field (encoding/json would make it U+FFFD), and entries
		// checks map keys.
		if escaped && e.indexed {
			if e.key, ok = unquote(e.key[:0], key); !ok {
				return 0, false
			}
			key = e.key
		}
		if !f(key, span{start, i}) {
			return 0, false
		}
		var done bool
		if i, done, ok = next(d, i, '}'); !ok || done {
			return i, ok
		}
	}
}

// elements calls f with each element of the JSON array at data[i], and
// returns the index after the array.
func (e *encoder) elements(i int, f func(v span) bool) (int, bool) {
	d := e.data
	i = ws(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, true
	}
	for {
		start := i
		var ok bool
		if i, ok = e.skip(i); !ok || !f(span{start, i}) {
			return 0, false
		}
		var done bool
		if i, done, ok = next(d, i, ']'); !ok || done {
			return i, ok
		}
	}
}

// next reads what follows a member or an element that ends before d[i]:
// a comma, and the index of the next one; or the closing bracket, done,
// and the index after it.
func next(d []byte, i int, closing byte) (at int, done, ok bool) {
	i = ws(d, i)
	if i >= len(d) {
		return 0, false, false
	}
	switch d[i] {
	case ',':
		return ws(d, i+1), false, true
	case closing:
		return i + 1, true, true
	}
	return 0, false, false
}

// skip returns the index after the JSON value at data[i], checking it
// is well-formed.
func (e *encoder) skip(i int) (int, bool) {
	d := e.data
	if i >= len(d) {
		return 0, false
	}
	switch c := d[i]; {
	case c == '"':
		end, _, ok := e.stringEnd(i)
		return end, ok
	case c == '{' || c == '[':
		if e.indexed {
			return e.end(i), true
		}
		if e.depth >= maxDepth {
			return 0, false
		}
		at := len(e.opens)
		e.opens = append(e.opens, int32(i))
		e.closes = append(e.closes, 0)
		e.depth++
		var end int
		var ok bool
		if c == '{' {
			end, ok = e.members(i, func([]byte, span) bool { return true })
		} else {
			end, ok = e.elements(i, func(span) bool { return true })
		}
		e.depth--
		e.closes[at] = int32(end)
		return end, ok
	case c == 't':
		return literal(d, i, "true")
	case c == 'f':
		return literal(d, i, "false")
	case c == 'n':
		return literal(d, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return numberEnd(d, i)
	}
	return 0, false
}

func literal(d []byte, i int, lit string) (int, bool) {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// numberEnd returns the index after the JSON number at d[i].
func numberEnd(d []byte, i int) (int, bool) {
	if d[i] == '-' {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if !digits() {
		return 0, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return 0, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return 0, false
		}
	}
	return i, true
}

// stringEnd returns the index after the JSON string at data[i], and
// whether it has escapes. The first pass checks the string; once it has,
// the end is found by a search for the closing quote.
func (e *encoder) stringEnd(i int) (end int, escaped, ok bool) {
	if !e.indexed {
		return stringEnd(e.data, i)
	}
	d := e.data
	for at := i + 1; ; {
		j := bytes.IndexByte(d[at:], '"')
		if j < 0 {
			return 0, false, false
		}
		q := at + j
		if bytes.IndexByte(d[at:q], '\\') >= 0 {
			escaped = true
			n := 0
			for k := q - 1; d[k] == '\\'; k-- {
				n++
			}
			if n%2 == 1 { // an escaped quote
				at = q + 1
				continue
			}
		}
		return q + 1, escaped, true
	}
}

// stringEnd returns the index after the JSON string at d[i], and whether
// it has escapes, checking it is well-formed.
func stringEnd(d []byte, i int) (end int, escaped, ok bool) {
	i++
	// From one escape to the next, a run at a time: the run must hold no
	// control character, and the first quote not escaped ends the string.
	q := -1 // the first quote at or after i
	for {
		if q < i {
			j := bytes.IndexByte(d[i:], '"')
			if j < 0 {
				return 0, false, false
			}
			q = i + j
		}
		k := bytes.IndexByte(d[i:q], '\\')
		if k < 0 {
			if hasControl(d[i:q]) {
				return 0, false, false
			}
			return q + 1, escaped, true
		}
		if hasControl(d[i : i+k]) {
			return 0, false, false
		}
		escaped = true
		i += k + 1 // the escaped character
		switch d[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(d)-i < 5 {
				return 0, false, false
			}
			if _, ok := hex4(d[i+1 : i+5]); !ok {
				return 0, false, false
			}
			i += 4
		default:
			return 0, false, false
		}
		i++
	}
}

// hasControl reports whether b has a byte below 0x20.
func hasControl(b []byte) bool {
	i := 0
	for ; len(b)-i >= 8; i += 8 {
		if hasLess(binary.LittleEndian.Uint64(b[i:]), 0x20) != 0 {
			return true
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return true
		}
	}
	return false
}

const (
	lowBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// hasLess is not zero exactly when one of x's bytes is below n (n at
// most 0x80).
func hasLess(x uint64, n byte) uint64 { return (x - lowBits*uint64(n)) &^ x & highBits }

func ws(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unquote appends a JSON string's contents (well-formed, between its
// quotes) unescaped. It refuses what encoding/json would replace with
// U+FFFD: bytes that are not UTF-8 and surrogates not in a pair.
func unquote(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			// The run up to the next escape, whole: a backslash never
			// falls inside a UTF-8 sequence, so the run is valid UTF-8
			// exactly when each of its runes is.
			n := bytes.IndexByte(raw[i:], '\\')
			if n < 0 {
				n = len(raw) - i
			}
			run := raw[i : i+n]
			if !utf8.Valid(run) {
				return dst, false
			}
			dst = append(dst, run...)
			i += n
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				if len(raw)-i < 7 || raw[i+1] != '\\' || raw[i+2] != 'u' {
					return dst, false
				}
				r2, _ := hex4(raw[i+3 : i+7])
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return dst, false
				}
				i += 6
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
		i++
	}
	return dst, true
}

// parseInt reads a JSON integer as encoding/json reads it into an int of
// the given bits: no fraction, no exponent, within range.
func parseInt(raw []byte, bits int) (int64, bool) {
	neg := raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	limit := uint64(1) << (bits - 1)
	if neg {
		if u > limit {
			return 0, false
		}
		return -int64(u), true
	}
	if u >= limit {
		return 0, false
	}
	return int64(u), true
}

// parseTime reads a JSON string as metav1.Time's UnmarshalJSON does
// (RFC 3339), returning its Unix seconds and whether it is the zero
// time. The form the API writes, 2006-01-02T15:04:05Z, is read here;
// others by time.Parse.
func parseTime(raw []byte) (sec int64, zero, ok bool) {
	if raw[0] != '"' {
		return 0, false, false
	}
	s := raw[1 : len(raw)-1]
	if len(s) == 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':' && s[19] == 'Z' {
		y, ok1 := digits(s[0:4])
		mo, ok2 := digits(s[5:7])
		d, ok3 := digits(s[8:10])
		h, ok4 := digits(s[11:13])
		mi, ok5 := digits(s[14:16])
		se, ok6 := digits(s[17:19])
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && mo >= 1 && mo <= 12 && d >= 1 && h < 24 && mi < 60 && se < 60 &&
			d <= daysIn(time.Month(mo), y) {
			t := time.Date(y, time.Month(mo), d, h, mi, se, 0, time.UTC)
			return t.Unix(), t.IsZero(), true
		}
	}
	var str string
	if json.Unmarshal(raw, &str) != nil {
		return 0, false, false
	}
	t, err := time.Parse(time.RFC3339, str)
	if err != nil {
		return 0, false, false
	}
	return t.Unix(), t.IsZero(), true
}

func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
