package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"
)

// gzipRatio is how many times smaller gzip's default level makes the JSON of
// a ConfigMap list's data holding values.
func gzipRatio(t *testing.T, values []string) float64 {
	t.Helper()
	items := make([]map[string]map[string]string, len(values))
	for i, v := range values {
		items[i] = map[string]map[string]string{"data": {"payload": v}}
	}
	raw, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(raw)
	w.Close()
	return float64(len(raw)) / float64(z.Len())
}

// TestPayloads checks each payload's size and that each compresses as its
// doc says: the text payload about as much as configuration files (the
// YAML files of Go's module cache gzip 3.0× one by one), the letters far
// more.
func TestPayloads(t *testing.T) {
	want := map[payloadKind][2]float64{payloadLetters: {20, 1000}, payloadText: {2, 5}}
	for _, k := range payloadKinds {
		values := make([]string, 1000)
		for i := range values {
			values[i] = k.value(i)
			if len(values[i]) != payloadBytes {
				t.Fatalf("%s: value %d has %d bytes, want %d", k, i, len(values[i]), payloadBytes)
			}
		}
		r := gzipRatio(t, values)
		if r < want[k][0] || r > want[k][1] {
			t.Errorf("%s: 1,000 values gzip %.1f×, want %.0f–%.0f×", k, r, want[k][0], want[k][1])
		}
		if k == payloadText && values[0] == values[1] {
			t.Errorf("text: objects 0 and 1 hold the same value")
		}
		if k.value(7) != values[7] {
			t.Errorf("%s: value 7 differs between calls", k)
		}
	}
	if _, err := parsePayload("lorem"); err == nil {
		t.Error("parsePayload accepted lorem")
	}
	// compare's title names the payload, whichever it is.
	for _, k := range payloadKinds {
		o := options{sizes: DefaultSizes(), payload: string(k)}
		if got, want := o.describe(), "; payload "+string(k)+";"; !strings.Contains(got, want) {
			t.Errorf("title %q does not name the payload %s", got, k)
		}
	}
}
