package main

import (
	"strings"
	"testing"
)

func TestParseProcessMetrics(t *testing.T) {
	// As kube-apiserver writes them: HELP and TYPE lines, labelled series
	// around, a float in exponent form; and a sample with a timestamp.
	in := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 12
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 41.37
process_cpu_seconds_total_other 99
process_resident_memory_bytes 3.0261248e+08
process_start_time_seconds 1.79571085576e+09 1795710856000
`
	s, err := parseProcessMetrics([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.cpu != 41.37 || s.rss != 302612480 || s.start != 1795710855.76 {
		t.Errorf("%+v", s)
	}
	for _, missing := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"} {
		var kept []string
		for line := range strings.Lines(in) {
			if !strings.HasPrefix(line, missing+" ") {
				kept = append(kept, line)
			}
		}
		if _, err := parseProcessMetrics([]byte(strings.Join(kept, ""))); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: %v", missing, err)
		}
	}
	if _, err := parseProcessMetrics([]byte("process_cpu_seconds_total x\n")); err == nil {
		t.Error("a value that is not a number: no error")
	}
}
