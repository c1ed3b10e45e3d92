package registry

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ReadManifest reads data, the JSON of one object of kind k from a file
// rather than from a request (kube-apiserver's static admission
// manifests), as upstream's manifest loaders read one: decoded strictly
// (an unknown or duplicate field is an error), defaulted, then checked
// as a create is (metadata, then ValidateManifest or, without one,
// Validate). The error names the kind and the object.
func (k *Kind) ReadManifest(data []byte) (*unstructured.Unstructured, error) {
	obj, strict, err := Decode(k, data)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, strictError(strict)
	}
	var errs field.ErrorList
	if k.ValidateFirst != nil {
		errs = k.ValidateFirst(obj)
	}
	errs = append(errs, validateMeta(k, obj)...)
	switch {
	case k.ValidateManifest != nil:
		errs = append(errs, k.ValidateManifest(obj)...)
	case k.Validate != nil:
		errs = append(errs, k.Validate(obj)...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %q: %w", k.Kind, obj.GetName(), errs.ToAggregate())
	}
	return obj, nil
}
