package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/storage"
)

// Update replaces ns/name with obj (or, with opts.Subresource "status",
// its status). A resourceVersion in obj makes the write conditional: 409
// Conflict if the object changed since. Without one the write is
// unconditional, for kinds that allow it, and 422 otherwise. An update
// that changes nothing writes nothing and returns the object unchanged.
// obj becomes Update's: it may change it, and may return it.
func (r *Resource) Update(ctx context.Context, version, ns, name string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error) {
	out, _, err := r.UpdateEncoded(ctx, version, ns, name, obj, opts)
	return out, err
}

// UpdateEncoded is Update, and also returns the JSON of the object it
// returns when it has it from the store (see CreateEncoded).
func (r *Resource) UpdateEncoded(ctx context.Context, version, ns, name string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, *storage.Encoded, error) {
	k := r.Kind()
	fm, err := r.fieldManager(k, version, opts.Subresource)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	// Checked before reading, so that a bad request fails the same way
	// whether or not the object exists; a missing resourceVersion only
	// once the object is found (update checks it), as upstream's store.
	if err := r.checkReplacement(k, ns, name, obj); err != nil {
		return nil, nil, err
	}
	// resourceVersion 0 asks for an unconditional update, as upstream
	// (the kinds that refuse one refused it above).
	if want, _ := resourceVersionOf(obj); want == 0 {
		obj.SetResourceVersion("")
	}
	// produce only reads cur (the field manager's live object). It
	// changes the object it hands on (managedFields, pruning, the status
	// kept), so each attempt needs obj as it came, and gets a copy; but
	// an update conditional on a resourceVersion has one attempt that
	// gets that far: the store retries only after losing to a newer
	// write, and against that the resourceVersion is a conflict. Such an
	// update uses obj itself.
	want := obj.GetResourceVersion()
	used := false
	// An update that changed nothing at the object's revision changes
	// nothing again (noopwrites.go), if the caller has the body's sum.
	var key noopWrite
	memo := false
	if opts.BodySum != nil {
		key, memo = noopKey(k, "update", version, ns, name, func() [sha256.Size]byte { return *opts.BodySum }, opts, false)
	}
	var watch noopWatch
	if memo {
		if out, ok := r.unchanged(ctx, k, version, ns, name, key); ok {
			return out, nil, nil
		}
		watch.wrap(&opts)
	}
	out, enc, err := r.update(ctx, k, version, ns, name, opts, false, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		watch.seen = cur.GetResourceVersion()
		// A uid in the body is a precondition, checked first, as
		// upstream takes it from the object sent.
		if uid := obj.GetUID(); uid != "" && uid != cur.GetUID() {
			//lint:ignore ST1005 upstream's wording, after "Operation cannot be fulfilled on ...: "
			return nil, apierrors.NewConflict(k.GroupResource(), name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cur.GetUID()))
		}
		// A stale resourceVersion is a conflict whatever the field
		// manager makes of the object (update checks it again after), so
		// the writers that lose a race skip its work.
		if want != "" && (want != cur.GetResourceVersion() || used) {
			return nil, apierrors.NewConflict(k.GroupResource(), name, errors.New(msgModified))
		}
		in := obj
		if want == "" {
			in = obj.DeepCopy()
		}
		used = true
		return updateManagedFor(k, version, opts.Subresource, fm, cur, in, opts.FieldManager), nil
	})
	if memo {
		r.noopDone(key, &watch, out, err)
	}
	return out, enc, err
}

// UpdateOrCreateEncoded is UpdateEncoded for a PUT: where the kind allows
// it (Kind.CreateOnUpdate), an object that does not exist is created
// (created is then true), as upstream's update does; the resourceVersion
// sent is ignored then, as upstream ignores it.
func (r *Resource) UpdateOrCreateEncoded(ctx context.Context, version, ns, name string, obj *unstructured.Unstructured, opts WriteOptions) (out *unstructured.Unstructured, enc *storage.Encoded, created bool, err error) {
	k := r.Kind()
	if !k.CreateOnUpdate || opts.Subresource != "" {
		out, enc, err = r.UpdateEncoded(ctx, version, ns, name, obj, opts)
		return out, enc, false, err
	}
	sent := obj.DeepCopy() // the update may change obj
	if want, _ := resourceVersionOf(obj); want == 0 && !k.UnconditionalUpdate {
		// Upstream refuses an update without a resourceVersion only once
		// it finds the object: one that does not exist is created.
		if _, err := r.Get(ctx, version, ns, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			obj = sent.DeepCopy()
			out, enc, err = r.CreateEncoded(withCreateByName(ctx), version, ns, obj, opts)
			if !apierrors.IsAlreadyExists(err) {
				return out, enc, err == nil, err
			}
		}
		out, enc, err = r.UpdateEncoded(ctx, version, ns, name, sent, opts)
		return out, enc, false, err
	}
	for attempt := 1; ; attempt++ {
		out, enc, err = r.UpdateEncoded(ctx, version, ns, name, obj, opts)
		if !apierrors.IsNotFound(err) || attempt == 3 {
			return out, enc, false, err
		}
		obj = sent.DeepCopy()
		obj.SetResourceVersion("")
		out, enc, err = r.CreateEncoded(withCreateByName(ctx), version, ns, obj, opts)
		if !apierrors.IsAlreadyExists(err) {
			return out, enc, err == nil, err
		}
		// Created since by another writer: update it after all.
		obj = sent.DeepCopy()
	}
}

// checkURLName refuses an object whose name is not the one in the URL,
// with kube-apiserver's messages for a missing and for another name.
func checkURLName(objName, name string) error {
	if objName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: name must be provided", name))
	}
	if objName != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", objName, name))
	}
	return nil
}

// checkReplacement checks the name, namespace and resourceVersion syntax
// of an object about to replace ns/name: what upstream checks before it
// reads the object.
func (r *Resource) checkReplacement(k *Kind, ns, name string, obj *unstructured.Unstructured) error {
	if err := checkURLName(obj.GetName(), name); err != nil {
		return err
	}
	if err := r.checkNamespace(k, ns, obj); err != nil {
		return err
	}
	_, err := resourceVersionOf(obj)
	return err
}

// checkUpdated is checkReplacement, and refuses an update without a
// resourceVersion of a kind that requires one.
func (r *Resource) checkUpdated(k *Kind, ns, name string, obj *unstructured.Unstructured) error {
	if err := r.checkReplacement(k, ns, name, obj); err != nil {
		return err
	}
	if want, _ := resourceVersionOf(obj); want == 0 && !k.UnconditionalUpdate {
		// Upstream names the resource here, not the kind.
		return apierrors.NewInvalid(schema.GroupKind{Group: k.Group, Kind: k.Resource}, name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), want, "must be specified for an update")})
	}
	return nil
}

// update is the read-modify-write under Update and Patch. produce
// computes the requested object (in version, with its managedFields) from
// the current one as presented, again on every retry; its
// resourceVersion, if set, must be the current one. With mutates set,
// produce gets a private copy it may change; without, it only reads it.
func (r *Resource) update(ctx context.Context, k *Kind, version, ns, name string, opts WriteOptions, mutates bool, produce func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, *storage.Encoded, error) {
	gr := k.GroupResource()
	key := r.key(k, ns, name)
	var deleteAt string                  // set when the update empties the finalizers of a deleted object
	var final *unstructured.Unstructured // and the object it computed, the answer
	var dry *unstructured.Unstructured
	var warnings []string // the last attempt's, told once it succeeds
	out, enc, err := r.cache.GuaranteedUpdateEncoded(ctx, key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		// The current object as upstream reads it back, in the
		// request's version: with the schema's defaults (those added
		// since it was stored), which the write then keeps, as the spec
		// a /status write carries over or the status an update does. A
		// copy only when the defaults change it. A kind with a
		// conversion webhook is updated in that version, as upstream's
		// (its storage converts what it reads), and converted back as
		// it is stored.
		stored, base := cur, cur
		if k.ConversionWebhook != nil {
			var err error
			if base, err = r.presentAs(ctx, k, version, cur); err != nil {
				return nil, updateReadFailed(cur, err)
			}
		} else {
			if s := defaulter(k, version); s != nil && needsDefaults(s, cur.Object) {
				stored = cur.DeepCopy()
				s.Default(stored.Object)
			}
			base = stored
		}
		// A produce that changes what it gets has a copy of its own.
		mine := convert(k, version, base)
		if mine == base && mutates {
			mine = base.DeepCopy()
		}
		obj, err := produce(mine)
		if err != nil {
			return nil, err
		}
		if err := r.checkUpdated(k, ns, name, obj); err != nil {
			return nil, err
		}
		if obj.GetResourceVersion() != "" && cur.GetResourceVersion() != obj.GetResourceVersion() {
			return nil, apierrors.NewConflict(gr, name, errors.New(msgModified))
		}
		if err := opts.prune(k, version, obj); err != nil {
			return nil, err
		}
		if opts.Subresource == "" {
			if err := validateTypeMeta(k, version, obj.GetAPIVersion(), cmp.Or(opts.SentKind, obj.GetKind()), name); err != nil {
				return nil, err
			}
		}
		// The stored object in the request's version, for admission and
		// a schema's checks only: converting a guest's copies it.
		adm := r.admitting(k)
		var old *unstructured.Unstructured
		if adm != nil || k.Schemas[version] != nil {
			old = convert(k, version, base)
		}
		// Mutating admission sees the object as the field manager or the
		// patch left it, in the request's version, as upstream's does.
		if adm != nil {
			a := &AdmissionAttributes{
				Kind: k, Version: version, Subresource: opts.Subresource, Operation: OpUpdate, Namespace: ns, Name: name,
				Object: obj, OldObject: old, Options: opts.sentOptions(OpUpdate), DryRun: opts.DryRun,
			}
			if opts.Subresource == "scale" {
				obj, err = r.mutateScale(ctx, adm, a)
			} else {
				obj, err = r.mutate(ctx, adm, a)
			}
			if err != nil {
				return nil, err
			}
		}
		if k.IsGuest() {
			obj = k.Cohabit.ToHost(obj) // prepared and checked as stored
		}
		if k.Admit != nil {
			if err := k.Admit(ctx, obj, stored); err != nil {
				return nil, err
			}
		}
		next, err := r.prepareUpdate(k, version, obj, base, opts.Subresource)
		if err == nil && opts.Subresource != "finalize" {
			if s := k.Schemas[version]; s != nil {
				validate := s.Validate
				if opts.Subresource == "status" {
					validate = s.ValidateStatus
				}
				if errs := validate(ctx, convert(k, version, next).Object, old.Object); len(errs) > 0 {
					err = apierrors.NewInvalid(k.invalidKind(), name, errs)
				}
			}
		}
		if err == nil && k.AdmitUpdate != nil {
			err = k.AdmitUpdate(ctx, opts.Subresource, next, base)
		}
		if err == nil && adm != nil {
			a := &AdmissionAttributes{
				Kind: k, Version: version, Subresource: opts.Subresource, Operation: OpUpdate, Namespace: ns, Name: name,
				Object: convert(k, version, next), OldObject: old, Options: opts.sentOptions(OpUpdate), DryRun: opts.DryRun,
			}
			if opts.Subresource == "scale" {
				err = asScales(k, a)
			}
			if err == nil {
				err = adm.Validate(ctx, a)
			}
		}
		if err == nil {
			next, err = r.toStored(ctx, k, next)
		}
		if err != nil {
			return nil, err
		}
		if warnings = nil; k.Warnings != nil && opts.Subresource == "" {
			warnings = k.Warnings(next, stored)
		}
		if next.GetDeletionTimestamp() != nil && !pendingFinalizers(k, next) {
			deleteAt, final = cur.GetResourceVersion(), next
			return nil, errDeleteNow
		}
		if opts.DryRun {
			dry = next
			return cur, nil // write nothing
		}
		next.SetResourceVersion("")
		return next, nil
	})
	if errors.Is(err, errDeleteNow) {
		// The object goes, and the answer is the object the update
		// computed (at the revision it replaced, which it carries), as
		// upstream's; its watchers see the last stored state go. A dry
		// run deletes nothing; a delete that finds the object gone
		// already (another update removed the finalizers too) answers
		// the same.
		if !opts.DryRun {
			deleted, err := r.cache.Delete(ctx, key, &storage.Preconditions{ResourceVersion: &deleteAt}, nil)
			switch {
			case err == nil:
				if k.Deleted != nil {
					k.Deleted(ctx, deleted)
				}
			case !storage.HasCode(err, storage.CodeNotFound):
				return nil, nil, interpret(err, gr, name)
			}
		}
		out, err := r.convertTo(ctx, k, version, final)
		return out, nil, err
	}
	if err != nil {
		return nil, nil, interpret(err, gr, name)
	}
	for _, w := range warnings {
		AddWarning(ctx, w)
	}
	if dry != nil {
		dry.SetResourceVersion(out.GetResourceVersion())
		out, enc = dry, nil
	} else if k.Written != nil {
		k.Written(ctx, out)
	}
	if !k.storedAs(version) {
		enc = nil
	}
	answer := r.convertStoredOne // out is as stored
	if dry != nil {
		answer = r.convertTo // computed, at the current object's resourceVersion
	}
	if out, err = answer(ctx, k, version, out); err != nil {
		return nil, nil, err
	}
	return out, enc, nil
}

// prepareUpdate computes the object to store from the request's obj and
// the current state, as kube-apiserver's BeforeUpdate and the kind's
// strategy do, and validates it. obj is this attempt's own (update's
// produce makes it anew each time): the result may be obj itself.
func (r *Resource) prepareUpdate(k *Kind, version string, obj, cur *unstructured.Unstructured, subresource string) (*unstructured.Unstructured, error) {
	hasStatus := k.StatusIn(version) // the request's version's strategy
	var next *unstructured.Unstructured
	switch {
	case subresource == "finalize":
		// A namespace's /finalize changes spec.finalizers only.
		next = cur.DeepCopy()
		keepManagedFields(next, obj)
		fins, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "finalizers")
		if len(fins) == 0 {
			unstructured.RemoveNestedField(next.Object, "spec", "finalizers")
		} else {
			unstructured.SetNestedStringSlice(next.Object, fins, "spec", "finalizers")
		}
	case subresource == "status":
		// /status changes the status and nothing else in the object: the
		// metadata stays, but for the managedFields the field manager
		// computed for this write, as upstream's status strategies keep
		// them: they record who changed which status fields.
		if hasStatus && k.PrepareForUpdate == nil {
			// Nothing below changes more than next's top level and
			// metadata (no hook runs), and cur is this attempt's own: the
			// rest (the spec, often most of the object) is shared.
			next = &unstructured.Unstructured{Object: maps.Clone(cur.Object)}
			if meta, ok := cur.Object["metadata"].(map[string]any); ok {
				next.Object["metadata"] = maps.Clone(meta)
			}
		} else {
			next = cur.DeepCopy()
		}
		keepManagedFields(next, obj)
		if st, ok := obj.Object["status"]; ok {
			next.Object["status"] = st // obj is this attempt's own
		} else {
			delete(next.Object, "status")
		}
	case slices.Contains(k.UpdateSubresources, subresource):
		// Another write-a-part subresource: the stored object, and what
		// PrepareForSubresource takes from the request's (below).
		next = cur.DeepCopy()
		keepManagedFields(next, obj)
	default:
		next = obj
		if hasStatus {
			if st, ok := cur.Object["status"]; ok {
				if k.PrepareForUpdate != nil {
					st = runtime.DeepCopyJSONValue(st) // the hook may change it
				}
				// Else shared: nothing below changes it, and cur is this
				// attempt's own.
				next.Object["status"] = st
			} else {
				delete(next.Object, "status")
			}
		}
	}
	// Written in the storage version, as upstream's storage encodes
	// every write: an object stored before the storage version changed
	// moves to it with its next write (what a StorageVersionMigration
	// relies on). A guest's objects are its host's; a kind with a
	// conversion webhook is converted to it as it is stored.
	if k.IsGuest() || k.ConversionWebhook != nil {
		next.SetAPIVersion(cur.GetAPIVersion())
	} else {
		next.SetAPIVersion(k.GroupVersionKind(k.StorageVersion()).GroupVersion().String())
	}
	next.SetKind(cur.GetKind())
	// Fields users cannot change through an update.
	if next.GetUID() == "" {
		next.SetUID(cur.GetUID())
	}
	next.SetCreationTimestamp(cur.GetCreationTimestamp())
	next.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	next.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	next.SetGeneration(cur.GetGeneration())
	next.SetResourceVersion(cur.GetResourceVersion())
	if k.PrepareForUpdate != nil && subresource != "finalize" {
		k.PrepareForUpdate(next, cur)
	}
	if k.PrepareForSubresource != nil && (subresource == "status" || slices.Contains(k.UpdateSubresources, subresource)) {
		k.PrepareForSubresource(subresource, next, obj, cur)
	}
	// Through /status, next is cur but for its status (and, with a hook,
	// what the hook changed).
	statusOnly := subresource == "status" && hasStatus && k.PrepareForUpdate == nil
	if k.Generation && !statusOnly && specChanged(hasStatus, next, cur) {
		next.SetGeneration(cur.GetGeneration() + 1)
	}
	path := field.NewPath("metadata")
	var errs field.ErrorList
	if k.ValidateFirst != nil {
		errs = k.ValidateFirst(next)
	}
	errs = append(errs, validateMetaUpdate(k, next, cur)...)
	if cur.GetDeletionTimestamp() != nil {
		errs = append(errs, metavalidation.ValidateNoNewFinalizers(next.GetFinalizers(), cur.GetFinalizers(), path.Child("finalizers"))...)
	}
	if k.ValidateSubresourceUpdate != nil {
		errs = append(errs, k.ValidateSubresourceUpdate(subresource, next, cur)...)
	} else if k.ValidateUpdate != nil {
		errs = append(errs, k.ValidateUpdate(next, cur)...)
	} else if k.Validate != nil {
		errs = append(errs, k.Validate(next)...)
	}
	if len(errs) > 0 {
		return nil, k.Invalid(next.GetName(), errs)
	}
	return next, nil
}

// keepManagedFields gives next (a copy of the current object) the
// managedFields of obj, the request's object after the field manager.
func keepManagedFields(next, obj *unstructured.Unstructured) {
	meta, _ := next.Object["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		next.Object["metadata"] = meta
	}
	if mf, ok := obj.Object["metadata"].(map[string]any)["managedFields"]; ok {
		meta["managedFields"] = mf
	} else {
		delete(meta, "managedFields")
	}
}

// specChanged reports a change outside metadata (and status, for a
// version with a status subresource): what bumps metadata.generation.
func specChanged(hasStatus bool, a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for f, v := range u.Object {
			if f == "metadata" || f == "apiVersion" || f == "kind" || (hasStatus && f == "status") {
				continue
			}
			m[f] = v
		}
		return m
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}
