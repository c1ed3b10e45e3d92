package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}} {
		if got := percentile(s, c.p); got != c.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("percentile(empty) = %v, want 0", got)
	}
	if got := percentile([]time.Duration{7}, 50); got != 7 {
		t.Errorf("percentile(one sample) = %v, want it", got)
	}
}

func TestJSONLineHasEveryFieldAndNullsForUnknowns(t *testing.T) {
	r := Result{Name: "create", Mode: "external", Ops: 3, Seconds: 1.5, OpsPerSec: 2}
	r.setLatencies([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	r.addExtra(map[string]any{"workers": 16})
	var b bytes.Buffer
	if err := writeJSONLine(&b, r); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("not one line: %q", line)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "mode", "ops", "seconds", "ops_per_s", "p50_ms", "p99_ms", "conflicts", "server_cpu_per_op", "client_cpu_per_op", "idle_percent", "rss_bytes", "extra"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, line)
		}
	}
	if m["p50_ms"] != 2.0 || m["p99_ms"] != 3.0 {
		t.Errorf("p50, p99 = %v, %v; want 2, 3", m["p50_ms"], m["p99_ms"])
	}
	if m["server_cpu_per_op"] != nil || m["rss_bytes"] != nil {
		t.Errorf("unknown CPU and RSS should be null: %s", line)
	}
	if _, ok := m["error"]; ok {
		t.Errorf("error present on success: %s", line)
	}
}

func TestProtocolsNamesEachOnceInOrder(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"", ""}, ""},
		{[]string{"HTTP/2.0", "", "HTTP/2.0"}, "over HTTP/2.0"},
		{[]string{"HTTP/1.1", "HTTP/2.0", "HTTP/1.1"}, "over HTTP/1.1 and HTTP/2.0"},
	} {
		var rs []Result
		for _, p := range c.in {
			rs = append(rs, Result{Name: "get", Protocol: p})
		}
		if got := protocols(rs); got != c.want {
			t.Errorf("protocols(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCompareTableShowsRatiosAndReference(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rss := int64(20 << 20)
	byMode := map[string][]Result{
		"embedded": {{Name: "create", Ops: 5000, OpsPerSec: 6000, P50ms: f(2), P99ms: f(8), ServerCPUPerOp: f(0.0002)},
			{Name: "start-to-ready", Ops: 1, Seconds: 0.05, RSSBytes: &rss}},
		"etcd": {{Name: "create", Ops: 5000, OpsPerSec: 2000, P50ms: f(4), P99ms: f(16), ServerCPUPerOp: f(0.0008)},
			{Name: "start-to-ready", Ops: 1, Seconds: 0.1, Error: "boom"}},
	}
	var b bytes.Buffer
	if err := compareTable(&b, []string{"embedded", "etcd"}, byMode); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	row := func(prefix string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && strings.HasPrefix(strings.Join(f, " "), prefix) {
				return f
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, out)
		return nil
	}
	// scenario metric embedded etcd embedded/etcd ref embedded/ref
	if got, want := row("create ops/s"), []string{"create", "ops/s", "6000", "2000", "3.00x", "1090", "5.50x"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("create ops/s row = %v, want %v", got, want)
	}
	if got := row("create p99 ms"); got[5] != "0.50x" {
		t.Errorf("create p99 ratio = %v, want 0.50x", got)
	}
	if got := row("create cpu ms/op"); got[3] != "0.200" || got[5] != "0.25x" {
		t.Errorf("cpu row = %v, want 0.200 ms and 0.25x", got)
	}
	if got := row("start-to-ready (FAILED) rss MB"); got[4] != "20.0" || got[5] != "n/a" || got[6] != "-" {
		t.Errorf("rss row = %v, want 20.0 MB, n/a for etcd and no ratio", got)
	}
	if strings.Contains(out, "get ") {
		t.Errorf("a scenario no mode ran has a row:\n%s", out)
	}
	// The peak RSS of lists-at-once, as measured (int64) and as read back
	// from a JSON line (float64).
	byMode = map[string][]Result{
		"embedded": {{Name: "lists-at-once", Ops: 50, OpsPerSec: 20, Extra: map[string]any{"server_rss_peak_bytes": int64(100 << 20)}}},
		"etcd":     {{Name: "lists-at-once", Ops: 50, OpsPerSec: 10, Extra: map[string]any{"server_rss_peak_bytes": float64(400 << 20)}}},
	}
	b.Reset()
	if err := compareTable(&b, []string{"embedded", "etcd"}, byMode); err != nil {
		t.Fatal(err)
	}
	out = b.String()
	if got := row("lists-at-once peak rss MB"); got[4] != "100.0" || got[5] != "400.0" || got[6] != "0.25x" {
		t.Errorf("peak rss row = %v, want 100.0 and 400.0 MB, 0.25x", got)
	}
}

func TestCompareTableShowsMediansOfRounds(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	create := func(opsPerSec, p50 float64) Result {
		return Result{Name: "create", Ops: 5000, OpsPerSec: opsPerSec, P50ms: f(p50), P99ms: f(2 * p50)}
	}
	byMode := map[string][]Result{
		// Three rounds each, out of order: the median is the middle one.
		"embedded": {create(7000, 2), create(5000, 4), create(6000, 3)},
		// Two rounds: the mean of the two; a round that failed still
		// marks the row.
		"etcd": {create(2000, 5), create(3000, 7), {Name: "create", Error: "boom"}},
	}
	var b bytes.Buffer
	if err := compareTable(&b, []string{"embedded", "etcd"}, byMode); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{
		// 6000 is the median; 5000/1090 and 7000/1090 the spread.
		"create (FAILED) ops/s 6000 2500 2.40x 1090 5.50x (4.59–6.42)",
		"create (FAILED) p50 ms 3.0 6.0 0.50x 13.0 0.23x (0.15–0.31)",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("no row %q in\n%s", want, b.String())
		}
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 1..4 = %v, want 2.5", got)
	}
}

func TestParseStatCPUCountsFromTheLastParen(t *testing.T) {
	// Field 2 may hold spaces and parentheses.
	line := "4242 (kplane (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 12 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.8 {
		t.Errorf("cpu = %v s, want 3.8 (250+130 ticks)", got)
	}
	if _, err := parseStatCPU([]byte("4242 (kplane) S 1")); err == nil {
		t.Error("a short line parsed")
	}
}

func TestCheckWatchFindsLostDuplicatedAndReordered(t *testing.T) {
	t0 := time.Now()
	rvs := []string{"10", "11", "12"}
	returned := []time.Time{t0, t0.Add(time.Millisecond), t0.Add(2 * time.Millisecond)}
	at := func(seq int, d time.Duration) receipt {
		return receipt{seq: seq, rv: rvs[seq], sent: t0, at: returned[seq].Add(d)}
	}
	t.Run("a complete history has latencies and no problems", func(t *testing.T) {
		got := [][]receipt{{at(0, time.Millisecond), at(1, 2*time.Millisecond), at(2, -time.Millisecond)}}
		lat, fromSend, early, p := checkWatch(got, make([]error, 1), rvs, returned)
		if p.err != nil || len(lat) != 3 || len(fromSend) != 3 || early != 1 || lat[2] != 0 {
			t.Errorf("lat %v early %d problems %+v", lat, early, p)
		}
	})
	t.Run("a lost, a duplicated and a reordered event are each counted", func(t *testing.T) {
		got := [][]receipt{
			{at(0, 0), at(2, 0)},                     // lost 1
			{at(0, 0), at(0, 0), at(1, 0), at(2, 0)}, // duplicated 0
			{at(1, 0), at(0, 0), at(2, 0)},           // reordered
		}
		_, _, _, p := checkWatch(got, make([]error, 3), rvs, returned)
		if p.lost != 1 || p.duplicated != 1 || p.outOfOrder != 1 || p.err == nil {
			t.Errorf("problems %+v, want 1 lost, 1 duplicated, 1 out of order", p)
		}
	})
}

func TestSelectScenarios(t *testing.T) {
	all, err := selectScenarios("all")
	if err != nil || len(all) != len(scenarios) {
		t.Fatalf("all: %d, %v", len(all), err)
	}
	// The order is fixed whatever the flag's order.
	two, err := selectScenarios("watch,create")
	if err != nil || len(two) != 2 || two[0].name != "create" || two[1].name != "watch" {
		t.Errorf("watch,create: %v %v", two, err)
	}
	if _, err := selectScenarios("create,nope"); err == nil {
		t.Error("an unknown scenario was accepted")
	}
	// Opt-in scenarios run only when named, after the others.
	for _, s := range all {
		if s.name == "lists-at-once" {
			t.Error("all runs lists-at-once")
		}
	}
	opt, err := selectScenarios("lists-at-once,create")
	if err != nil || len(opt) != 2 || opt[0].name != "create" || opt[1].name != "lists-at-once" {
		t.Errorf("lists-at-once,create: %v %v", opt, err)
	}
}

// prefixCounter counts a prefix however the stream is cut.
func TestPrefixCounterCountsAcrossWrites(t *testing.T) {
	data := []byte(strings.Repeat(`{"metadata":{"name":"cm-00001"}},{"name":"cx-"},"name":"cm`, 40) + `"name":"cm-`)
	want := bytes.Count(data, bulkNamePrefix)
	if want != 41 {
		t.Fatalf("the test's data holds %d, want 41", want)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		c := &prefixCounter{prefix: bulkNamePrefix}
		for rest := data; len(rest) > 0; {
			n := min(len(rest), rnd.IntN(len(bulkNamePrefix)*3))
			c.Write(rest[:n])
			rest = rest[n:]
		}
		if c.n != want {
			t.Fatalf("counted %d, want %d", c.n, want)
		}
	}
}

func TestMachineTicksFromProcStat(t *testing.T) {
	t0, err := parseMachineTicks([]byte("cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 3 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if t0.idle != 840 || t0.total != 1000 {
		t.Fatalf("idle %d of %d ticks, want 840 of 1000 (guest time is in user already)", t0.idle, t0.total)
	}
	t1, err := parseMachineTicks([]byte("cpu  250 5 100 850 40 3 2 0 7 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := t1.idlePercentSince(t0); !ok || got != 20 {
		t.Errorf("idle since = %v, %v; want 20 %% (50 idle of 250 ticks)", got, ok)
	}
	if _, ok := t0.idlePercentSince(t0); ok {
		t.Error("no time passed, yet an idle share")
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 x 5 6 7 8"} {
		if _, err := parseMachineTicks([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := readMachineTicks(); err != nil {
		t.Errorf("this machine's /proc/stat: %v", err)
	}
}

func TestCompareTablePairsRoundsWithKube(t *testing.T) {
	create := func(round int, opsPerSec float64) Result {
		return Result{Name: "create", Round: round, Ops: 5000, OpsPerSec: opsPerSec}
	}
	byMode := map[string][]Result{
		"embedded": {create(1, 6000), create(2, 3000)},
		"etcd":     {create(1, 2000), create(2, 1500)},
		// kube's rounds are slow when kplane's are: each round's ratio
		// is against kube in that round.
		"kube": {create(1, 1500), create(2, 1000)},
	}
	var b bytes.Buffer
	if err := compareTable(&b, []string{"embedded", "etcd", "kube"}, byMode); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if got, want := strings.Join(strings.Fields(lines[0]), " "), "scenario metric embedded etcd kube embedded/etcd embedded/kube ref embedded/ref"; got != want {
		t.Errorf("header = %q, want %q", got, want)
	}
	// Medians 4500 / 1250 = 3.60x; rounds 6000/1500 = 4.00 and
	// 3000/1000 = 3.00 (not 6000/1000 nor 3000/1500).
	want := "create ops/s 4500 1750 1250 2.57x 3.60x (3.00–4.00) 1090 4.13x (2.75–5.50)"
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Join(strings.Fields(l), " ") == want }) {
		t.Errorf("no row %q in\n%s", want, b.String())
	}
}
