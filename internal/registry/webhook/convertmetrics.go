package webhook

import (
	"sort"
	"sync"
	"time"
)

// The conversion metrics kube-apiserver serves (apiextensions-apiserver's
// conversion/metrics.go), kept here and written on /metrics by app:
//   - apiserver_conversion_webhook_request_total{result,failure_type} and
//     apiserver_conversion_webhook_duration_seconds{result,failure_type}:
//     each call, "success" or "failure" and why;
//   - apiserver_crd_conversion_webhook_duration_seconds{crd_name,
//     from_version,to_version,succeeded}: each call by CRD and versions.

// The failure types, upstream's words.
const (
	failureCall          = "conversion_webhook_call_failure"
	failureMalformed     = "conversion_webhook_malformed_response_failure"
	failurePartial       = "conversion_webhook_partial_response_failure"
	failureInvalidObject = "conversion_webhook_invalid_converted_object_failure"
)

var (
	// callBounds are upstream's buckets of a call's duration: 5 ms to 60 s.
	callBounds = []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 45, 60}
	// crdBounds are upstream's buckets by CRD: 1 ms doubling 15 times.
	crdBounds = func() []float64 {
		b := make([]float64, 15)
		for i := range b {
			b[i] = 0.001 * float64(int(1)<<i)
		}
		return b
	}()
)

// Series is one series of a metric: its labels (name, value, …, in name
// order) and, for a histogram, its observations by bucket (Bounds; the
// last count those above every bound) with their sum in seconds; for a
// counter, Counts holds its one count.
type Series struct {
	Labels []string
	Bounds []float64
	Counts []uint64
	Sum    float64
}

// Total is the number of observations of s.
func (s Series) Total() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// conversionMetrics are Conversions' figures.
type conversionMetrics struct {
	mu    sync.Mutex
	calls map[[2]string]*series // by result, failure type
	crds  map[[4]string]*series // by CRD name, from and to versions, succeeded
}

type series struct {
	counts []uint64
	sum    float64
}

func (s *series) observe(bounds []float64, d time.Duration) {
	sec := d.Seconds()
	i := sort.SearchFloat64s(bounds, sec) // the first bound ≥ sec
	s.counts[i]++
	s.sum += sec
}

// observe records a call of crd's webhook converting from one version to
// another that took d and failed for failure ("" when it succeeded).
func (m *conversionMetrics) observe(crd, from, to, failure string, d time.Duration) {
	result, ok := "success", "true"
	if failure != "" {
		result, ok = "failure", "false"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls, m.crds = map[[2]string]*series{}, map[[4]string]*series{}
	}
	get := func(bounds []float64, s *series) *series {
		if s == nil {
			s = &series{counts: make([]uint64, len(bounds)+1)}
		}
		return s
	}
	ck := [2]string{result, failure}
	m.calls[ck] = get(callBounds, m.calls[ck])
	m.calls[ck].observe(callBounds, d)
	rk := [4]string{crd, from, to, ok}
	m.crds[rk] = get(crdBounds, m.crds[rk])
	m.crds[rk].observe(crdBounds, d)
}

// Metrics returns the calls' series (labels failure_type, result) and the
// CRDs' (crd_name, from_version, succeeded, to_version), in label order.
func (c *Conversions) Metrics() (calls, crds []Series) {
	m := &c.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.calls {
		calls = append(calls, Series{Labels: []string{"failure_type", k[1], "result", k[0]},
			Bounds: callBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	for k, s := range m.crds {
		crds = append(crds, Series{Labels: []string{"crd_name", k[0], "from_version", k[1], "succeeded", k[3], "to_version", k[2]},
			Bounds: crdBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	byLabels(calls)
	byLabels(crds)
	return calls, crds
}

// byLabels sorts ss by their labels, as /metrics lists series.
func byLabels(ss []Series) {
	sort.Slice(ss, func(i, j int) bool { return lessLabels(ss[i].Labels, ss[j].Labels) })
}

func lessLabels(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
