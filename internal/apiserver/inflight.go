package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Request kinds, as kube-apiserver's apiserver_current_inflight_requests
// labels them: reads (GET) and the rest.
const (
	readOnly = iota
	mutating
)

// kindOf is a request's kind. kube-apiserver takes get, list and watch
// for reads, and a non-resource request's verb is its method, lowercased:
// so GET alone reads, and HEAD or OPTIONS count as mutating there too.
func kindOf(r *http.Request) int {
	if r.Method == http.MethodGet {
		return readOnly
	}
	return mutating
}

// inflightRequests counts the requests being served, watches aside, for
// kube-apiserver's stable apiserver_current_inflight_requests: for each
// kind, the most served at once during the last whole second (read off a
// running v1.37 kube-apiserver: 16 mutating under 16 clients creating, 1
// read-only for the scrape itself, watches not counted). kube-apiserver
// records them in its max-in-flight or priority-and-fairness filter, for
// every authenticated request; kplane has no such limit, so it counts
// them here.
//
// A request costs two short critical sections of one mutex: 14,000 a
// second at 7,000 creates a second.
type inflightRequests struct {
	mu   sync.Mutex
	sec  int64  // the second now counted (Unix)
	now  [2]int // served now
	high [2]int // the most at once during second sec
	last [2]int // the most at once during the second before sec
}

// add counts d requests of kind starting (1) or done (-1) at t.
func (f *inflightRequests) add(kind, d int, t time.Time) {
	f.mu.Lock()
	f.roll(t.Unix())
	f.now[kind] += d
	f.high[kind] = max(f.high[kind], f.now[kind])
	f.mu.Unlock()
}

// roll moves the count on to second sec.
func (f *inflightRequests) roll(sec int64) {
	switch {
	case sec <= f.sec:
		return
	case sec == f.sec+1:
		f.last = f.high
	default: // whole seconds without a change: what was served throughout
		f.last = f.now
	}
	f.sec, f.high = sec, f.now
}

// write appends the metric: the most served at once during the last whole
// second.
func (f *inflightRequests) write(b *bytes.Buffer, t time.Time) {
	f.mu.Lock()
	f.roll(t.Unix())
	last := f.last
	f.mu.Unlock()
	b.WriteString("# HELP apiserver_current_inflight_requests The most requests served at once during the last whole second, watches aside, by kind: readOnly (GET) or mutating.\n# TYPE apiserver_current_inflight_requests gauge\n")
	fmt.Fprintf(b, "apiserver_current_inflight_requests{request_kind=\"mutating\"} %d\n", last[mutating])
	fmt.Fprintf(b, "apiserver_current_inflight_requests{request_kind=\"readOnly\"} %d\n", last[readOnly])
}
