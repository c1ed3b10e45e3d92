package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
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
// and TYPE, its labels as given (histograms as their buckets, sum and
// count), and left out when it has no sample.
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
		}, {
			Name: "test_seconds", Type: "histogram", Help: "A histogram.",
			Read: func() []apiserver.Sample {
				return []apiserver.Sample{{Labels: []string{"result", "ok"},
					Histogram: &apiserver.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{2, 0, 1}, Sum: 5.25}}}
			},
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
	if f := families["test_seconds"]; f.GetType().String() != "HISTOGRAM" || len(f.GetMetric()) != 1 {
		t.Errorf("test_seconds: %v", f)
	} else {
		m := f.GetMetric()[0]
		h := m.GetHistogram()
		var buckets []string
		for _, b := range h.GetBucket() {
			buckets = append(buckets, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
		}
		if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "ok" || h.GetSampleCount() != 3 || h.GetSampleSum() != 5.25 ||
			fmt.Sprint(buckets) != "[0.1:2 1:2 +Inf:3]" {
			t.Errorf("test_seconds: labels %v, count %d, sum %g, buckets %v; want ok, 3, 5.25, [0.1:2 1:2 +Inf:3]", m.GetLabel(), h.GetSampleCount(), h.GetSampleSum(), buckets)
		}
	}
	if bytes.Contains(w.Body.Bytes(), []byte("test_absent")) {
		t.Errorf("a metric without samples is served:\n%s", w.Body)
	}
	if _, ok := families["process_cpu_seconds_total"]; !ok {
		t.Error("the server's own metrics are gone")
	}
}

// Outside the resources, /metrics counts the requests kube-apiserver
// counts, under its labels, as a running v1.37 kube-apiserver showed them
// after the same requests: the health checks, OpenAPI v3 and aggregated
// discovery; not /version, /metrics, /openapi/v2, discovery in the older
// form, a group's or version's discovery, or a single health check.
func TestMetricsCountThePathsKubeAPIServerCounts(t *testing.T) {
	h := newInProcess(t)
	h.(*apiserver.Server).MarkStarted()
	const aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
	for _, c := range []struct {
		method, path, accept string
		code                 int
	}{
		{"GET", "/readyz", "", 200},
		{"HEAD", "/readyz", "", 200},
		{"GET", "/readyz?verbose", "", 200},
		{"OPTIONS", "/healthz", "", 200},
		{"DELETE", "/livez", "", 200},
		{"GET", "/openapi/v3", "", 200},
		{"GET", "/openapi/v3/api/v1", "", 200},
		{"GET", "/openapi/v3/apis/nope.example/v1", "", 404},
		{"GET", "/api", aggregated, 200},
		{"GET", "/apis", aggregated, 200},
		// Not counted.
		{"GET", "/api", "", 200},
		{"GET", "/apis", "", 200},
		{"GET", "/api/v1", "", 200},
		{"GET", "/apis/rbac.authorization.k8s.io", "", 200},
		{"GET", "/apis/rbac.authorization.k8s.io/v1", "", 200},
		{"GET", "/version", "", 200},
		{"GET", "/openapi/v2", "", 200},
		{"GET", "/metrics", "", 200},
		{"GET", "/nothing/here", "", 404},
	} {
		r := httptest.NewRequest(c.method, c.path, nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code {
			t.Fatalf("%s %s: %d, want %d", c.method, c.path, w.Code, c.code)
		}
	}
	w := get(t, h, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Body)
	}
	key := func(m *dto.Metric, code string) string {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["group"]+l["version"]+l["resource"]+l["scope"]+l["dry_run"] != "" {
			return "" // a resource request
		}
		return fmt.Sprintf("%q %s %s %s", l["component"], l["subresource"], l["verb"], code)
	}
	got := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" {
				if k := key(m, l.GetValue()); k != "" {
					got[k] = m.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{
		`"" /readyz GET 200`:       3,
		`"" /healthz other 200`:    1,
		`"" /livez DELETE 200`:     1,
		`"" openapi/v3 GET 200`:    1,
		`"" openapi/v3/ GET 200`:   1,
		`"" openapi/v3/ GET 404`:   1,
		`"apiserver" api GET 200`:  1,
		`"apiserver" apis GET 200`: 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("apiserver_request_total outside the resources:\n got %v\nwant %v", got, want)
	}
	durations := map[string]uint64{}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		if k := key(m, ""); k != "" {
			durations[k] = m.GetHistogram().GetSampleCount()
		}
	}
	if n := durations[`"" /readyz GET `]; n != 3 || len(durations) != 7 {
		t.Errorf("apiserver_request_duration_seconds outside the resources: %v", durations)
	}
}

// apiserver_response_sizes counts the bytes of read responses as written,
// under kube-apiserver v1.37's labels and buckets: a get and a list of
// ConfigMaps, /readyz; not a create, nor a patch.
func TestResponseSizesCountReads(t *testing.T) {
	h := newInProcess(t)
	h.(*apiserver.Server).MarkStarted()
	createConfigMaps(t, h, 2, func(i int) string { return strings.Repeat("x", 600*(i+1)) })
	patchConfigMaps(t, h, 1, func(int) string { return "patched" })
	one := get(t, h, "/api/v1/namespaces/default/configmaps/cm-0001")
	list := get(t, h, "/api/v1/namespaces/default/configmaps")
	ready := get(t, h, "/readyz")
	if one.Code != 200 || list.Code != 200 || ready.Code != 200 {
		t.Fatalf("reads: %d %d %d", one.Code, list.Code, ready.Code)
	}
	w := get(t, h, "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, w.Body)
	}
	f := families["apiserver_response_sizes"]
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("a %v", f.GetType())
	}
	got := map[string]string{}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		var under10k uint64
		for _, bk := range h.GetBucket() {
			if bk.GetUpperBound() == 1e4 {
				under10k = bk.GetCumulativeCount()
			}
		}
		got[label(m, "verb")+" "+label(m, "resource")+label(m, "subresource")+" "+label(m, "scope")] =
			fmt.Sprintf("count %d sum %v under 10k %d", h.GetSampleCount(), h.GetSampleSum(), under10k)
	}
	want := map[string]string{
		"GET configmaps resource":   fmt.Sprintf("count 1 sum %d under 10k 1", one.Body.Len()),
		"LIST configmaps namespace": fmt.Sprintf("count 1 sum %d under 10k 1", list.Body.Len()),
		"GET /readyz ":              "count 1 sum 2 under 10k 1",
	}
	if !maps.Equal(got, want) {
		t.Errorf("apiserver_response_sizes:\n got %v\nwant %v", got, want)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
