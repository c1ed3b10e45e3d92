package webhook

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/kplane-dev/kplane/internal/registry"
)

// requestMapByJSON is what requestMap stands for: the AdmissionRequest a
// webhook is sent, through JSON.
func requestMapByJSON(t *testing.T, ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) map[string]any {
	t.Helper()
	req, err := admissionRequest(ctx, inv, a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"uid", "object", "oldObject"} {
		delete(out, k)
	}
	return out
}

func TestRequestMapIsTheRequestsJSON(t *testing.T) {
	configMaps := &registry.Kind{Versions: []string{"v1"}, Kind: "ConfigMap", Resource: "configmaps", Namespaced: true}
	namespaces := &registry.Kind{Versions: []string{"v1"}, Kind: "Namespace", Resource: "namespaces"}
	widgets := &registry.Kind{Group: "example.com", Versions: []string{"v1", "v2"}, Kind: "Widget", Resource: "widgets", Namespaced: true}
	grace := int64(30)
	orphan := metav1.DeletePropagationOrphan
	users := []registry.User{
		{},
		{Name: "alice", Groups: []string{"devs", "system:authenticated"}},
		{Name: "system:serviceaccount:ns:sa", UID: "u-1", Groups: []string{"g"},
			Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"p"}, "empty": {}, "null": nil}},
	}
	attrs := []*registry.AdmissionAttributes{
		{Kind: configMaps, Version: "v1", Operation: registry.OpCreate, Namespace: "default", Name: "c",
			Options: &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"}, FieldManager: "kubectl", DryRun: []string{"All"}}, DryRun: true},
		{Kind: configMaps, Version: "v1", Operation: registry.OpCreate, Namespace: "default", GeneratedName: true, Options: &metav1.CreateOptions{}},
		{Kind: configMaps, Version: "v1", Operation: registry.OpUpdate, Namespace: "default", Name: "c", Subresource: "status",
			Options: &metav1.UpdateOptions{FieldValidation: "Strict"}},
		{Kind: configMaps, Version: "v1", Operation: registry.OpDelete, Namespace: "default", Name: "c",
			Options: &metav1.DeleteOptions{GracePeriodSeconds: &grace, PropagationPolicy: &orphan,
				Preconditions: &metav1.Preconditions{ResourceVersion: ptr("5")}}},
		{Kind: configMaps, Version: "v1", Operation: registry.OpDelete, Namespace: "default", Name: "c"},
		{Kind: namespaces, Version: "v1", Operation: registry.OpCreate, Name: "ns", Options: &metav1.CreateOptions{}},
		{Kind: widgets, Version: "v2", Operation: registry.OpUpdate, Namespace: "a", Name: "w", Subresource: "scale",
			ObjectKind: schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Options: &metav1.UpdateOptions{}},
	}
	for _, u := range users {
		ctx := registry.WithUser(context.Background(), u)
		for i, a := range attrs {
			a.Object = &unstructured.Unstructured{Object: map[string]any{"kind": "X"}}
			invs := []*invocation{{resource: a.GroupVersionResource(), kind: a.GroupVersionKind()}}
			if a.Kind == widgets {
				invs = append(invs, &invocation{resource: widgets.GroupResource().WithVersion("v1"), kind: widgets.GroupVersionKind("v1"), equivalent: widgets})
			}
			for _, inv := range invs {
				got, err := requestMap(ctx, inv, a)
				if err != nil {
					t.Fatal(err)
				}
				if want := requestMapByJSON(t, ctx, inv, a); !reflect.DeepEqual(got, want) {
					t.Errorf("user %q, request %d:\ngot  %#v\nwant %#v", u.Name, i, got, want)
				}
			}
		}
	}
}
