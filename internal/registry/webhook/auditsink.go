package webhook

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// AuditWebhook posts audit events to the webhook a kubeconfig names, as
// kube-apiserver's --audit-webhook-config-file: each audit.k8s.io/v1
// EventList to its current context's server (with ?timeout=30s and the
// user's credentials), retried after any failure, upstream's judging
// that no answer is a reason to lose events: up to five calls, the
// first retry after the initial backoff (--audit-webhook-initial-backoff,
// 10 s by default) and then 1.5 times longer each time.
type AuditWebhook struct {
	client *reviewClient
}

// NewAuditWebhook reads the kubeconfig at path.
func NewAuditWebhook(path string, initialBackoff time.Duration) (*AuditWebhook, error) {
	if initialBackoff <= 0 {
		initialBackoff = 10 * time.Second
	}
	backoff := wait.Backoff{Duration: initialBackoff, Factor: 1.5, Jitter: 0.2, Steps: 5}
	client, err := newReviewClient(path, 0, backoff, "kplane-audit")
	if err != nil {
		return nil, err
	}
	client.retry = func(err error) bool { return err != nil }
	return &AuditWebhook{client: client}, nil
}

// Send posts body, an EventList; any 2xx answer takes it.
func (w *AuditWebhook) Send(ctx context.Context, body []byte) error {
	return w.client.post(ctx, body, func([]byte, string) error { return nil }, nil)
}
