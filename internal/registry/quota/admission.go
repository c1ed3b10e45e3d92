package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Config configures a Quota.
type Config struct {
	// Registry serves the quotas and the objects they count; required.
	Registry *registry.Registry
	// Logger; nil discards.
	Logger *slog.Logger
	// Resync is how often the controller counts every quota's objects
	// again. Default 5 minutes, upstream's --resource-quota-sync-period.
	Resync time.Duration
	// Retry is the pause before a namespace whose count failed is
	// counted again. Default 50 ms.
	Retry time.Duration
	// Settle is how long after it writes new limits the controller
	// counts their namespace again. Default 1 s.
	Settle time.Duration
}

// Quota is quota admission (registry.Quota) and the quota controller
// (Run), which share what is in flight. Make it with New.
type Quota struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	spaces map[string]*space // by namespace, while a create is charged or in flight there
	// recount is signalled when a namespace must be counted again (a
	// charged create failed): the controller reads them from dirty.
	recount chan struct{}
	dirty   map[string]bool
}

// space is one namespace's admission state. Its fields are under
// Quota.mu, but gate.
type space struct {
	ns    string
	refs  int       // creates and counts using it: it goes at 0
	queue []*waiter // creates waiting to be charged
	busy  bool      // a waiter is charging a batch (the leader)
	// gate is held shared by each create from before its charge until it
	// is stored or failed, and exclusively by the controller while it
	// counts the namespace's objects: a count then sees every create
	// charged so far stored, and none charged and not yet stored.
	gate sync.RWMutex
}

// waiter is one create waiting for its charge.
type waiter struct {
	kind   *registry.Kind
	obj    *unstructured.Unstructured
	dryRun bool
	// wake is sent to once: the result is ready (lead false) or the
	// waiter is to charge the next batch (lead true).
	wake chan bool
	err  error
	// charged: the create was counted in some quota (not a dry run),
	// whether or not it was then admitted.
	charged bool
}

// errPending is a waiter's result until its charge is written.
var errPending = errors.New("quota: charge not written")

// New returns a Quota over cfg.Registry.
func New(cfg Config) (*Quota, error) {
	if cfg.Registry == nil {
		return nil, errors.New("quota: a Registry is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 50 * time.Millisecond
	}
	if cfg.Settle <= 0 {
		cfg.Settle = time.Second
	}
	return &Quota{cfg: cfg, log: cfg.Logger, spaces: map[string]*space{}, recount: make(chan struct{}, 1), dirty: map[string]bool{}}, nil
}

// timeout bounds the charging of one batch, as upstream's 10 s wait.
const timeout = 10 * time.Second

// Charge implements registry.Quota.
func (q *Quota) Charge(ctx context.Context, k *registry.Kind, ns string, obj *unstructured.Unstructured, dryRun bool) (func(stored bool), error) {
	nothing := func(bool) {}
	if ns == "" || !countable(k) {
		return nothing, nil
	}
	res, ok := q.cfg.Registry.Get(quotasResource)
	if !ok {
		return nothing, nil
	}
	// Most namespaces have no quota: a look at the cache settles it
	// without a wait. A quota created a moment ago and missed here has
	// no status.hard yet anyway (the controller writes it).
	if n, _, err := res.Count(ctx, ns, true); err == nil && n == 0 {
		return nothing, nil
	}
	sp := q.acquire(ns)
	sp.gate.RLock()
	release := func() {
		sp.gate.RUnlock()
		q.release(ns, sp)
	}
	w := &waiter{kind: k, obj: obj, dryRun: dryRun, wake: make(chan bool, 1), err: errPending}
	q.mu.Lock()
	sp.queue = append(sp.queue, w)
	lead := !sp.busy
	sp.busy = true
	q.mu.Unlock()
	if !lead {
		lead = <-w.wake
	}
	if lead {
		q.lead(ctx, sp)
	}
	if w.err != nil {
		release()
		if w.charged {
			q.markDirty(ns) // charged to some quota, then refused by another
		}
		if errors.Is(w.err, context.DeadlineExceeded) {
			return nil, apierrors.NewInternalError(errors.New("resource quota evaluation timed out"))
		}
		return nil, w.err
	}
	return func(stored bool) {
		release()
		if w.charged && !stored {
			q.markDirty(ns)
		}
	}, nil
}

// acquire returns ns's space, made if need be, for the caller to use
// until release.
func (q *Quota) acquire(ns string) *space {
	q.mu.Lock()
	defer q.mu.Unlock()
	sp := q.spaces[ns]
	if sp == nil {
		sp = &space{ns: ns}
		q.spaces[ns] = sp
	}
	sp.refs++
	return sp
}

func (q *Quota) release(ns string, sp *space) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if sp.refs--; sp.refs == 0 {
		delete(q.spaces, ns)
	}
}

// lead charges the batch of creates waiting in ns, the leader's among
// them, then hands the lead to the first create that came meanwhile.
func (q *Quota) lead(ctx context.Context, sp *space) {
	q.mu.Lock()
	batch := sp.queue
	sp.queue = nil
	q.mu.Unlock()

	// The batch is charged for all its creates: one client going away
	// must not fail the others'.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	q.chargeBatch(ctx, sp.ns, batch)

	q.mu.Lock()
	var next *waiter
	if len(sp.queue) > 0 {
		next = sp.queue[0]
	} else {
		sp.busy = false
	}
	q.mu.Unlock()
	if next != nil {
		next.wake <- true
	}
	for i, w := range batch {
		if i > 0 { // the leader is batch[0], and awake
			w.wake <- false
		}
	}
}

// entry is one quota of a namespace, as read for a batch.
type entry struct {
	obj *unstructured.Unstructured
	rq  *corev1.ResourceQuota // obj, typed
	// hard and used are rq's status; used changes as creates are
	// charged.
	hard, used corev1.ResourceList
	scoped     bool
}

func readEntry(obj *unstructured.Unstructured) (*entry, error) {
	rq := &corev1.ResourceQuota{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, rq); err != nil {
		return nil, err
	}
	return &entry{
		obj: obj, rq: rq, hard: rq.Status.Hard, used: rq.Status.Used,
		scoped: len(rq.Spec.Scopes) > 0 || (rq.Spec.ScopeSelector != nil && len(rq.Spec.ScopeSelector.MatchExpressions) > 0),
	}, nil
}

// readQuotas reads ns's quotas consistently, by name; only, if not nil,
// those named in it.
func (q *Quota) readQuotas(ctx context.Context, ns string, only map[string]bool) ([]*entry, error) {
	res, ok := q.cfg.Registry.Get(quotasResource)
	if !ok {
		return nil, nil
	}
	list, err := res.List(ctx, "v1", ns, registry.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*entry
	for i := range list.Items {
		if only != nil && !only[list.Items[i].GetName()] {
			continue
		}
		e, err := readEntry(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// chargeBatch charges batch's creates against ns's quotas, as upstream's
// checkQuotas: each create in turn against the counts its predecessors
// left, then one write per quota changed; quotas whose write failed (a
// conflict) are read again and the creates still waiting charged against
// them, up to three times.
func (q *Quota) chargeBatch(ctx context.Context, ns string, batch []*waiter) {
	quotas, err := q.readQuotas(ctx, ns, nil)
	if err != nil {
		for _, w := range batch {
			w.err = err
		}
		return
	}
	pending := batch
	for retries := 3; ; retries-- {
		changed := make([]bool, len(quotas))
		var waiting []*waiter
		for _, w := range pending {
			used, err := check(quotas, w)
			switch {
			case err != nil:
				w.err = err
			case w.dryRun || used == nil:
				w.err = nil // upstream's dry runs are checked, not charged
			default:
				for i, u := range used {
					if u != nil {
						quotas[i].used = u
						changed[i] = true
					}
				}
				waiting = append(waiting, w)
			}
		}
		if len(waiting) == 0 {
			return
		}
		failed := map[string]bool{}
		var lastErr error
		written := false
		for i, e := range quotas {
			if !changed[i] {
				continue
			}
			if err := q.writeUsed(ctx, e); err != nil {
				failed[e.obj.GetName()] = true
				lastErr = err
			} else {
				written = true
			}
		}
		for _, w := range waiting {
			w.charged = w.charged || written
		}
		if len(failed) == 0 {
			for _, w := range waiting {
				w.err = nil
			}
			return
		}
		if retries == 0 {
			for _, w := range waiting {
				w.err = lastErr
			}
			return
		}
		if quotas, err = q.readQuotas(ctx, ns, failed); err != nil {
			for _, w := range waiting {
				w.err = err
			}
			return
		}
		pending = waiting
	}
}

// check is upstream's CheckRequest for an object count: the new
// status.used of each quota that counts w's object (nil for the others,
// and no slice when none does), or the 403 refusing it.
func check(quotas []*entry, w *waiter) ([]corev1.ResourceList, error) {
	names := countNames(w.kind.GroupResource())
	forbidden := func(format string, args ...any) error {
		return apierrors.NewForbidden(w.kind.GroupResource(), w.obj.GetName(), fmt.Errorf(format, args...))
	}
	counting := make([][]corev1.ResourceName, len(quotas))
	any := false
	for i, e := range quotas {
		// An object count matches no scope: a scoped quota counts none.
		if e.scoped {
			continue
		}
		restricted := intersect(e.hard, names)
		if len(restricted) == 0 {
			continue
		}
		for _, n := range restricted {
			if _, ok := e.used[n]; !ok {
				return nil, forbidden("status unknown for quota: %s, resources: %s", e.obj.GetName(), joinNames(restricted))
			}
		}
		counting[i] = restricted
		any = true
	}
	if !any {
		return nil, nil
	}
	out := make([]corev1.ResourceList, len(quotas))
	for i, e := range quotas {
		if counting[i] == nil {
			continue
		}
		used := corev1.ResourceList{}
		for n, v := range e.used {
			used[n] = v.DeepCopy()
		}
		requested, exceeded := corev1.ResourceList{}, corev1.ResourceList{}
		for _, n := range counting[i] {
			v := used[n]
			v.Add(one())
			used[n] = v
			requested[n] = one()
			if v.Cmp(e.hard[n]) > 0 {
				exceeded[n] = one()
			}
		}
		if len(exceeded) > 0 {
			mask := func(l corev1.ResourceList) corev1.ResourceList {
				m := corev1.ResourceList{}
				for n := range exceeded {
					m[n] = l[n]
				}
				return m
			}
			return nil, forbidden("exceeded quota: %s, requested: %s, used: %s, limited: %s",
				e.obj.GetName(), pretty(mask(requested)), pretty(mask(e.used)), pretty(mask(e.hard)))
		}
		out[i] = used
	}
	return out, nil
}

// writeUsed writes e's status.used, if the quota is still the one read.
func (q *Quota) writeUsed(ctx context.Context, e *entry) error {
	res, ok := q.cfg.Registry.Get(quotasResource)
	if !ok {
		return apierrors.NewNotFound(quotasResource, e.obj.GetName())
	}
	obj := e.obj.DeepCopy()
	if err := unstructured.SetNestedField(obj.Object, listJSON(e.used), "status", "used"); err != nil {
		return err
	}
	ctx = registry.AsController(ctx, registry.APIServerUser)
	out, err := res.Update(ctx, "v1", obj.GetNamespace(), obj.GetName(), obj, registry.WriteOptions{Subresource: "status", FieldManager: admissionManager})
	if err != nil {
		return err
	}
	e.obj = out
	return nil
}

// admissionManager is the field manager of admission's writes: upstream's
// loopback client's.
const admissionManager = "kube-apiserver"

// listJSON is l as a ResourceList's JSON.
func listJSON(l corev1.ResourceList) map[string]any {
	m := make(map[string]any, len(l))
	for n, v := range l {
		m[string(n)] = v.String()
	}
	return m
}

// equalLists reports whether two ResourceLists hold the same quantities.
func equalLists(a, b corev1.ResourceList) bool { return apiequality.Semantic.DeepEqual(a, b) }
