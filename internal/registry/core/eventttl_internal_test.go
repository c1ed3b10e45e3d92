package core

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

type eventFixture struct {
	*tokenFixture
	events *registry.Resource
}

func newEventFixture(t *testing.T) *eventFixture {
	f := newTokenFixture(t)
	events, ok := f.reg.Get(eventsResource)
	if !ok {
		t.Fatal("no events")
	}
	return &eventFixture{f, events}
}

func (f *eventFixture) create(name string) *unstructured.Unstructured {
	f.t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"name": name, "namespace": "ns"},
		"involvedObject": map[string]any{"kind": "ConfigMap", "name": "x", "namespace": "ns"}, "reason": "R", "message": "m"}}
	out, err := f.events.Create(f.ctx, "v1", "ns", obj, registry.WriteOptions{FieldManager: "recorder"})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *eventFixture) exists(name string) bool {
	f.t.Helper()
	_, err := f.events.Get(f.ctx, "v1", "ns", name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return err == nil
}

// run runs an EventExpiry until the test ends.
func (f *eventFixture) run(x *EventExpiry) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); x.Run(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

func (f *eventFixture) gone(name string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a failure bound, not a timing assertion
	for f.exists(name) {
		if time.Now().After(deadline) {
			f.t.Fatalf("event %s not expired", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Events stored before the expiry starts (as at a restart) are dated by
// their metadata: with the expiry's clock a day ahead and a TTL of an
// hour, one is due at once.
func TestEventExpiryDatesStoredEvents(t *testing.T) {
	f := newEventFixture(t)
	f.create("before")
	f.run(&EventExpiry{Registry: f.reg, TTL: time.Hour, Now: func() time.Time { return time.Now().Add(24 * time.Hour) }})
	f.gone("before")
}

// A stored Event's last write is the latest of its creation and its
// managers' writes; the expiries come out earliest first, a rewrite
// moving one.
func TestEventExpiryOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	obj := &metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0), ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "a", Time: &metav1.Time{Time: t0.Add(time.Minute)}}, {Manager: "b", Time: &metav1.Time{Time: t0.Add(time.Second)}}, {Manager: "c"}}}
	if got := lastWritten(obj); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lastWritten %v", got)
	}
	x := &expiries{byKey: map[string]*expiry{}}
	x.set("ns", "late", "u1", "1", t0.Add(3*time.Hour))
	x.set("ns", "soon", "u2", "2", t0.Add(time.Hour))
	x.set("ns", "mid", "u3", "3", t0.Add(2*time.Hour))
	x.set("ns", "soon", "u2", "4", t0.Add(4*time.Hour)) // written again
	x.drop("ns", "mid")
	var order []string
	for len(x.order) > 0 {
		e := x.order[0]
		x.drop(e.ns, e.name)
		order = append(order, e.name+"@"+e.rv)
	}
	if fmt.Sprint(order) != "[late@1 soon@4]" || len(x.byKey) != 0 {
		t.Fatalf("order %v, left %v", order, x.byKey)
	}
}

// An Event goes TTL after its last write, whichever API wrote it.
func TestEventExpiryDeletesAfterTTL(t *testing.T) {
	f := newEventFixture(t)
	f.run(&EventExpiry{Registry: f.reg, TTL: 100 * time.Millisecond})
	f.create("core")
	guest, ok := f.reg.Get(schema.GroupResource{Group: "events.k8s.io", Resource: "events"})
	if !ok {
		t.Fatal("no events.k8s.io events")
	}
	ev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata": map[string]any{"name": "new-api", "namespace": "ns"}, "eventTime": "2026-11-28T12:00:00.000000Z",
		"reportingController": "example.com/c", "reportingInstance": "i", "action": "A", "reason": "R", "type": "Normal",
		"regarding": map[string]any{"kind": "ConfigMap", "name": "x", "namespace": "ns"}}}
	if _, err := guest.Create(f.ctx, "v1", "ns", ev, registry.WriteOptions{FieldManager: "recorder"}); err != nil {
		t.Fatal(err)
	}
	f.gone("core")
	f.gone("new-api")
}

// The delete is conditional on the write the expiry saw: an Event
// written again since stays (its new write set a new expiry).
func TestEventExpiryKeepsRewrittenEvents(t *testing.T) {
	f := newEventFixture(t)
	x := &EventExpiry{Registry: f.reg, TTL: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	first := f.create("e")
	next := first.DeepCopy()
	next.Object["message"] = "again"
	if _, err := f.events.Update(f.ctx, "v1", "ns", "e", next, registry.WriteOptions{FieldManager: "recorder"}); err != nil {
		t.Fatal(err)
	}
	if !x.expire(f.ctx, f.events, &expiry{ns: "ns", name: "e", uid: first.GetUID(), rv: first.GetResourceVersion()}) || !f.exists("e") {
		t.Fatal("an event written again was expired by its older write")
	}
	cur, _ := f.events.Get(f.ctx, "v1", "ns", "e", metav1.GetOptions{})
	if !x.expire(f.ctx, f.events, &expiry{ns: "ns", name: "e", uid: cur.GetUID(), rv: cur.GetResourceVersion()}) || f.exists("e") {
		t.Fatal("the event's last write did not expire it")
	}
}
