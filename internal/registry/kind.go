package registry

import (
	"context"
	"fmt"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Kind describes one kind and how the registry treats it: the strategy of
// kube-apiserver's registry/rest, as data and hooks. Hooks may be nil.
type Kind struct {
	Group    string
	Versions []string // served versions; the first is the storage version
	Kind     string
	ListKind string
	Resource string // plural, lowercase
	Singular string
	// ShortNames and Categories feed discovery (kubectl get cm, get all).
	ShortNames []string
	Categories []string
	Namespaced bool

	// Status: the kind has a /status subresource. Writes to the main
	// resource keep the stored status; writes to /status change only the
	// status. Creates drop the status. VersionStatus has the versions
	// that say otherwise than the storage version, as a CRD's versions
	// each say: StatusIn.
	Status        bool
	VersionStatus map[string]bool
	// Generation: metadata.generation starts at 1 and goes up whenever
	// anything outside metadata (and status, with Status) changes.
	// Upstream only some kinds track it (custom resources, CRDs; not
	// ConfigMaps).
	Generation bool
	// UnconditionalUpdate: an update without a resourceVersion is allowed
	// (last write wins). Upstream allows it for most built-in kinds and
	// refuses it for custom resources.
	UnconditionalUpdate bool
	// CreateOnUpdate: a PUT of an object that does not exist creates it
	// (upstream allows it for Leases, Events and RBAC objects).
	CreateOnUpdate bool
	// ReturnDeletedObject: an immediate delete answers with the deleted
	// object rather than a Status (ServiceAccount does upstream).
	ReturnDeletedObject bool
	// QualifiedFinalizers: each finalizer must be a standard one
	// (kubernetes, orphan, foregroundDeletion) or qualified by a domain
	// ("example.com/cleanup"), as core validation requires of most
	// built-in kinds upstream; Lease, Event, CRDs and custom resources
	// take any finalizer that is a qualified name.
	QualifiedFinalizers bool
	// DistinctErrors: a validation error that repeats an earlier one word
	// for word is reported once, as upstream's built-in kinds report
	// them (their strategies' declarative validation passes every error
	// through ErrorList.Filter, which keeps one of each message; custom
	// resources' and CRDs' strategies do not).
	DistinctErrors bool
	// NoDeleteCollection: the kind has no deletecollection verb, so a
	// DELETE on its collection is refused rather than deleting every
	// object (namespaces upstream).
	NoDeleteCollection bool

	// Typed, for built-in kinds, returns the Go type bodies are decoded
	// through, which checks field types and drops unknown fields as
	// kube-apiserver's codecs do. Nil for custom resources.
	Typed func() runtime.Object
	// TypeConverter gives field ownership (managedFields, server-side
	// apply) the kind's schema: which lists are sets or keyed maps. Nil
	// deduces a schema from each object, where every list is atomic.
	TypeConverter managedfields.TypeConverter

	// Default sets the defaults (and conversions) upstream's decoding
	// applies to every object a request sends: Decode and DecodeTyped run
	// it, before the field manager sees the object, so that a create or
	// update owns the defaulted fields as upstream's does (an apply's
	// configuration owns only what it sets). PrepareForCreate and
	// PrepareForUpdate should run it too, for objects kplane writes
	// itself.
	Default func(obj *unstructured.Unstructured)
	// PrepareForCreate and PrepareForUpdate normalize an object before
	// validation (set defaults, reset fields users may not set).
	PrepareForCreate func(obj *unstructured.Unstructured)
	PrepareForUpdate func(obj, old *unstructured.Unstructured)
	// Validate and ValidateUpdate check the kind's own fields; metadata is
	// checked by the registry.
	Validate       func(obj *unstructured.Unstructured) field.ErrorList
	ValidateUpdate func(obj, old *unstructured.Unstructured) field.ErrorList
	// ValidateFirst, if set, checks fields whose errors upstream lists
	// before the metadata's (which come first otherwise), on creates and
	// updates both.
	ValidateFirst func(obj *unstructured.Unstructured) field.ErrorList
	// ValidateManifest, if set, checks an object read from a file rather
	// than written through the API (kube-apiserver's static admission
	// manifests, ReadManifest): Validate's checks but for the names the
	// API keeps for such objects.
	ValidateManifest func(obj *unstructured.Unstructured) field.ErrorList
	// ValidateName checks metadata.name (nil: a DNS subdomain, the
	// default upstream). prefix is true for a generateName prefix.
	ValidateName func(name string, prefix bool) []string

	// PrepareForDelete may change a copy of the object about to be
	// deleted: add a finalizer that defers the delete (a CRD's cleanup),
	// set a phase (a namespace's Terminating). Pending, if set, reports
	// finalizers outside metadata.finalizers that defer a delete (a
	// namespace's spec.finalizers); Finalize allows the /finalize
	// subresource that clears them.
	PrepareForDelete func(obj *unstructured.Unstructured)
	// RefuseDelete, if set, refuses to delete the named object, with a
	// 403 giving its reason (upstream's NamespaceLifecycle admission
	// keeps default, kube-system and kube-public).
	RefuseDelete func(name string) error
	// MarkDeleting, if set, marks an object's first deletion in place of
	// the generic marking: the registry sets the deletionTimestamp and
	// nothing else (no grace period, no generation bump, no garbage
	// collector finalizers), then MarkDeleting may record it (upstream's
	// CRD storage marks a CRD so, with a Terminating condition).
	// PrepareForDelete runs first and must leave a finalizer.
	MarkDeleting func(obj *unstructured.Unstructured)
	Pending      func(obj *unstructured.Unstructured) bool
	Finalize     bool
	// UpstreamStorageVersion, if set, is the version kube-apiserver
	// stores the kind in when that is not one kplane serves (a
	// ClusterTrustBundle is stored as v1beta1 in 1.37, served as v1):
	// discovery's storageVersionHash is computed from it, so that it is
	// upstream's.
	UpstreamStorageVersion string
	// WritesByUser: the kind's writes depend on who sends them (a
	// CertificateSigningRequest records its requester), so the user is
	// always given to them (UserFrom).
	WritesByUser bool
	// UpdateSubresources are subresources besides status and scale that
	// read the object (GET) and write a part of it (PUT, PATCH), such as
	// a CertificateSigningRequest's approval: a write starts from the
	// stored object and PrepareForSubresource takes from the request's
	// what the subresource may change.
	UpdateSubresources []string
	// ResetFields are, by subresource ("" for the object itself), the
	// fields a write there does not own because the kind's strategy puts
	// them back (upstream's GetResetFields), where they are not the
	// default (status on the main resource, spec and metadata through
	// /status, for a kind with Status): a CertificateSigningRequest's
	// spec and status on the main resource. Paths of JSON member names.
	ResetFields map[string][][]string
	// PrepareForSubresource makes next (a copy of the stored object cur)
	// what a write through subresource (status, or one of
	// UpdateSubresources) stores, from obj, the request's object; it
	// runs after PrepareForUpdate. For status, next already has obj's
	// status.
	PrepareForSubresource func(subresource string, next, obj, cur *unstructured.Unstructured)
	// ValidateSubresourceUpdate, if set, validates updates instead of
	// ValidateUpdate, knowing the subresource written ("" for the
	// object itself).
	ValidateSubresourceUpdate func(subresource string, obj, old *unstructured.Unstructured) field.ErrorList
	// AdmitUpdate, if set, is the kind's own validating admission of an
	// update (upstream's built-in plugins), after validation and before
	// the webhooks: obj is the object to be stored, old the stored one.
	// AdmitCreate is the same for a create.
	AdmitUpdate func(ctx context.Context, subresource string, obj, old *unstructured.Unstructured) error
	AdmitCreate func(ctx context.Context, obj *unstructured.Unstructured) error

	// Fields returns the fields a field selector may use, beyond
	// metadata.name and metadata.namespace.
	Fields func(obj *unstructured.Unstructured) fields.Set
	// VersionFields, if set, are the fields of Fields a selector may use
	// in each version, by version name, in the order declared: a CRD
	// declares selectableFields per version (and its OpenAPI definition
	// lists them). Nil allows all of them in every version.
	VersionFields map[string][]string
	// Columns are the Table columns, as upstream's printer for the kind
	// has them; a NAME column (CellName) comes first unless one of them
	// is the name.
	Columns []Column
	// TableOrder, if set, orders the rows of a list's Table, as a
	// printer that sorts them does (upstream's FlowSchema printer sorts
	// by matching precedence): it compares two rows' objects, which hold
	// their name and the members the columns read (Column.Reads).
	// Nil: the list's order.
	TableOrder func(a, b *unstructured.Unstructured) int
	// VersionColumns are the columns of the versions whose columns are
	// not Columns (a custom resource's versions may declare their own
	// additionalPrinterColumns); nil: Columns for every version.
	VersionColumns map[string][]Column

	// Admit, if set, may refuse a create (old is nil) or an update of the
	// kind by who sends it (registry.UserFrom), as upstream's policy
	// checks on RBAC writes do: after the object is computed (defaults,
	// the patch applied) and before it is validated, dry runs too.
	Admit func(ctx context.Context, obj, old *unstructured.Unstructured) error

	// Warnings, if set, are the warnings a valid create (old is nil) or
	// update of the kind gets (AddWarning), dry runs too, as upstream's
	// WarningsOnCreate and WarningsOnUpdate; not a status update.
	Warnings func(obj, old *unstructured.Unstructured) []string

	// Written, if set, is called after every stored create or update of
	// the kind, before the client gets its answer (the CRD controller uses
	// it so a CRD change applies to the next request). It must not change
	// obj, which is also the answer.
	Written func(ctx context.Context, obj *unstructured.Unstructured)
	// Deleted, if set, is called after every stored delete of the kind
	// (not one a finalizer defers), before the client gets its answer,
	// with the object deleted (the RBAC authorizer uses it, and Written,
	// so that a role or binding written or deleted applies to the next
	// request).
	Deleted func(ctx context.Context, obj *unstructured.Unstructured)

	// VersionWarnings are the warnings every request to a version gets,
	// by version: a CRD's deprecated versions', so the versions named are
	// deprecated (/metrics counts their requests).
	VersionWarnings map[string]string

	// ConversionWebhook, of a custom resource whose CRD converts between
	// versions with a webhook, is where and how to call it: versions then
	// differ in shape, and the registry's Converter changes an object's
	// version. Without one, versions differ only in apiVersion.
	ConversionWebhook *apiextensionsv1.WebhookConversion

	// Scale, if set, serves the /scale subresource (autoscaling/v1 Scale)
	// over these paths of the object. VersionScale has the paths of the
	// versions whose paths differ from the storage version's (nil for a
	// version without /scale), as a CRD's versions each have their own:
	// ScaleIn.
	Scale        *ScalePaths
	VersionScale map[string]*ScalePaths
	// ScaleColumns are the columns of a /scale answer's Table (after its
	// NAME), as apiextensions-apiserver's: DESIRED, AVAILABLE, AGE.
	ScaleColumns []Column

	// Schemas, for kinds defined by a schema (custom resources), check and
	// normalize the objects of each version, by version name. Writes are
	// pruned, defaulted and validated in the request's version.
	Schemas map[string]Schema
	// OpenAPI returns the OpenAPI v3 schema of version v's objects (nil:
	// none), for the published documents; the caller must not change it.
	// Built-in kinds are described by package openapi instead, and have
	// none.
	OpenAPI func(v string) *spec.Schema

	// Cohabit, if set, links the kind with another that serves the same
	// objects in a group of its own (see Cohabit). Both kinds name it.
	Cohabit *Cohabit

	// Review, if set, makes the kind one that is never stored: its only
	// verb is create, which answers what Review makes of the object sent
	// (after the field manager has recorded the sender's fields, as
	// upstream's create does), as upstream's access and identity reviews
	// are. The requester is in ctx (UserFrom). name is the object the
	// request names, for a kind served as another's subresource
	// (ReviewSubresources), and empty otherwise. Mutating admission has
	// seen obj; admit is validating admission, which Review calls once obj
	// passed its own checks and has its defaults (upstream's
	// createValidation): an error it returns is the answer.
	Review func(ctx context.Context, name string, obj *unstructured.Unstructured, admit func(*unstructured.Unstructured) error) (*unstructured.Unstructured, error)

	// ReviewSubresources are subresources of the kind's objects that take
	// a create of another kind and answer it, storing nothing, by
	// subresource name: upstream's serviceaccounts/token takes an
	// authentication.k8s.io TokenRequest and answers it with a token. Each
	// is a Review kind with one version, not served on its own.
	ReviewSubresources map[string]*Kind
}

// OwnsObjects reports whether the kind has objects of its own, stored
// under its prefix: not a Cohabit's guest, whose objects are its host's,
// nor a Review kind. Controllers that visit every object skip the others.
func (k *Kind) OwnsObjects() bool { return k.Review == nil && !k.IsGuest() }

// Cohabit serves the objects of one kind (Host) also as a kind of another
// group (Guest), as upstream serves core Events also as events.k8s.io
// Events: the two are one resource in storage, with two shapes. The guest
// has no storage or watch cache of its own. It reads the host's objects,
// converted, and writes its own converted back, so a write through either
// kind is seen through both. Each kind has one version. The guest's hooks
// (Validate, Fields, Columns' cells) see objects in the host's shape, as
// stored; its field manager and patches see its own.
type Cohabit struct {
	Host, Guest *Kind
	// ToHost and ToGuest convert an object of one kind into the other's
	// shape, as a new object: they must not change obj, and fields they
	// do not know are dropped.
	ToHost, ToGuest func(obj *unstructured.Unstructured) *unstructured.Unstructured
}

// IsGuest reports whether k is the guest of a Cohabit: a kind with no
// objects of its own (controllers that visit every object skip it).
func (k *Kind) IsGuest() bool { return k.Cohabit != nil && k.Cohabit.Guest == k }

// invalidKind is the kind a 422 names: a guest's checks are its host's,
// as upstream's strategy is shared, and name the host's kind.
func (k *Kind) invalidKind() schema.GroupKind {
	if k.IsGuest() {
		return k.Cohabit.Host.GroupKind()
	}
	return k.GroupKind()
}

// Invalid is the 422 refusing object name for errs, each error once for
// a kind with DistinctErrors.
func (k *Kind) Invalid(name string, errs field.ErrorList) *apierrors.StatusError {
	if k.DistinctErrors {
		seen := make(map[string]bool, len(errs))
		distinct := errs[:0:0]
		for _, e := range errs {
			if msg := e.Error(); !seen[msg] {
				seen[msg] = true
				distinct = append(distinct, e)
			}
		}
		errs = distinct
	}
	return apierrors.NewInvalid(k.invalidKind(), name, errs)
}

// storedAs reports whether version v's objects are the stored ones, as
// they are: the storage version of a kind that is no guest.
func (k *Kind) storedAs(v string) bool { return v == k.StorageVersion() && !k.IsGuest() }

// ScalePaths locate a scalable object's replicas, as a CRD's
// subresources.scale does: JSON paths such as ".spec.replicas".
type ScalePaths struct {
	SpecReplicas, StatusReplicas, LabelSelector string
}

// Schema checks and normalizes the objects of one version of a kind, as
// kube-apiserver does for custom resources with their CRD's schema.
type Schema interface {
	// Prune removes from obj the fields the schema does not know, and
	// returns their paths ("spec.foo"), for fieldValidation to report.
	Prune(obj map[string]any) []string
	// Default sets the schema's defaults in obj.
	Default(obj map[string]any)
	// Validate checks obj; old is the stored object on an update (nil on
	// a create), for transition rules.
	Validate(ctx context.Context, obj, old map[string]any) field.ErrorList
	// ValidateStatus checks an update through /status: the status
	// alone, as upstream's status strategy does.
	ValidateStatus(ctx context.Context, obj, old map[string]any) field.ErrorList
}

// Column is one Table column.
type Column struct {
	Name        string
	Type        string // "string", "integer", "number", "boolean", "date"
	Format      string
	Description string
	Priority    int32
	// Cell, if set, is a cell the table writes itself from the object's
	// name or creationTimestamp; Value and Reads are then unused.
	Cell Cell
	// Value returns the cell; nil renders as <none> by kubectl.
	Value func(obj *unstructured.Unstructured) any
	// Reads are the top-level members of the object Value reads. A list's
	// table then decodes only those; unless "metadata" is among them,
	// the object Value sees has only the name and creationTimestamp of
	// its metadata. Nil: the whole object.
	Reads []string
	// Counts, when set, says the cell is the number of entries in these
	// top-level members (an object's members, an array's elements), as
	// Value computes it: a stored object's are counted where they lie,
	// without decoding them, and its table decodes nothing for the
	// column.
	Counts []string
}

// Cell is a table cell written from the row's name or creationTimestamp.
type Cell int

const (
	CellValue   Cell = iota // Column.Value's
	CellName                // the object's name
	CellAge                 // the time since its creation, as "3d4h"
	CellCreated             // its creationTimestamp, in RFC 3339 (UTC)
)

// NameColumn and AgeColumn are the NAME and AGE columns of upstream's
// printers, with their descriptions (ObjectMeta's documentation).
var (
	NameColumn = Column{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"], Cell: CellName}
	AgeColumn  = Column{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], Cell: CellAge}
	// CreatedColumn is the date column of upstream's default table (kinds
	// without a printer of their own).
	CreatedColumn = Column{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], Cell: CellCreated}
)

// ColumnsOf are version v's Table columns.
func (k *Kind) ColumnsOf(v string) []Column {
	if c, ok := k.VersionColumns[v]; ok {
		return c
	}
	return k.Columns
}

// TableMembers are the top-level members version v's columns read
// (Column.Reads), all of them when a column reads the whole object.
func (k *Kind) TableMembers(v string) (members []string, all bool) {
	for _, c := range k.ColumnsOf(v) {
		if c.Counts != nil || c.Cell != CellValue {
			continue
		}
		if c.Reads == nil {
			return nil, true
		}
		for _, m := range c.Reads {
			if !slices.Contains(members, m) {
				members = append(members, m)
			}
		}
	}
	return members, false
}

// GroupVersionKind for version v.
func (k *Kind) GroupVersionKind(v string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: k.Group, Version: v, Kind: k.Kind}
}

// GroupResource is the kind's resource, qualified by its group, as error
// messages name it ("configmaps", "foos.webapp.my.domain").
func (k *Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.Group, Resource: k.Resource}
}

// GroupKind of the kind.
func (k *Kind) GroupKind() schema.GroupKind { return schema.GroupKind{Group: k.Group, Kind: k.Kind} }

// ScaleIn is the /scale paths of version v, nil when v has no /scale.
func (k *Kind) ScaleIn(v string) *ScalePaths {
	if s, ok := k.VersionScale[v]; ok {
		return s
	}
	return k.Scale
}

// StatusIn reports whether version v has a /status subresource.
func (k *Kind) StatusIn(v string) bool {
	if s, ok := k.VersionStatus[v]; ok {
		return s
	}
	return k.Status
}

// StorageVersion is the version objects are stored in.
func (k *Kind) StorageVersion() string { return k.Versions[0] }

// Serves reports whether version v is served.
func (k *Kind) Serves(v string) bool {
	for _, s := range k.Versions {
		if s == v {
			return true
		}
	}
	return false
}

// Prefix is the storage prefix of the kind's objects: "/<resource>/" for
// the core group, "/<group>/<resource>/" otherwise, as kube-apiserver lays
// out etcd (under --etcd-prefix); a guest's is its host's.
func (k *Kind) Prefix() string {
	if k.Cohabit != nil && k.Cohabit.Guest == k {
		k = k.Cohabit.Host // not a call: Prefix stays inlined into the key's concatenation
	}
	if k.Group == "" {
		return "/" + k.Resource + "/"
	}
	return "/" + k.Group + "/" + k.Resource + "/"
}

// SupportsField reports whether a field selector of a request in version
// may use field f, as upstream's field label conversions accept it:
// metadata.name; metadata.namespace for a namespaced kind, and for a
// built-in kind with no fields of its own, cluster-scoped too (the
// default conversion takes both); and the kind's Fields.
func (k *Kind) SupportsField(version, f string) bool {
	if f == "metadata.name" || (f == "metadata.namespace" && (k.Namespaced || k.metadataFieldsOnly())) {
		return true
	}
	if k.Fields == nil {
		return false
	}
	if k.VersionFields != nil {
		return slices.Contains(k.VersionFields[version], f)
	}
	_, ok := k.Fields(&unstructured.Unstructured{Object: map[string]any{}})[f]
	return ok
}

// metadataFieldsOnly reports whether the kind is a built-in one whose
// field selectors take only metadata: upstream converts its field labels
// with the default conversion, not one of the kind's own.
func (k *Kind) metadataFieldsOnly() bool { return k.Fields == nil && k.Typed != nil }

// FieldNotSupported is the message of the 400 for a field selector on f,
// which SupportsField refuses: the default conversion's for a built-in
// kind with no fields of its own, the kind's own conversion's otherwise.
func (k *Kind) FieldNotSupported(f string) string {
	if k.metadataFieldsOnly() {
		return fmt.Sprintf("%q is not a known field selector: only %q, %q", f, "metadata.name", "metadata.namespace")
	}
	return "field label not supported: " + f
}
