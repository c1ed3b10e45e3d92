package core_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// An update with an invalid label is refused with the error once, as
// kube-apiserver v1.37.2 refused it: core validation finds it twice
// (the metadata update's checks and the ConfigMap's own), and upstream's
// declarative validation keeps one of each message.
func TestBuiltInKindsReportEachErrorOnce(t *testing.T) {
	reg := newRegistry(t, memoryStore(t), nil)
	cms, _ := reg.Get(schema.GroupResource{Resource: "configmaps"})
	ctx := context.Background()
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "dup1"}}}
	if _, err := cms.Create(ctx, "v1", "default", cm, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	cm.SetLabels(map[string]string{"bad key": "x"})
	_, err := cms.Update(ctx, "v1", "default", "dup1", cm, registry.WriteOptions{FieldManager: "test"})
	var st *apierrors.StatusError
	if !errors.As(err, &st) || st.ErrStatus.Details == nil {
		t.Fatalf("got %v, want a 422", err)
	}
	const msg = `Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	causes := st.ErrStatus.Details.Causes
	if len(causes) != 1 || causes[0].Field != "metadata.labels" || causes[0].Message != msg ||
		st.ErrStatus.Message != `ConfigMap "dup1" is invalid: metadata.labels: `+msg {
		t.Errorf("got %q %+v, want the error once", st.ErrStatus.Message, causes)
	}
}
