package quota

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// controllerManager is the field manager of the controller's writes,
// kube-controller-manager's.
const controllerManager = "kube-controller-manager"

// markDirty asks the controller to count ns's quotas again.
func (q *Quota) markDirty(ns string) {
	q.mu.Lock()
	q.dirty[ns] = true
	q.mu.Unlock()
	select {
	case q.recount <- struct{}{}:
	default:
	}
}

// takeDirty returns the namespaces to count and forgets them.
func (q *Quota) takeDirty() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]string, 0, len(q.dirty))
	for ns := range q.dirty {
		out = append(out, ns)
	}
	clear(q.dirty)
	return out
}

// Run is the quota controller, until ctx ends: it fills in the status of
// new and changed quotas, counts again where a counted object was deleted
// (or a charged create failed), and counts every quota every Resync.
func (q *Quota) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(registry.AsController(ctx, registry.ControllerUser("resourcequota-controller")))
	defer cancel()
	c := &controller{q: q, counts: map[string]map[string][]schema.GroupResource{}, monitors: map[schema.GroupResource]context.CancelFunc{}, deleted: make(chan deletion, 64)}
	defer c.stopMonitors()
	events := make(chan watch.Event)
	go c.followQuotas(ctx, events)
	resync := time.NewTicker(q.cfg.Resync)
	defer resync.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			c.quotaEvent(ctx, ev)
		case d := <-c.deleted:
			c.deletion(d)
			// A namespace's deletion deletes its objects by the
			// thousand: the deletes queued meanwhile make one count.
		drain:
			for range 4096 {
				select {
				case d := <-c.deleted:
					c.deletion(d)
				default:
					break drain
				}
			}
		case <-q.recount:
		case <-retry:
			retry = nil
		case <-resync.C:
			for ns := range c.counts {
				q.markDirty(ns)
			}
		case <-q.cfg.Registry.Changed():
			// A resource came or went (a CRD): its count may be due.
			c.syncMonitors(ctx)
			for ns := range c.counts {
				q.markDirty(ns)
			}
		}
		for _, ns := range q.takeDirty() {
			settle, err := q.sync(ctx, ns)
			if settle {
				// New limits apply in a server once its watch cache has
				// them; a create another server admitted meanwhile was
				// not counted. Count once more when they have settled.
				time.AfterFunc(q.cfg.Settle, func() {
					if ctx.Err() == nil {
						q.markDirty(ns)
					}
				})
			}
			if err != nil && ctx.Err() == nil {
				q.log.Warn("quota controller: counting", "namespace", ns, "err", err)
				q.mu.Lock()
				q.dirty[ns] = true
				q.mu.Unlock()
				if retry == nil {
					retry = time.After(q.cfg.Retry)
				}
			}
		}
	}
}

// controller is Run's state, its goroutine's alone.
type controller struct {
	q *Quota
	// counts holds, by namespace and quota name, the resources each
	// quota's spec counts.
	counts map[string]map[string][]schema.GroupResource
	// monitors follow the deletes of the counted resources.
	monitors map[schema.GroupResource]context.CancelFunc
	deleted  chan deletion
}

// deletion says an object of gr went in namespace ns ("": some may have,
// in any namespace).
type deletion struct {
	ns string
	gr schema.GroupResource
}

// deletion marks dirty the namespaces d may change the counts of.
func (c *controller) deletion(d deletion) {
	if d.ns != "" {
		if countsAny(c.counts[d.ns], d.gr) {
			c.q.markDirty(d.ns)
		}
		return
	}
	for ns, quotas := range c.counts {
		if countsAny(quotas, d.gr) {
			c.q.markDirty(ns)
		}
	}
}

// countsAny reports whether one of quotas counts gr.
func countsAny(quotas map[string][]schema.GroupResource, gr schema.GroupResource) bool {
	for _, grs := range quotas {
		if slices.Contains(grs, gr) {
			return true
		}
	}
	return false
}

// followQuotas sends every event of the quotas' watch to events, from
// their state now, watching again whenever the watch ends.
func (c *controller) followQuotas(ctx context.Context, events chan<- watch.Event) {
	follow(ctx, func() (watch.Interface, error) {
		res, ok := c.q.cfg.Registry.Get(quotasResource)
		if !ok {
			return nil, apierrors.NewNotFound(quotasResource, "")
		}
		return res.Watch(ctx, "v1", "", registry.ListOptions{})
	}, func(ev watch.Event) {
		select {
		case events <- ev:
		case <-ctx.Done():
		}
	}, nil)
}

// follow hands each event of the watches open makes to handle, until ctx
// ends: when a watch ends, ended (if set) is called and another is
// opened, a second later if open fails.
func follow(ctx context.Context, open func() (watch.Interface, error), handle func(watch.Event), ended func()) {
	for ctx.Err() == nil {
		w, err := open()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				break
			}
			handle(ev)
		}
		w.Stop()
		if ended != nil && ctx.Err() == nil {
			ended()
		}
	}
}

// quotaEvent records what a quota counts, and marks its namespace dirty
// when its status is not its spec's (new, changed, or not counted yet).
func (c *controller) quotaEvent(ctx context.Context, ev watch.Event) {
	u, ok := ev.Object.(runtime.Unstructured)
	if !ok || ev.Type == watch.Bookmark {
		return
	}
	obj := &unstructured.Unstructured{Object: u.UnstructuredContent()}
	ns, name := obj.GetNamespace(), obj.GetName()
	if ev.Type == watch.Deleted {
		delete(c.counts[ns], name)
		if len(c.counts[ns]) == 0 {
			delete(c.counts, ns)
		}
		c.syncMonitors(ctx)
		return
	}
	var rq corev1.ResourceQuota
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &rq); err != nil {
		return
	}
	var grs []schema.GroupResource
	for n := range rq.Spec.Hard {
		if gr, ok := counted(n); ok {
			grs = append(grs, gr)
		}
	}
	slices.SortFunc(grs, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	if c.counts[ns] == nil {
		c.counts[ns] = map[string][]schema.GroupResource{}
	}
	was, known := c.counts[ns][name]
	c.counts[ns][name] = grs
	if !known || !slices.Equal(was, grs) {
		// Charges rewrite a quota's status all the time; its spec,
		// rarely.
		c.syncMonitors(ctx)
	}
	if rq.Status.Hard == nil || rq.Status.Used == nil || !equalLists(rq.Spec.Hard, rq.Status.Hard) {
		c.q.markDirty(ns)
	}
}

// syncMonitors follows the deletes of each resource some quota counts,
// and stops following the others.
func (c *controller) syncMonitors(ctx context.Context) {
	want := map[schema.GroupResource]*registry.Resource{}
	for _, quotas := range c.counts {
		for _, grs := range quotas {
			for _, gr := range grs {
				if res, ok := c.q.cfg.Registry.Get(gr); ok && countable(res.Kind()) {
					want[gr] = res
				}
			}
		}
	}
	for gr, stop := range c.monitors {
		if want[gr] == nil {
			stop()
			delete(c.monitors, gr)
		}
	}
	for gr, res := range want {
		if c.monitors[gr] != nil {
			continue
		}
		mctx, stop := context.WithCancel(ctx)
		c.monitors[gr] = stop
		go c.monitor(mctx, res)
	}
}

func (c *controller) stopMonitors() {
	for _, stop := range c.monitors {
		stop()
	}
}

// monitor tells c.deleted of each object of res deleted, from now until
// ctx ends.
func (c *controller) monitor(ctx context.Context, res *registry.Resource) {
	v, gr := res.Kind().StorageVersion(), res.Kind().GroupResource()
	send := func(d deletion) {
		select {
		case c.deleted <- d:
		case <-ctx.Done():
		}
	}
	follow(ctx, func() (watch.Interface, error) {
		return res.Watch(ctx, v, "", registry.ListOptions{NoInitialEvents: true})
	}, func(ev watch.Event) {
		if m, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Deleted {
			send(deletion{m.GetNamespace(), gr})
		}
	}, func() {
		// Watched again from now: a delete missed meanwhile is found by
		// counting every namespace again.
		send(deletion{gr: gr})
	})
}

// sync counts the objects ns's quotas count and writes the quotas whose
// status differs (settle reports new limits among them: see Run), as upstream's syncResourceQuota: status.hard is
// spec.hard; status.used has a count for each counted resource served (0
// for a scoped quota, which counts no object), keeps what it had for the
// other names of spec.hard, and drops the rest.
func (q *Quota) sync(ctx context.Context, ns string) (settle bool, err error) {
	if ns == "" {
		return false, nil
	}
	sp := q.acquire(ns)
	sp.gate.Lock()
	defer func() {
		sp.gate.Unlock()
		q.release(ns, sp)
	}()
	quotas, err := q.readQuotas(ctx, ns, nil)
	if err != nil {
		return false, err
	}
	counts := map[schema.GroupResource]int{}
	// count is the number of gr's objects in ns; false if they are not
	// counted (not served, or never counted).
	count := func(gr schema.GroupResource) (int, bool, error) {
		if n, ok := counts[gr]; ok {
			return n, true, nil
		}
		res, ok := q.cfg.Registry.Get(gr)
		if !ok || !countable(res.Kind()) {
			return 0, false, nil
		}
		n, _, err := res.Count(ctx, ns, false)
		if err != nil {
			return 0, false, err
		}
		counts[gr] = n
		return n, true, nil
	}
	var firstErr error
	for _, e := range quotas {
		rq := e.rq
		used := corev1.ResourceList{}
		for name := range rq.Spec.Hard {
			if old, ok := rq.Status.Used[name]; ok {
				used[name] = old
			}
			gr, ok := counted(name)
			n, served := 0, false
			if ok {
				var err error
				if n, served, err = count(gr); err != nil {
					return false, err
				}
			}
			if !served {
				if unserved(name) {
					used[name] = *resource.NewQuantity(0, resource.DecimalSI)
				}
				continue
			}
			if e.scoped {
				n = 0 // an object count matches no scope
			}
			used[name] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
		newHard := rq.Status.Hard == nil || !equalLists(rq.Spec.Hard, rq.Status.Hard)
		if !newHard && rq.Status.Used != nil && equalLists(used, rq.Status.Used) {
			continue
		}
		if newHard {
			settle = true
		}
		obj := e.obj.DeepCopy()
		status := map[string]any{"hard": listJSON(rq.Spec.Hard), "used": listJSON(used)}
		obj.Object["status"] = status
		res, _ := q.cfg.Registry.Get(quotasResource)
		if _, err := res.Update(ctx, "v1", ns, obj.GetName(), obj, registry.WriteOptions{Subresource: "status", FieldManager: controllerManager}); err != nil && !apierrors.IsNotFound(err) && firstErr == nil {
			firstErr = err
		}
	}
	return settle, firstErr
}
