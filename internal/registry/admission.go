package registry

import (
	"context"

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
	// webhook is configured): if not, the registry does not ask.
	Active() bool
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
	// Object is the object written (nil for a delete), OldObject the
	// one it replaces or deletes (nil for a create).
	Object, OldObject *unstructured.Unstructured
	// Options are the request's options: a metav1.CreateOptions,
	// UpdateOptions or DeleteOptions.
	Options runtime.Object
	DryRun  bool
}

// GroupVersionResource is the resource the request wrote.
func (a *AdmissionAttributes) GroupVersionResource() schema.GroupVersionResource {
	return a.Kind.GroupResource().WithVersion(a.Version)
}

// SetAdmission makes a the registry's admission. Call it before the
// registry serves requests.
func (r *Registry) SetAdmission(a Admission) { r.admission = a }

// Admits reports whether writes of k go through admission: every stored
// kind but the admission configurations themselves (upstream exempts them
// from webhooks, so that a broken webhook can always be removed) and the
// reviews, which are never stored.
func (k *Kind) Admits() bool {
	if k.Review != nil {
		return false
	}
	if k.Group == "admissionregistration.k8s.io" {
		switch k.Kind {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
			"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
			return false
		}
	}
	return true
}

// admitting returns the registry's admission if writes of k are to be
// asked about now, nil if not.
func (r *Resource) admitting(k *Kind) Admission {
	adm := r.reg.admission
	if adm == nil || !adm.Active() || !k.Admits() {
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
