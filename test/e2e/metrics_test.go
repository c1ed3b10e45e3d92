package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// scrapeMetrics reads /metrics with kubectl and parses it as Prometheus
// does.
func scrapeMetrics(t *testing.T, s *server) map[string]*dto.MetricFamily {
	t.Helper()
	out := s.mustKubectl(t, "get", "--raw", "/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, out)
	}
	return families
}

// counters are the series of the counter name on /metrics, by their
// labels written "name=value,..." in order.
func counters(t *testing.T, s *server, name string) map[string]float64 {
	t.Helper()
	counts := map[string]float64{}
	for _, m := range scrapeMetrics(t, s)[name].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		counts[strings.Join(labels, ",")] = m.GetCounter().GetValue()
	}
	return counts
}

// TestMetrics reads /metrics as Prometheus and kubectl do: the text
// format parses, the process figures are the server process's own (its
// RSS as /proc tells it, CPU that grows with work, its start), and only
// an authenticated client may read them.
func TestMetrics(t *testing.T) {
	before := time.Now()
	s := startServer(t, "--storage", "memory")
	pid := s.cmd.Process.Pid

	scrape := func() map[string]*dto.MetricFamily { return scrapeMetrics(t, s) }
	value := func(families map[string]*dto.MetricFamily, name string, typ dto.MetricType) float64 {
		t.Helper()
		f, ok := families[name]
		if !ok || f.GetType() != typ || len(f.Metric) != 1 {
			t.Fatalf("%s: %v, want one %v", name, f, typ)
		}
		m := f.Metric[0]
		if typ == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue()
		}
		return m.GetGauge().GetValue()
	}

	first := scrape()
	start := value(first, "process_start_time_seconds", dto.MetricType_GAUGE)
	// The process started after the test did.
	if st := time.Unix(0, int64(start*1e9)); st.Before(before) || st.After(time.Now()) {
		t.Errorf("process_start_time_seconds %v: not between %v and now", st, before)
	}
	rss := value(first, "process_resident_memory_bytes", dto.MetricType_GAUGE)
	if vm := vmRSS(t, pid); rss < vm/2 || rss > vm*2 {
		t.Errorf("process_resident_memory_bytes %.0f, /proc says %.0f", rss, vm)
	}
	if v := value(first, "process_open_fds", dto.MetricType_GAUGE); v < 3 {
		t.Errorf("process_open_fds %v", v)
	}
	if g := value(first, "go_goroutines", dto.MetricType_GAUGE); g < 2 {
		t.Errorf("go_goroutines %v", g)
	}
	if f := first["go_info"]; f == nil || len(f.Metric) != 1 || len(f.Metric[0].Label) != 1 ||
		f.Metric[0].Label[0].GetName() != "version" || !strings.HasPrefix(f.Metric[0].Label[0].GetValue(), "go") {
		t.Errorf("go_info: %v", f)
	}
	for _, name := range []string{"process_max_fds", "process_virtual_memory_bytes", "go_threads",
		"go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes"} {
		if v := value(first, name, dto.MetricType_GAUGE); v <= 0 {
			t.Errorf("%s: %v", name, v)
		}
	}

	// Work makes the CPU counter grow; the process stays the same one.
	cpu0 := value(first, "process_cpu_seconds_total", dto.MetricType_COUNTER)
	cs := kubernetes.NewForConfigOrDie(s.config())
	for i := range 300 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i)},
			Data: map[string]string{"v": strings.Repeat("x", 4096)}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := scrape()
	if cpu1 := value(second, "process_cpu_seconds_total", dto.MetricType_COUNTER); cpu1 <= cpu0 {
		t.Errorf("process_cpu_seconds_total %v after 300 creates, %v before", cpu1, cpu0)
	}
	if st := value(second, "process_start_time_seconds", dto.MetricType_GAUGE); st != start {
		t.Errorf("process_start_time_seconds changed: %v, then %v", start, st)
	}

	// The requests, labelled as kube-apiserver labels them.
	requests := func(families map[string]*dto.MetricFamily, verb, code, scope string) float64 {
		t.Helper()
		for _, m := range families["apiserver_request_total"].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["verb"] == verb && l["code"] == code && l["scope"] == scope && l["resource"] == "configmaps" &&
				l["group"] == "" && l["version"] == "v1" && l["component"] == "apiserver" && l["dry_run"] == "" && l["subresource"] == "" {
				return m.GetCounter().GetValue()
			}
		}
		return 0
	}
	if n := requests(second, "POST", "201", "resource"); n != 300 {
		t.Errorf("apiserver_request_total POST 201: %v, want 300", n)
	}
	// The SLI histogram that kube-apiserver's latency SLOs read counts the
	// same creates.
	sli := uint64(0)
	for _, m := range second["apiserver_request_sli_duration_seconds"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["verb"] == "POST" && l["resource"] == "configmaps" && l["component"] == "apiserver" {
			sli += m.GetHistogram().GetSampleCount()
		}
	}
	if sli != 300 {
		t.Errorf("apiserver_request_sli_duration_seconds POST configmaps: %d, want 300", sli)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "nope", metav1.GetOptions{}); err == nil {
		t.Fatal("got a ConfigMap that is not there")
	}
	all, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Apply(ctx, corev1ac.ConfigMap("applied", "default").WithData(map[string]string{"k": "v"}),
		metav1.ApplyOptions{FieldManager: "metrics-test"}); err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	third := scrape()
	if n := requests(third, "GET", "404", "resource"); n != 1 {
		t.Errorf("apiserver_request_total GET 404: %v, want 1", n)
	}
	if n := requests(third, "APPLY", "201", "resource"); n != 1 {
		t.Errorf("apiserver_request_total APPLY 201: %v, want 1", n)
	}
	if n := requests(third, "LIST", "200", "cluster"); n != 1 {
		t.Errorf("apiserver_request_total LIST 200 cluster: %v, want 1", n)
	}
	// The cluster-wide list's size, as written: at least its 300
	// ConfigMaps' names. Creates are not measured.
	var listed, posted uint64
	var listBytes float64
	for _, m := range third["apiserver_response_sizes"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		switch {
		case l["resource"] == "configmaps" && l["verb"] == "LIST" && l["scope"] == "cluster":
			listed, listBytes = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		case l["verb"] == "POST":
			posted += m.GetHistogram().GetSampleCount()
		}
	}
	if listed != 1 || listBytes < float64(300*len(`"name":"cm-000"`)) || posted != 0 {
		t.Errorf("apiserver_response_sizes: list %d, %v bytes; creates %d", listed, listBytes, posted)
	}
	watching := func(families map[string]*dto.MetricFamily) float64 {
		for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
			for _, p := range m.GetLabel() {
				if p.GetName() == "resource" && p.GetValue() == "configmaps" {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	if n := watching(third); n != 1 {
		t.Errorf("apiserver_longrunning_requests while watching: %v, want 1", n)
	}
	// The objects stored, as kube-apiserver counts them: the list's and
	// the applied one.
	objects := func(families map[string]*dto.MetricFamily, name string, labels ...string) float64 {
		for _, m := range families[name].GetMetric() {
			var got []string
			for _, p := range m.GetLabel() {
				got = append(got, p.GetName()+"="+p.GetValue())
			}
			if slices.Equal(got, labels) {
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	eventually(t, 10*time.Second, "the ConfigMaps counted", func() (bool, string) {
		f := scrape()
		n, old := objects(f, "apiserver_resource_objects", "group=", "resource=configmaps"), objects(f, "apiserver_storage_objects", "resource=configmaps")
		want := float64(len(all.Items) + 1)
		return n == want && old == want, fmt.Sprintf("apiserver_resource_objects %v, apiserver_storage_objects %v, want %v", n, old, want)
	})
	// Requests in flight: three creates whose bodies are half sent, while
	// five more watches are open. kube-apiserver's gauge is the most
	// served at once in the last whole second; watches are left out.
	hc, err := rest.HTTPClientFor(s.config())
	if err != nil {
		t.Fatal(err)
	}
	var more []watch.Interface
	for range 5 {
		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, w)
	}
	inflight := func(f map[string]*dto.MetricFamily, kind string) float64 {
		for _, m := range f["apiserver_current_inflight_requests"].GetMetric() {
			if l := m.GetLabel(); len(l) == 1 && l[0].GetName() == "request_kind" && l[0].GetValue() == kind {
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	var held []*io.PipeWriter
	created := make(chan int, 3)
	for i := range 3 {
		pr, pw := io.Pipe()
		held = append(held, pw)
		req, err := http.NewRequest(http.MethodPost, s.config().Host+"/api/v1/namespaces/default/configmaps", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		go func() {
			resp, err := hc.Do(req)
			if err != nil {
				created <- -1
				return
			}
			resp.Body.Close()
			created <- resp.StatusCode
		}()
		go fmt.Fprintf(pw, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held-%d"},`, i)
	}
	eventually(t, 10*time.Second, "three creates in flight", func() (bool, string) {
		f := scrape()
		m, r := inflight(f, "mutating"), inflight(f, "readOnly")
		if r > 1 {
			t.Fatalf("apiserver_current_inflight_requests readOnly %v with six watches open and one scrape at a time: watches counted", r)
		}
		return m == 3, fmt.Sprintf("mutating %v, readOnly %v", m, r)
	})
	for _, pw := range held {
		fmt.Fprint(pw, `"data":{"k":"v"}}`)
		pw.Close()
	}
	for range held {
		if code := <-created; code != http.StatusCreated {
			t.Fatalf("a held create answered %d", code)
		}
	}
	// The six watches got the ConfigMaps there were (a watch from no
	// resourceVersion starts with them), then the three creates: every
	// event received was counted and sized, as kube-apiserver does.
	received := 0
	for i, w := range append([]watch.Interface{w}, more...) {
		for held := 0; held < 3; {
			select {
			case ev := <-w.ResultChan():
				received++
				if cm, ok := ev.Object.(*corev1.ConfigMap); ok && strings.HasPrefix(cm.Name, "held-") {
					held++
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %d got %d of the 3 creates", i, held)
			}
		}
	}
	f := scrape()
	events := value(f, "apiserver_watch_events_total", dto.MetricType_COUNTER)
	var sizes *dto.Histogram
	if h := f["apiserver_watch_events_sizes"]; h.GetType() == dto.MetricType_HISTOGRAM && len(h.Metric) == 1 {
		sizes = h.Metric[0].GetHistogram()
	}
	n := float64(received)
	if events != n || sizes.GetSampleCount() != uint64(received) || sizes.GetSampleSum() < n*100 || sizes.GetSampleSum() > n*8192 ||
		len(sizes.GetBucket()) != 9 || sizes.GetBucket()[0].GetUpperBound() != 1024 ||
		sizes.GetBucket()[0].GetCumulativeCount() < 6*3 || sizes.GetBucket()[2].GetCumulativeCount() >= uint64(received) ||
		sizes.GetBucket()[3].GetCumulativeCount() != uint64(received) {
		// The held creates are under 1 KiB; the ConfigMaps of 4 KiB of
		// data, over 4 KiB and under 8.
		t.Errorf("%d events received; apiserver_watch_events_total %v, apiserver_watch_events_sizes %v", received, events, sizes)
	}
	if l := f["apiserver_watch_events_total"].Metric[0].GetLabel(); fmt.Sprint(l) != fmt.Sprint(f["apiserver_watch_events_sizes"].Metric[0].GetLabel()) ||
		len(l) != 3 || l[0].GetValue() != "" || l[1].GetValue() != "configmaps" || l[2].GetValue() != "v1" {
		t.Errorf("apiserver_watch_events_total's labels: %v", l)
	}
	eventually(t, 10*time.Second, "no create in flight", func() (bool, string) {
		m := inflight(scrape(), "mutating")
		return m == 0, fmt.Sprintf("mutating %v", m)
	})
	for _, w := range more {
		w.Stop()
	}

	w.Stop()
	eventually(t, 10*time.Second, "the watches counted once they stopped", func() (bool, string) {
		f := scrape()
		open, done := watching(f), requests(f, "WATCH", "200", "namespace")
		return open == 0 && done == 6, fmt.Sprintf("%v open, %v counted", open, done)
	})

	// Only for authenticated clients; any method reads, as upstream's.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS(t, s)}}
	resp, err := anon.Get(s.config().Host + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous /metrics: %d", resp.StatusCode)
	}
	code, _, body := s.call(t, http.MethodPost, "/metrics", "text/plain", nil)
	if code != http.StatusOK || !bytes.Contains(body, []byte("\nprocess_cpu_seconds_total ")) {
		t.Errorf("POST /metrics: %d %s", code, body)
	}
	code, header, body := s.call(t, http.MethodGet, "/metrics", "", nil)
	if code != http.StatusOK || header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" || !bytes.Contains(body, []byte("\nprocess_cpu_seconds_total ")) {
		t.Errorf("GET /metrics: %d %q\n%s", code, header.Get("Content-Type"), body)
	}
}

// vmRSS is VmRSS of process pid, in bytes.
func vmRSS(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
