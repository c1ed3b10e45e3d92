package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

// Resource serves the verbs of one resource. Reads go through its watch
// cache where the API allows; writes go to the store.
type Resource struct {
	reg   *Registry
	store *storage.Store
	cache *watchcache.Cache
	kind  atomic.Pointer[Kind]
	stop  func() // ends the cache; guarded by reg.mu
	// hosted: the cache is the host's (the kind is a Cohabit's guest),
	// which runs it, or there is none (a Review kind).
	hosted bool

	managers fieldManagers
	// converted memoizes what a conversion webhook made of stored objects.
	converted conversionMemo
}

func (r *Resource) setKind(k *Kind) { r.kind.Store(k) }

// CacheStats returns the figures of the resource's watch cache: how many
// objects are stored (once it has loaded them), its revision, the writes
// it has taken in and the watchers it ended as too slow. A kind that owns
// no objects (Kind.OwnsObjects) has none of its own.
func (r *Resource) CacheStats() watchcache.Stats {
	if r.cache == nil {
		return watchcache.Stats{}
	}
	return r.cache.Stats()
}

// Kind describes the resource. It may change (a CRD was updated): read it
// once per request.
func (r *Resource) Kind() *Kind { return r.kind.Load() }

// key is the storage key of ns/name.
func (r *Resource) key(k *Kind, ns, name string) string {
	if k.Namespaced {
		return k.Prefix() + ns + "/" + name
	}
	return k.Prefix() + name
}

// scope is the storage prefix of a list or watch in ns ("" = all).
func (r *Resource) scope(k *Kind, ns string) string {
	if k.Namespaced && ns != "" {
		return k.Prefix() + ns + "/"
	}
	return k.Prefix()
}

// convert returns obj, as stored, as version v of its kind. Versions of a
// kind differ only in apiVersion (conversion strategy None), so this is a
// relabel; a guest's objects are converted from its host's shape. It
// copies only when the label changes, as objects from the cache are
// shared.
func convert(k *Kind, v string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	want := k.GroupVersionKind(v).GroupVersion().String()
	if obj.GetAPIVersion() == want {
		return obj
	}
	if k.IsGuest() {
		return k.Cohabit.ToGuest(obj)
	}
	out := obj.DeepCopy()
	out.SetAPIVersion(want)
	return out
}

// present returns obj as the client sees it in version v: relabelled, and
// with the version's schema defaults applied, as upstream applies them
// when it reads from storage (so objects stored before a default was
// added show it). It copies only when it changes something.
func present(k *Kind, v string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	return withDefaults(k, v, obj, convert(k, v, obj))
}

// withDefaults is out, obj in version v, with v's schema defaults applied:
// a copy when out is obj and the defaults change it.
func withDefaults(k *Kind, v string, obj, out *unstructured.Unstructured) *unstructured.Unstructured {
	if s := defaulter(k, v); s != nil && needsDefaults(s, out.Object) {
		if out == obj {
			out = obj.DeepCopy()
		}
		s.Default(out.Object)
	}
	return out
}

// needsDefaults reports whether s's defaults would change obj (always,
// for a schema that cannot tell). An object written since the schema got
// its defaults has them: it is presented as stored.
func needsDefaults(s Schema, obj map[string]any) bool {
	if d, ok := s.(interface{ NeedsDefaults(map[string]any) bool }); ok {
		return d.NeedsDefaults(obj)
	}
	return true
}

// defaulter is version v's schema if it has defaults to apply.
func defaulter(k *Kind, v string) Schema {
	s := k.Schemas[v]
	if s == nil {
		return nil
	}
	if d, ok := s.(interface{ HasDefaults() bool }); ok && !d.HasDefaults() {
		return nil
	}
	return s
}

// Get reads ns/name.
func (r *Resource) Get(ctx context.Context, version, ns, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	k := r.Kind()
	obj, err := r.cache.Get(ctx, r.key(k, ns, name), storage.GetOptions{ResourceVersion: opts.ResourceVersion})
	if err != nil {
		return nil, interpret(err, k.GroupResource(), name)
	}
	out, err := r.presentAs(ctx, k, version, obj)
	if err != nil {
		return nil, readFailed(k, obj, err)
	}
	return out, nil
}

// GetRecord reads ns/name as stored, for a caller that serves its JSON
// as it is: no decode, no encode. asStored is false when version v of the
// object is not the stored bytes (another version than the stored one is
// asked for, or the schema has defaults the object lacks); Present gives
// what Get would then.
func (r *Resource) GetRecord(ctx context.Context, version, ns, name string, opts metav1.GetOptions) (rec *storage.Record, asStored bool, err error) {
	k := r.Kind()
	rec, err = r.cache.GetRecord(ctx, r.key(k, ns, name), storage.GetOptions{ResourceVersion: opts.ResourceVersion})
	if err != nil {
		return nil, false, interpret(err, k.GroupResource(), name)
	}
	asStored = rec.APIVersion() == k.GroupVersionKind(version).GroupVersion().String() && !recordNeedsDefaults(defaulter(k, version), rec)
	return rec, asStored, nil
}

// recordNeedsDefaults reports whether the object of rec is not as
// presented under schema s: s has defaults, and they change the object
// (or it does not decode, which Present then reports). Objects written
// since the schema got its defaults have them, so their bytes are served
// as stored: no copy, defaulting or encode, and a decode only the first
// time.
func recordNeedsDefaults(s Schema, rec *storage.Record) bool {
	if s == nil {
		return false
	}
	// The answer is kept with the record, for this schema: a record
	// does not change, and a CRD change makes new schemas.
	var key any = s
	if k, ok := s.(interface{ FactKey() any }); ok {
		key = k.FactKey()
	}
	if needs, known := rec.Fact(key); known {
		return needs
	}
	obj, err := rec.Decode(rec.Rev)
	if err != nil {
		return true
	}
	needs := needsDefaults(s, obj.Object)
	rec.SetFact(key, needs)
	return needs
}

// Present decodes a record of GetRecord as version v of its object: what
// Get returns.
func (r *Resource) Present(ctx context.Context, version string, rec *storage.Record) (*unstructured.Unstructured, error) {
	obj, err := rec.Decode(rec.Rev)
	if err != nil {
		return nil, interpret(err, r.Kind().GroupResource(), rec.Name)
	}
	out, err := r.presentAs(ctx, r.Kind(), version, obj)
	if err != nil {
		return nil, readFailed(r.Kind(), obj, err)
	}
	return out, nil
}

// ListOptions are what a list or watch request asks for, parsed.
type ListOptions struct {
	storage.ListOptions
	// Watch options, the API's. AllowBookmarks asks for BOOKMARK events.
	// SendInitialEvents starts the watch with the state at least as new
	// as ResourceVersion ("": the store's state now) as ADDED events,
	// then, if AllowBookmarks, the initial-events-end bookmark.
	// NoInitialEvents (sendInitialEvents=false) starts a watch from ""
	// or "0" at the newest revision, with no state. With neither, a
	// watch from "" or "0" starts with the cache's state, and one from N
	// after N.
	AllowBookmarks    bool
	SendInitialEvents bool
	NoInitialEvents   bool
	// EncodedOnly: the caller only writes the events' objects as JSON, so
	// objects read in their stored form may come undecoded
	// (storage.WatchOptions.EncodedOnly).
	EncodedOnly bool
}

// List reads the objects of ns ("" = all namespaces).
func (r *Resource) List(ctx context.Context, version, ns string, opts ListOptions) (*unstructured.UnstructuredList, error) {
	k := r.Kind()
	var failed conversionFailure
	opts.Predicate.Fields = r.fieldSetIn(ctx, k, version, opts.Predicate.Field, &failed)
	list, err := r.cache.List(ctx, r.scope(k, ns), opts.ListOptions)
	if err != nil {
		return nil, interpret(err, k.GroupResource(), "")
	}
	if err := failed.err(); err != nil {
		return nil, err
	}
	list.SetAPIVersion(k.GroupVersionKind(version).GroupVersion().String())
	list.SetKind(k.ListKind)
	if k.ConversionWebhook != nil {
		if err := r.presentItems(ctx, k, version, list.Items); err != nil {
			return nil, err
		}
		return list, nil
	}
	defaults := defaulter(k, version) != nil
	for i := range list.Items {
		if defaults || list.Items[i].GetAPIVersion() != list.GetAPIVersion() {
			list.Items[i] = *present(k, version, &list.Items[i])
		}
	}
	return list, nil
}

// ListFromStore is List read from the store itself, not the watch
// cache, with no options: for start-up, before the caches run (Run).
func (r *Resource) ListFromStore(ctx context.Context, version, ns string) (*unstructured.UnstructuredList, error) {
	k := r.Kind()
	list, err := r.store.List(ctx, r.scope(k, ns), storage.ListOptions{})
	if err != nil {
		return nil, interpret(err, k.GroupResource(), "")
	}
	list.SetAPIVersion(k.GroupVersionKind(version).GroupVersion().String())
	list.SetKind(k.ListKind)
	if err := r.presentItems(ctx, k, version, list.Items); err != nil {
		return nil, err
	}
	return list, nil
}

// ListRecords reads the objects of ns as stored, for a caller that
// serves their JSON as it is: no decode, no encode (but, the first time
// a record is read under a schema with defaults, a decode to see that
// they are all there).
// ok is false when the objects must be presented first (another version
// than the stored one is asked for, or an object lacks a default); List
// does that.
func (r *Resource) ListRecords(ctx context.Context, version, ns string, opts ListOptions) (list *storage.RecordList, ok bool, err error) {
	k := r.Kind()
	if k.ConversionWebhook != nil && !k.storedAs(version) {
		return nil, false, nil // converted: List
	}
	s := defaulter(k, version)
	if _, ok := s.(interface{ NeedsDefaults(map[string]any) bool }); s != nil && !ok {
		return nil, false, nil
	}
	opts.Predicate.Fields = r.fieldSet(k)
	list, err = r.cache.ListRecords(ctx, r.scope(k, ns), opts.ListOptions)
	if err != nil {
		return nil, true, interpret(err, k.GroupResource(), "")
	}
	want := k.GroupVersionKind(version).GroupVersion().String()
	for _, it := range list.Items {
		if it.APIVersion() != want || recordNeedsDefaults(s, it) {
			return nil, false, nil
		}
	}
	return list, true, nil
}

// Count is the number of objects in ns ("" = all namespaces), read
// without a decode, and the revision it was read at: consistently (at
// least the store's state now), or, if cached, from the watch cache as it
// is.
func (r *Resource) Count(ctx context.Context, ns string, cached bool) (n int, rev int64, err error) {
	k := r.Kind()
	var opts storage.ListOptions
	if cached {
		opts.ResourceVersion = "0"
	}
	list, err := r.cache.ListRecords(ctx, r.scope(k, ns), opts)
	if err != nil {
		return 0, 0, interpret(err, k.GroupResource(), "")
	}
	return len(list.Items), list.ResourceVersion, nil
}

// ObjectKey names one stored object and the revision it was written at.
type ObjectKey struct {
	Namespace, Name string
	Rev             int64
}

// Keys lists the objects of ns ("" = all namespaces) by name, read
// consistently (at least the store's state now) and without a decode,
// and the revision they were read at.
func (r *Resource) Keys(ctx context.Context, ns string) ([]ObjectKey, int64, error) {
	k := r.Kind()
	list, err := r.cache.ListRecords(ctx, r.scope(k, ns), storage.ListOptions{})
	if err != nil {
		return nil, 0, interpret(err, k.GroupResource(), "")
	}
	keys := make([]ObjectKey, len(list.Items))
	for i, it := range list.Items {
		keys[i] = ObjectKey{Namespace: it.Namespace, Name: it.Name, Rev: it.Rev}
	}
	return keys, list.ResourceVersion, nil
}

// Watch follows the objects of ns ("" = all namespaces). A
// sendInitialEvents watch without a resourceVersion starts consistently,
// as kube-apiserver's does: its initial state is at least the store's
// state now, not whatever the cache holds yet. A NoInitialEvents watch
// from "" or "0" starts after the store's revision now (for "0", any
// revision would do; this one is the newest).
func (r *Resource) Watch(ctx context.Context, version, ns string, opts ListOptions) (watch.Interface, error) {
	k := r.Kind()
	if (opts.SendInitialEvents && opts.ResourceVersion == "") ||
		(opts.NoInitialEvents && (opts.ResourceVersion == "" || opts.ResourceVersion == "0")) {
		rev, err := r.StoreRevision(ctx)
		if err != nil {
			return nil, err
		}
		opts.ResourceVersion = strconv.FormatInt(rev, 10)
	}
	opts.Predicate.Fields = r.fieldSetIn(ctx, k, version, opts.Predicate.Field, nil)
	asStored := k.storedAs(version) && defaulter(k, version) == nil
	w, err := r.cache.Watch(ctx, r.scope(k, ns), storage.WatchOptions{
		ResourceVersion:   opts.ResourceVersion,
		Recursive:         true,
		Predicate:         opts.Predicate,
		AllowBookmarks:    opts.AllowBookmarks,
		SendInitialEvents: opts.SendInitialEvents,
		MetadataOnly:      opts.MetadataOnly,
		EncodedOnly:       opts.EncodedOnly && asStored,
	})
	if err != nil {
		return nil, interpret(err, k.GroupResource(), "")
	}
	if asStored {
		return w, nil // events pass as they are, encoded once for all watchers
	}
	if k.ConversionWebhook != nil {
		return r.convertingWatch(ctx, k, version, w), nil
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if u, ok := ev.Object.(metav1.Object); ok && ev.Type != watch.Bookmark && ev.Type != watch.Error {
			switch o := u.(type) {
			case *storage.Shared:
				// Unchanged, the event keeps the object shared by all
				// watchers, and its encoding.
				if p := present(k, version, o.Unstructured); p != o.Unstructured {
					ev.Object = p
				}
			case *unstructured.Unstructured:
				ev.Object = present(k, version, o)
			case *metav1.PartialObjectMetadata: // MetadataOnly: shared, so a copy
				p := *o
				p.APIVersion = k.GroupVersionKind(version).GroupVersion().String()
				ev.Object = &p
			}
		}
		return ev, true
	}), nil
}

// fieldSetIn is fieldSet for a list or watch in version v selecting by
// sel. A kind with a conversion webhook has the fields of a version not
// stored read from its objects converted to that version (through the
// memo), as upstream's per-version watch caches select from objects of
// their version. A conversion that fails is kept in failed (nil: logged)
// and the object left out.
func (r *Resource) fieldSetIn(ctx context.Context, k *Kind, v string, sel fields.Selector, failed *conversionFailure) func(*unstructured.Unstructured) fields.Set {
	base := r.fieldSet(k)
	if k.ConversionWebhook == nil || k.Fields == nil || k.storedAs(v) || sel == nil || onlyMetadata(sel) {
		return base
	}
	return func(obj *unstructured.Unstructured) fields.Set {
		conv, err := r.convertStoredOne(ctx, k, v, obj)
		if err != nil {
			if failed != nil {
				failed.set(err)
			} else {
				r.reg.cfg.Logger.Error("a watch left out an object: converting it for its field selector", "resource", k.GroupResource(), "version", v, "err", err)
			}
			return fields.Set{}
		}
		return base(conv)
	}
}

// onlyMetadata reports whether sel selects by metadata fields alone,
// which every version has alike.
func onlyMetadata(sel fields.Selector) bool {
	for _, req := range sel.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return false
		}
	}
	return true
}

// conversionFailure keeps the first error of conversions made while a
// list is selected.
type conversionFailure struct {
	mu    sync.Mutex
	first error
}

func (f *conversionFailure) set(err error) {
	f.mu.Lock()
	if f.first == nil {
		f.first = err
	}
	f.mu.Unlock()
}

func (f *conversionFailure) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

func (r *Resource) fieldSet(k *Kind) func(*unstructured.Unstructured) fields.Set {
	return func(obj *unstructured.Unstructured) fields.Set {
		set := fields.Set{"metadata.name": obj.GetName()}
		if k.Namespaced {
			set["metadata.namespace"] = obj.GetNamespace()
		}
		if k.Fields != nil {
			for f, v := range k.Fields(obj) {
				set[f] = v
			}
		}
		return set
	}
}

// resourceVersionOf parses an object's resourceVersion for a precondition.
func resourceVersionOf(obj *unstructured.Unstructured) (int64, error) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
	}
	return n, nil
}

// errDeleteNow aborts an update that removed an object's last finalizer
// while it is being deleted: the object is deleted instead.
var errDeleteNow = errors.New("delete now")

var (
	storageGetLatest     = storage.GetOptions{ResourceVersion: "0"}
	storageGetConsistent = storage.GetOptions{}
)

// StoreRevision is the store's current revision.
func (r *Resource) StoreRevision(ctx context.Context) (int64, error) {
	rev, err := r.store.Revision(ctx)
	if err != nil {
		return 0, interpret(err, r.Kind().GroupResource(), "")
	}
	return rev, nil
}
