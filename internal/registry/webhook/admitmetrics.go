package webhook

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The admission webhook metrics kube-apiserver serves (k8s.io/apiserver's
// admission/metrics), kept here and written on /metrics by app, each by
// webhook name and type ("admit" for mutating, "validating"):
//   - apiserver_admission_webhook_admission_duration_seconds{name,type,
//     operation,rejected}: each call's duration;
//   - apiserver_admission_webhook_request_total{name,type,operation,code,
//     rejected}: each call, with the HTTP code it came to (200, a refusal's
//     or a failure's code, 0 for an error of the server's own);
//   - apiserver_admission_webhook_rejection_count{name,type,operation,
//     error_type,rejection_code}: the calls that refused the request;
//   - apiserver_admission_webhook_fail_open_count{name,type}: failed calls
//     ignored under failurePolicy Ignore.

// admissionBounds are upstream's buckets of a call's duration.
var admissionBounds = []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25}

type admissionMetrics struct {
	mu         sync.Mutex
	durations  map[[4]string]*series // name, type, operation, rejected
	requests   map[[5]string]uint64  // name, type, operation, code, rejected
	rejections map[[5]string]uint64  // name, type, operation, error type, rejection code
	failOpen   map[[2]string]uint64  // name, type
}

// observe records a call of h for op that took d and ended with err (the
// call's own error, before the failure policy).
func (m *admissionMetrics) observe(h *hook, op string, d time.Duration, err error) {
	typ := "validating"
	if h.mutating {
		typ = "admit"
	}
	code, rejected := int32(http.StatusOK), false
	var refusedKey *[5]string
	var failed *callError
	var refused *rejection
	switch {
	case err == nil:
	case errors.As(err, &failed):
		code = failed.code
		if h.failurePolicy != admissionregistrationv1.Ignore {
			rejected = true
			if !errors.Is(failed.reason, context.Canceled) {
				refusedKey = &[5]string{h.name, typ, op, "calling_webhook_error", codeLabel(code)}
			}
		}
	case errors.As(err, &refused):
		code, rejected = refused.ErrStatus.Code, true
		refusedKey = &[5]string{h.name, typ, op, "no_error", codeLabel(code)}
	default:
		code, rejected = 0, true
		refusedKey = &[5]string{h.name, typ, op, "apiserver_internal_error", "0"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.durations == nil {
		m.durations, m.requests = map[[4]string]*series{}, map[[5]string]uint64{}
		m.rejections, m.failOpen = map[[5]string]uint64{}, map[[2]string]uint64{}
	}
	r := strconv.FormatBool(rejected)
	dk := [4]string{h.name, typ, op, r}
	if m.durations[dk] == nil {
		m.durations[dk] = &series{counts: make([]uint64, len(admissionBounds)+1)}
	}
	m.durations[dk].observe(admissionBounds, d)
	m.requests[[5]string{h.name, typ, op, codeLabel(code), r}]++
	if refusedKey != nil {
		m.rejections[*refusedKey]++
	}
	if failed != nil && !rejected && !errors.Is(failed.reason, context.Canceled) {
		m.failOpen[[2]string{h.name, typ}]++
	}
}

// codeLabel is a code as upstream labels it: above 600 as 600, to bound
// the series.
func codeLabel(code int32) string {
	return strconv.Itoa(int(min(code, 600)))
}

// AdmissionMetrics are the admission webhook metrics' series, each in
// label order: the durations (histograms), the requests, the rejections
// and the calls failed open (counters).
func (w *Webhooks) AdmissionMetrics() (durations, requests, rejections, failOpen []Series) {
	m := &w.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.durations {
		durations = append(durations, Series{Labels: []string{"name", k[0], "operation", k[2], "rejected", k[3], "type", k[1]},
			Bounds: admissionBounds, Counts: append([]uint64(nil), s.counts...), Sum: s.sum})
	}
	for k, n := range m.requests {
		requests = append(requests, Series{Labels: []string{"code", k[3], "name", k[0], "operation", k[2], "rejected", k[4], "type", k[1]}, Counts: []uint64{n}})
	}
	for k, n := range m.rejections {
		rejections = append(rejections, Series{Labels: []string{"error_type", k[3], "name", k[0], "operation", k[2], "rejection_code", k[4], "type", k[1]}, Counts: []uint64{n}})
	}
	for k, n := range m.failOpen {
		failOpen = append(failOpen, Series{Labels: []string{"name", k[0], "type", k[1]}, Counts: []uint64{n}})
	}
	for _, ss := range [][]Series{durations, requests, rejections, failOpen} {
		byLabels(ss)
	}
	return durations, requests, rejections, failOpen
}
