package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/storage"
)

// WriteOptions qualify create, update and delete.
type WriteOptions struct {
	// DryRun runs every check and answers as if the write happened, and
	// stores nothing.
	DryRun bool
	// Subresource is "" or "status".
	Subresource string
	// FieldManager owns the fields the write sets (see ManagerName).
	FieldManager string
	// Strict refuses unknown and duplicate fields; Warn, if set, is told
	// about them (fieldValidation Strict and Warn; neither is Ignore).
	Strict bool
	Warn   func(msg string)
	// BodySum, on an update, is the SHA-256 of the request's body (its
	// JSON, or its protobuf as sent): with it, an update that changed
	// nothing is answered from the store when it comes again
	// (noopwrites.go). Nil: not.
	BodySum *[sha256.Size]byte
	// SentKind, if set, is the kind a custom resource's body named in
	// place of the resource's, which the object sent carries instead:
	// the create or update is refused where upstream's custom resource
	// validator refuses it (validateTypeMeta).
	SentKind string
	// SentFieldManager and SentFieldValidation are the request's
	// fieldManager and fieldValidation as sent (FieldManager may be the
	// user agent's), for admission webhooks.
	SentFieldManager, SentFieldValidation string

	// applied: the object's managedFields were computed by an apply.
	applied bool
	// patch: the write is a patch, whose bad results are 422 upstream.
	patch bool
}

func (o WriteOptions) warn(msg string) {
	if o.Warn != nil {
		o.Warn(msg)
	}
}

// prune removes the fields version's schema does not know from obj and
// refuses or reports them according to the field validation directive.
func (o WriteOptions) prune(k *Kind, version string, obj *unstructured.Unstructured) error {
	s := k.Schemas[version]
	if s == nil {
		return nil
	}
	// Embedded resources whose apiVersion, kind or metadata do not decode
	// fail the request as upstream's decoder fails it: 400, or 422 for
	// the result of a patch.
	if c, ok := s.(interface{ CheckEmbedded(map[string]any) error }); ok {
		if err := c.CheckEmbedded(obj.Object); err != nil {
			if o.patch {
				data, _ := obj.MarshalJSON()
				return invalidPatch(string(data), err)
			}
			return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", k.Kind, version, k.Kind, err))
		}
	}
	unknown := s.Prune(obj.Object)
	if len(unknown) > 0 && o.Strict {
		msgs := make([]string, len(unknown))
		for i, u := range unknown {
			msgs[i] = fmt.Sprintf("unknown field %q", u)
		}
		err := "strict decoding error: " + strings.Join(msgs, ", ")
		if o.patch {
			return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), "", err)})
		}
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %s", k.Kind, version, k.Kind, err))
	}
	for _, u := range unknown {
		o.warn(fmt.Sprintf("unknown field %q", u))
	}
	s.Default(obj.Object)
	return nil
}

// Create stores a new object in ns and returns it as stored.
func (r *Resource) Create(ctx context.Context, version, ns string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error) {
	out, _, err := r.CreateEncoded(ctx, version, ns, obj, opts)
	return out, err
}

// CreateEncoded is Create, and also returns the JSON of the object it
// returns, when it has it from the store without an encode (nil when
// not: a dry run, another version than the stored one).
func (r *Resource) CreateEncoded(ctx context.Context, version, ns string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, *storage.Encoded, error) {
	k := r.Kind()
	if k.Review != nil {
		if k.Namespaced {
			// A namespaced review (LocalSubjectAccessReview) is about its
			// namespace, which need not exist.
			if err := r.checkNamespace(k, ns, obj); err != nil {
				return nil, nil, err
			}
		}
		// What upstream's create handler wipes from every object sent.
		for _, f := range []string{"creationTimestamp", "uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"} {
			unstructured.RemoveNestedField(obj.Object, "metadata", f)
		}
		out, err := r.review(ctx, k, version, "", "", obj, opts)
		return out, nil, err
	}
	if err := r.checkNamespace(k, ns, obj); err != nil {
		return nil, nil, err
	}
	if k.Namespaced {
		// Upstream's NamespaceLifecycle admission answers before the
		// registry's checks.
		if err := r.reg.admitNamespace(ctx, ns); err != nil {
			return nil, nil, err
		}
	}
	sentAPIVersion, sentKind := obj.GetAPIVersion(), cmp.Or(opts.SentKind, obj.GetKind())
	if err := opts.prune(k, version, obj); err != nil {
		return nil, nil, err
	}
	var meta metav1.Object = obj
	if !opts.applied {
		m, err := r.kindManager(k, version, "")
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		var entries []metav1.ManagedFieldsEntry
		var known bool
		obj, entries, known = m.create(k, version, obj, opts.FieldManager)
		if known {
			meta = metaView{obj, entries}
		}
	}
	// Mutating admission sees the object as the field manager left it,
	// before a generated name, a uid or a creationTimestamp, as
	// upstream's does.
	adm := r.admitting(k)
	if adm != nil {
		mutated, err := r.mutate(ctx, adm, &AdmissionAttributes{
			Kind: k, Version: version, Operation: OpCreate, Namespace: ns, Name: obj.GetName(),
			Object: obj, Options: opts.sentOptions(OpCreate), DryRun: opts.DryRun,
		})
		if err != nil {
			return nil, nil, err
		}
		if mutated != obj {
			obj, meta = mutated, mutated
		}
	}
	generated := false
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		obj.SetName(generateName(obj.GetGenerateName()))
		generated = true
	}
	now := metav1.NewTime(r.reg.Now().Truncate(1e9))
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(now)
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	if k.IsGuest() {
		// Stored in its host's shape, which the checks below see.
		obj = k.Cohabit.ToHost(obj)
		if mv, ok := meta.(metaView); ok {
			meta = metaView{obj, mv.managed}
		} else {
			meta = obj
		}
	} else if k.ConversionWebhook == nil {
		obj.SetAPIVersion(k.GroupVersionKind(k.StorageVersion()).GroupVersion().String())
	}
	// Else the object stays in the request's version, as upstream's: its
	// checks and admission see that version, and it is converted as it
	// is stored.
	if k.Generation {
		obj.SetGeneration(1)
	} else {
		obj.SetGeneration(0)
	}
	if k.StatusIn(version) {
		delete(obj.Object, "status")
	}
	if k.PrepareForCreate != nil {
		k.PrepareForCreate(obj)
	}
	if k.Admit != nil {
		if err := k.Admit(ctx, obj, nil); err != nil {
			return nil, nil, err
		}
	}
	if err := validateTypeMeta(k, version, sentAPIVersion, sentKind, obj.GetName()); err != nil {
		return nil, nil, err
	}
	var errs field.ErrorList
	if k.ValidateFirst != nil {
		errs = k.ValidateFirst(obj)
	}
	errs = append(errs, validateMeta(k, meta)...)
	if k.Validate != nil {
		errs = append(errs, k.Validate(obj)...)
	}
	if s := k.Schemas[version]; s != nil {
		errs = append(errs, s.Validate(ctx, obj.Object, nil)...)
	}
	if len(errs) > 0 {
		return nil, nil, k.Invalid(obj.GetName(), errs)
	}
	if k.AdmitCreate != nil {
		if err := k.AdmitCreate(ctx, obj); err != nil {
			return nil, nil, err
		}
	}
	if adm != nil {
		if err := adm.Validate(ctx, &AdmissionAttributes{
			Kind: k, Version: version, Operation: OpCreate, Namespace: ns, Name: obj.GetName(), GeneratedName: generated,
			Object: convert(k, version, obj), Options: opts.sentOptions(OpCreate), DryRun: opts.DryRun,
		}); err != nil {
			return nil, nil, err
		}
	}
	if q := r.reg.quota; q != nil && k.Namespaced {
		done, err := q.Charge(ctx, k, ns, obj, opts.DryRun)
		if err != nil {
			return nil, nil, err
		}
		stored := false
		defer func() { done(stored) }()
		out, enc, err := r.finishCreate(ctx, k, version, ns, obj, opts)
		stored = err == nil && !opts.DryRun
		return out, enc, err
	}
	return r.finishCreate(ctx, k, version, ns, obj, opts)
}

// finishCreate ends a create: the warnings, the conversion to the stored
// version, the write (not for a dry run).
func (r *Resource) finishCreate(ctx context.Context, k *Kind, version, ns string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, *storage.Encoded, error) {
	if k.Warnings != nil {
		for _, w := range k.Warnings(obj, nil) {
			AddWarning(ctx, w)
		}
	}
	// A dry run's answer has been through the conversion too, as
	// upstream's.
	obj, err := r.toStored(ctx, k, obj)
	if err != nil {
		return nil, nil, err
	}
	if opts.DryRun {
		// Upstream's dry run stops before its storage, which alone
		// refuses a resourceVersion: it is answered as sent.
		out, err := r.convertTo(ctx, k, version, obj)
		return out, nil, err
	}
	if obj.GetResourceVersion() != "" {
		return nil, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	out, enc, err := r.cache.CreateEncoded(ctx, r.key(k, ns, obj.GetName()), obj)
	if err != nil {
		return nil, nil, interpret(err, k.GroupResource(), obj.GetName())
	}
	if k.Written != nil {
		k.Written(ctx, out)
	}
	if !k.storedAs(version) {
		enc = nil
	}
	if out, err = r.convertStoredOne(ctx, k, version, out); err != nil {
		return nil, nil, err
	}
	return out, enc, nil
}

// CreateSubreview answers a create on subresource sub of the object name
// (in namespace ns), one of the kind's ReviewSubresources, with the object
// sent (of the subresource's kind): it must be in the request's
// namespace, which must exist; the field manager records the sender's
// fields as written through sub; then the subresource's Review answers.
// Nothing is stored, even without dry run: upstream's token requests
// answer the same either way. The metadata sent is the Review's to judge
// (upstream's serviceaccounts/token keeps it, and refuses a uid that is
// not the service account's).
func (r *Resource) CreateSubreview(ctx context.Context, sub, ns, name string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error) {
	k := r.Kind()
	sk := k.ReviewSubresources[sub]
	if sk == nil {
		return nil, apierrors.NewNotFound(k.GroupResource(), name)
	}
	if err := r.checkNamespace(k, ns, obj); err != nil {
		return nil, err
	}
	if k.Namespaced {
		if err := r.reg.admitNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	return r.review(ctx, sk, sk.StorageVersion(), sub, name, obj, opts)
}

// review answers the create of a Review kind's object, sent to the kind's
// collection or (sub not empty) as the subresource sub of the object
// name: the field manager records the sender's fields, mutating
// admission may change the object, then Review answers, calling
// validating admission once the object passed its checks. Nothing is
// stored.
func (r *Resource) review(ctx context.Context, k *Kind, version, sub, name string, obj *unstructured.Unstructured, opts WriteOptions) (*unstructured.Unstructured, error) {
	m, err := r.kindManager(k, version, sub)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, _, _ = m.create(k, version, obj, opts.FieldManager)
	obj.SetGroupVersionKind(k.GroupVersionKind(version))
	// Admission sees the request's resource: a review's kind, or the
	// object's kind (serviceaccounts) with the subresource (token) and
	// the review's kind as the object's.
	asked, askedVersion, ns := k, version, obj.GetNamespace()
	if sub != "" {
		asked, askedVersion = r.Kind(), r.Kind().StorageVersion()
	}
	attrs := func(o *unstructured.Unstructured) *AdmissionAttributes {
		a := &AdmissionAttributes{Kind: asked, Version: askedVersion, Subresource: sub, Operation: OpCreate, Namespace: ns, Name: name,
			Object: o, Options: opts.sentOptions(OpCreate), DryRun: opts.DryRun}
		if sub != "" {
			a.ObjectKind = k.GroupVersionKind(version)
		}
		return a
	}
	admit := func(*unstructured.Unstructured) error { return nil }
	if adm := r.reg.admission; adm != nil && adm.Admits(asked) {
		a := attrs(obj)
		if err := adm.Mutate(ctx, a); err != nil {
			return nil, err
		}
		if a.Object != obj && a.Object != nil {
			// Decoded as a request body of the kind, as upstream decodes
			// a webhook's result.
			data, err := a.Object.MarshalJSON()
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			if obj, _, err = Decode(k, data); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			obj.SetGroupVersionKind(k.GroupVersionKind(version))
		}
		admit = func(o *unstructured.Unstructured) error { return adm.Validate(ctx, attrs(o)) }
	}
	return k.Review(ctx, name, obj, admit)
}

// validateTypeMeta checks the apiVersion and kind a custom resource was
// sent or patched with, as upstream's custom resource validator does
// before anything else it checks: they must be the resource's in the
// request's version. A create or update body of the right group version
// may name another kind (its decoding refuses other group versions), and
// a patch may change either. The 422 names the kind and group sent. The
// built-in kinds' decoding sets both, so only custom resources are
// checked.
func validateTypeMeta(k *Kind, version, apiVersion, kind, name string) error {
	if k.Typed != nil {
		return nil
	}
	want := k.GroupVersionKind(version)
	var errs field.ErrorList
	if kind != want.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+want.Kind))
	}
	if gv := want.GroupVersion().String(); apiVersion != gv {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), apiVersion, "must be "+gv))
	}
	if len(errs) == 0 {
		return nil
	}
	sent, _ := schema.ParseGroupVersion(apiVersion)
	return apierrors.NewInvalid(schema.GroupKind{Group: sent.Group, Kind: kind}, name, errs)
}

// checkNamespace makes obj's namespace agree with the request's, as
// kube-apiserver does: an empty one is filled in, a different one is 400,
// and a cluster-scoped object carries none.
func (r *Resource) checkNamespace(k *Kind, ns string, obj *unstructured.Unstructured) error {
	if !k.Namespaced {
		obj.SetNamespace("")
		return nil
	}
	switch obj.GetNamespace() {
	case ns:
	case "":
		obj.SetNamespace(ns)
	default:
		if ns == "" {
			// No namespace on the request (an empty one in the path):
			// the object's goes too, as upstream's; validation then
			// refuses it.
			obj.SetNamespace("")
			return nil
		}
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// generateName appends 5 random characters to a generateName prefix,
// truncated so that the name fits 63 characters, as upstream does.
func generateName(base string) string {
	const maxBase = 63 - 5
	if len(base) > maxBase {
		base = base[:maxBase]
	}
	return base + utilrand.String(5)
}

// admitNamespace refuses writes into a namespace that is missing (404) or
// terminating (403), as the NamespaceLifecycle admission plugin does.
func (g *Registry) admitNamespace(ctx context.Context, ns string) error {
	nsr, ok := g.Get(schema.GroupResource{Resource: "namespaces"})
	if !ok || ns == "" { // as the plugin, a write in no namespace passes
		return nil
	}
	// The record, not the object: every namespaced write asks, and the
	// record knows whether a deletionTimestamp is set without a decode.
	rec, err := nsr.cache.GetRecord(ctx, nsr.key(nsr.Kind(), "", ns), storageGetLatest)
	if apierrors.IsNotFound(interpret(err, nsr.Kind().GroupResource(), ns)) {
		// The cache may lag a namespace created a moment ago: ask the store.
		rec, err = nsr.store.GetRecord(ctx, nsr.key(nsr.Kind(), "", ns), storageGetConsistent)
	}
	if err != nil {
		return interpret(err, nsr.Kind().GroupResource(), ns)
	}
	if rec.Deleting() {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, ns,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return nil
}
