package registry

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kplane-dev/kplane/internal/registry/openapi"
)

// SetTypeConverters gives the built-in kinds among kinds (those with a Go
// type) one shared type converter built from their schemas, so that field
// ownership knows their list and map semantics. The converter is built on
// first use: a server that only reads never pays for it.
func SetTypeConverters(kinds ...*Kind) {
	typed := make(map[schema.GroupVersionKind]runtime.Object)
	for _, k := range kinds {
		if k.Typed == nil {
			continue
		}
		for _, v := range k.Versions {
			typed[k.GroupVersionKind(v)] = k.Typed()
		}
	}
	tc := &lazyTypeConverter{kinds: typed}
	for _, k := range kinds {
		if k.Typed != nil {
			k.TypeConverter = tc
		}
	}
}

// lazyTypeConverter builds the converter of the built-in kinds once, when
// the first write needs it.
type lazyTypeConverter struct {
	kinds map[schema.GroupVersionKind]runtime.Object
	once  sync.Once
	tc    managedfields.TypeConverter
	err   error
}

func (l *lazyTypeConverter) get() (managedfields.TypeConverter, error) {
	l.once.Do(func() {
		defs, err := openapi.Definitions(l.kinds, openapi.V3RefPrefix)
		if err != nil {
			l.err = fmt.Errorf("building the built-in kinds' schemas: %w", err)
			return
		}
		if l.tc, err = managedfields.NewTypeConverter(defs, false); err != nil {
			l.err = fmt.Errorf("building the built-in kinds' type converter: %w", err)
		}
	})
	return l.tc, l.err
}

func (l *lazyTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	tc, err := l.get()
	if err != nil {
		return nil, err
	}
	return tc.ObjectToTyped(obj, opts...)
}

func (l *lazyTypeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	tc, err := l.get()
	if err != nil {
		return nil, err
	}
	return tc.TypedToObject(v)
}
