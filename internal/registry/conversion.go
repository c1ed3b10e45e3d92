package registry

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// Converter changes the version of custom resources whose CRD converts
// with a webhook (Kind.ConversionWebhook): registry/webhook calls it.
type Converter interface {
	// Convert returns objs, objects of k in one version (as stored, or
	// as a client sent them), as version v of k, in order. The objects
	// it returns are its own; objs are left as they are. An error is the
	// conversion's, as upstream words it ("conversion webhook for ...").
	Convert(ctx context.Context, k *Kind, objs []*unstructured.Unstructured, v string) ([]*unstructured.Unstructured, error)
}

// SetConverter makes c the converter of kinds with a conversion webhook.
// Set before the registry serves.
func (r *Registry) SetConverter(c Converter) { r.converter = c }

// convertTo returns obj as version v of k. Versions of a kind without a
// conversion webhook differ only in apiVersion (convert); a kind with one
// has the registry's Converter call it, unless obj is in v already, and
// the result is pruned to v's schema, as upstream prunes what a webhook
// returns. It copies only when it changes something.
func (r *Resource) convertTo(ctx context.Context, k *Kind, v string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return r.reg.ConvertTo(ctx, k, v, obj)
}

// ConvertTo is the package's ConvertTo for any kind: an object of a kind
// with a conversion webhook is converted by it (unless it is in v already),
// and the result pruned to v's schema, as upstream prunes what a webhook
// returns.
func (r *Registry) ConvertTo(ctx context.Context, k *Kind, v string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if k.ConversionWebhook == nil {
		return ConvertTo(k, v, obj), nil
	}
	if obj.GetAPIVersion() == k.GroupVersionKind(v).GroupVersion().String() {
		return obj, nil
	}
	out, err := r.convertMany(ctx, k, v, []*unstructured.Unstructured{obj})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// convertMany is convertTo of several objects, in one call of the
// webhook for those not in v already.
func (r *Registry) convertMany(ctx context.Context, k *Kind, v string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	want := k.GroupVersionKind(v).GroupVersion().String()
	var send []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAPIVersion() != want {
			send = append(send, o)
		}
	}
	out := make([]*unstructured.Unstructured, len(objs))
	copy(out, objs)
	if len(send) == 0 || k.ConversionWebhook == nil {
		for i, o := range out {
			out[i] = convert(k, v, o)
		}
		return out, nil
	}
	c := r.converter
	if c == nil {
		return nil, conversionFailed(fmt.Errorf("conversion webhook for %s failed: no converter is configured", send[0].GroupVersionKind()))
	}
	got, err := c.Convert(ctx, k, send, v)
	if err != nil {
		return nil, conversionFailed(err)
	}
	if len(got) != len(send) {
		return nil, conversionFailed(fmt.Errorf("conversion webhook for %s returned %d objects, expected %d", send[0].GroupVersionKind(), len(got), len(send)))
	}
	s := k.Schemas[v]
	j := 0
	for i, o := range out {
		if o.GetAPIVersion() == want {
			continue
		}
		if s != nil {
			s.Prune(got[j].Object)
		}
		out[i] = got[j]
		j++
	}
	return out, nil
}

// conversionFailed is err, a conversion's, as the client gets it: an API
// status as it is, anything else a conversionError.
func conversionFailed(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return &conversionError{err}
}

// conversionError is a conversion that failed: a 500 with its message as
// it is (reason Unknown), as upstream answers an error that is not an API
// status. Upstream's reads (and so its updates and deletes) fail in its
// storage, which words them further: readFailed, updateReadFailed.
type conversionError struct{ err error }

func (e *conversionError) Error() string { return e.err.Error() }

func (e *conversionError) Status() metav1.Status {
	return metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Reason: metav1.StatusReasonUnknown, Message: e.err.Error(),
	}
}

// readFailed is err, from converting obj (as stored) for a read or a
// delete, as upstream's storage reports an object it cannot decode.
func readFailed(k *Kind, obj *unstructured.Unstructured, err error) error {
	var ce *conversionError
	if !errors.As(err, &ce) {
		return err
	}
	key := "/" + k.Group + "/" + k.Resource + "/"
	if k.Namespaced {
		key += obj.GetNamespace() + "/"
	}
	return apierrors.NewInternalError(fmt.Errorf("StorageError: corrupt object, Code: 7, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=%s: %v",
		key+obj.GetName(), obj.GetResourceVersion(), ce.err))
}

// updateReadFailed is err, from converting obj (as stored) for an update,
// as upstream's update reports an object it cannot decode.
func updateReadFailed(obj *unstructured.Unstructured, err error) error {
	var ce *conversionError
	if !errors.As(err, &ce) {
		return err
	}
	return &conversionError{fmt.Errorf("object not decodable revision=%s: %v", obj.GetResourceVersion(), ce.err)}
}

// toStored returns obj, an object of k in the version a client wrote,
// as stored: converted by the webhook for a kind with one. Other kinds'
// writes are relabelled as they are prepared.
func (r *Resource) toStored(ctx context.Context, k *Kind, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if k.ConversionWebhook == nil {
		return obj, nil
	}
	return r.convertTo(ctx, k, k.StorageVersion(), obj)
}

// presentAs is present for any kind: obj, as stored, converted to
// version v (by the webhook for a kind with one) with v's schema defaults
// applied.
func (r *Resource) presentAs(ctx context.Context, k *Kind, v string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if k.ConversionWebhook == nil {
		return present(k, v, obj), nil
	}
	out, err := r.convertStoredOne(ctx, k, v, obj)
	if err != nil {
		return nil, err
	}
	return withDefaults(k, v, obj, out), nil
}

// presentItems presents a list's items, as stored, in version v,
// converting those of a kind with a webhook in one call.
func (r *Resource) presentItems(ctx context.Context, k *Kind, v string, items []unstructured.Unstructured) error {
	if k.ConversionWebhook == nil {
		for i := range items {
			items[i] = *present(k, v, &items[i])
		}
		return nil
	}
	objs := make([]*unstructured.Unstructured, len(items))
	for i := range items {
		objs[i] = &items[i]
	}
	out, err := r.convertStored(ctx, k, v, objs)
	if err != nil {
		return err
	}
	for i := range items {
		items[i] = *withDefaults(k, v, objs[i], out[i])
	}
	return nil
}

// convertStored is convertMany of objects as stored (each read at its
// resourceVersion), through the memo: a stored object converts the same
// way every time, as upstream's per-version watch caches convert each
// change once, so only those not converted lately are sent. Objects
// converted are the caller's to change; those in v already come back as
// they were.
func (r *Resource) convertStored(ctx context.Context, k *Kind, v string, objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	want := k.GroupVersionKind(v).GroupVersion().String()
	out := make([]*unstructured.Unstructured, len(objs))
	var miss []*unstructured.Unstructured
	var at []int
	for i, o := range objs {
		if o.GetAPIVersion() == want {
			out[i] = o
			continue
		}
		if c, ok := r.converted.get(k, memoKey{v, string(o.GetUID()), o.GetResourceVersion()}); ok {
			out[i] = c
			continue
		}
		miss, at = append(miss, o), append(at, i)
	}
	if len(miss) == 0 {
		return out, nil
	}
	got, err := r.reg.convertMany(ctx, k, v, miss)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = got[j]
		if o := miss[j]; o.GetUID() != "" && o.GetResourceVersion() != "" {
			r.converted.put(k, memoKey{v, string(o.GetUID()), o.GetResourceVersion()}, got[j])
		}
	}
	return out, nil
}

// convertStoredOne is convertStored of one object: convertTo of an
// object as stored.
func (r *Resource) convertStoredOne(ctx context.Context, k *Kind, v string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if k.ConversionWebhook == nil || obj.GetAPIVersion() == k.GroupVersionKind(v).GroupVersion().String() {
		return convert(k, v, obj), nil
	}
	key := memoKey{v, string(obj.GetUID()), obj.GetResourceVersion()}
	if key.uid == "" || key.resourceVersion == "" {
		out, err := r.convertStored(ctx, k, v, []*unstructured.Unstructured{obj})
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	// One conversion per object at a time: the watchers of a version
	// not stored all get each event at once, and one call serves them.
	f, first := r.converted.join(k, key)
	if !first {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
		return f.obj.DeepCopy(), nil
	}
	out, err := r.convertStored(ctx, k, v, []*unstructured.Unstructured{obj})
	if err == nil {
		f.obj = out[0].DeepCopy()
	}
	f.err = err
	r.converted.land(key, f)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// conversionMemo keeps the latest conversions of stored objects, by
// version, uid and resourceVersion, for one Kind value: a CRD update
// (a new Kind, perhaps a new webhook) starts it again. Entries are
// private copies; get hands out copies.
type conversionMemo struct {
	mu      sync.Mutex
	kind    *Kind
	order   *list.List // of *memoEntry, the latest used first
	entries map[memoKey]*list.Element
	flying  map[memoKey]*flight // conversions under way, of kind's objects
}

// flight is one conversion under way, which others of the same object
// wait for (join) rather than call the webhook again.
type flight struct {
	done chan struct{} // closed once obj or err is set
	obj  *unstructured.Unstructured
	err  error
}

// join returns the conversion of key under way for k, or, first, a new
// one the caller makes and lands.
func (m *conversionMemo) join(k *Kind, key memoKey) (f *flight, first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forKind(k)
	if f := m.flying[key]; f != nil {
		return f, false
	}
	f = &flight{done: make(chan struct{})}
	m.flying[key] = f
	return f, true
}

// forKind starts the memo again for k if it was another Kind's.
func (m *conversionMemo) forKind(k *Kind) {
	if m.kind != k {
		m.kind, m.order = k, list.New()
		m.entries, m.flying = map[memoKey]*list.Element{}, map[memoKey]*flight{}
	}
}

// land ends f, the conversion of key: those waiting get its result.
func (m *conversionMemo) land(key memoKey, f *flight) {
	m.mu.Lock()
	if m.flying[key] == f {
		delete(m.flying, key)
	}
	m.mu.Unlock()
	close(f.done)
}

type memoKey struct{ version, uid, resourceVersion string }

type memoEntry struct {
	key memoKey
	obj *unstructured.Unstructured
}

// memoSize bounds a resource's memo: what an informer's list of a
// version not stored and the watch events after it reuse.
const memoSize = 4096

func (m *conversionMemo) get(k *Kind, key memoKey) (*unstructured.Unstructured, bool) {
	m.mu.Lock()
	if m.kind != k {
		m.mu.Unlock()
		return nil, false
	}
	e, ok := m.entries[key]
	if !ok {
		m.mu.Unlock()
		return nil, false
	}
	m.order.MoveToFront(e)
	obj := e.Value.(*memoEntry).obj
	m.mu.Unlock()
	// Copied outside the lock: an entry's object is never changed (put
	// replaces it), so readers of the memo do not wait on each other's
	// copies.
	return obj.DeepCopy(), true
}

func (m *conversionMemo) put(k *Kind, key memoKey, obj *unstructured.Unstructured) {
	obj = obj.DeepCopy()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forKind(k)
	if e, ok := m.entries[key]; ok {
		e.Value.(*memoEntry).obj = obj
		m.order.MoveToFront(e)
		return
	}
	m.entries[key] = m.order.PushFront(&memoEntry{key, obj})
	if m.order.Len() > memoSize {
		last := m.order.Back()
		m.order.Remove(last)
		delete(m.entries, last.Value.(*memoEntry).key)
	}
}

// convertingWatch presents the objects of w's events in version v of a
// kind with a conversion webhook. A conversion that fails ends the watch,
// as an event upstream cannot encode ends its stream; the client's
// reflector starts another.
func (r *Resource) convertingWatch(ctx context.Context, k *Kind, v string, w watch.Interface) watch.Interface {
	out := make(chan watch.Event)
	cw := &convertedWatch{w: w, out: out, done: make(chan struct{})}
	go func() {
		defer close(out)
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Bookmark && ev.Type != watch.Error {
				var obj *unstructured.Unstructured
				switch o := ev.Object.(type) {
				case *storage.Shared:
					obj = o.Unstructured
				case *unstructured.Unstructured:
					obj = o
				case *metav1.PartialObjectMetadata: // MetadataOnly: shared, so a copy
					p := *o
					p.APIVersion = k.GroupVersionKind(v).GroupVersion().String()
					ev.Object = &p
				}
				if obj != nil {
					p, err := r.presentAs(ctx, k, v, obj)
					if err != nil {
						r.reg.cfg.Logger.Error("ending a watch: converting an event's object", "resource", k.GroupResource(), "version", v, "err", err)
						return
					}
					ev.Object = p
				}
			}
			select {
			case out <- ev:
			case <-cw.done:
				return
			}
		}
	}()
	return cw
}

type convertedWatch struct {
	w    watch.Interface
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func (c *convertedWatch) Stop() {
	c.once.Do(func() {
		close(c.done)
		c.w.Stop()
	})
}

func (c *convertedWatch) ResultChan() <-chan watch.Event { return c.out }
