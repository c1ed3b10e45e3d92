package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// requestLabels are the labels kube-apiserver gives a resource request in
// apiserver_request_total and apiserver_request_duration_seconds (read off
// a running v1.37 kube-apiserver's /metrics): the verb as it reports it
// (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION),
// the dryRun query, the group, version, resource and subresource, the
// scope (resource for a named object or a create, namespace, or cluster),
// and the component, apiserver (pathLabels gives the few other paths
// kube-apiserver counts).
type requestLabels struct {
	component, verb, dryRun, group, version, resource, subresource, scope string
}

// countRequest marks the request as one on a served resource, for the
// request metrics (ServeHTTP counts it when it is answered), and returns
// its series; nil when w is not the server's own writer. watch says
// whether the router took the request for a watch. Requests refused
// before they name a served resource (an unknown path, resource or
// subresource) are not counted: their labels would be whatever a client
// sent.
func (s *Server) countRequest(w http.ResponseWriter, r *http.Request, ri requestInfo, watch bool) *requestSeries {
	sw := statusWriterOf(w)
	if sw == nil {
		return nil
	}
	l := labelsFor(r, ri, watch)
	sw.series = s.requests.of(l)
	// kube-apiserver measures the responses of the routes it installs as
	// GET and LIST; a watch by ?watch on a list is one of those, one by
	// the /watch/ path is not.
	sw.sized = l.verb == "GET" || l.verb == "LIST" || l.verb == "WATCH" && !ri.watchPrefix
	if watch {
		// A watch holds its priority-and-fairness seat until it is set
		// up, as upstream's.
		sw.ticket.Done()
	}
	if watch && sw.inflight {
		// Long-running: kube-apiserver leaves watches out of its
		// in-flight counts.
		s.inflight.add(readOnly, -1, time.Now())
		sw.inflight = false
	}
	return sw.series
}

// countPath marks a request on one of the paths outside the resources
// that kube-apiserver counts, for the request metrics; see pathLabels.
func (s *Server) countPath(w http.ResponseWriter, r *http.Request, path, component string) {
	if sw := statusWriterOf(w); sw != nil {
		sw.series = s.requests.of(pathLabels(r, path, component))
		sw.sized = true // installed as GET, whatever the method
	}
}

// pathLabels returns the labels of a request outside the resources, as a
// running v1.37 kube-apiserver showed them. It counts only a few such
// paths, each with the path as subresource and no other label but the
// verb (the method: HEAD counts as GET, methods it does not know as
// other): /livez, /readyz and /healthz, not their single checks, with no
// component; openapi/v3, and openapi/v3/ for any document under it (one
// it does not have too), with no component; and api and apis, with
// component apiserver, when they answer aggregated discovery. It does not
// count /version, /metrics, /openapi/v2, discovery in the older form or
// the discovery of one group or version.
func pathLabels(r *http.Request, path, component string) requestLabels {
	l := requestLabels{component: component, subresource: path}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		l.verb = "GET"
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		l.verb = r.Method
	default:
		l.verb = "other"
	}
	return l
}

// labelsFor returns the labels of a request for resource ri, a watch if
// the router says so.
func labelsFor(r *http.Request, ri requestInfo, watch bool) requestLabels {
	l := requestLabels{component: "apiserver", group: ri.group, version: ri.version, resource: ri.resource, subresource: ri.subresource}
	collection := ri.name == ""
	switch r.Method {
	case http.MethodGet:
		switch {
		case watch:
			l.verb = "WATCH"
		case collection:
			l.verb = "LIST"
		default:
			l.verb = "GET"
		}
	case http.MethodDelete:
		l.verb = "DELETE"
		if collection {
			l.verb = "DELETECOLLECTION"
		}
	case http.MethodPatch:
		l.verb = "PATCH"
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			l.verb = "APPLY"
		}
	case http.MethodPost, http.MethodPut:
		l.verb = r.Method
	default:
		l.verb = "other" // refused; a method's name is the client's to choose
	}
	switch {
	case !collection || r.Method == http.MethodPost:
		l.scope = "resource"
	case ri.namespace != "":
		l.scope = "namespace"
	default:
		l.scope = "cluster"
	}
	l.dryRun = dryRunLabel(r.URL)
	return l
}

// dryRunLabel is the dryRun query as kube-apiserver labels it: its values
// without repeats, sorted, joined by commas; "invalid" if any is not All.
func dryRunLabel(u *url.URL) string {
	if !strings.Contains(u.RawQuery, "dryRun") && !strings.Contains(u.RawQuery, "%") {
		return "" // without parsing the query: no key can spell dryRun
	}
	v := u.Query()["dryRun"]
	for _, d := range v {
		if d != "All" {
			return "invalid"
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "All"
}

// durationBuckets are apiserver_request_duration_seconds' upper bounds, as
// kube-apiserver's.
var durationBuckets = [...]float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// sizeBuckets are apiserver_response_sizes' upper bounds, in bytes, as
// kube-apiserver v1.37's.
var sizeBuckets = [...]float64{1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// requestSeries counts the requests of one set of labels.
type requestSeries struct {
	buckets [len(durationBuckets) + 1]atomic.Uint64 // the last is +Inf alone
	nanos   atomic.Int64                            // the durations' sum
	// The durations the latency SLI counts: less the time spent waiting
	// for a priority-and-fairness seat and in admission webhooks.
	sli      [len(durationBuckets) + 1]atomic.Uint64
	sliNanos atomic.Int64
	codes    sync.Map                            // HTTP status code → *atomic.Uint64
	refused  atomic.Uint64                       // 429s before routing (apiserver_request_terminations_total)
	running  atomic.Int64                        // watches open now
	sizes    [len(sizeBuckets) + 1]atomic.Uint64 // response bytes, of the requests whose size is counted
	bytes    atomic.Int64                        // their sum
}

// requestMetrics are the request metrics of one server. A request costs a
// read-locked map lookup and a few atomic adds.
type requestMetrics struct {
	seriesMap[requestLabels, requestSeries]
	// deprecated holds the deprecated API versions requested since the
	// start (apiserver_requested_deprecated_apis), as their labels in the
	// text format.
	deprecated sync.Map // string → struct{}
}

// requestedDeprecated notes a request to a deprecated version of a
// resource (a CRD's), for apiserver_requested_deprecated_apis. kplane
// serves no built-in version with a planned removal, so removed_release
// is empty, as upstream's for CRDs.
func (m *requestMetrics) requestedDeprecated(ri requestInfo) {
	m.deprecated.LoadOrStore(fmt.Sprintf("group=%q,removed_release=\"\",resource=%q,subresource=%q,version=%q", ri.group, ri.resource, ri.subresource, ri.version), struct{}{})
}

// seriesMap holds the series of a metric by their labels, each made on
// first use. Looking one up that exists is a read-locked map lookup.
type seriesMap[L comparable, S any] struct {
	mu     sync.RWMutex
	series map[L]*S
}

// of returns the series of l, made on first use.
func (m *seriesMap[L, S]) of(l L) *S {
	m.mu.RLock()
	s := m.series[l]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.series[l]; s == nil {
		if m.series == nil {
			m.series = map[L]*S{}
		}
		s = new(S)
		m.series[l] = s
	}
	return s
}

// observeSize counts the bytes of a finished request's response body.
func (s *requestSeries) observeSize(n int64) {
	s.sizes[sort.SearchFloat64s(sizeBuckets[:], float64(n))].Add(1)
	s.bytes.Add(n)
}

// observe counts a finished request that took d, of which excluded was
// spent where the latency SLI does not count it (waiting for a seat, in
// admission webhooks).
func (s *requestSeries) observe(code int, d, excluded time.Duration) {
	s.count(code)
	i := sort.SearchFloat64s(durationBuckets[:], d.Seconds())
	s.buckets[i].Add(1)
	s.nanos.Add(int64(d))
	if excluded > 0 {
		d = max(0, d-excluded)
		i = sort.SearchFloat64s(durationBuckets[:], d.Seconds())
	}
	s.sli[i].Add(1)
	s.sliNanos.Add(int64(d))
}

// refuse counts a request refused before it was routed, in self-defense
// (429: no seat, too many in flight): in apiserver_request_total and
// apiserver_request_terminations_total, not in the latency histograms,
// as upstream counts it.
func (s *requestSeries) refuse(code int) {
	s.count(code)
	s.refused.Add(1)
}

// count counts an answer of code.
func (s *requestSeries) count(code int) {
	if code == 0 {
		code = http.StatusOK // written without WriteHeader
	}
	c, ok := s.codes.Load(code)
	if !ok {
		c, _ = s.codes.LoadOrStore(code, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// write appends the metrics in the Prometheus text format, series in
// label order.
func (m *requestMetrics) write(b *bytes.Buffer) {
	m.mu.RLock()
	all := make([]requestEntry, 0, len(m.series))
	for l, s := range m.series {
		all = append(all, requestEntry{l, l.String(), s})
	}
	m.mu.RUnlock()
	slices.SortFunc(all, func(a, b requestEntry) int { return strings.Compare(a.text, b.text) })

	b.WriteString("# HELP apiserver_request_total Requests answered, by component, verb, dry run, group, version, resource, subresource, scope and HTTP status code.\n# TYPE apiserver_request_total counter\n")
	for _, e := range all {
		var codes []int
		e.s.codes.Range(func(k, _ any) bool { codes = append(codes, k.(int)); return true })
		slices.Sort(codes)
		for _, code := range codes {
			c, _ := e.s.codes.Load(code)
			fmt.Fprintf(b, "apiserver_request_total{code=\"%d\",%s} %d\n", code, e.text, c.(*atomic.Uint64).Load())
		}
	}
	b.WriteString("# HELP apiserver_request_duration_seconds How long requests took to answer, watches for as long as they were open, in seconds.\n# TYPE apiserver_request_duration_seconds histogram\n")
	for _, e := range all {
		var counts [len(durationBuckets) + 1]uint64
		if loadCounts(counts[:], e.s.buckets[:]) == 0 {
			continue // none observed yet: only refused, or a watch still open
		}
		writeHistogram(b, "apiserver_request_duration_seconds", e.text, durationBuckets[:], counts[:], seconds(e.s.nanos.Load()))
	}
	writeSLIAndSizes(b, all)
	b.WriteString("# HELP apiserver_longrunning_requests Watches open now, by group, version, resource, subresource and scope.\n# TYPE apiserver_longrunning_requests gauge\n")
	for _, e := range all {
		if l := e.labels; l.verb == "WATCH" {
			fmt.Fprintf(b, "apiserver_longrunning_requests{component=\"apiserver\",group=%q,resource=%q,scope=%q,subresource=%q,verb=\"WATCH\",version=%q} %d\n",
				l.group, l.resource, l.scope, l.subresource, l.version, e.s.running.Load())
		}
	}
	var deprecated []string
	m.deprecated.Range(func(k, _ any) bool { deprecated = append(deprecated, k.(string)); return true })
	if len(deprecated) > 0 {
		slices.Sort(deprecated)
		b.WriteString("# HELP apiserver_requested_deprecated_apis Deprecated API versions requested since the start (1), by group, version, resource, subresource and the release that removes them.\n# TYPE apiserver_requested_deprecated_apis gauge\n")
		for _, labels := range deprecated {
			fmt.Fprintf(b, "apiserver_requested_deprecated_apis{%s} 1\n", labels)
		}
	}
}

// requestEntry is one series of the request metrics as /metrics writes
// it.
type requestEntry struct {
	labels requestLabels
	text   string // the labels in the text format
	s      *requestSeries
}

// sliFirstBucket is where the upper bounds of
// apiserver_request_sli_duration_seconds start in durationBuckets:
// kube-apiserver v1.37's are the duration histogram's from 50 ms on, so
// each of its buckets is a sum of the duration histogram's.
const sliFirstBucket = 2 // durationBuckets[2] is 0.05

// writeSLIAndSizes writes the two histograms kube-apiserver labels without
// dry_run or code, summing the series that differ only in those:
//   - apiserver_request_sli_duration_seconds, the histogram that
//     kube-apiserver's latency SLOs (and the kubernetes-mixin rules built
//     on them) read: the request durations without webhooks' time or the
//     priority-and-fairness queue's, neither of which kplane has, so they
//     are the duration histogram's, watches left out, in kube-apiserver's
//     coarser buckets;
//   - apiserver_response_sizes, the bytes of the response bodies of the
//     requests whose size is counted (reads; see countRequest).
//
// Both are computed at the scrape, from the series' counts.
func writeSLIAndSizes(b *bytes.Buffer, all []requestEntry) {
	type group struct {
		text    string
		watch   bool
		buckets [len(durationBuckets) + 1]uint64 // the SLI's
		nanos   int64
		sizes   [len(sizeBuckets) + 1]uint64
		bytes   int64
		refused uint64
	}
	var out []*group
	byText := map[string]*group{}
	for _, e := range all {
		l := e.labels
		text := fmt.Sprintf("component=%q,group=%q,resource=%q,scope=%q,subresource=%q,verb=%q,version=%q",
			l.component, l.group, l.resource, l.scope, l.subresource, l.verb, l.version)
		g := byText[text]
		if g == nil {
			g = &group{text: text, watch: l.verb == "WATCH"}
			byText[text] = g
			out = append(out, g)
		}
		if l.verb != "WATCH" {
			for j := range g.buckets {
				g.buckets[j] += e.s.sli[j].Load()
			}
			g.nanos += e.s.sliNanos.Load()
		}
		for j := range g.sizes {
			g.sizes[j] += e.s.sizes[j].Load()
		}
		g.bytes += e.s.bytes.Load()
		g.refused += e.s.refused.Load()
	}
	slices.SortFunc(out, func(a, b *group) int { return strings.Compare(a.text, b.text) })
	b.WriteString("# HELP apiserver_request_terminations_total Requests refused in self-defense before they were served (429: no priority-and-fairness seat, or too many in flight), by component, verb, group, version, resource, subresource, scope and HTTP status code.\n# TYPE apiserver_request_terminations_total counter\n")
	for _, g := range out {
		if g.refused > 0 {
			fmt.Fprintf(b, "apiserver_request_terminations_total{code=\"429\",%s} %d\n", g.text, g.refused)
		}
	}
	b.WriteString("# HELP apiserver_request_sli_duration_seconds How long requests took to answer, watches aside, in seconds, for latency SLIs: less the time they waited for a priority-and-fairness seat and spent in admission webhooks.\n# TYPE apiserver_request_sli_duration_seconds histogram\n")
	for _, g := range out {
		if g.watch || g.buckets == [len(g.buckets)]uint64{} {
			continue // watches, and series only refused
		}
		writeHistogram(b, "apiserver_request_sli_duration_seconds", g.text, durationBuckets[sliFirstBucket:], g.buckets[:], seconds(g.nanos))
	}
	b.WriteString("# HELP apiserver_response_sizes Bytes of the response bodies of reads, a watch's whole stream included.\n# TYPE apiserver_response_sizes histogram\n")
	for _, g := range out {
		var n uint64
		for _, c := range g.sizes {
			n += c
		}
		if n > 0 {
			writeHistogram(b, "apiserver_response_sizes", g.text, sizeBuckets[:], g.sizes[:], strconv.FormatInt(g.bytes, 10))
		}
	}
}

// writeHistogram writes one series of a histogram in the text format:
// counts holds, per bucket, the observations up to its bound and above the
// previous one, the last bucket those above every bound; bounds are the
// last len(bounds) of the upper bounds counts is kept by (a histogram with
// coarser buckets at its low end sums the finer ones); sum is written as
// given.
func writeHistogram(b *bytes.Buffer, name, labels string, bounds []float64, counts []uint64, sum string) {
	skip := len(counts) - 1 - len(bounds)
	var n uint64
	for j, c := range counts[:len(counts)-1] {
		n += c
		if j >= skip {
			fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %d\n", name, labels, strconv.FormatFloat(bounds[j-skip], 'g', -1, 64), n)
		}
	}
	n += counts[len(counts)-1]
	fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %d\n", name, labels, n)
	fmt.Fprintf(b, "%s_sum{%s} %s\n", name, labels, sum)
	fmt.Fprintf(b, "%s_count{%s} %d\n", name, labels, n)
}

// loadCounts reads a histogram's atomic counts into dst, and returns
// their sum.
func loadCounts(dst []uint64, src []atomic.Uint64) (total uint64) {
	for j := range src {
		dst[j] = src[j].Load()
		total += dst[j]
	}
	return total
}

// seconds is a sum of nanoseconds as the text format writes seconds.
func seconds(nanos int64) string {
	return strconv.FormatFloat(time.Duration(nanos).Seconds(), 'g', -1, 64)
}

// String is the labels in the text format, in name order after code.
// Their values are path segments and fixed words: %q escapes any
// backslash, quote or newline as the format wants.
func (l requestLabels) String() string {
	return fmt.Sprintf("component=%q,dry_run=%q,group=%q,resource=%q,scope=%q,subresource=%q,verb=%q,version=%q",
		l.component, l.dryRun, l.group, l.resource, l.scope, l.subresource, l.verb, l.version)
}
