package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// /metrics counts the objects of each resource under kube-apiserver's
// names and labels, as a running v1.37 kube-apiserver's showed them:
// apiserver_resource_objects{group="",resource="configmaps"} and the
// deprecated apiserver_storage_objects{resource="configmaps"}, with
// "resource.group" for the other groups; and each watch cache's revision,
// the writes it took in and the watchers it ended.
func TestMetricsCountStoredObjects(t *testing.T) {
	h := newInProcess(t)
	// A consistent list returns once the cache has loaded: the creates
	// after it reach the cache as writes it takes in.
	if w := get(t, h, "/api/v1/configmaps"); w.Code != http.StatusOK {
		t.Fatalf("GET configmaps: %d %s", w.Code, w.Body)
	}
	createConfigMaps(t, h, 3, func(i int) string { return fmt.Sprint(i) })
	want := map[string]float64{
		`apiserver_watch_cache_events_received_total group="" resource="configmaps"`:                   3,
		`apiserver_resource_objects group="" resource="configmaps"`:                                    3,
		`apiserver_resource_objects group="apiextensions.k8s.io" resource="customresourcedefinitions"`: 0,
		`apiserver_storage_objects resource="configmaps"`:                                              3,
		`apiserver_storage_objects resource="customresourcedefinitions.apiextensions.k8s.io"`:          0,
	}
	// Consistent lists return once each resource's cache reflects the
	// store's current revision: its count is then the store's.
	for _, path := range []string{"/api/v1/configmaps", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"} {
		w := get(t, h, path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		// The revision each cache reflects is the list's.
		var l struct {
			Metadata struct{ ResourceVersion string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseFloat(l.Metadata.ResourceVersion, 64)
		gr := `group="" resource="configmaps"`
		if strings.Contains(path, "apiextensions") {
			gr = `group="apiextensions.k8s.io" resource="customresourcedefinitions"`
		}
		want["apiserver_watch_cache_resource_version "+gr] = rv
		want["apiserver_terminated_watchers_total "+gr] = 0
	}
	w := get(t, h, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Body)
	}
	got := map[string]float64{}
	for name, typ := range map[string]string{"apiserver_resource_objects": "GAUGE", "apiserver_storage_objects": "GAUGE",
		"apiserver_watch_cache_resource_version": "GAUGE", "apiserver_terminated_watchers_total": "COUNTER",
		"apiserver_watch_cache_events_received_total": "COUNTER"} {
		f := families[name]
		if f.GetType().String() != typ {
			t.Fatalf("%s is a %v, want a %s", name, f.GetType(), typ)
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf(" %s=%q", l.GetName(), l.GetValue())
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}

	for k, v := range want {
		if n, ok := got[k]; !ok || n != v {
			t.Errorf("%s: %v (present %v), want %v; all: %v", k, n, ok, v, got)
		}
	}
}

// Config.Metrics are served after the server's own, each with its HELP
// and TYPE, its labels as given, and left out when it has no sample.
func TestMetricsServesTheCallersFigures(t *testing.T) {
	h := newInProcess(t, func(c *apiserver.Config) {
		c.Metrics = []apiserver.Metric{{
			Name: "test_bytes", Type: "gauge", Help: "A gauge.",
			Read: func() []apiserver.Sample { return []apiserver.Sample{{Value: 1 << 40}} },
		}, {
			Name: "test_total", Type: "counter", Help: "A counter with labels.",
			Read: func() []apiserver.Sample {
				return []apiserver.Sample{
					{Labels: []string{"reason", "a", "kind", "x"}, Value: 2},
					{Labels: []string{"reason", "b", "kind", "y"}, Value: 0.5},
				}
			},
		}, {
			Name: "test_absent", Type: "gauge", Help: "Nothing to say.",
			Read: func() []apiserver.Sample { return nil },
		}}
	})
	w := get(t, h, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Body)
	}
	if f := families["test_bytes"]; f.GetType().String() != "GAUGE" || f.GetHelp() != "A gauge." ||
		len(f.GetMetric()) != 1 || len(f.GetMetric()[0].GetLabel()) != 0 || f.GetMetric()[0].GetGauge().GetValue() != 1<<40 {
		t.Errorf("test_bytes: %v", f)
	}
	got := map[string]float64{}
	f := families["test_total"]
	if f.GetType().String() != "COUNTER" {
		t.Errorf("test_total is a %v, want a counter", f.GetType())
	}
	for _, m := range f.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			key += fmt.Sprintf("%s=%s ", l.GetName(), l.GetValue())
		}
		got[key] = m.GetCounter().GetValue()
	}
	if want := map[string]float64{"reason=a kind=x ": 2, "reason=b kind=y ": 0.5}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("test_total: %v, want %v", got, want)
	}
	if bytes.Contains(w.Body.Bytes(), []byte("test_absent")) {
		t.Errorf("a metric without samples is served:\n%s", w.Body)
	}
	if _, ok := families["process_cpu_seconds_total"]; !ok {
		t.Error("the server's own metrics are gone")
	}
}
