package registry

import (
	"encoding/json"
	"errors"

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
	if md, ok := obj.Object["metadata"]; ok && md == nil {
		delete(obj.Object, "metadata")
	}
	return obj, strict, nil
}
