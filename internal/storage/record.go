package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unique"
	"unsafe"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Record is a stored object kept as the store holds it: its JSON (without
// resourceVersion, as Store writes it) and what selectors need, read once
// by a scan instead of a decode. The watch cache keeps records, not
// decoded objects: a record costs little beyond its JSON, which it shares
// with the engine, and it is served by copying that JSON with the
// resourceVersion spliced in (AppendJSON), byte for byte what encoding the
// decoded object would give.
//
// A Record is read-only once made; its Value must not be modified.
type Record struct {
	Key   string
	Value []byte // the stored JSON; shared, read-only
	// Rev is the revision the object was written at: its resourceVersion.
	Rev             int64
	Name, Namespace string
	apiVersion      unique.Handle[string]
	kind            unique.Handle[string]
	// labels are metadata's labels; their strings are Value's bytes
	// (labels only serve selectors, which keep none of them).
	labels labelPairs
	// metaStart and metaEnd delimit metadata's JSON in Value (0, 0: no
	// metadata object), for DecodeMetadata. Offsets are int32, as a
	// record is kept for every object the cache holds; a Value of 2 GiB
	// or more is served the slow way.
	metaStart, metaEnd int32
	// at is where `"resourceVersion":"N"` goes in Value, and sep says
	// whether it needs a comma after it (sepAfter), before it
	// (sepBefore), or none (metadata was empty). at < 0: Value is not in
	// the form Store writes (a resourceVersion is stored, say), and
	// AppendJSON goes the slow way, through a decode.
	at  int32
	sep byte
	// typeMeta holds where the top-level apiVersion and kind members are
	// in Value, each with the comma after it, for AppendItemJSON; a zero
	// span: not there as one string member followed by another member.
	typeMeta [2]span
	// deleting: metadata.deletionTimestamp is set.
	deleting bool
	// metaForm says whether metadata is in the plain form
	// AppendObjectMetaJSON serves as it is (metaFormUnknown until asked).
	metaForm atomic.Int32

	// shared is the decoded object at Rev while some watcher holds it
	// (SharedRecord).
	mu     sync.Mutex
	shared weak.Pointer[Shared]
	// alt is another encoding of the object at Rev that a caller keeps
	// with the record (Alt), or altMadeOnce or altDropped.
	alt atomic.Pointer[altKept]
	// fact is a yes-or-no fact about the object at Rev that a caller
	// keeps with the record (Fact).
	fact atomic.Pointer[recordFact]
}

type recordFact struct {
	about any
	yes   bool
}

// Fact returns the fact a caller kept with the record about about (the
// registry keeps whether the object lacks any of its schema's defaults,
// about the schema), and whether one is kept.
func (r *Record) Fact(about any) (yes, known bool) {
	if f := r.fact.Load(); f != nil && f.about == about {
		return f.yes, true
	}
	return false, false
}

// SetFact keeps a fact about about with the record, in place of any
// other. about must be comparable.
func (r *Record) SetFact(about any, yes bool) {
	r.fact.Store(&recordFact{about: about, yes: yes})
}

// altKept is an encoding kept with a record, and what to call when the
// record lets go of it.
type altKept struct {
	b       []byte
	release func()
}

// Alt returns the other encoding a caller kept with the record (the HTTP
// layer keeps the protobuf form of built-in kinds, from the second time
// it is asked for), or nil.
func (r *Record) Alt() []byte {
	if p := r.alt.Load(); p != nil {
		return p.b
	}
	return nil
}

// altMadeOnce marks, in alt, a record whose other encoding was made once
// and not kept; altDropped, one whose encoding is no longer to be kept
// (DropAlt).
var altMadeOnce, altDropped altKept

// AltMadeBefore notes that a caller made the record's other encoding and
// did not keep it, and reports whether that happened before. A caller
// that keeps the encoding only when this says yes spends no memory on
// objects read once that way (an informer's first list), and keeps it
// for those read again. It reports no for a record whose encoding was
// dropped.
func (r *Record) AltMadeBefore() bool {
	return !r.alt.CompareAndSwap(nil, &altMadeOnce) && r.alt.Load() != &altDropped
}

// KeepAlt keeps b as the record's other encoding, unless one is kept
// already or was dropped, and reports whether it did; b must not be
// modified. release, if not nil, is called when DropAlt lets go of b.
func (r *Record) KeepAlt(b []byte, release func()) bool {
	var kept *altKept
	for {
		old := r.alt.Load()
		if old != nil && old != &altMadeOnce {
			return false
		}
		if kept == nil {
			kept = &altKept{b: b, release: release}
		}
		if r.alt.CompareAndSwap(old, kept) {
			return true
		}
	}
}

// DropAlt lets go of the other encoding kept with the record, and keeps
// none from then on: the watch cache calls it when the record's object is
// replaced or deleted, after which its record is rarely read again (a
// watch replaying history, a list at a past resourceVersion) but may be
// held for long in the cache's history.
func (r *Record) DropAlt() {
	if old := r.alt.Swap(&altDropped); old != nil && old.release != nil {
		old.release()
	}
}

// span is [start, end) of Value.
type span struct{ start, end int32 }

const (
	sepNone   = 0
	sepAfter  = 1
	sepBefore = 2
)

// NewRecord scans a stored object. The error is CodeInvalidObj when value
// is not a well-formed JSON object.
func NewRecord(key string, value []byte, rev int64) (*Record, error) {
	r := &Record{Key: key, Value: value, Rev: rev, at: -1}
	if err := r.scan(); err != nil {
		return nil, &Error{Code: CodeInvalidObj, Key: key, ResourceVersion: rev, Msg: "decoding the stored object", Err: err}
	}
	if len(value) > math.MaxInt32 {
		r.metaStart, r.metaEnd, r.at = 0, 0, -1
	}
	return r, nil
}

// scan finds metadata's name, namespace and labels, and where the
// resourceVersion belongs among metadata's keys (they are sorted, as
// AppendJSON writes them). Only malformed JSON is an error: a value of
// the wrong type reads as the decoded object's accessors read it (a name
// that is not a string is "", labels that are not all strings are none),
// and a value not in the form Store writes (no metadata object, a stored
// resourceVersion, keys out of order) is served through a decode, so that
// one odd object never stops a watch cache.
func (r *Record) scan() error {
	s := scanner{data: r.Value}
	found := false
	metas := 0      // how often metadata came
	var seen [2]int // how often apiVersion and kind came
	err := s.object(func(key string) error {
		if key == "apiVersion" || key == "kind" {
			i := 0
			if key == "kind" {
				i = 1
			}
			seen[i]++
			if s.peek() != '"' {
				return s.skip()
			}
			start := s.keyStart
			v, err := s.str()
			if err != nil {
				return err
			}
			if i == 1 {
				r.kind = unique.Make(v)
			} else {
				r.apiVersion = unique.Make(v)
			}
			if s.peek() == ',' && s.pos < math.MaxInt32 {
				r.typeMeta[i] = span{int32(start), int32(s.pos + 1)}
			}
			return nil
		}
		if key != "metadata" {
			return s.skip()
		}
		if metas++; metas > 1 {
			// Given again: a decode takes the last one, and so does the
			// record; the value is served through a decode (below).
			r.Name, r.Namespace, r.labels, r.deleting = "", "", nil, false
			r.metaStart, r.metaEnd, r.at, found = 0, 0, -1, false
		}
		if s.peek() != '{' {
			return s.skip()
		}
		found = true
		r.metaStart = int32(s.pos)
		defer func() { r.metaEnd = int32(s.pos) }()
		inOrder, prevKey, empty := true, "", true
		err := s.object(func(key string) error {
			if key <= prevKey && !empty {
				inOrder = false // out of order, or given twice: decode's last one wins
			}
			prevKey = key
			if r.at < 0 && key > "resourceVersion" {
				r.at, r.sep = int32(s.keyStart), sepAfter
			}
			empty = false
			switch key {
			case "resourceVersion":
				inOrder = false // stored with one: serve through a decode
				return s.skip()
			case "deletionTimestamp":
				r.deleting = s.peek() == '"' // as the accessor reads it: null or another type is unset
				return s.skip()
			case "name", "namespace":
				if s.peek() != '"' {
					if key == "name" { // as the accessors read it, should it come again
						r.Name = ""
					} else {
						r.Namespace = ""
					}
					return s.skip()
				}
				b, v, plain, err := s.strBytes()
				if plain {
					// The key ends in namespace/name: share its bytes.
					v = keySegment(r.Key, b, key == "namespace")
				}
				if key == "name" {
					r.Name = v
				} else {
					r.Namespace = v
				}
				return err
			case "labels":
				r.labels = nil
				if s.peek() != '{' {
					return s.skip()
				}
				var pairs labelPairs
				strs := true
				if err := s.objectBytes(func(k string) error {
					if s.peek() != '"' {
						strs = false
						return s.skip()
					}
					b, v, plain, err := s.strBytes()
					if plain {
						v = bytesString(b)
					}
					pairs = append(pairs, k, v)
					return err
				}); err != nil {
					return err
				}
				if strs {
					r.labels = pairs.sorted()
				}
				return nil
			}
			return s.skip()
		})
		if err != nil {
			return err
		}
		if r.at < 0 {
			// Before metadata's closing brace, which the scanner has passed.
			r.at = int32(s.pos - 1)
			if empty {
				r.sep = sepNone
			} else {
				r.sep = sepBefore
			}
		}
		if !inOrder {
			r.at = -1
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found || metas > 1 {
		r.at = -1
	}
	if seen != [2]int{1, 1} {
		r.typeMeta = [2]span{}
	}
	return nil
}

// Deleting reports whether the object has a deletionTimestamp: it is
// being deleted, waiting for its finalizers.
func (r *Record) Deleting() bool { return r.deleting }

// TypeMeta reads apiVersion and kind from the top of a JSON object as
// encoding/json decodes them into a struct of those two string fields
// (keys matched without regard to case, the last one winning, null
// leaving a field empty), for a fraction of its cost: one scan, no
// reflection. It does not validate the JSON as a decode would; ok is
// false when it cannot tell (not an object, a value of another type,
// malformed where it looked), and the caller decodes instead.
func TypeMeta(data []byte) (apiVersion, kind string, ok bool) {
	s := scanner{data: data}
	err := s.object(func(key string) error {
		var field *string
		switch {
		case strings.EqualFold(key, "apiVersion"):
			field = &apiVersion
		case strings.EqualFold(key, "kind"):
			field = &kind
		default:
			return s.skip()
		}
		switch s.peek() {
		case '"':
			v, err := s.str()
			*field = v
			return err
		case 'n':
			return s.skip() // null: left as it was, as encoding/json does
		}
		return errSyntax // another type: the decode says what is wrong
	})
	if err != nil {
		return "", "", false
	}
	if s.ws(); s.pos != len(data) {
		return "", "", false
	}
	return apiVersion, kind, true
}

// APIVersion is the object's apiVersion as stored.
func (r *Record) APIVersion() string {
	var zero unique.Handle[string]
	if r.apiVersion == zero {
		return ""
	}
	return r.apiVersion.Value()
}

// DecodeMetadata returns the object with only its apiVersion, kind and
// metadata, without managedFields, with resourceVersion rev (the caller
// owns it): what an in-process controller that reads metadata needs, for
// a fraction of a whole decode. managedFields are most of a typical
// object's metadata, and no in-process controller reads them.
func (r *Record) DecodeMetadata(rev int64) (*unstructured.Unstructured, error) {
	if r.metaEnd == 0 {
		obj, err := r.Decode(rev)
		if err == nil {
			unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields")
		}
		return obj, err
	}
	data := r.Value[r.metaStart:r.metaEnd]
	meta, ok := decodeObjectWithout(data, "managedFields")
	if !ok {
		if err := utiljson.Unmarshal(data, &meta); err != nil {
			return nil, &Error{Code: CodeInvalidObj, Key: r.Key, ResourceVersion: r.Rev, Msg: "decoding the stored object's metadata", Err: err}
		}
		delete(meta, "managedFields")
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"metadata": meta}}
	var zero unique.Handle[string]
	if r.apiVersion != zero {
		obj.Object["apiVersion"] = r.apiVersion.Value()
	}
	if r.kind != zero {
		obj.Object["kind"] = r.kind.Value()
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}

// DecodeMembers returns the object's top-level members named in members,
// decoded (the caller owns them), and no others: what a table's cells
// read. Metadata, unless named, is passed over without a look; named,
// it has resourceVersion rev.
func (r *Record) DecodeMembers(rev int64, members []string) (map[string]any, error) {
	if len(members) == 0 {
		return map[string]any{}, nil
	}
	d := jsonDecoder{scanner: scanner{data: r.Value}, keep: members}
	withMeta := slices.Contains(members, "metadata")
	if !withMeta && r.metaEnd != 0 {
		d.jump = span{r.metaStart, r.metaEnd}
	}
	m, _, ok := decodeTop(d)
	if !ok {
		full, err := r.Decode(rev)
		if err != nil {
			return nil, err
		}
		m = map[string]any{}
		for _, k := range members {
			if v, ok := full.Object[k]; ok {
				m[k] = v
			}
		}
		return m, nil
	}
	if md, ok := m["metadata"].(map[string]any); ok && withMeta {
		md["resourceVersion"] = strconv.FormatInt(rev, 10)
	}
	return m, nil
}

// CountEntries is the number of entries in the object's top-level members
// named: an object's members and an array's elements, counted without
// decoding them (an absent or null member counts none), as a table's
// cell that counts a ConfigMap's data needs. false when a member is
// anything else, or the value is not one the scanner reads.
func (r *Record) CountEntries(members []string) (int, bool) {
	s := scanner{data: r.Value}
	n := 0
	count := func(string) error { n++; return s.skip() }
	err := s.objectBytes(func(key string) error {
		if s.ws(); r.metaEnd != 0 && s.pos == int(r.metaStart) {
			s.pos = int(r.metaEnd) // metadata, known to be valid
			return nil
		}
		if !slices.Contains(members, key) {
			return s.skip()
		}
		switch s.peek() {
		case '{':
			return s.object(count)
		case '[':
			return s.array(func() error { n++; return s.skip() })
		case 'n':
			return s.skip()
		}
		return errSyntax
	})
	if s.ws(); err != nil || s.pos != len(s.data) {
		return 0, false
	}
	return n, true
}

// CreationTimestamp is metadata.creationTimestamp as stored, "" when
// there is none or it is not a string. It may share the record's bytes.
func (r *Record) CreationTimestamp() string {
	if r.metaEnd == 0 {
		return ""
	}
	s := scanner{data: r.Value[r.metaStart:r.metaEnd]}
	var ts string
	s.objectBytes(func(key string) error {
		if key != "creationTimestamp" {
			return s.skip()
		}
		if s.peek() != '"' {
			ts = ""
			return s.skip()
		}
		b, v, plain, err := s.strBytes()
		if err != nil {
			return err
		}
		if plain {
			v = bytesString(b) // the record's bytes, never modified: no copy
		}
		ts = v
		if r.at < 0 {
			return nil // not as Store writes it: a key may come again, and the last wins
		}
		// Keys in Store's order come once each: what follows
		// (managedFields, most of the metadata) need not be read. A
		// table row reads this.
		return errFound
	})
	return ts
}

// errFound stops a scan that has found what it looked for.
var errFound = errors.New("found")

// Labels returns the object's labels for a label selector.
func (r *Record) Labels() labels.Labels { return r.labels }

// AppendJSON appends the object's JSON with resourceVersion rev (its own
// Rev, or a delete's revision), without a trailing newline.
func (r *Record) AppendJSON(b []byte, rev int64) ([]byte, error) {
	if r.at < 0 {
		obj, err := r.Decode(rev)
		if err != nil {
			return nil, err
		}
		return AppendJSON(b, obj.Object)
	}
	return spliceRV(b, bytes.TrimSuffix(r.Value, []byte("\n")), int(r.at), r.sep, rev), nil
}

// AppendItemJSON is AppendJSON without the object's apiVersion and kind:
// an item of a built-in kind's list, as kube-apiserver writes it (the
// list's own apiVersion and kind say what its items are; client-go's
// unstructured decoder puts them back into items that lack them).
func (r *Record) AppendItemJSON(b []byte, rev int64) ([]byte, error) {
	av, k := r.typeMeta[0], r.typeMeta[1]
	if r.at < 0 || av.end == 0 || k.end == 0 || av.end > k.start || k.end > r.metaStart || k.end > r.at {
		obj, err := r.Decode(rev)
		if err != nil {
			return nil, err
		}
		delete(obj.Object, "apiVersion")
		delete(obj.Object, "kind")
		return AppendJSON(b, obj.Object)
	}
	v := bytes.TrimSuffix(r.Value, []byte("\n"))
	b = append(b, v[:av.start]...)
	b = append(b, v[av.end:k.start]...)
	return spliceRV(b, v[k.end:], int(r.at-k.end), r.sep, rev), nil
}

// Decode returns the object with resourceVersion rev; the caller owns it.
func (r *Record) Decode(rev int64) (*unstructured.Unstructured, error) {
	obj, err := unmarshalObject(r.Value)
	if err != nil {
		return nil, &Error{Code: CodeInvalidObj, Key: r.Key, ResourceVersion: r.Rev, Msg: "decoding the stored object", Err: err}
	}
	obj.SetResourceVersion(strconv.FormatInt(rev, 10))
	return obj, nil
}

// MatchesRecord reports whether the object of r is selected. Field
// selectors read metadata.name and metadata.namespace from the record;
// any other field decodes the object, once, for the kind's Fields.
func (p Predicate) MatchesRecord(r *Record) bool {
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(r.labels) {
		return false
	}
	if p.Field == nil || p.Field.Empty() {
		return true
	}
	return p.Field.Matches(&recordFields{r: r, of: p.Fields})
}

// recordFields are a record's fields for a field selector (fields.Fields).
type recordFields struct {
	r       *Record
	of      func(*unstructured.Unstructured) fields.Set // nil: name and namespace only
	set     fields.Set
	decoded bool
}

func (f *recordFields) Has(field string) bool { _, ok := f.lookup(field); return ok }
func (f *recordFields) Get(field string) string {
	v, _ := f.lookup(field)
	return v
}

func (f *recordFields) lookup(field string) (string, bool) {
	switch field {
	case "metadata.name":
		return f.r.Name, true
	case "metadata.namespace":
		return f.r.Namespace, true
	}
	if f.of == nil {
		return "", false
	}
	if !f.decoded {
		f.decoded = true
		if obj, err := f.r.Decode(f.r.Rev); err == nil {
			f.set = f.of(obj)
		}
	}
	v, ok := f.set[field]
	return v, ok
}

// labelPairs are labels as key, value, key, value…, sorted by key: a
// labels.Labels that costs two strings per label.
type labelPairs []string

func (l labelPairs) sorted() labelPairs {
	inOrder := true // as stored: AppendJSON sorts keys
	for i := 2; i+1 < len(l); i += 2 {
		if l[i-2] >= l[i] {
			inOrder = false
			break
		}
	}
	if inOrder {
		return append(make(labelPairs, 0, len(l)&^1), l[:len(l)&^1]...)
	}
	type kv struct{ k, v string }
	pairs := make([]kv, 0, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		pairs = append(pairs, kv{l[i], l[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b kv) int {
		switch {
		case a.k < b.k:
			return -1
		case a.k > b.k:
			return 1
		}
		return 0
	})
	out := make(labelPairs, 0, len(l))
	for i, p := range pairs {
		if i > 0 && pairs[i-1].k == p.k {
			out[len(out)-1] = p.v // the last of a repeated key wins, as decoding does
			continue
		}
		out = append(out, p.k, p.v)
	}
	return out
}

func (l labelPairs) find(key string) (int, bool) {
	lo, hi := 0, len(l)/2
	for lo < hi {
		m := (lo + hi) / 2
		switch k := l[2*m]; {
		case k == key:
			return m, true
		case k < key:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// Has implements labels.Labels.
func (l labelPairs) Has(key string) bool { _, ok := l.find(key); return ok }

// Get implements labels.Labels.
func (l labelPairs) Get(key string) string {
	if i, ok := l.find(key); ok {
		return l[2*i+1]
	}
	return ""
}

// Lookup implements labels.Labels.
func (l labelPairs) Lookup(key string) (string, bool) {
	if i, ok := l.find(key); ok {
		return l[2*i+1], true
	}
	return "", false
}

// scanner reads just enough JSON to find keys and skip values. It
// trusts nothing: malformed input is an error, never a panic.
type scanner struct {
	data     []byte
	pos      int
	keyStart int // where the key object() last handed over starts
	// viewKeys: object hands over plain keys as the data's bytes
	// (bytesString), not copies.
	viewKeys bool
}

var errSyntax = errors.New("malformed JSON")

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// object reads an object, calling f with each key; f must read the value.
func (s *scanner) object(f func(key string) error) error {
	if s.peek() != '{' {
		return errSyntax
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		s.ws()
		s.keyStart = s.pos
		key, err := s.key()
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return errSyntax
		}
		s.pos++
		if err := f(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return errSyntax
		}
	}
}

// str reads a string as encoding/json does: one without escapes, control
// bytes or invalid UTF-8 is taken as it is (the member names of metadata
// and managedFields from one set of constants, without an allocation);
// any other is unescaped as encoding/json would (unescape: invalid UTF-8
// replaced), and what that refuses (control bytes, a bad escape) goes to
// encoding/json for its error.
func (s *scanner) str() (string, error) {
	b, v, plain, err := s.strBytes()
	if plain {
		if k, ok := commonKey(b); ok {
			return k, nil
		}
		return string(b), nil
	}
	return v, err
}

// strBytes reads a string as str does, without a copy when it is taken
// as it is: then plain is true and b is its bytes in the data, else v is
// its value.
func (s *scanner) strBytes() (b []byte, v string, plain bool, err error) {
	start, escaped, err := s.strEnd()
	if err != nil {
		return nil, "", false, err
	}
	raw := s.data[start:s.pos]
	if body := raw[1 : len(raw)-1]; !escaped && plainText(body) {
		return body, "", true, nil
	}
	if u, ok := unescape(raw[1 : len(raw)-1]); ok {
		return nil, u, false, nil
	}
	var u string // not v: taking a result's address would allocate it on every call
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, "", false, err
	}
	return nil, u, false, nil
}

// key reads an object's key: with str, or as bytesString of the data
// when it is plain text and viewKeys is set.
func (s *scanner) key() (string, error) {
	if !s.viewKeys {
		return s.str()
	}
	b, v, plain, err := s.strBytes()
	if plain {
		v = bytesString(b)
	}
	return v, err
}

// objectBytes is object with viewKeys set.
func (s *scanner) objectBytes(f func(key string) error) error {
	was := s.viewKeys
	s.viewKeys = true
	defer func() { s.viewKeys = was }()
	return s.object(f)
}

// bytesString is b as a string without a copy: only for the bytes of a
// Record's Value, which are never modified.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// keySegment returns b as a string: the last segment of key when that is
// b (the name), or the one before it when namespace is true, sharing
// key's bytes; otherwise a copy.
func keySegment(key string, b []byte, namespace bool) string {
	i := strings.LastIndexByte(key, '/')
	if namespace && i > 0 {
		key = key[:i]
		i = strings.LastIndexByte(key, '/')
	}
	if seg := key[i+1:]; i >= 0 && seg == string(b) {
		return seg
	}
	return string(b)
}

// strEnd moves past a string, reporting where it began and whether it
// has escapes.
func (s *scanner) strEnd() (start int, escaped bool, err error) {
	if s.peek() != '"' {
		return 0, false, errSyntax
	}
	start = s.pos
	end, escaped := stringEnd(s.data[s.pos+1:])
	if end < 0 {
		return 0, false, errSyntax
	}
	s.pos += end + 2
	return start, escaped, nil
}

// array reads an array, calling f at each element, which must move past
// it.
func (s *scanner) array(f func() error) error {
	if s.peek() != '[' {
		return errSyntax
	}
	s.pos++
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		if err := f(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return errSyntax
		}
	}
}

// skip moves past one value.
func (s *scanner) skip() error {
	switch c := s.peek(); c {
	case '{':
		return s.object(func(string) error { return s.skip() })
	case '[':
		return s.array(s.skip)
	case '"':
		_, _, err := s.strEnd()
		return err
	case 0:
		return errSyntax
	default: // a number, true, false or null
		start := s.pos
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if s.pos == start {
					return errSyntax
				}
				return nil
			}
			s.pos++
		}
		return errSyntax
	}
}

// RecordList is a list of records: a page of a list, as Store.ListRecords
// and the watch cache read it.
type RecordList struct {
	// Items are served each at its own Rev.
	Items           []*Record
	ResourceVersion int64
	Continue        string
	// Remaining is the count of objects after this page, when known.
	Remaining *int64
}

// Decode returns the list as objects the caller owns.
func (l *RecordList) Decode() (*unstructured.UnstructuredList, error) { return l.decode(false) }

// DecodeMetadata returns the list with only each object's apiVersion,
// kind and metadata (Record.DecodeMetadata).
func (l *RecordList) DecodeMetadata() (*unstructured.UnstructuredList, error) { return l.decode(true) }

func (l *RecordList) decode(metadataOnly bool) (*unstructured.UnstructuredList, error) {
	out := &unstructured.UnstructuredList{Object: map[string]any{}}
	if len(l.Items) > 0 {
		out.Items = make([]unstructured.Unstructured, len(l.Items))
	}
	for i, r := range l.Items {
		decode := r.Decode
		if metadataOnly {
			decode = r.DecodeMetadata
		}
		obj, err := decode(r.Rev)
		if err != nil {
			return nil, err
		}
		out.Items[i] = *obj
	}
	out.SetResourceVersion(strconv.FormatInt(l.ResourceVersion, 10))
	if l.Continue != "" { // omitted when empty, as ListMeta's omitempty does
		out.SetContinue(l.Continue)
	}
	out.SetRemainingItemCount(l.Remaining)
	return out, nil
}

// AppendJSON appends the list as apiVersion and kind: the bytes AppendList
// gives for the decoded list, written from the records' JSON. With
// bareItems, the items go without their apiVersion and kind
// (AppendItemJSON), as a built-in kind's list does upstream; without, the
// metadata always has a continue (empty on the last page), as a custom
// resource's list does upstream.
func (l *RecordList) AppendJSON(b []byte, apiVersion, kind string, bareItems bool) ([]byte, error) {
	return l.WriteJSON(b, apiVersion, kind, bareItems, 0, nil)
}

// WriteJSON is AppendJSON in pieces: whenever b holds flushAt bytes or
// more after an item, it is handed to flush and emptied, so that a list
// of any length is written through a buffer of about flushAt. It
// returns the last piece, which the caller writes. flush's error ends
// it. A nil flush never flushes.
func (l *RecordList) WriteJSON(b []byte, apiVersion, kind string, bareItems bool, flushAt int, flush func([]byte) error) ([]byte, error) {
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, apiVersion)
	b = append(b, `,"items":[`...)
	for i, r := range l.Items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if bareItems {
			b, err = r.AppendItemJSON(b, r.Rev)
		} else {
			b, err = r.AppendJSON(b, r.Rev)
		}
		if err != nil {
			return nil, err
		}
		if flush != nil && len(b) >= flushAt {
			if err := flush(b); err != nil {
				return nil, err
			}
			b = b[:0]
		}
	}
	b = append(b, `],"kind":`...)
	b = appendString(b, kind)
	b = append(b, `,"metadata":{`...)
	if l.Continue != "" || !bareItems {
		// A custom resource's list (its items not bare) is upstream's
		// UnstructuredList, which always has a continue, empty at the end.
		b = append(b, `"continue":`...)
		b = appendString(b, l.Continue)
		b = append(b, ',')
	}
	if l.Remaining != nil {
		b = append(b, `"remainingItemCount":`...)
		b = strconv.AppendInt(b, *l.Remaining, 10)
		b = append(b, ',')
	}
	b = append(b, `"resourceVersion":"`...)
	b = strconv.AppendInt(b, l.ResourceVersion, 10)
	return append(b, `"}}`...), nil
}
