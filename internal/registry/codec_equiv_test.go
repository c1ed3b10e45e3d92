package registry

import (
	"encoding/json"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsjson "sigs.k8s.io/json"
)

// Decode turns a built-in kind's Go value into an object with apimachinery's
// converter; that must give exactly what the JSON round trip it replaced
// gives (json.Marshal of the Go value, decoded with ints kept), for every
// kind of field the built-in kinds have: bytes, times, micro-times, int32,
// quantities, int-or-string, raw JSON, empty and nil maps and slices.
func TestDecodeMatchesTheJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		typed func() runtime.Object
		body  string
	}{
		{func() runtime.Object { return &corev1.ConfigMap{} }, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{},"annotations":{"x":""},"finalizers":[]},"data":{"k":"v\u00e9<"},"binaryData":{"b":"AAEC"},"immutable":false}`},
		{func() runtime.Object { return &corev1.ConfigMap{} }, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","creationTimestamp":"2026-01-02T03:04:05Z","deletionGracePeriodSeconds":30,"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"u","controller":true}]}}`},
		{func() runtime.Object { return &corev1.Secret{} }, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"c2VjcmV0"},"stringData":{"a":"b"},"type":"Opaque"}`},
		{func() runtime.Object { return &corev1.Event{} }, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p"},"count":3,"firstTimestamp":"2026-01-02T03:04:05Z","eventTime":"2026-01-02T03:04:05.123456Z","series":{"count":2,"lastObservedTime":"2026-01-02T03:04:05.000001Z"}}`},
		{func() runtime.Object { return &corev1.Namespace{} }, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}`},
		{func() runtime.Object { return &corev1.ServiceAccount{} }, `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa"},"automountServiceAccountToken":true,"secrets":[{"name":"x"}]}`},
		{func() runtime.Object { return &coordinationv1.Lease{} }, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15,"acquireTime":"2026-01-02T03:04:05.654321Z","renewTime":"2026-01-02T03:04:05.000000Z","leaseTransitions":2}}`},
		{func() runtime.Object { return &rbacv1.ClusterRole{} }, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"r"},"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}],"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"a":"b"}}]}}`},
		{func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} }, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"foos.x.io"},"spec":{"group":"x.io","names":{"plural":"foos","kind":"Foo"},"scope":"Namespaced","versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true,"properties":{"n":{"type":"integer","default":3,"minimum":1.5,"maximum":10,"enum":[1,2.5,"x"]},"p":{"x-kubernetes-int-or-string":true,"anyOf":[{"type":"integer"},{"type":"string"}]}}}}}},"subresources":{"status":{},"scale":{"specReplicasPath":".spec.r","statusReplicasPath":".status.r"}},"additionalPrinterColumns":[{"name":"N","type":"integer","jsonPath":".spec.n","priority":1}]}]}}`},
	} {
		obj, _, err := Decode(&Kind{Kind: "X", Typed: tc.typed}, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		typed := tc.typed()
		if _, err := sigsjson.UnmarshalStrict([]byte(tc.body), typed); err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(typed)
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := utiljson.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(obj.Object, want) {
			got, _ := json.Marshal(obj.Object)
			t.Errorf("%T:\n got %s\nwant %s", typed, got, data)
		}
	}
}
