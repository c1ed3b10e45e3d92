package kv

import (
	"errors"
	"strings"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"/registry/": "/registry0",
		"a":          "b",
		"a\xff":      "b",
		"a\xff\xff":  "b",
		"\xff":       "",
		"\xff\xff":   "",
	} {
		if got := PrefixEnd(prefix); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", prefix, got, want)
		}
		if want != "" && (!InRange(prefix+"x", prefix, want) || InRange(want, prefix, want)) {
			t.Errorf("[%q, %q) does not hold exactly the keys under the prefix", prefix, want)
		}
	}
}

func TestCheckWrite(t *testing.T) {
	for _, c := range []struct {
		name  string
		key   string
		value int
		want  error
	}{
		{"a key and a value at the limit", "/k", DefaultMaxValueSize, nil},
		{"an empty key", "", 1, ErrEmptyKey},
		{"a key at its limit", strings.Repeat("k", MaxKeySize), 0, nil},
		{"a key over its limit", strings.Repeat("k", MaxKeySize+1), 0, ErrKeyTooLarge},
		{"a value over the limit", "/k", DefaultMaxValueSize + 1, ErrValueTooLarge},
	} {
		err := CheckWrite(c.key, make([]byte, c.value), DefaultMaxValueSize)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: CheckWrite = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestEventIsCreate(t *testing.T) {
	create := Event{Type: Put, KV: KeyValue{Key: "k", CreateRevision: 5, ModRevision: 5, Version: 1}}
	update := Event{Type: Put, KV: KeyValue{Key: "k", CreateRevision: 5, ModRevision: 6, Version: 2}}
	del := Event{Type: Delete, KV: KeyValue{Key: "k", ModRevision: 7}}
	if !create.IsCreate() || update.IsCreate() || del.IsCreate() {
		t.Fatalf("IsCreate: create %v, update %v, delete %v", create.IsCreate(), update.IsCreate(), del.IsCreate())
	}
}
