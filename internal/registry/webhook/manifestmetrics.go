package webhook

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The static manifest metrics kube-apiserver serves (k8s.io/apiserver's
// admission/plugin/manifest/metrics), kept here and written on /metrics
// by app, by plugin and this server's identity (apiserver_id_hash, the
// SHA-256 of APIServerID):
//   - apiserver_manifest_admission_config_controller_automatic_reloads_total:
//     the loads of a plugin's directory, by status ("success", "failure"):
//     the first, then each reload that found its files changed or failed;
//   - ..._automatic_reload_last_timestamp_seconds: when the last of each
//     status happened;
//   - ..._last_config_info: 1, with the hash of the files in force.

// manifestMetrics are the static manifests' figures.
type manifestMetrics struct {
	mu     sync.Mutex
	counts map[[2]string]uint64    // status, plugin
	last   map[[2]string]time.Time // status, plugin
	hashes map[string]string       // plugin → the files' hash
}

func (m *manifestMetrics) loaded(plugin, hash string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("success", plugin, now)
	if m.hashes == nil {
		m.hashes = map[string]string{}
	}
	m.hashes[plugin] = hash
}

func (m *manifestMetrics) failed(plugin string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("failure", plugin, now)
}

func (m *manifestMetrics) count(status, plugin string, now time.Time) {
	if m.counts == nil {
		m.counts, m.last = map[[2]string]uint64{}, map[[2]string]time.Time{}
	}
	k := [2]string{status, plugin}
	m.counts[k]++
	m.last[k] = now
}

// Gauge is one series of a gauge: its labels (name, value, …, in name
// order) and its value.
type Gauge struct {
	Labels []string
	Value  float64
}

// ManifestMetrics are the static manifest metrics' series, in label
// order: the reloads (counters), the last reloads' times (Unix seconds)
// and the files in force (1, with their hash).
func (w *Webhooks) ManifestMetrics() (reloads []Series, lastReload, configInfo []Gauge) {
	id := IDHash(w.APIServerID)
	m := &w.manifestMetrics
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, n := range m.counts {
		labels := []string{"apiserver_id_hash", id, "plugin", k[1], "status", k[0]}
		reloads = append(reloads, Series{Labels: labels, Counts: []uint64{n}})
		lastReload = append(lastReload, Gauge{Labels: labels, Value: float64(m.last[k].UnixNano()) / 1e9})
	}
	if id != "" {
		// Upstream's collector leaves the series out without an identity.
		for plugin, hash := range m.hashes {
			configInfo = append(configInfo, Gauge{Labels: []string{"apiserver_id_hash", id, "hash", hash, "plugin", plugin}, Value: 1})
		}
	}
	byLabels(reloads)
	sortGauges(lastReload)
	sortGauges(configInfo)
	return reloads, lastReload, configInfo
}

// IDHash is upstream's label of a server's identity: its SHA-256
// ("sha256:<hex>"), or "" for none.
func IDHash(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(id)))
}

func sortGauges(gs []Gauge) {
	sort.Slice(gs, func(i, j int) bool { return lessLabels(gs[i].Labels, gs[j].Labels) })
}
