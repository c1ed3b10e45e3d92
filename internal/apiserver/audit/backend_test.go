package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The webhook backend sends EventLists: in batch mode lists of up to
// the batch size, every event once, by Close; blocking, one list per
// event. A list the webhook did not take is lost and counted.
func TestWebhookBackend(t *testing.T) {
	var mu sync.Mutex
	var lists [][]string // the auditIDs of each list sent
	fail := false
	send := func(_ context.Context, body []byte) error {
		var list struct {
			Kind, APIVersion string
			Items            []struct {
				AuditID string `json:"auditID"`
			}
		}
		if err := json.Unmarshal(body, &list); err != nil || list.Kind != "EventList" || list.APIVersion != "audit.k8s.io/v1" ||
			!bytes.HasPrefix(body, []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"level":`)) {
			t.Errorf("sent %s (%v)", body, err)
		}
		mu.Lock()
		defer mu.Unlock()
		var ids []string
		for _, it := range list.Items {
			ids = append(ids, it.AuditID)
		}
		lists = append(lists, ids)
		if fail {
			return errors.New("webhook down")
		}
		return nil
	}
	var lost int
	b := NewWebhookBackend(send, &BatchOptions{BufferSize: 100, MaxBatchSize: 4, MaxBatchWait: 20 * time.Millisecond}, func(_ error, n int) { lost += n })
	for i := range 10 {
		if err := b.Write(&Event{Kind: "Event", APIVersion: "audit.k8s.io/v1", AuditID: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	seen := map[string]bool{}
	for _, l := range lists {
		if len(l) == 0 || len(l) > 4 {
			t.Errorf("a list of %d", len(l))
		}
		for _, id := range l {
			seen[id] = true
		}
	}
	if f := b.Figures(); len(seen) != 10 || f.Events != 10 || f.Errors["webhook"] != 0 {
		t.Errorf("%d sent of 10, %+v", len(seen), f)
	}

	lists, fail = nil, true
	b = NewWebhookBackend(send, nil, func(_ error, n int) { lost += n })
	for i := range 3 {
		if err := b.Write(&Event{Kind: "Event", APIVersion: "audit.k8s.io/v1", AuditID: strconv.Itoa(i)}); err == nil {
			t.Error("a failed send was not an error in blocking mode")
		}
	}
	b.Close()
	if f := b.Figures(); len(lists) != 3 || len(lists[0]) != 1 || f.Errors["webhook"] != 3 || lost != 3 {
		t.Errorf("blocking: %v, %+v, %d lost", lists, f, lost)
	}
}
