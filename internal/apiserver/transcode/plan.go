package transcode

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Plan transcodes the JSON of one Go type's objects into the type's
// protobuf message.
type Plan struct{ m *message }

// marshaler is what k8s.io/api's generated types implement.
type marshaler interface {
	Marshal() ([]byte, error)
}

var (
	mu       sync.Mutex
	plans    = map[reflect.Type]*Plan{}
	messages = map[reflect.Type]*message{} // shared by the plans, under mu
)

// For returns the plan for objects of the struct type t (corev1.ConfigMap,
// say), compiled on first use; nil when t has no protobuf form a plan can
// write.
func For(t reflect.Type) *Plan {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := plans[t]; ok {
		return p
	}
	var p *Plan
	if t.Kind() == reflect.Struct {
		if m := compile(t); !m.bad {
			p = &Plan{m}
		}
	}
	plans[t] = p
	return p
}

// message is the plan of one struct type. A JSON object of the type
// fills slots, one per JSON member the message encodes (its own fields'
// and, after them, its inline fields' members); its fields are then
// written in field-number order, each from its slot or, when the JSON
// lacks it, as the generated Marshal writes the field's zero value.
type message struct {
	fields []field
	slots  int
	// keys maps a JSON key to its slot; -1 for a key the message has
	// but does not encode (TypeMeta's apiVersion and kind).
	keys  map[string]int
	names []string // every key of keys, to refuse a case-folded match
	// bad: the type cannot be transcoded (no generated Marshal, a JSON
	// key given to two fields); an object of it is refused.
	bad bool
}

// field is one protobuf field of a message.
type field struct {
	num  protowire.Number
	tag  []byte
	slot int // its JSON member's slot; -1: none (json:"-")
	// zero is what the generated Marshal writes for the field's zero
	// value: usually nothing for pointers, slices and maps; the tag and
	// an empty string, a 0 or an empty message otherwise.
	zero   []byte
	inline bool // its members are the object's own (an embedded struct)
	value  coder
}

// kind is how a value is transcoded.
type kind uint8

const (
	kNone    kind = iota // a type a plan cannot write: refused when present
	kString              // a JSON string: length-delimited bytes
	kBytes               // base64 in JSON: length-delimited bytes
	kInt                 // a JSON integer: a varint (negative ones sign-extended)
	kBool                // true or false: a varint
	kFloat               // a JSON number: fixed64
	kMessage             // a JSON object: a nested message
	kTime                // metav1.Time: a Timestamp of its seconds
	kFields              // metav1.FieldsV1: the JSON itself in field 1
	kSpecial             // a type with its own JSON form: its UnmarshalJSON and Marshal
	kList                // a JSON array: the field repeated, unpacked
	kMap                 // a JSON object: an entry message per key, keys in order
)

// coder says how to write a value of a field (or of a list's element, or
// a map's value).
type coder struct {
	kind kind
	bits int            // kInt: 32 or 64
	msg  *message       // kMessage, and an inline field's message
	typ  reflect.Type   // kSpecial
	elem *coder         // kList: the element's; kMap: the value's
	wire protowire.Type // how the generated code writes it
	// valueTag is a map entry's value's tag: field 2.
	valueTag []byte
}

var (
	timeType        = reflect.TypeFor[metav1.Time]()
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	marshalerType   = reflect.TypeFor[marshaler]()
)

// compile returns the message of struct type t, compiling it (and the
// types it refers to) unless it was before. A type that refers back to
// itself gets the message being compiled.
func compile(t reflect.Type) *message {
	if m, ok := messages[t]; ok {
		return m
	}
	m := &message{keys: map[string]int{}}
	messages[t] = m
	zero, ok := reflect.New(t).Interface().(marshaler)
	if !ok {
		m.bad = true
		return m
	}
	zb, err := zero.Marshal()
	if err != nil {
		m.bad = true
		return m
	}
	zeros := splitFields(zb)
	if zeros == nil {
		m.bad = true
		return m
	}
	var inline []int // indexes in m.fields, given slots after the others
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, opts, promoted := jsonName(sf)
		ptag := sf.Tag.Get("protobuf")
		if ptag == "" {
			// Not in the message: TypeMeta's members. encoding/json
			// still refuses a value of the wrong type for them, which
			// the encoder checks for strings only.
			var names []string
			strs := true
			if promoted {
				names, strs = jsonNames(sf.Type), allStrings(sf.Type)
			} else if name != "" {
				names, strs = []string{name}, sf.Type.Kind() == reflect.String
			}
			for _, k := range names {
				m.addKey(k, -1)
			}
			if !strs {
				m.bad = true
			}
			continue
		}
		num, ok := parseTag(ptag)
		if !ok {
			m.bad = true
			continue
		}
		f := field{num: num, slot: -1, zero: zeros[num]}
		switch {
		case promoted:
			if sf.Type.Kind() != reflect.Struct {
				m.bad = true
				continue
			}
			f.inline = true
			f.value = coder{kind: kMessage, msg: compile(sf.Type), wire: protowire.BytesType}
			if f.value.msg.bad {
				m.bad = true
			}
			inline = append(inline, len(m.fields))
		case name != "":
			f.slot = m.slots
			m.slots++
			m.addKey(name, f.slot)
			if strings.Contains(opts, ",string") {
				f.value = coder{kind: kNone}
				break
			}
			f.value = coderOf(sf.Type)
		}
		f.tag = protowire.AppendTag(nil, num, f.value.wire)
		m.fields = append(m.fields, f)
	}
	for _, i := range inline {
		f := &m.fields[i]
		f.slot = m.slots
		sub := f.value.msg
		m.slots += sub.slots
		for _, k := range sub.names {
			if s := sub.keys[k]; s >= 0 {
				m.addKey(k, f.slot+s)
			} else {
				m.addKey(k, -1)
			}
		}
	}
	slices.SortFunc(m.fields, func(a, b field) int { return int(a.num) - int(b.num) })
	for i := 1; i < len(m.fields); i++ {
		if m.fields[i].num == m.fields[i-1].num {
			m.bad = true
		}
	}
	return m
}

// addKey gives a JSON key its slot. A key given twice (an inline
// field's member named as one of the object's own) is left to
// encoding/json's rules of depth: the message refuses objects instead.
func (m *message) addKey(k string, slot int) {
	if _, dup := m.keys[k]; dup {
		m.bad = true
		return
	}
	m.keys[k] = slot
	m.names = append(m.names, k)
}

// coderOf returns the coder of a struct field's values, of type t. A
// slice (other than bytes) is a repeated field, a map one of entry
// messages, whatever the struct tag says (some lists are tagged opt).
func coderOf(t reflect.Type) coder {
	switch {
	case t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(marshalerType):
		// A named list with a message of its own (metav1.Verbs).
		return coder{kind: kSpecial, typ: t, wire: protowire.BytesType}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		elem := valueCoder(t.Elem())
		return coder{kind: kList, elem: &elem, wire: elem.wire}
	case t.Kind() == reflect.Map:
		// An entry is a message: its key in field 1, its value in
		// field 2.
		if t.Key().Kind() != reflect.String {
			return coder{kind: kNone}
		}
		val := valueCoder(t.Elem())
		return coder{kind: kMap, elem: &val, wire: protowire.BytesType, valueTag: protowire.AppendTag(nil, 2, val.wire)}
	case t.Kind() == reflect.Pointer:
		t = t.Elem()
	}
	return valueCoder(t)
}

// valueCoder returns the coder of a single value of type t (not a
// pointer). Its wire type is the Go type's, as the generated code
// writes it: the struct tags do not always say it (ListMeta's
// remainingItemCount is tagged bytes, and written as a varint).
func valueCoder(t reflect.Type) coder {
	c := coder{wire: protowire.BytesType}
	switch {
	case t == timeType:
		c.kind = kTime
		return c
	case t == fieldsV1Type:
		c.kind = kFields
		return c
	case reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler):
		if t.Kind() == reflect.Struct && reflect.PointerTo(t).Implements(marshalerType) {
			c.kind, c.typ = kSpecial, t
		}
		return c
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8 && reflect.PointerTo(t).Implements(marshalerType):
		// A named list with a message of its own as a map's value
		// (certificates' ExtraValue).
		c.kind, c.typ = kSpecial, t
		return c
	}
	switch t.Kind() {
	case reflect.String:
		c.kind = kString
	case reflect.Bool:
		c.kind, c.wire = kBool, protowire.VarintType
	case reflect.Int32, reflect.Int64, reflect.Int:
		c.kind, c.bits, c.wire = kInt, t.Bits(), protowire.VarintType
	case reflect.Float64:
		c.kind, c.wire = kFloat, protowire.Fixed64Type
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			c.kind = kBytes
		}
	case reflect.Struct:
		c.kind, c.msg = kMessage, compile(t)
	}
	return c
}

// parseTag reads the field number from a protobuf struct tag
// ("bytes,1,opt,name=metadata"). The rest is not to be trusted: the
// generated code is what counts, and it follows the Go types.
func parseTag(tag string) (protowire.Number, bool) {
	parts := strings.Split(tag, ",")
	if len(parts) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n <= 0 || n > int(protowire.MaxValidNumber) {
		return 0, false
	}
	return protowire.Number(n), true
}

// jsonName is a struct field's JSON key as encoding/json reads it, the
// options after it, and whether the field's own members are promoted
// into the object instead (an embedded struct without a name).
func jsonName(sf reflect.StructField) (name, opts string, promoted bool) {
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return "", "", false
	}
	name, opts, _ = strings.Cut(tag, ",")
	opts = "," + opts
	if name == "" {
		t := sf.Type
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if sf.Anonymous && t.Kind() == reflect.Struct {
			return "", opts, true
		}
		name = sf.Name
	}
	return name, opts, false
}

// jsonNames lists the JSON keys of struct type t's members, promoted
// ones included.
func jsonNames(t reflect.Type) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, promoted := jsonName(sf)
		if promoted {
			names = append(names, jsonNames(sf.Type)...)
		} else if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// allStrings reports whether struct type t's JSON members, promoted
// ones included, are all strings.
func allStrings(t reflect.Type) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		if _, _, promoted := jsonName(sf); promoted {
			if !allStrings(sf.Type) {
				return false
			}
		} else if sf.Type.Kind() != reflect.String {
			return false
		}
	}
	return true
}

// splitFields splits a message into its fields' encodings, tags
// included, by number; nil if it is malformed or has a number twice.
func splitFields(b []byte) map[protowire.Number][]byte {
	fields := map[protowire.Number][]byte{}
	for len(b) > 0 {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil
		}
		if _, dup := fields[num]; dup {
			return nil
		}
		fields[num] = b[:n:n]
		b = b[n:]
	}
	return fields
}
