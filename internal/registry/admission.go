package registry

import (
	"context"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operation is what a write does, as admission names it.
type Operation string

// The operations admission sees (upstream's CONNECT is not served).
const (
	OpCreate Operation = "CREATE"
	OpUpdate Operation = "UPDATE"
	OpDelete Operation = "DELETE"
)

// Admission is asked about every write of a stored kind, as upstream's
// admission chain is after its built-in plugins: Mutate after the request
// is decoded and the field manager has recorded it, before the kind's own
// preparation and checks; Validate after them, just before the write (dry
// runs too). Package webhook is the implementation: the admission
// webhooks users configure.
type Admission interface {
	// Mutate may replace a.Object (in a.Version). The registry prunes,
	// decodes and defaults what it gets back as it does a request's body.
	Mutate(ctx context.Context, a *AdmissionAttributes) error
	// Validate may refuse the write; it must not change the objects.
	Validate(ctx context.Context, a *AdmissionAttributes) error
	// Active reports whether Mutate or Validate may do anything (some
	// webhook or policy is configured), for callers that would prepare
	// for it.
	Active() bool
	// Admits reports whether writes of k are to be asked about now: some
	// webhook or policy may apply to them. Upstream exempts the admission
	// configurations from those written through the API, so that a
	// broken one can always be removed; the reviews, never stored, are
	// never asked about.
	Admits(k *Kind) bool
}

// AdmissionAttributes describe one write to Admission, as upstream's
// admission.Attributes do.
type AdmissionAttributes struct {
	Kind        *Kind
	Version     string // the request's version; the objects are in it
	Subresource string
	Operation   Operation
	Namespace   string
	Name        string // empty for a create by generateName
	// GeneratedName: Name was generated from the object's generateName
	// by this create (validating admission runs after that).
	GeneratedName bool
	// Object is the object written (nil for a delete), OldObject the
	// one it replaces or deletes (nil for a create).
	Object, OldObject *unstructured.Unstructured
	// Options are the request's options: a metav1.CreateOptions,
	// UpdateOptions or DeleteOptions.
	Options runtime.Object
	DryRun  bool
	// ObjectKind, if set, is the kind of Object and OldObject, which are
	// then not the resource's: a /scale write's autoscaling/v1 Scales.
	ObjectKind schema.GroupVersionKind
}

// GroupVersionKind is the kind of the objects: ObjectKind, or the
// resource's in the request's version.
func (a *AdmissionAttributes) GroupVersionKind() schema.GroupVersionKind {
	if !a.ObjectKind.Empty() {
		return a.ObjectKind
	}
	return a.Kind.GroupVersionKind(a.Version)
}

// GroupVersionResource is the resource the request wrote.
func (a *AdmissionAttributes) GroupVersionResource() schema.GroupVersionResource {
	return a.Kind.GroupResource().WithVersion(a.Version)
}

// Quota charges the creates of namespaced kinds against their
// namespace's ResourceQuotas, as upstream's ResourceQuota admission plugin
// does: last, after validating admission, just before the object is
// stored (dry runs too). Package quota is the implementation.
type Quota interface {
	// Charge may refuse the create of obj (of kind k, in namespace ns),
	// or count it in the quotas it falls under. When it does not refuse,
	// the registry calls done once the create is over, with whether the
	// object was stored.
	Charge(ctx context.Context, k *Kind, ns string, obj *unstructured.Unstructured, dryRun bool) (done func(stored bool), err error)
}

// SetQuota makes q the registry's quota admission. Call it before the
// registry serves requests.
func (r *Registry) SetQuota(q Quota) { r.quota = q }

// SetAdmission makes a the registry's admission. Call it before the
// registry serves requests.
func (r *Registry) SetAdmission(a Admission) { r.admission = a }

// admitting returns the registry's admission if writes of k are to be
// asked about now, nil if not.
func (r *Resource) admitting(k *Kind) Admission {
	adm := r.reg.admission
	if adm == nil || k.Review != nil || !adm.Admits(k) {
		return nil
	}
	return adm
}

// AdmissionActive reports whether writes are asked about (some webhook
// is configured), for callers that would prepare for it.
func (r *Registry) AdmissionActive() bool { return r.admission != nil && r.admission.Active() }

// mutate runs adm's Mutate on a and returns the object to carry on with:
// a's Object, or what Mutate made of it, pruned, decoded and defaulted as
// a request body.
func (r *Resource) mutate(ctx context.Context, adm Admission, a *AdmissionAttributes) (*unstructured.Unstructured, error) {
	in := a.Object
	if err := adm.Mutate(ctx, a); err != nil {
		return nil, err
	}
	if a.Object == in || a.Object == nil {
		return in, nil
	}
	// A patched object is decoded as upstream decodes a webhook's
	// result: through the kind's type (unknown fields dropped), then
	// defaulted; a custom resource's is pruned by its schema.
	data, err := a.Object.MarshalJSON()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out, _, err := Decode(a.Kind, data)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := (WriteOptions{}).prune(a.Kind, a.Version, out); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// sentOptions are a create's or an update's options as admission shows
// them, from what the request sent.
func (o WriteOptions) sentOptions(op Operation) runtime.Object {
	var dry []string
	if o.DryRun {
		dry = []string{metav1.DryRunAll}
	}
	if op == OpCreate {
		return &metav1.CreateOptions{
			TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "CreateOptions"},
			DryRun:   dry, FieldManager: o.SentFieldManager, FieldValidation: o.SentFieldValidation,
		}
	}
	return &metav1.UpdateOptions{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "UpdateOptions"},
		DryRun:   dry, FieldManager: o.SentFieldManager, FieldValidation: o.SentFieldValidation,
	}
}

// ConvertTo returns obj, an object of kind k or of the kind k shares its
// objects with (Cohabit), as k shows it in version v. It copies only when
// it changes something.
func ConvertTo(k *Kind, v string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	if c := k.Cohabit; c != nil && !k.IsGuest() {
		if gv, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err == nil && gv.Group == c.Guest.Group {
			obj = c.ToHost(obj)
		}
	}
	return convert(k, v, obj)
}

// scaleGVK is the kind a /scale write shows admission.
var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// asScales makes a, the attributes of a /scale write, show the Scales of
// its objects, as upstream's scale subresources show admission.
func asScales(k *Kind, a *AdmissionAttributes) error {
	for _, o := range []**unstructured.Unstructured{&a.Object, &a.OldObject} {
		if *o == nil {
			continue
		}
		s, _, err := scaleOf(k.ScaleIn(a.Version), *o)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		*o = &unstructured.Unstructured{Object: m}
	}
	a.ObjectKind = scaleGVK
	return nil
}

// mutateScale is mutate for a /scale write: adm is shown the Scales, and
// the replicas of the Scale it returns go into the object.
func (r *Resource) mutateScale(ctx context.Context, adm Admission, a *AdmissionAttributes) (*unstructured.Unstructured, error) {
	obj := a.Object
	if err := asScales(a.Kind, a); err != nil {
		return nil, err
	}
	in := a.Object
	if err := adm.Mutate(ctx, a); err != nil {
		return nil, err
	}
	if a.Object == in || a.Object == nil {
		return obj, nil
	}
	var s autoscalingv1.Scale
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(a.Object.Object, &s); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := unstructured.SetNestedField(obj.Object, int64(s.Spec.Replicas), scalePath(a.Kind.ScaleIn(a.Version).SpecReplicas)...); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}
