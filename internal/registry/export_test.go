package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/storage"
)

// DecodeFull is Decode without the one-pass decode of plain bodies.
func DecodeFull(k *Kind, data []byte) (*unstructured.Unstructured, []error, error) {
	obj, strict, err := decodeFull(k, data)
	if err == nil && k.Default != nil {
		k.Default(obj)
	}
	return obj, strict, err
}

// PlainDecode is the one-pass decode of a body of k's Go type.
func PlainDecode(k *Kind, data []byte) (map[string]any, bool) {
	return plainDecode(goType(k), data)
}

// CustomPlain reports whether Decode takes data, a custom resource's body,
// in one pass.
func CustomPlain(data []byte) bool {
	m, ok := storage.DecodeObjectNoDuplicates(data)
	return ok && metadataDecodes(m["metadata"])
}

// NoopWrites turns the memo of writes that changed nothing on or off.
func NoopWrites(on bool) { noopWritesOff = !on }

// NoopWriteHits is how many writes r's registry answered from that memo.
func NoopWriteHits(r *Resource) int64 { return r.reg.noops.hits.Load() }
