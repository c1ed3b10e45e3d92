package registry

import (
	"encoding/json"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"
)

// Decode parses JSON data as an object of kind k. Built-in kinds go
// through their Go type, as kube-apiserver's codecs do: a field of the
// wrong type is an error and unknown fields are dropped. Unknown and
// duplicate fields come back as strict errors, for the caller to refuse
// or warn about according to the request's fieldValidation.
func Decode(k *Kind, data []byte) (obj *unstructured.Unstructured, strict []error, err error) {
	if k.Typed != nil {
		typed := k.Typed()
		if strict, err = sigsjson.UnmarshalStrict(data, typed); err != nil {
			return nil, nil, err
		}
		if data, err = json.Marshal(typed); err != nil {
			return nil, nil, err
		}
	} else {
		var m map[string]any
		if strict, err = sigsjson.UnmarshalStrict(data, &m); err != nil {
			return nil, nil, err
		}
	}
	obj = &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(data, &obj.Object); err != nil {
		return nil, nil, err
	}
	if obj.Object == nil {
		return nil, nil, errors.New("the object provided is unrecognized or malformed: null")
	}
	if k.Typed == nil {
		// A custom resource's metadata must decode as ObjectMeta, as
		// apiextensions-apiserver's schema-coercing decoder requires of a
		// request body (schema/objectmeta GetObjectMetaWithOptions without
		// DropMalformedFields): "metadata":{"name":5} is refused, not dropped.
		if md, ok := obj.Object["metadata"]; ok {
			raw, err := utiljson.Marshal(md)
			if err == nil {
				err = utiljson.Unmarshal(raw, &metav1.ObjectMeta{})
			}
			if err != nil {
				return nil, nil, err
			}
		}
	}
	if md, ok := obj.Object["metadata"]; ok && md == nil {
		delete(obj.Object, "metadata")
	}
	return obj, strict, nil
}
