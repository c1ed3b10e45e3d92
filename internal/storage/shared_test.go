package storage_test

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/storage"
)

// A Shared object is encoded once: later encodings, from any number of
// goroutines and through encoding/json, return the first encoding's bytes.
func TestSharedEncodesOnce(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "resourceVersion": "7"},
		"data":     map[string]any{"k": "v"},
	}}
	want, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	s := storage.NewShared(obj)

	var wg sync.WaitGroup
	got := make([][]byte, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = json.Marshal(struct {
				Type   string `json:"type"`
				Object any    `json:"object"`
			}{"ADDED", s})
		}()
	}
	wg.Wait()
	for i, g := range got {
		// encoding/json compacts what MarshalJSON returns (the codec ends
		// it with a newline).
		if string(g) != `{"type":"ADDED","object":`+string(bytes.TrimSpace(want))+`}` {
			t.Fatalf("watcher %d got %s", i, g)
		}
	}

	// The bytes are cached: a change behind the wrapper's back (which the
	// contract forbids) is not seen, which shows nothing was re-encoded.
	obj.Object["data"] = map[string]any{"k": "changed"}
	again, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(want) {
		t.Fatalf("second encoding %s, want the cached %s", again, want)
	}
}
