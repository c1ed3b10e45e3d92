package core

import (
	"container/heap"
	"context"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// EventExpiry deletes each Event TTL after it was last written, as
// kube-apiserver does by storing Events under an etcd lease of --event-ttl
// (1 hour by default): so that Events, which controllers write by the
// thousand, do not pile up. Both APIs' Events are the same objects.
//
// It follows the Events' watch: a write seen sets the Event's expiry to
// TTL from then. Events already stored when it starts (at start-up) expire
// TTL after the latest time their metadata records (their creation, their
// managers' last writes). The delete is conditional on the Event's uid and
// resourceVersion, so one written again since stays.
type EventExpiry struct {
	Registry *registry.Registry
	TTL      time.Duration
	Logger   *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

var eventsResource = schema.GroupResource{Resource: "events"}

// expiry is one Event's, in the heap.
type expiry struct {
	at        time.Time
	ns, name  string
	uid       types.UID
	rv        string
	heapIndex int
}

type expiryHeap []*expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*expiry)
	e.heapIndex = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// expiries holds the Events' expiries by namespace/name, earliest first.
type expiries struct {
	byKey map[string]*expiry
	order expiryHeap
}

func (x *expiries) set(ns, name string, uid types.UID, rv string, at time.Time) {
	key := ns + "/" + name
	if e, ok := x.byKey[key]; ok {
		e.at, e.uid, e.rv = at, uid, rv
		heap.Fix(&x.order, e.heapIndex)
		return
	}
	e := &expiry{at: at, ns: ns, name: name, uid: uid, rv: rv}
	x.byKey[key] = e
	heap.Push(&x.order, e)
}

func (x *expiries) drop(ns, name string) {
	key := ns + "/" + name
	if e, ok := x.byKey[key]; ok {
		heap.Remove(&x.order, e.heapIndex)
		delete(x.byKey, key)
	}
}

// Run works until ctx ends.
func (e *EventExpiry) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.APIServerUser)
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.Now == nil {
		e.Now = time.Now
	}
	res, ok := e.Registry.Get(eventsResource)
	if !ok || e.TTL <= 0 {
		<-ctx.Done()
		return nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, "v1", "", registry.ListOptions{
			ListOptions: storage.ListOptions{MetadataOnly: true}, AllowBookmarks: true, SendInitialEvents: true,
		})
		if err != nil {
			e.Logger.Warn("event expiry: watch", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		e.follow(ctx, res, w, timer)
		w.Stop()
	}
	return nil
}

// follow keeps the expiries of w's Events, from its initial state, and
// deletes those due, until the watch ends.
func (e *EventExpiry) follow(ctx context.Context, res *registry.Resource, w watch.Interface, timer *time.Timer) {
	initial := true
	followExpiring(ctx, w, timer, e.Now, func(x *expiries, ev watch.Event) {
		obj, isObj := ev.Object.(metav1.Object)
		if !isObj {
			return
		}
		switch ev.Type {
		case watch.Bookmark:
			if obj.GetAnnotations()[storage.InitialEventsEndAnnotation] == "true" {
				initial = false
			}
		case watch.Deleted:
			x.drop(obj.GetNamespace(), obj.GetName())
		default:
			at := e.Now().Add(e.TTL)
			if initial {
				at = lastWritten(obj).Add(e.TTL)
			}
			x.set(obj.GetNamespace(), obj.GetName(), obj.GetUID(), obj.GetResourceVersion(), at)
		}
	}, func(due *expiry) bool { return e.expire(ctx, res, due) })
}

// followExpiring hands w's events to observe, which sets and drops the
// expiries of x, and each expiry that falls due to expire, until the watch
// ends: expire reports false for one to be tried again a second later.
// timer is the caller's, reused across watches.
func followExpiring(ctx context.Context, w watch.Interface, timer *time.Timer, now func() time.Time,
	observe func(x *expiries, ev watch.Event), expire func(due *expiry) bool) {
	x := &expiries{byKey: map[string]*expiry{}}
	arm := func() {
		timer.Stop()
		select {
		case <-timer.C:
		default:
		}
		if len(x.order) > 0 {
			timer.Reset(max(x.order[0].at.Sub(now()), 0))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			observe(x, ev)
			arm()
		case <-timer.C:
			t := now()
			for len(x.order) > 0 && !x.order[0].at.After(t) {
				due := heap.Pop(&x.order).(*expiry)
				delete(x.byKey, due.ns+"/"+due.name)
				if !expire(due) && ctx.Err() == nil {
					x.set(due.ns, due.name, due.uid, due.rv, t.Add(time.Second))
				}
			}
			arm()
		}
	}
}

// lastWritten is the latest time obj's metadata records: its creation,
// its managers' last changes.
func lastWritten(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, m := range obj.GetManagedFields() {
		if m.Time != nil && m.Time.After(t) {
			t = m.Time.Time
		}
	}
	return t
}

// expire deletes due's Event if it is still the one written then; it
// reports false when that is to be tried again.
func (e *EventExpiry) expire(ctx context.Context, res *registry.Resource, due *expiry) bool {
	uid, rv := due.uid, due.rv
	_, _, err := res.Delete(ctx, "v1", due.ns, due.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}},
		registry.WriteOptions{FieldManager: "kube-apiserver"})
	switch {
	case err == nil:
		e.Logger.Debug("event expired", "namespace", due.ns, "name", due.name)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or written again since: its new write set a new expiry.
	default:
		e.Logger.Warn("event expiry: deleting", "namespace", due.ns, "name", due.name, "err", err)
		return false
	}
	return true
}
