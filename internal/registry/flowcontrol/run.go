package flowcontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gvr "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// The field managers of kube-apiserver's writes: the one that keeps the
// bootstrap objects, and the one that writes the flow schemas' status.
const (
	producer = "api-priority-and-fairness-config-producer-v1"
	consumer = "api-priority-and-fairness-config-consumer-v1"
)

// ensurePeriod is how often the bootstrap objects are made again and put
// back, as upstream's (besides at start).
const ensurePeriod = time.Minute

var (
	schemasGR = gvr.GroupResource{Group: flowcontrolv1.GroupName, Resource: "flowschemas"}
	levelsGR  = gvr.GroupResource{Group: flowcontrolv1.GroupName, Resource: "prioritylevelconfigurations"}
)

// Run keeps the configuration until ctx ends: it makes the bootstrap
// objects (at once, then every minute), follows the stored flow schemas
// and priority levels into the classifier, writes each flow schema's
// Dangling condition, and shares the seats out again every 10 seconds.
// Synced is closed once the bootstrap objects are stored, classify and
// have their conditions.
func (c *Controller) Run(ctx context.Context) error {
	ctx = registry.AsController(ctx, registry.APIServerUser)
	var schemas, levels *registry.Resource
	for {
		var ok1, ok2 bool
		schemas, ok1 = c.cfg.Registry.Get(schemasGR)
		levels, ok2 = c.cfg.Registry.Get(levelsGR)
		if ok1 && ok2 {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Registry.Changed():
		}
	}
	// The first ensure before anything follows, as upstream's post-start
	// hook before the server is ready; then every minute.
	for {
		err := c.ensure(ctx, schemas, levels)
		if err == nil {
			break
		}
		c.cfg.Logger.Warn("priority and fairness: the bootstrap configuration; again in a second", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	keep := func() {
		tick := time.NewTicker(ensurePeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := c.ensure(ctx, schemas, levels); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("priority and fairness: the bootstrap configuration", "err", err)
			}
		}
	}
	if c.cfg.ObjectsOnly {
		c.syncOnce.Do(func() { close(c.synced) })
		keep()
		return nil
	}
	go keep()
	go func() {
		tick := time.NewTicker(borrowingPeriod)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				c.mu.Lock()
				c.rebalanceLocked(c.cfg.Now(), true)
				c.mu.Unlock()
			}
		}
	}()
	for ctx.Err() == nil {
		if err := c.follow(ctx, schemas, levels); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("priority and fairness: watch", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// Synced is closed once Run has stored the bootstrap configuration and
// classifies by the stored objects (their conditions written).
func (c *Controller) Synced() <-chan struct{} { return c.synced }

// follow lists both kinds, then watches them from there until a watch
// ends, configuring the classifier after each batch of events.
func (c *Controller) follow(ctx context.Context, schemas, levels *registry.Resource) error {
	fsObjs := map[string]*flowcontrolv1.FlowSchema{}
	plObjs := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	apply := func(ev watch.Event, isSchema bool) error {
		if ev.Type == watch.Error {
			return fmt.Errorf("watch error: %v", ev.Object)
		}
		obj, ok := ev.Object.(runtime.Unstructured)
		if !ok || ev.Type == watch.Bookmark {
			return nil
		}
		u := &unstructured.Unstructured{Object: obj.UnstructuredContent()}
		if isSchema {
			return keep(fsObjs, ev.Type, u)
		}
		return keep(plObjs, ev.Type, u)
	}
	// The state first, as a list (an informer's), so that Synced means
	// the whole of it.
	var revs [2]string
	for i, res := range []*registry.Resource{schemas, levels} {
		list, err := res.List(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			return err
		}
		for j := range list.Items {
			if err := apply(watch.Event{Type: watch.Added, Object: &list.Items[j]}, i == 0); err != nil {
				return err
			}
		}
		revs[i] = list.GetResourceVersion()
	}
	c.sync(ctx, schemas, fsObjs, plObjs)
	c.syncOnce.Do(func() { close(c.synced) })

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from := func(rv string) registry.ListOptions {
		return registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: rv}}
	}
	sw, err := schemas.Watch(wctx, "v1", "", from(revs[0]))
	if err != nil {
		return err
	}
	defer sw.Stop()
	lw, err := levels.Watch(wctx, "v1", "", from(revs[1]))
	if err != nil {
		return err
	}
	defer lw.Stop()
	// next takes one event, or reports that none is waiting.
	next := func(block bool) (bool, error) {
		var ev watch.Event
		var ok, isSchema bool
		if block {
			select {
			case <-ctx.Done():
				return false, nil
			case ev, ok = <-sw.ResultChan():
				isSchema = true
			case ev, ok = <-lw.ResultChan():
			}
		} else {
			select {
			case ev, ok = <-sw.ResultChan():
				isSchema = true
			case ev, ok = <-lw.ResultChan():
			default:
				return false, nil
			}
		}
		if !ok {
			return false, errWatchEnded
		}
		return true, apply(ev, isSchema)
	}
	for ctx.Err() == nil {
		if got, err := next(true); err != nil || !got {
			return err
		}
		for { // the rest of the batch
			got, err := next(false)
			if err != nil {
				return err
			}
			if !got {
				break
			}
		}
		c.sync(ctx, schemas, fsObjs, plObjs)
	}
	return nil
}

// sync configures the classifier with the objects, and writes the flow
// schemas' conditions that changed.
func (c *Controller) sync(ctx context.Context, schemas *registry.Resource, fsObjs map[string]*flowcontrolv1.FlowSchema, plObjs map[string]*flowcontrolv1.PriorityLevelConfiguration) {
	dangling := c.configure(maps.Clone(fsObjs), maps.Clone(plObjs))
	// At once, to share the store's commits (a first start writes every
	// schema's).
	var wg sync.WaitGroup
	for name, fs := range fsObjs {
		wg.Go(func() { c.writeDangling(ctx, schemas, fs, dangling[name]) })
	}
	wg.Wait()
}

var errWatchEnded = fmt.Errorf("the watch ended")

// keep records an event's object u in objs, by name, as a T; or forgets
// it if it was deleted.
func keep[T any](objs map[string]*T, typ watch.EventType, u *unstructured.Unstructured) error {
	if typ == watch.Deleted {
		delete(objs, u.GetName())
		return nil
	}
	obj := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return err
	}
	objs[u.GetName()] = obj
	return nil
}

// writeDangling sets fs's Dangling condition, if it says otherwise: true
// if its priority level is missing.
func (c *Controller) writeDangling(ctx context.Context, schemas *registry.Resource, fs *flowcontrolv1.FlowSchema, dangling bool) {
	level := fs.Spec.PriorityLevelConfiguration.Name
	want := flowcontrolv1.FlowSchemaCondition{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, Reason: "Found",
		Message: fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", level)}
	if dangling {
		want.Status, want.Reason = flowcontrolv1.ConditionTrue, "NotFound"
		want.Message = fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", level)
	}
	for _, have := range fs.Status.Conditions {
		if have.Type == want.Type && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message {
			return
		}
	}
	want.LastTransitionTime = metav1.NewTime(c.cfg.Now())
	body, err := json.Marshal(map[string]any{
		"apiVersion": flowcontrolv1.SchemeGroupVersion.String(), "kind": "FlowSchema",
		"metadata": map[string]any{"name": fs.Name},
		"status":   map[string]any{"conditions": []flowcontrolv1.FlowSchemaCondition{want}},
	})
	if err != nil {
		return
	}
	_, _, err = schemas.Patch(ctx, "v1", "", fs.Name, body, registry.PatchOptions{
		WriteOptions: registry.WriteOptions{Subresource: "status", FieldManager: consumer},
		Type:         types.ApplyPatchType, Force: true,
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		c.cfg.Logger.Warn("priority and fairness: a flow schema's status", "flowSchema", fs.Name, "err", err)
	}
}

// ensure makes the bootstrap objects that are missing and puts back the
// spec of those that changed, as upstream's: always for the mandatory
// ones, for the suggested ones if their annotation
// apf.kubernetes.io/autoupdate-spec says "true" (or, without one that
// parses, if they were never changed); the annotation is set to what was
// decided. Then it deletes the objects that say "true" but that the
// bootstrap configuration no longer has.
func (c *Controller) ensure(ctx context.Context, schemas, levels *registry.Resource) error {
	type boot struct {
		res       *registry.Resource
		obj       runtime.Object
		name      string
		mandatory bool
	}
	var boots []boot
	for _, pl := range suggestedLevels() {
		boots = append(boots, boot{levels, pl, pl.Name, false})
	}
	for _, fs := range suggestedSchemas() {
		boots = append(boots, boot{schemas, fs, fs.Name, false})
	}
	for _, pl := range mandatoryLevels() {
		boots = append(boots, boot{levels, pl, pl.Name, true})
	}
	for _, fs := range mandatorySchemas() {
		boots = append(boots, boot{schemas, fs, fs.Name, true})
	}
	wanted := map[*registry.Resource]map[string]bool{schemas: {}, levels: {}}
	opts := registry.WriteOptions{FieldManager: producer}
	// Each object on its own goroutine: a first start's creates then
	// share the store's commits (one fsync for many), rather than wait
	// for one each.
	errs := make(chan error, len(boots))
	for _, b := range boots {
		wanted[b.res][b.name] = true
		go func() { errs <- ensureOne(ctx, b.res, b.obj, b.name, b.mandatory, opts) }()
	}
	var first error
	for range boots {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	for _, res := range []*registry.Resource{levels, schemas} {
		list, err := res.List(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			return err
		}
		for _, obj := range list.Items {
			if wanted[res][obj.GetName()] {
				continue
			}
			if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !v {
				continue
			}
			uid := obj.GetUID()
			if _, _, err := res.Delete(ctx, "v1", "", obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}, opts); err != nil &&
				!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	return nil
}

// ensureOne makes the bootstrap object obj of res if it is missing, or
// puts back its spec and annotation as ensure says.
func ensureOne(ctx context.Context, res *registry.Resource, obj runtime.Object, name string, mandatory bool, opts registry.WriteOptions) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	want := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(want.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(want.Object, "status")
	have, err := res.Get(ctx, "v1", "", name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err = res.Create(ctx, "v1", "", want, opts); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	autoUpdate := mandatory
	if !autoUpdate {
		if v, err := strconv.ParseBool(have.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
			autoUpdate = v
		} else {
			autoUpdate = have.GetGeneration() == 1
		}
	}
	annotation, hasAnnotation := have.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]
	fixAnnotation := true
	if v, err := strconv.ParseBool(annotation); hasAnnotation && err == nil && v == autoUpdate {
		fixAnnotation = false
	}
	fixSpec := autoUpdate && !specEqualish(obj, have)
	if !fixAnnotation && !fixSpec {
		return nil
	}
	next := have.DeepCopy()
	if fixSpec {
		next.Object["spec"] = want.Object["spec"]
	}
	if fixAnnotation {
		ann := next.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
		next.SetAnnotations(ann)
	}
	if _, err := res.Update(ctx, "v1", "", name, next, opts); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// specEqualish reports whether the stored object have has the bootstrap
// spec of want, defaulted as stored; the exempt level's shares and
// lendable percent are the user's to set.
func specEqualish(want runtime.Object, have *unstructured.Unstructured) bool {
	switch w := want.(type) {
	case *flowcontrolv1.PriorityLevelConfiguration:
		w = w.DeepCopy()
		core.DefaultPriorityLevelConfiguration(w)
		h := core.TypedPriorityLevelConfiguration(have)
		if w.Name == exemptName {
			if h.Spec.Exempt == nil {
				return false
			}
			w.Spec.Exempt.NominalConcurrencyShares, w.Spec.Exempt.LendablePercent = h.Spec.Exempt.NominalConcurrencyShares, h.Spec.Exempt.LendablePercent
		}
		return equality.Semantic.DeepEqual(w.Spec, h.Spec)
	case *flowcontrolv1.FlowSchema:
		w = w.DeepCopy()
		core.DefaultFlowSchema(w)
		return equality.Semantic.DeepEqual(w.Spec, core.TypedFlowSchema(have).Spec)
	}
	return false
}
