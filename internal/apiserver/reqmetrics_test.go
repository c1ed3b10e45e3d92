package apiserver

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// BenchmarkRequestMetrics is what the request metrics add to a request:
// its labels, its series and the count.
func BenchmarkRequestMetrics(b *testing.B) {
	var m requestMetrics
	r := httptest.NewRequest("GET", "/api/v1/namespaces/default/configmaps/cm-1", nil)
	ri, _ := parsePath(r.URL.Path)
	b.ReportAllocs()
	for b.Loop() {
		m.of(labelsFor(r, ri, false)).observe(200, 3*time.Millisecond, 0)
	}
}

// The labels are kube-apiserver's for the same requests, as a running
// v1.37 kube-apiserver's /metrics showed them.
func TestRequestLabels(t *testing.T) {
	for _, c := range []struct {
		method, target, contentType string
		want                        requestLabels
	}{
		{"GET", "/api/v1/namespaces/default/configmaps/a", "", requestLabels{component: "apiserver", verb: "GET", version: "v1", resource: "configmaps", scope: "resource"}},
		{"GET", "/api/v1/namespaces/default/configmaps", "", requestLabels{component: "apiserver", verb: "LIST", version: "v1", resource: "configmaps", scope: "namespace"}},
		{"GET", "/api/v1/configmaps?limit=500", "", requestLabels{component: "apiserver", verb: "LIST", version: "v1", resource: "configmaps", scope: "cluster"}},
		{"GET", "/api/v1/namespaces/default/configmaps?watch=true", "", requestLabels{component: "apiserver", verb: "WATCH", version: "v1", resource: "configmaps", scope: "namespace"}},
		{"GET", "/api/v1/watch/namespaces/default/configmaps/a", "", requestLabels{component: "apiserver", verb: "WATCH", version: "v1", resource: "configmaps", scope: "resource"}},
		{"POST", "/api/v1/namespaces/default/configmaps?dryRun=All", "application/json", requestLabels{component: "apiserver", verb: "POST", dryRun: "All", version: "v1", resource: "configmaps", scope: "resource"}},
		{"PUT", "/apis/apps.example/v1/namespaces/x/widgets/w/status", "application/json", requestLabels{component: "apiserver", verb: "PUT", group: "apps.example", version: "v1", resource: "widgets", subresource: "status", scope: "resource"}},
		{"PATCH", "/api/v1/namespaces/default/configmaps/a", "application/merge-patch+json", requestLabels{component: "apiserver", verb: "PATCH", version: "v1", resource: "configmaps", scope: "resource"}},
		{"PATCH", "/api/v1/namespaces/default/configmaps/a?fieldManager=m", "application/apply-patch+yaml", requestLabels{component: "apiserver", verb: "APPLY", version: "v1", resource: "configmaps", scope: "resource"}},
		{"DELETE", "/api/v1/namespaces/default/configmaps/a?dryRun=All&dryRun=All", "", requestLabels{component: "apiserver", verb: "DELETE", dryRun: "All", version: "v1", resource: "configmaps", scope: "resource"}},
		{"DELETE", "/api/v1/namespaces/default/configmaps?dryRun=Some", "", requestLabels{component: "apiserver", verb: "DELETECOLLECTION", dryRun: "invalid", version: "v1", resource: "configmaps", scope: "namespace"}},
		{"POST", "/api/v1/namespaces/default/configmaps?dry%52un=All", "application/json", requestLabels{component: "apiserver", verb: "POST", dryRun: "All", version: "v1", resource: "configmaps", scope: "resource"}},
		{"PUT", "/api/v1/namespaces/gone/finalize", "application/json", requestLabels{component: "apiserver", verb: "PUT", version: "v1", resource: "namespaces", subresource: "finalize", scope: "resource"}},
		{"BREW", "/api/v1/namespaces/default/configmaps", "", requestLabels{component: "apiserver", verb: "other", version: "v1", resource: "configmaps", scope: "namespace"}},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if c.contentType != "" {
			r.Header.Set("Content-Type", c.contentType)
		}
		ri, ok := parsePath(r.URL.Path)
		if !ok {
			t.Fatalf("%s: not a resource path", c.target)
		}
		watch := c.method == "GET" && (ri.watchPrefix || (ri.name == "" && watchParam(r.URL.Query())))
		if got := labelsFor(r, ri, watch); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.target, got, c.want)
		}
	}
}

// The text parses as Prometheus reads it, and the histogram adds up: its
// buckets grow to its count, which is every code's count together, and
// its sum is the durations'.
func TestRequestMetricsText(t *testing.T) {
	var m requestMetrics
	get := requestLabels{component: "apiserver", verb: "GET", version: "v1", resource: "configmaps", scope: "resource"}
	watch := requestLabels{component: "apiserver", verb: "WATCH", version: "v1", resource: "configmaps", scope: "namespace"}
	for _, d := range []time.Duration{time.Millisecond, 5 * time.Millisecond, 30 * time.Millisecond, 2 * time.Second, 2 * time.Minute} {
		m.of(get).observe(200, d, 0)
	}
	m.of(get).observe(404, time.Millisecond, 0)
	m.of(watch).running.Add(2)
	m.of(watch).observe(0, time.Second, 0) // a watch written without WriteHeader: 200

	families := parseRequestMetrics(t, &m)
	counts := map[string]float64{}
	for _, s := range families["apiserver_request_total"].GetMetric() {
		counts[label(s, "verb")+" "+label(s, "code")] = s.GetCounter().GetValue()
		if label(s, "component") != "apiserver" {
			t.Errorf("component %q", label(s, "component"))
		}
	}
	if want := map[string]float64{"GET 200": 5, "GET 404": 1, "WATCH 200": 1}; !maps.Equal(counts, want) {
		t.Errorf("apiserver_request_total: %v, want %v", counts, want)
	}
	for _, s := range families["apiserver_request_duration_seconds"].GetMetric() {
		h := s.GetHistogram()
		want := map[string]uint64{"GET": 6, "WATCH": 1}[label(s, "verb")]
		if h.GetSampleCount() != want {
			t.Errorf("%s: count %d, want %d", label(s, "verb"), h.GetSampleCount(), want)
		}
		var last uint64
		for _, bk := range h.GetBucket() {
			if bk.GetCumulativeCount() < last {
				t.Errorf("%s: buckets shrink at le=%v", label(s, "verb"), bk.GetUpperBound())
			}
			last = bk.GetCumulativeCount()
		}
		if label(s, "verb") == "GET" {
			// 1 ms (twice) and 5 ms (the bound itself) in the first
			// bucket; the 2-minute one only in +Inf.
			for _, bk := range h.GetBucket() {
				want, ok := map[float64]uint64{0.005: 3, 0.025: 3, 0.05: 4, 2: 5, 60: 5}[bk.GetUpperBound()]
				if ok && bk.GetCumulativeCount() != want {
					t.Errorf("le=%v: %d, want %d", bk.GetUpperBound(), bk.GetCumulativeCount(), want)
				}
			}
			if sum := h.GetSampleSum(); sum < 122.037 || sum > 122.038 {
				t.Errorf("sum %v", sum)
			}
		}
	}
	running := families["apiserver_longrunning_requests"].GetMetric()
	if len(running) != 1 || running[0].GetGauge().GetValue() != 2 || label(running[0], "scope") != "namespace" {
		t.Errorf("apiserver_longrunning_requests: %v", running)
	}
}

// parseRequestMetrics writes m's metrics and parses them as Prometheus
// reads them.
func parseRequestMetrics(t *testing.T, m *requestMetrics) map[string]*dto.MetricFamily {
	t.Helper()
	var b bytes.Buffer
	m.write(&b)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	return families
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Requests counted from many goroutines while /metrics is read: none is
// lost (and the race detector, which CI runs here, sees no race).
func TestRequestMetricsConcurrent(t *testing.T) {
	var m requestMetrics
	verbs := []string{"GET", "LIST", "POST"}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				l := requestLabels{component: "apiserver", verb: verbs[(w+i)%len(verbs)], version: "v1", resource: "configmaps", scope: "resource"}
				m.of(l).observe(200+i%2, time.Duration(i)*time.Millisecond, 0)
			}
		})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			var b bytes.Buffer
			m.write(&b)
		}
	}()
	wg.Wait()
	<-done
	families := parseRequestMetrics(t, &m)
	var total float64
	for _, s := range families["apiserver_request_total"].GetMetric() {
		total += s.GetCounter().GetValue()
	}
	var observed uint64
	for _, s := range families["apiserver_request_duration_seconds"].GetMetric() {
		observed += s.GetHistogram().GetSampleCount()
	}
	if total != 4000 || observed != 4000 {
		t.Errorf("counted %v requests, observed %d durations; want 4000 each", total, observed)
	}
}

// apiserver_request_sli_duration_seconds is the duration histogram by
// kube-apiserver v1.37's SLI labels (no dry_run, no code) and buckets
// (from 50 ms), watches left out: a dry-run create and a create share a
// series, as do their codes.
func TestRequestSLIHistogram(t *testing.T) {
	var m requestMetrics
	post := requestLabels{component: "apiserver", verb: "POST", version: "v1", resource: "configmaps", scope: "resource"}
	dryRun := post
	dryRun.dryRun = "All"
	readyz := requestLabels{verb: "GET", subresource: "/readyz"}
	watch := requestLabels{component: "apiserver", verb: "WATCH", version: "v1", resource: "configmaps", scope: "namespace"}
	m.of(post).observe(201, 10*time.Millisecond, 0)
	m.of(post).observe(409, 60*time.Millisecond, 0)
	m.of(dryRun).observe(201, 30*time.Millisecond, 0)
	m.of(dryRun).observe(201, 90*time.Second, 0)
	m.of(readyz).observe(200, time.Millisecond, 0)
	m.of(watch).observe(200, time.Minute, 0)
	// 2 s, of which 1.95 s waiting for a seat and in webhooks: 50 ms
	// for the SLI (and the duration histogram's 2 s, below).
	m.of(post).observe(201, 2*time.Second, 1950*time.Millisecond)

	families := parseRequestMetrics(t, &m)
	f := families["apiserver_request_sli_duration_seconds"]
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("a %v", f.GetType())
	}
	got := map[string]string{}
	for _, s := range f.GetMetric() {
		var names []string
		for _, l := range s.GetLabel() {
			names = append(names, l.GetName())
		}
		if want := "component group resource scope subresource verb version"; strings.Join(names, " ") != want {
			t.Errorf("labels %v, want %s", names, want)
		}
		h := s.GetHistogram()
		var les []string
		for _, bk := range h.GetBucket() {
			les = append(les, fmt.Sprintf("%v:%d", bk.GetUpperBound(), bk.GetCumulativeCount()))
		}
		got[label(s, "verb")+" "+label(s, "subresource")] = fmt.Sprintf("count %d sum %.3f %s", h.GetSampleCount(), h.GetSampleSum(), strings.Join(les, " "))
	}
	want := map[string]string{
		"POST ":       "count 5 sum 90.150 0.05:3 0.1:4 0.2:4 0.4:4 0.6:4 0.8:4 1:4 1.25:4 1.5:4 2:4 3:4 4:4 5:4 6:4 8:4 10:4 15:4 20:4 30:4 45:4 60:4 +Inf:5",
		"GET /readyz": "count 1 sum 0.001 0.05:1 0.1:1 0.2:1 0.4:1 0.6:1 0.8:1 1:1 1.25:1 1.5:1 2:1 3:1 4:1 5:1 6:1 8:1 10:1 15:1 20:1 30:1 45:1 60:1 +Inf:1",
	}
	if !maps.Equal(got, want) {
		t.Errorf("apiserver_request_sli_duration_seconds:\n got %v\nwant %v", got, want)
	}
	for _, s := range families["apiserver_request_duration_seconds"].GetMetric() {
		if label(s, "verb") == "POST" && label(s, "dry_run") == "" {
			if h := s.GetHistogram(); h.GetSampleCount() != 3 || math.Abs(h.GetSampleSum()-2.07) > 1e-9 {
				t.Errorf("the duration histogram of POST: count %d sum %v, want 3 and 2.07 (the whole time)", h.GetSampleCount(), h.GetSampleSum())
			}
		}
	}
}

// A request refused before it was served (429) is counted in
// apiserver_request_total and apiserver_request_terminations_total (by
// the SLI's labels, dry runs summed, with code), and not in the latency
// histograms, as kube-apiserver counts its priority-and-fairness
// refusals.
func TestRequestTerminations(t *testing.T) {
	var m requestMetrics
	post := requestLabels{component: "apiserver", verb: "POST", version: "v1", resource: "configmaps", scope: "resource"}
	dryRun := post
	dryRun.dryRun = "All"
	list := requestLabels{component: "apiserver", verb: "LIST", version: "v1", resource: "configmaps", scope: "namespace"}
	m.of(post).observe(201, time.Millisecond, 0)
	m.of(post).refuse(429)
	m.of(post).refuse(429)
	m.of(dryRun).refuse(429)
	m.of(list).observe(200, time.Millisecond, 0)
	families := parseRequestMetrics(t, &m)
	var terminations []string
	for _, s := range families["apiserver_request_terminations_total"].GetMetric() {
		var names []string
		for _, l := range s.GetLabel() {
			names = append(names, l.GetName())
		}
		if want := "code component group resource scope subresource verb version"; strings.Join(names, " ") != want {
			t.Errorf("labels %v, want %s", names, want)
		}
		terminations = append(terminations, fmt.Sprintf("%s %s %v", label(s, "verb"), label(s, "code"), s.GetCounter().GetValue()))
	}
	if got := strings.Join(terminations, "; "); got != "POST 429 3" {
		t.Errorf("terminations %q, want POST 429 3 (and no LIST)", got)
	}
	totals := map[string]float64{}
	for _, s := range families["apiserver_request_total"].GetMetric() {
		totals[label(s, "verb")+" "+label(s, "dry_run")+" "+label(s, "code")] = s.GetCounter().GetValue()
	}
	if totals["POST  429"] != 2 || totals["POST All 429"] != 1 || totals["POST  201"] != 1 {
		t.Errorf("apiserver_request_total %v", totals)
	}
	for _, name := range []string{"apiserver_request_duration_seconds", "apiserver_request_sli_duration_seconds"} {
		for _, s := range families[name].GetMetric() {
			if label(s, "verb") == "POST" && s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("%s of POST counts %d, want the one served", name, s.GetHistogram().GetSampleCount())
			}
		}
	}
}
