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

// SetTypeConverters gives each built-in kind among kinds (those with a Go
// type), and the kinds of their ReviewSubresources, a type converter built
// from its schemas, so that field ownership
// knows their list and map semantics. A kind's converter is built on its
// first write, from the definitions that kind refers to alone and without
// their descriptions: a server pays only for the kinds it writes (at
// start-up, Namespace), and not for the documents' descriptions.
func SetTypeConverters(kinds ...*Kind) {
	for _, k := range kinds {
		for _, sk := range k.ReviewSubresources {
			SetTypeConverters(sk)
		}
		if k.Typed == nil {
			continue
		}
		typed := make(map[schema.GroupVersionKind]runtime.Object)
		for _, v := range k.Versions {
			typed[k.GroupVersionKind(v)] = k.Typed()
		}
		name := k.Kind
		k.TypeConverter = LazyTypeConverter(func() (managedfields.TypeConverter, error) {
			defs, err := openapi.DefinitionsWithoutDocs(typed, openapi.V3RefPrefix)
			if err != nil {
				return nil, fmt.Errorf("building the schemas of %s: %w", name, err)
			}
			tc, err := managedfields.NewTypeConverter(defs, false)
			if err != nil {
				return nil, fmt.Errorf("building the type converter of %s: %w", name, err)
			}
			return tc, nil
		})
	}
}

// LazyTypeConverter is a type converter built by build when the first
// write needs it, once; a build error is returned by every conversion.
// Building a converter walks every definition of the schemas, which a
// server that only reads never needs.
func LazyTypeConverter(build func() (managedfields.TypeConverter, error)) managedfields.TypeConverter {
	return &lazyTypeConverter{build: build}
}

type lazyTypeConverter struct {
	build func() (managedfields.TypeConverter, error)
	once  sync.Once
	tc    managedfields.TypeConverter
	err   error
}

func (l *lazyTypeConverter) get() (managedfields.TypeConverter, error) {
	l.once.Do(func() {
		l.tc, l.err = l.build()
		l.build = nil
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
