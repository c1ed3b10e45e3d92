package jwt

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The JWT authenticators' metrics kube-apiserver serves, kept here and
// written on /metrics by app:
//   - apiserver_authentication_jwt_authenticator_latency_seconds
//     {jwt_issuer_hash,result}: each token an issuer's authenticator
//     checked, "success" or "failure" (a token of no configured issuer
//     is not counted);
//   - ..._jwks_fetch_last_timestamp_seconds{apiserver_id_hash,
//     jwt_issuer_hash,result}: the last fetch of an issuer's key set
//     that succeeded, and the last that failed;
//   - ..._jwks_fetch_last_key_set_info{apiserver_id_hash,hash,
//     jwt_issuer_hash}: 1, with the SHA-256 of the last key set fetched.

// latencyBounds are upstream's buckets.
var latencyBounds = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Metrics are the authenticators' figures, shared by those of one
// server and those a reloaded configuration makes.
type Metrics struct {
	mu      sync.Mutex
	latency map[[2]string]*histogram // issuer hash, result
	fetches map[[2]string]time.Time  // issuer hash, result
	keySets map[string]string        // issuer hash → key set hash
}

type histogram struct {
	counts []uint64
	sum    float64
}

func (m *Metrics) observe(issuerHash string, ok bool, d time.Duration) {
	if m == nil {
		return
	}
	result := "failure"
	if ok {
		result = "success"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.latency == nil {
		m.latency = map[[2]string]*histogram{}
	}
	k := [2]string{issuerHash, result}
	h := m.latency[k]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBounds)+1)}
		m.latency[k] = h
	}
	sec := d.Seconds()
	h.counts[sort.SearchFloat64s(latencyBounds, sec)]++
	h.sum += sec
}

func (m *Metrics) fetched(issuerHash string, body []byte, err error) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fetches == nil {
		m.fetches, m.keySets = map[[2]string]time.Time{}, map[string]string{}
	}
	if err != nil {
		m.fetches[[2]string{issuerHash, "failure"}] = time.Now()
		return
	}
	m.fetches[[2]string{issuerHash, "success"}] = time.Now()
	m.keySets[issuerHash] = fmt.Sprintf("sha256:%x", sha256.Sum256(body))
}

// Forget drops the fetch figures of issuers no longer configured, as
// upstream drops them after a reload.
func (m *Metrics) Forget(issuers []string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, iss := range issuers {
		h := hashOf(iss)
		delete(m.fetches, [2]string{h, "success"})
		delete(m.fetches, [2]string{h, "failure"})
		delete(m.keySets, h)
	}
}

// Series is one series of a metric: its labels (name, value, ...), and
// its counts (one for a gauge) or a histogram's buckets.
type Series struct {
	Labels []string
	Bounds []float64
	Counts []uint64
	Sum    float64
	Value  float64
}

// Figures are the metrics' series, sorted.
type Figures struct {
	Latency, FetchTimes, KeySets []Series
}

// Figures returns the figures so far, with idHash, the server's
// identity, in the fetches' labels.
func (m *Metrics) Figures(idHash string) Figures {
	var f Figures
	if m == nil {
		return f
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, h := range m.latency {
		f.Latency = append(f.Latency, Series{Labels: []string{"jwt_issuer_hash", k[0], "result", k[1]}, Bounds: latencyBounds, Counts: append([]uint64(nil), h.counts...), Sum: h.sum})
	}
	for k, t := range m.fetches {
		f.FetchTimes = append(f.FetchTimes, Series{Labels: []string{"apiserver_id_hash", idHash, "jwt_issuer_hash", k[0], "result", k[1]}, Value: float64(t.UnixNano()) / 1e9})
	}
	for iss, hash := range m.keySets {
		f.KeySets = append(f.KeySets, Series{Labels: []string{"apiserver_id_hash", idHash, "hash", hash, "jwt_issuer_hash", iss}, Value: 1})
	}
	for _, ss := range [][]Series{f.Latency, f.FetchTimes, f.KeySets} {
		sort.Slice(ss, func(i, j int) bool { return fmt.Sprint(ss[i].Labels) < fmt.Sprint(ss[j].Labels) })
	}
	return f
}
