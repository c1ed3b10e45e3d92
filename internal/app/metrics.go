package app

import (
	"context"
	"fmt"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// diskSizer is implemented by the engines that can say how much disk
// their data takes: the embedded one (its files) and etcd (its database).
type diskSizer interface {
	DiskBytes(ctx context.Context) (int64, error)
}

// diskSizeTimeout bounds the read of the store's size on disk at a
// scrape: an etcd that does not answer leaves the metric out, not the
// scrape hanging.
const diskSizeTimeout = 2 * time.Second

// storeMetrics are the store's figures for /metrics: the compactor's, and
// the size on disk under kube-apiserver's stable
// apiserver_storage_size_bytes{storage_cluster_id}, which it reads from
// etcd's Status (storage_cluster_id "etcd-0", the first storage
// backend). The embedded engine reports its files, as "embedded"; the
// memory engine has none.
func storeMetrics(storage string, kvs kv.Store, c *compactor) []apiserver.Metric {
	ms := c.metrics()
	ds, ok := kvs.(diskSizer)
	if !ok || storage == StorageMemory {
		return ms
	}
	id := "embedded"
	if storage == StorageEtcd {
		id = "etcd-0"
	}
	return append(ms, apiserver.Metric{
		Name: "apiserver_storage_size_bytes",
		Type: "gauge",
		Help: "Size of the store's data on disk, as the file system allocated it: etcd's database file, or the embedded engine's log and snapshots.",
		Read: func() []apiserver.Sample {
			ctx, cancel := context.WithTimeout(context.Background(), diskSizeTimeout)
			defer cancel()
			n, err := ds.DiskBytes(ctx)
			if err != nil {
				return nil
			}
			return []apiserver.Sample{{Labels: []string{"storage_cluster_id", id}, Value: float64(n)}}
		},
	})
}

// conversionMetrics are the CRD conversion webhooks' figures under
// kube-apiserver's names, labels and buckets: each call by result and
// failure type, and by CRD and versions.
func conversionMetrics(c *webhook.Conversions) []apiserver.Metric {
	return []apiserver.Metric{
		{
			Name: "apiserver_conversion_webhook_request_total", Type: "counter",
			Help: "Calls of CRD conversion webhooks, by result and failure type.",
			Read: func() []apiserver.Sample { calls, _ := c.Metrics(); return counterSamples(calls) },
		},
		{
			Name: "apiserver_conversion_webhook_duration_seconds", Type: "histogram",
			Help: "Duration of CRD conversion webhook calls in seconds, by result and failure type.",
			Read: func() []apiserver.Sample { calls, _ := c.Metrics(); return histogramSamples(calls) },
		},
		{
			Name: "apiserver_crd_conversion_webhook_duration_seconds", Type: "histogram",
			Help: "Duration of CRD conversion webhook calls in seconds, by CRD, the versions converted from and to, and success.",
			Read: func() []apiserver.Sample { _, crds := c.Metrics(); return histogramSamples(crds) },
		},
	}
}

// admissionMetrics are the admission webhooks' figures under
// kube-apiserver's names, labels and buckets.
func admissionMetrics(w *webhook.Webhooks) []apiserver.Metric {
	counter := func(name, help string, pick func(d, req, rej, open []webhook.Series) []webhook.Series) apiserver.Metric {
		return apiserver.Metric{Name: name, Type: "counter", Help: help, Read: func() []apiserver.Sample {
			return counterSamples(pick(w.AdmissionMetrics()))
		}}
	}
	return []apiserver.Metric{
		{
			Name: "apiserver_admission_webhook_admission_duration_seconds", Type: "histogram",
			Help: "Duration of admission webhook calls in seconds, by webhook, type (admit or validating), operation and whether the request was refused.",
			Read: func() []apiserver.Sample { d, _, _, _ := w.AdmissionMetrics(); return histogramSamples(d) },
		},
		counter("apiserver_admission_webhook_request_total",
			"Admission webhook calls, by webhook, type, operation, the HTTP code they came to and whether the request was refused.",
			func(_, req, _, _ []webhook.Series) []webhook.Series { return req }),
		counter("apiserver_admission_webhook_rejection_count",
			"Admission webhook calls that refused the request, by webhook, type, operation, error type and code.",
			func(_, _, rej, _ []webhook.Series) []webhook.Series { return rej }),
		counter("apiserver_admission_webhook_fail_open_count",
			"Admission webhook calls that failed and were ignored (failurePolicy Ignore), by webhook and type.",
			func(_, _, _, open []webhook.Series) []webhook.Series { return open }),
	}
}

// policyMetrics are the admission policies' figures under
// kube-apiserver's names, labels and buckets.
func policyMetrics(w *webhook.Webhooks) []apiserver.Metric {
	return []apiserver.Metric{
		{
			Name: "apiserver_validating_admission_policy_check_total", Type: "counter",
			Help: "ValidatingAdmissionPolicy validations that failed, by policy, binding, error type and the action taken (deny, warn, audit; allow for one that could not be evaluated under failurePolicy Ignore).",
			Read: func() []apiserver.Sample { return counterSamples(w.PolicyMetrics()) },
		},
		{
			Name: "apiserver_validating_admission_policy_check_duration_seconds", Type: "histogram",
			Help: "Duration in seconds of the ValidatingAdmissionPolicy validations counted by apiserver_validating_admission_policy_check_total, with its labels.",
			Read: func() []apiserver.Sample { return histogramSamples(w.PolicyMetrics()) },
		},
		{
			Name: "apiserver_mutating_admission_policy_check_total", Type: "counter",
			Help: "MutatingAdmissionPolicy mutations evaluated, by policy, binding and error type (no_error for one that applied).",
			Read: func() []apiserver.Sample { return counterSamples(w.MutationMetrics()) },
		},
		{
			Name: "apiserver_mutating_admission_policy_check_duration_seconds", Type: "histogram",
			Help: "Duration in seconds of the MutatingAdmissionPolicy mutations counted by apiserver_mutating_admission_policy_check_total, with its labels.",
			Read: func() []apiserver.Sample { return histogramSamples(w.MutationMetrics()) },
		},
		{
			Name: "apiserver_admission_match_condition_evaluation_errors_total", Type: "counter",
			Help: "matchConditions of webhooks and admission policies that failed to evaluate, by the name of the webhook or policy, its kind (webhook, policy), type (admit, validating, validate) and operation.",
			Read: func() []apiserver.Sample { return counterSamples(w.ConditionErrors()) },
		},
		{
			Name: "apiserver_admission_match_condition_evaluation_seconds", Type: "histogram",
			Help: "Duration in seconds of the matchConditions of a webhook or admission policy that did not all hold, with the labels of apiserver_admission_match_condition_evaluation_errors_total.",
			Read: func() []apiserver.Sample { return histogramSamples(w.ConditionSeconds()) },
		},
	}
}

// manifestMetrics are the static admission manifests' figures under
// kube-apiserver's names and labels.
func manifestMetrics(w *webhook.Webhooks) []apiserver.Metric {
	const prefix = "apiserver_manifest_admission_config_controller_"
	return []apiserver.Metric{
		{
			Name: prefix + "automatic_reloads_total", Type: "counter",
			Help: "Loads of an admission plugin's static manifest directory (the first, then each reload that found its files changed or failed), by status, plugin and apiserver identity.",
			Read: func() []apiserver.Sample { reloads, _, _ := w.ManifestMetrics(); return counterSamples(reloads) },
		},
		{
			Name: prefix + "automatic_reload_last_timestamp_seconds", Type: "gauge",
			Help: "When the last load of each status of an admission plugin's static manifest directory happened, by status, plugin and apiserver identity.",
			Read: func() []apiserver.Sample { _, last, _ := w.ManifestMetrics(); return gaugeSamples(last) },
		},
		{
			Name: prefix + "last_config_info", Type: "gauge",
			Help: "The static manifests in force, with the hash of their files, by plugin and apiserver identity.",
			Read: func() []apiserver.Sample { _, _, info := w.ManifestMetrics(); return gaugeSamples(info) },
		},
	}
}

// gaugeSamples are gauges as /metrics samples.
func gaugeSamples(gs []webhook.Gauge) []apiserver.Sample {
	out := make([]apiserver.Sample, len(gs))
	for i, g := range gs {
		out[i] = apiserver.Sample{Labels: g.Labels, Value: g.Value}
	}
	return out
}

// counterSamples are series of a counter (each its observations' total)
// as /metrics samples.
func counterSamples(ss []webhook.Series) []apiserver.Sample {
	out := make([]apiserver.Sample, len(ss))
	for i, s := range ss {
		out[i] = apiserver.Sample{Labels: s.Labels, Value: float64(s.Total())}
	}
	return out
}

// histogramSamples are series of a histogram as /metrics samples.
func histogramSamples(ss []webhook.Series) []apiserver.Sample {
	out := make([]apiserver.Sample, len(ss))
	for i, s := range ss {
		out[i] = apiserver.Sample{Labels: s.Labels, Histogram: &apiserver.Histogram{Bounds: s.Bounds, Counts: s.Counts, Sum: s.Sum}}
	}
	return out
}

// healthCheckTimeout bounds the store's health check, as kube-apiserver's
// --etcd-healthcheck-timeout bounds its etcd check by default.
const healthCheckTimeout = 2 * time.Second

// storeHealthChecks are the store's checks for /livez, /readyz and
// /healthz, each a read of one key bounded by healthCheckTimeout:
//   - over etcd, kube-apiserver's "etcd": the read is linearizable, so it
//     fails when etcd does not answer or has lost its quorum, and a load
//     balancer stops sending requests that could not be served;
//   - on the embedded engine, "embedded-store": it fails once the store
//     has stopped because its write-ahead log failed (a full disk, an I/O
//     error), after which it refuses every request until kplane restarts
//     and replays the log.
//
// The memory engine cannot fail so.
func storeHealthChecks(storage string, kvs kv.Store) []apiserver.HealthCheck {
	var name, what string
	switch storage {
	case StorageEtcd:
		name, what = "etcd", "etcd"
	case StorageEmbedded:
		name, what = "embedded-store", "the embedded store"
	default:
		return nil
	}
	return []apiserver.HealthCheck{{Name: name, Check: func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, healthCheckTimeout)
		defer cancel()
		if _, err := kvs.Range(ctx, "/health", kv.RangeOptions{CountOnly: true}); err != nil {
			return fmt.Errorf("error getting data from %s: %w", what, err)
		}
		return nil
	}}}
}

// authorizationMetrics are the authorizers' figures under
// kube-apiserver's names and labels.
func authorizationMetrics(m *webhook.AuthorizationMetrics) []apiserver.Metric {
	const prefix = "apiserver_authorization_"
	return []apiserver.Metric{
		{
			Name: prefix + "decisions_total", Type: "counter",
			Help: "Allowances and denials of each configured authorizer, by its type and name and the decision.",
			Read: func() []apiserver.Sample { return counterSamples(m.Series().Decisions) },
		},
		{
			Name: prefix + "webhook_evaluations_total", Type: "counter",
			Help: "Calls of authorization webhooks (each retry too), by webhook and result.",
			Read: func() []apiserver.Sample { return counterSamples(m.Series().Calls) },
		},
		{
			Name: prefix + "webhook_duration_seconds", Type: "histogram",
			Help: "Duration of authorization webhook calls in seconds, by webhook and result.",
			Read: func() []apiserver.Sample { return histogramSamples(m.Series().Calls) },
		},
		{
			Name: prefix + "webhook_evaluations_fail_open_total", Type: "counter",
			Help: "Questions an authorization webhook failing open could not answer, left to the next authorizer, by webhook and its last call's result.",
			Read: func() []apiserver.Sample { return counterSamples(m.Series().FailOpen) },
		},
		{
			Name: prefix + "match_condition_evaluation_seconds", Type: "histogram",
			Help: "Duration of the evaluations of an authorization webhook's match conditions in seconds, by authorizer type and name.",
			Read: func() []apiserver.Sample { return histogramSamples(m.Series().MatchTimes) },
		},
		{
			Name: prefix + "match_condition_evaluation_errors_total", Type: "counter",
			Help: "Evaluations of an authorization webhook's match conditions in which one failed, by authorizer type and name.",
			Read: func() []apiserver.Sample { return counterSamples(m.Series().MatchErrors) },
		},
		{
			Name: prefix + "match_condition_exclusions_total", Type: "counter",
			Help: "Questions an authorization webhook's match conditions kept from it, by authorizer type and name.",
			Read: func() []apiserver.Sample { return counterSamples(m.Series().MatchExclusions) },
		},
	}
}
