package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"sync/atomic"
	"time"
)

// Backend receives a server's audit events: the log file (Writer), a
// webhook (WebhookBackend), or both (Backends).
type Backend interface {
	// Write takes e; the error says it was not kept (a failed write in
	// blocking mode, a full queue in batch mode).
	Write(e *Event) error
	// Close sends what is queued, and ends.
	Close() error
	// Figures are the events taken and those lost, by the plugin that
	// lost them, as apiserver_audit_event_total and
	// apiserver_audit_error_total{plugin} count them.
	Figures() Figures
}

// Figures count a backend's events.
type Figures struct {
	Events uint64
	Errors map[string]uint64 // by plugin: log, webhook, buffered
}

// Backends sends each event to all of them, as upstream's union of
// backends: the error is the first one's.
type Backends []Backend

func (bs Backends) Write(e *Event) error {
	var first error
	for _, b := range bs {
		if err := b.Write(e); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (bs Backends) Close() error {
	var first error
	for _, b := range bs {
		if err := b.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Figures are the events (each counted once) and the losses of every
// backend.
func (bs Backends) Figures() Figures {
	out := Figures{Errors: map[string]uint64{}}
	for i, b := range bs {
		f := b.Figures()
		if i == 0 {
			out.Events = f.Events
		}
		for plugin, n := range f.Errors {
			out.Errors[plugin] += n
		}
	}
	return out
}

// Plugins are the plugins of f's errors, in order.
func (f Figures) Plugins() []string {
	var out []string
	for p := range f.Errors {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// WebhookBatchDefaults are upstream's batch options of the webhook: a
// queue of 10,000, lists of up to 400 events sent at least every 30 s,
// at most 10 lists a second (15 at once).
var WebhookBatchDefaults = BatchOptions{BufferSize: 10000, MaxBatchSize: 400, MaxBatchWait: 30 * time.Second,
	ThrottleEnable: true, ThrottleQPS: 10, ThrottleBurst: 15}

// WebhookBackend sends events to a webhook as audit.k8s.io/v1
// EventLists, as kube-apiserver's --audit-webhook-config-file: in batch
// mode (upstream's default for the webhook) from a queue, each batch on
// a goroutine of its own; in blocking modes each event before the
// request goes on. Send posts one list (the caller's client retries it
// as upstream's does); a list it could not send is lost and counted.
type WebhookBackend struct {
	send    func(ctx context.Context, body []byte) error
	onError func(err error, events int)
	batcher *batcher

	events, failed, dropped atomic.Uint64
}

// NewWebhookBackend sends by send; batch, if set, queues the events
// (batch mode). onError, if set, is told of each list lost.
func NewWebhookBackend(send func(ctx context.Context, body []byte) error, batch *BatchOptions, onError func(err error, events int)) *WebhookBackend {
	w := &WebhookBackend{send: send, onError: onError}
	if batch != nil {
		w.batcher = newBatcher(*batch, true, &w.dropped, w.post)
	}
	return w
}

func (w *WebhookBackend) Write(e *Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	// An EventList's items have no kind or apiVersion of their own, as
	// upstream's encoder writes them.
	kind, _ := json.Marshal(e.Kind)
	version, _ := json.Marshal(e.APIVersion)
	prefix := `{"kind":` + string(kind) + `,"apiVersion":` + string(version) + `,`
	if bytes.HasPrefix(line, []byte(prefix)) {
		line = append([]byte{'{'}, line[len(prefix):]...)
	}
	w.events.Add(1)
	if w.batcher != nil {
		return w.batcher.enqueue(line)
	}
	return w.postErr([][]byte{line})
}

// post sends events as one EventList.
func (w *WebhookBackend) post(events [][]byte) { _ = w.postErr(events) }

func (w *WebhookBackend) postErr(events [][]byte) error {
	body := append([]byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`), joinJSON(events)...)
	body = append(body, "]}"...)
	// A bound past the client's own (five calls of at most 30 s, and
	// the backoff between them), so that a list never hangs a goroutine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := w.send(ctx, body)
	if err != nil {
		w.failed.Add(uint64(len(events)))
		if w.onError != nil {
			w.onError(err, len(events))
		}
	}
	return err
}

// joinJSON joins JSON values with commas.
func joinJSON(values [][]byte) []byte {
	n := len(values)
	for _, v := range values {
		n += len(v)
	}
	out := make([]byte, 0, n)
	for i, v := range values {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	return out
}

func (w *WebhookBackend) Close() error {
	if w.batcher != nil {
		w.batcher.close()
	}
	return nil
}

func (w *WebhookBackend) Figures() Figures {
	return Figures{Events: w.events.Load(), Errors: map[string]uint64{"webhook": w.failed.Load(), "buffered": w.dropped.Load()}}
}
