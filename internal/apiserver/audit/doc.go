// Package audit writes kube-apiserver's audit log: audit.k8s.io/v1
// Events for each request, at the level an audit.k8s.io/v1 Policy gives
// it.
//
// ReadPolicy loads and validates a Policy file (--audit-policy-file) as
// kube-apiserver does, and Policy.Decide applies it to one request's
// Attributes: the first rule that matches gives the level, the stages to
// leave out and whether to drop managedFields; a request no rule matches
// is not logged (LevelNone).
//
// The events go to a Backend: Writer, the log file (--audit-log-path),
// rotated as lumberjack does; WebhookBackend, a webhook that takes
// EventLists (--audit-webhook-config-file; the sending is the caller's,
// registry/webhook's AuditWebhook); or Backends, both. Each writes before
// the request goes on (blocking modes) or queues the events for a
// goroutine that sends them in batches (batch.go, --audit-*-mode=batch).
package audit
