package apiserver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// apiserver_current_inflight_requests is, for each kind, the most served
// at once during the last whole second.
func TestInflightRequestsReportTheLastSecondsMost(t *testing.T) {
	var f inflightRequests
	at := func(sec float64) time.Time { return time.Unix(0, int64(sec*1e9)) }
	read := func(sec float64) (mutating, readOnly string) {
		t.Helper()
		var b bytes.Buffer
		f.write(&b, at(sec))
		for l := range strings.Lines(b.String()) {
			if v, ok := strings.CutPrefix(l, `apiserver_current_inflight_requests{request_kind="mutating"} `); ok {
				mutating = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, `apiserver_current_inflight_requests{request_kind="readOnly"} `); ok {
				readOnly = strings.TrimSpace(v)
			}
		}
		return mutating, readOnly
	}
	check := func(sec float64, wantMutating, wantReadOnly string) {
		t.Helper()
		if m, r := read(sec); m != wantMutating || r != wantReadOnly {
			t.Errorf("at %vs: mutating %s, readOnly %s; want %s, %s", sec, m, r, wantMutating, wantReadOnly)
		}
	}

	for i := range 3 {
		f.add(mutating, 1, at(100.1+float64(i)/10))
	}
	f.add(readOnly, 1, at(100.4))
	f.add(mutating, -1, at(100.5))
	f.add(mutating, -1, at(100.6))
	check(100.9, "0", "0") // second 100 is not over
	check(101.2, "3", "1") // its most at once, though one is left now
	// Whole seconds without a change: what was served throughout.
	check(103.0, "1", "1")
	// A burst within a second counts, though it is gone by its end.
	f.add(mutating, 1, at(103.5))
	f.add(mutating, 1, at(103.6))
	f.add(mutating, -2, at(103.7))
	f.add(readOnly, -1, at(103.8))
	check(104.1, "3", "1")
	check(105.0, "1", "0")
	// A burst, then whole seconds without a change: those seconds' most
	// is what stayed, not the burst's.
	f.add(mutating, 3, at(106.5))
	f.add(mutating, -3, at(106.6))
	check(109.0, "1", "0")
}

// A request leaves the count when its handler panics (net/http recovers
// the panic), as when it returns.
func TestInflightRequestsLeftByAPanic(t *testing.T) {
	s := New(Config{Anonymous: true})
	s.mux.HandleFunc("/panics", func(http.ResponseWriter, *http.Request) { panic("handler") })
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler did not panic")
			}
		}()
		s.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/panics", nil))
	}()
	s.inflight.mu.Lock()
	defer s.inflight.mu.Unlock()
	if s.inflight.now != [2]int{} {
		t.Fatalf("after a panic, %v requests counted in flight (readOnly, mutating)", s.inflight.now)
	}
}
