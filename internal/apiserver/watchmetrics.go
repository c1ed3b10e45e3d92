package apiserver

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// watchEventLabels are the labels of kube-apiserver's (beta)
// apiserver_watch_events_total and apiserver_watch_events_sizes, as a
// running v1.37 kube-apiserver showed them: the watch's group, resource
// and version.
type watchEventLabels struct{ group, resource, version string }

// watchSizeBuckets are apiserver_watch_events_sizes' upper bounds in bytes,
// as kube-apiserver's: 1 KiB, doubling, to 128 KiB.
var watchSizeBuckets = [...]float64{1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}

// watchEventSeries counts the events sent to the watches of one set of
// labels.
type watchEventSeries struct {
	buckets [len(watchSizeBuckets) + 1]atomic.Uint64 // the last is +Inf alone
	bytes   atomic.Int64
}

// sent counts an event of n bytes, as encoded (before any gzip).
func (s *watchEventSeries) sent(n int) {
	s.buckets[sort.SearchFloat64s(watchSizeBuckets[:], float64(n))].Add(1)
	s.bytes.Add(int64(n))
}

// watchEventMetrics are the watch event metrics of one server. A watch
// looks its series up once; an event costs two atomic adds.
type watchEventMetrics struct {
	seriesMap[watchEventLabels, watchEventSeries]
}

// write appends the metrics in the Prometheus text format, series in
// label order.
func (m *watchEventMetrics) write(b *bytes.Buffer) {
	type entry struct {
		text string
		s    *watchEventSeries
	}
	m.mu.RLock()
	all := make([]entry, 0, len(m.series))
	for l, s := range m.series {
		all = append(all, entry{fmt.Sprintf("group=%q,resource=%q,version=%q", l.group, l.resource, l.version), s})
	}
	m.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.text, b.text) })
	counts := make([][len(watchSizeBuckets) + 1]uint64, len(all))
	for i, e := range all {
		loadCounts(counts[i][:], e.s.buckets[:])
	}
	total := func(c [len(watchSizeBuckets) + 1]uint64) (n uint64) {
		for _, v := range c {
			n += v
		}
		return n
	}
	b.WriteString("# HELP apiserver_watch_events_total Events sent to watch clients, by group, resource and version.\n# TYPE apiserver_watch_events_total counter\n")
	for i, e := range all {
		fmt.Fprintf(b, "apiserver_watch_events_total{%s} %d\n", e.text, total(counts[i]))
	}
	b.WriteString("# HELP apiserver_watch_events_sizes Sizes of the events sent to watch clients, as encoded, in bytes.\n# TYPE apiserver_watch_events_sizes histogram\n")
	for i, e := range all {
		writeHistogram(b, "apiserver_watch_events_sizes", e.text, watchSizeBuckets[:], counts[i][:], strconv.FormatInt(e.s.bytes.Load(), 10))
	}
}
