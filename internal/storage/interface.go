package storage

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is the object store as the registry uses it: the Store itself,
// or a watch cache in front of one. Both pass the same conformance suite
// (storagetest), so the registry cannot tell which it has, except by
// speed.
type Interface interface {
	Create(ctx context.Context, key string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	Get(ctx context.Context, key string, opts GetOptions) (*unstructured.Unstructured, error)
	GuaranteedUpdate(ctx context.Context, key string, pre *Preconditions, tryUpdate UpdateFunc) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, key string, pre *Preconditions, validate ValidateDeletion) (*unstructured.Unstructured, error)
	List(ctx context.Context, prefix string, opts ListOptions) (*unstructured.UnstructuredList, error)
	Watch(ctx context.Context, key string, opts WatchOptions) (watch.Interface, error)
	// Revision is the store's current revision.
	Revision(ctx context.Context) (int64, error)
}

var _ Interface = (*Store)(nil)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial
// events of a sendInitialEvents watch ("API Concepts", "Streaming lists").
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// Shared is an object handed to many watchers at once. It is read-only,
// and its JSON form is computed once, on first use, for all of them: the
// apiserver's caching_object idea. Anything that marshals it with
// encoding/json gets the cached bytes.
type Shared struct {
	*unstructured.Unstructured
	once sync.Once
	data []byte
	err  error
}

// NewShared wraps obj, which nobody may modify afterwards.
func NewShared(obj *unstructured.Unstructured) *Shared { return &Shared{Unstructured: obj} }

// MarshalJSON returns the object's JSON, encoding it at most once.
func (s *Shared) MarshalJSON() ([]byte, error) {
	s.once.Do(func() {
		s.data, s.err = AppendJSON(nil, s.Object)
		s.data = append(s.data, '\n') // as Unstructured.MarshalJSON writes it
	})
	return s.data, s.err
}
