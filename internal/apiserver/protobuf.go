package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/kplane-dev/kplane/internal/registry"
)

// protoScheme knows the built-in kinds' Go types, for decoding protobuf
// request bodies (kubectl and typed clients send built-in kinds as
// protobuf). Responses are JSON: clients accept it.
var protoSerializer = func() *protobuf.Serializer {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, rbacv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err) // a broken scheme is a programming error
		}
	}
	return protobuf.NewSerializer(scheme, scheme)
}()

// protoToJSON decodes a protobuf body of kind k into its Go type and
// returns it as JSON.
func protoToJSON(k *registry.Kind, v string, body []byte) ([]byte, error) {
	if k.Typed == nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"),
		}}
	}
	gvk := k.GroupVersionKind(v)
	obj, _, err := protoSerializer.Decode(body, &gvk, k.Typed())
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", k.Kind, v, k.Kind, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(obj)
}
