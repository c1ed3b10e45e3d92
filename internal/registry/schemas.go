package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/kplane-dev/kplane/internal/registry/openapi"
)

// SetTypeConverters gives the built-in kinds among kinds (those with a Go
// type) one shared type converter built from their schemas, so that field
// ownership knows their list and map semantics.
func SetTypeConverters(kinds ...*Kind) error {
	typed := make(map[schema.GroupVersionKind]runtime.Object)
	for _, k := range kinds {
		if k.Typed == nil {
			continue
		}
		for _, v := range k.Versions {
			typed[k.GroupVersionKind(v)] = k.Typed()
		}
	}
	defs, err := openapi.Definitions(typed, openapi.V3RefPrefix)
	if err != nil {
		return fmt.Errorf("building the built-in kinds' schemas: %w", err)
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		return fmt.Errorf("building the built-in kinds' type converter: %w", err)
	}
	for _, k := range kinds {
		if k.Typed != nil {
			k.TypeConverter = tc
		}
	}
	return nil
}
