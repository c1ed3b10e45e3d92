package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// serverMetrics reads the API server's own process figures from its
// /metrics (Prometheus text format), for a server whose process the bench
// cannot see: a cluster elsewhere, or one started by someone else.
// kube-apiserver and kplane both serve process_cpu_seconds_total,
// process_resident_memory_bytes and process_start_time_seconds there.
// What it measures is the one process that answered: not etcd, and with
// several API servers behind one address, whichever answered (a span
// whose two samples came from different processes has no CPU figure).
type serverMetrics struct {
	rc rest.Interface
}

// processSample is one reading of /metrics.
type processSample struct {
	cpu   float64 // process_cpu_seconds_total
	rss   int64   // process_resident_memory_bytes
	start float64 // process_start_time_seconds: which process answered
}

// sample reads /metrics once.
func (m *serverMetrics) sample(ctx context.Context) (processSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	data, err := m.rc.Get().AbsPath("/metrics").SetHeader("Accept", "text/plain").DoRaw(ctx)
	if err != nil {
		return processSample{}, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseProcessMetrics(data)
}

// parseProcessMetrics picks the three process metrics out of a Prometheus
// text exposition. Each is a single sample without labels.
func parseProcessMetrics(data []byte) (processSample, error) {
	var s processSample
	var seen [3]bool
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var i int
		switch name {
		case "process_cpu_seconds_total":
			i = 0
		case "process_resident_memory_bytes":
			i = 1
		case "process_start_time_seconds":
			i = 2
		default:
			continue
		}
		// A sample may carry a timestamp after the value.
		value, _, _ = strings.Cut(strings.TrimSpace(value), " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return processSample{}, fmt.Errorf("/metrics: %s: %v", name, err)
		}
		switch i {
		case 0:
			s.cpu = v
		case 1:
			s.rss = int64(v)
		case 2:
			s.start = v
		}
		seen[i] = true
	}
	if err := sc.Err(); err != nil {
		return processSample{}, fmt.Errorf("/metrics: %w", err)
	}
	for i, name := range []string{"process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"} {
		if !seen[i] {
			return processSample{}, fmt.Errorf("/metrics has no %s", name)
		}
	}
	return s, nil
}
