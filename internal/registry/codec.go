package registry

import (
	"errors"
	"math"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"

	"github.com/kplane-dev/kplane/internal/registry/plain"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Decode parses JSON data as an object of kind k. Built-in kinds go
// through their Go type, as kube-apiserver's codecs do: a field of the
// wrong type is an error and unknown fields are dropped. Unknown and
// duplicate fields come back as strict errors, for the caller to refuse
// or warn about according to the request's fieldValidation.
func Decode(k *Kind, data []byte) (obj *unstructured.Unstructured, strict []error, err error) {
	obj, strict, err = decode(k, data)
	if err == nil && k.Default != nil {
		k.Default(obj)
	}
	return obj, strict, err
}

func decode(k *Kind, data []byte) (obj *unstructured.Unstructured, strict []error, err error) {
	if k.Typed != nil {
		if m, ok := plainDecode(goType(k), data); ok {
			return &unstructured.Unstructured{Object: m}, nil, nil
		}
	} else if m, ok := storage.DecodeObjectNoDuplicates(data); ok && metadataDecodes(m["metadata"]) {
		// A custom resource: the full decode's strict decode into a map
		// only finds duplicate members, which this one refuses, and its
		// metadata check passes for plain metadata.
		if md, ok := m["metadata"]; ok && md == nil {
			delete(m, "metadata")
		}
		return &unstructured.Unstructured{Object: m}, nil, nil
	}
	return decodeFull(k, data)
}

// DecodeTyped returns obj, an object of kind k's Go type (a protobuf
// request body, decoded), as Decode returns obj's JSON, without writing
// the JSON: by plain.Type.Map. false: obj holds what Map does not vouch
// for, and the caller decodes obj's JSON instead. A test holds the two
// ways equal over random objects of every kind with a protobuf form.
func DecodeTyped(k *Kind, obj runtime.Object) (*unstructured.Unstructured, bool) {
	v := reflect.ValueOf(obj)
	if k.Typed == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Type().Elem() != goType(k) {
		return nil, false
	}
	m, ok := plain.Of(goType(k)).Map(v.Elem())
	if !ok {
		return nil, false
	}
	out := &unstructured.Unstructured{Object: m}
	if k.Default != nil {
		k.Default(out)
	}
	return out, true
}

// goTypes caches each kind's Go type (Typed makes an object to show it).
var goTypes sync.Map // *Kind → reflect.Type

// goType is the Go type of k's objects; k.Typed is not nil.
func goType(k *Kind) reflect.Type {
	if t, ok := goTypes.Load(k); ok {
		return t.(reflect.Type)
	}
	t := reflect.TypeOf(k.Typed()).Elem()
	goTypes.Store(k, t)
	return t
}

// metadataDecodes reports that md (absent, null or plain ObjectMeta)
// decodes as ObjectMeta; false when it can't tell.
func metadataDecodes(md any) bool {
	switch x := md.(type) {
	case nil:
		return true
	case map[string]any:
		_, ok := plain.ObjectMeta(x)
		return ok
	}
	return false
}

// decodeFull is Decode without plainDecode.
func decodeFull(k *Kind, data []byte) (obj *unstructured.Unstructured, strict []error, err error) {
	obj = &unstructured.Unstructured{}
	if k.Typed != nil {
		typed := k.Typed()
		if strict, err = sigsjson.UnmarshalStrict(data, typed); err != nil {
			return nil, nil, err
		}
		// The Go type's fields as JSON would give them, without the JSON:
		// the converter, with a whole float made an int as the JSON
		// decoding did (a test checks the two agree for every built-in
		// kind's field types).
		if obj.Object, err = runtime.DefaultUnstructuredConverter.ToUnstructured(typed); err != nil {
			return nil, nil, err
		}
		wholeFloatsToInts(obj.Object)
	} else {
		var m map[string]any
		if strict, err = sigsjson.UnmarshalStrict(data, &m); err != nil {
			return nil, nil, err
		}
		if err := storage.UnmarshalMap(data, &obj.Object); err != nil {
			return nil, nil, err
		}
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

// wholeFloatsToInts replaces, in place, every float64 that JSON would
// write without a fraction or exponent with the int64 that decoding that
// JSON gives, as k8s.io/apimachinery/pkg/util/json does.
func wholeFloatsToInts(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = wholeFloatsToInts(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeFloatsToInts(e)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e21 && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x)
		}
	}
	return v
}
