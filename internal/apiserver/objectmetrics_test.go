package apiserver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// /metrics counts the objects of each resource under kube-apiserver's
// names and labels, as a running v1.37 kube-apiserver's showed them:
// apiserver_resource_objects{group="",resource="configmaps"} and the
// deprecated apiserver_storage_objects{resource="configmaps"}, with
// "resource.group" for the other groups.
func TestMetricsCountStoredObjects(t *testing.T) {
	h := newInProcess(t)
	createConfigMaps(t, h, 3, func(i int) string { return fmt.Sprint(i) })
	want := map[string]float64{
		`apiserver_resource_objects group="" resource="configmaps"`:                                    3,
		`apiserver_resource_objects group="apiextensions.k8s.io" resource="customresourcedefinitions"`: 0,
		`apiserver_storage_objects resource="configmaps"`:                                              3,
		`apiserver_storage_objects resource="customresourcedefinitions.apiextensions.k8s.io"`:          0,
	}
	// Consistent lists return once each resource's cache reflects the
	// store's current revision: its count is then the store's.
	for _, path := range []string{"/api/v1/configmaps", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"} {
		if w := get(t, h, path); w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
	w := get(t, h, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Body)
	}
	got := map[string]float64{}
	for _, name := range []string{"apiserver_resource_objects", "apiserver_storage_objects"} {
		f := families[name]
		if f.GetType().String() != "GAUGE" {
			t.Fatalf("%s is a %v, want a gauge", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf(" %s=%q", l.GetName(), l.GetValue())
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s: %v (present %v), want %v; all: %v", k, n, ok, v, got)
		}
	}
}
