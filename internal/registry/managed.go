package registry

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/kplane-dev/kplane/internal/registry/plain"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Field ownership (metadata.managedFields) is kept by apimachinery's
// managedfields.FieldManager, the same code kube-apiserver runs, over
// structured-merge-diff. Every write goes through it: create, update and
// the patches record the fields a manager changed; server-side apply
// merges the applied configuration and reports conflicts.

// deduced is the type converter of kinds without a schema: every field
// is a separately owned map key and every list is atomic.
var deduced = managedfields.NewDeducedTypeConverter()

// fieldManagers caches one FieldManager per kind value, version and
// subresource. A CRD update replaces the Kind, which starts a new set.
type fieldManagers struct {
	mu sync.Mutex
	m  map[fieldManagerKey]*kindManager
}

// kindManager is a kind's field manager for one version and subresource,
// with the managedFields of the creates it has seen by shape.
type kindManager struct {
	fm      *managedfields.FieldManager
	creates createMemo
}

type fieldManagerKey struct {
	kind        *Kind
	version     string
	subresource string
}

// fieldManager returns the FieldManager for writes of version v of k
// through subresource ("" or "status").
func (r *Resource) fieldManager(k *Kind, v, subresource string) (*managedfields.FieldManager, error) {
	m, err := r.kindManager(k, v, subresource)
	if err != nil {
		return nil, err
	}
	return m.fm, nil
}

func (r *Resource) kindManager(k *Kind, v, subresource string) (*kindManager, error) {
	fm := &r.managers
	key := fieldManagerKey{k, v, subresource}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	if m, ok := fm.m[key]; ok {
		return m, nil
	}
	tc := k.TypeConverter
	if tc == nil {
		tc = deduced
	}
	tc = unwrapping{tc}
	gvk := k.GroupVersionKind(v)
	hub := k.GroupVersionKind(k.StorageVersion()).GroupVersion()
	reset := resetFields(k, v, subresource)
	var conv runtime.ObjectConvertor = relabel{}
	if k.ConversionWebhook != nil {
		// The field manager works in the request's version, as
		// upstream's for custom resources: its hub is that version.
		conv, hub = webhookConvertor{r, k}, gvk.GroupVersion()
	}
	var m *managedfields.FieldManager
	var err error
	if k.Typed == nil {
		// Custom resources, with their CRD's schema or a deduced one, as
		// apiextensions-apiserver's scopeWithFieldManager.
		m, err = managedfields.NewDefaultCRDFieldManager(tc, conv, noDefaults{}, creater{}, gvk, hub, subresource, reset)
	} else {
		m, err = managedfields.NewDefaultFieldManager(tc, conv, noDefaults{}, creater{}, gvk, hub, subresource, reset)
	}
	if err != nil {
		return nil, err
	}
	if fm.m == nil {
		fm.m = make(map[fieldManagerKey]*kindManager)
	}
	// Forget the managers of a replaced Kind.
	for old := range fm.m {
		if old.kind != k {
			delete(fm.m, old)
		}
	}
	km := &kindManager{fm: m}
	fm.m[key] = km
	return km, nil
}

// resetFields are the fields a write through subresource in version v
// does not own, because the write drops them: a version with a status
// subresource ignores status on the main resource, and everything but
// status on /status.
func resetFields(k *Kind, v, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !k.StatusIn(v) && len(k.ResetFields[subresource]) == 0 {
		return nil
	}
	var set *fieldpath.Set
	switch own, ok := k.ResetFields[subresource]; {
	case ok:
		set = fieldpath.NewSet()
		for _, p := range own {
			parts := make([]any, len(p))
			for i, name := range p {
				parts[i] = name
			}
			set.Insert(fieldpath.MakePathOrDie(parts...))
		}
	case subresource == "status", slices.Contains(k.UpdateSubresources, subresource):
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
	default:
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	}
	out := make(map[fieldpath.APIVersion]fieldpath.Filter, len(k.Versions))
	for _, v := range k.Versions {
		out[fieldpath.APIVersion(k.GroupVersionKind(v).GroupVersion().String())] = fieldpath.NewExcludeSetFilter(set)
	}
	return out
}

// ManagerName is the field manager of a write: the request's fieldManager
// or, without one, the start of the client's User-Agent (up to the first
// "/", printable characters only, at most 128), as kube-apiserver names
// it.
func ManagerName(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b bytes.Buffer
	for _, c := range prefix {
		if b.Len() >= 128 {
			break
		}
		if unicode.IsPrint(c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// updateManaged is fm.UpdateNoErrors: it records in obj's managedFields
// the fields manager changed from live to obj. obj goes through as a
// managedObject, which writes the entries into the map without
// apimachinery's reflection (a JSON round trip per entry's fieldsV1):
// that was 5.6 % of the server's CPU under creates. The entries come
// back too (from updateManagedEntries) when the map holds just them
// (known), so that validation needn't read them back out of the map.
func updateManaged(fm *managedfields.FieldManager, live, obj *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	out, _, _ := updateManagedEntriesOf(fm, live, obj, manager, true)
	return out
}

// updateManagedFor is updateManaged for a write of k through subresource.
// The field manager of a kind with a status subresource ignores status on
// the main resource and spec (and metadata) through /status (resetFields),
// so that part of the live object and of obj is not handed over, and the
// typed conversion and comparison skip it; only obj's metadata (its
// managedFields) changes. One difference: a body whose ignored part does
// not fit the schema fails upstream's typed conversion, which drops the
// managedFields; here they are recorded.
func updateManagedFor(k *Kind, version, subresource string, fm *managedfields.FieldManager, live, obj *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	var ignored string
	switch {
	case k.ConversionWebhook != nil:
		// The field manager has the webhook convert both objects to the
		// versions of managers who wrote in another: whole objects.
		out, _, _ := updateManagedEntriesOf(fm, live, obj, manager, false)
		return out
	case !k.StatusIn(version), len(k.ResetFields[subresource]) > 0:
		return updateManaged(fm, live, obj, manager) // the reset fields' filter does it
	case subresource == "":
		ignored = "status"
	case subresource == "status":
		ignored = "spec"
	default:
		return updateManaged(fm, live, obj, manager)
	}
	without := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		if _, ok := u.Object[ignored]; !ok {
			return u
		}
		top := maps.Clone(u.Object)
		delete(top, ignored)
		return &unstructured.Unstructured{Object: top}
	}
	out := updateManaged(fm, without(live), without(obj), manager)
	if md, ok := out.Object["metadata"]; ok {
		obj.Object["metadata"] = md
	} else {
		delete(obj.Object, "metadata")
	}
	return obj
}

func updateManagedEntries(fm *managedfields.FieldManager, live, obj *unstructured.Unstructured, manager string) (out *unstructured.Unstructured, entries []metav1.ManagedFieldsEntry, known bool) {
	return updateManagedEntriesOf(fm, live, obj, manager, false)
}

// updateManagedEntriesOf is updateManagedEntries; diffs hands the field
// manager's comparison only what differs between live and obj (see
// comparison), which pays on an update and not on a create.
func updateManagedEntriesOf(fm *managedfields.FieldManager, live, obj *unstructured.Unstructured, manager string, diffs bool) (out *unstructured.Unstructured, entries []metav1.ManagedFieldsEntry, known bool) {
	mo := &managedObject{Unstructured: obj}
	lo := newLiveObject(live)
	if diffs {
		c := &comparison{live: lo.Unstructured, obj: obj}
		lo.cmp, mo.cmp = c, c
	}
	switch o := fm.UpdateNoErrors(lo, mo, manager).(type) {
	case *managedObject:
		return o.Unstructured, o.written, o == mo && o.known
	case *unstructured.Unstructured:
		return o, nil, false
	default:
		panic(fmt.Sprintf("field manager returned %T", o))
	}
}

// liveObject is the current object as the field manager's Update takes
// it. Its managedFields are read from the whole object, directly (a write
// through a subresource, or a body without managedFields, takes the live
// object's entries). Its structure, which the field manager converts to a
// typed value and compares with the new object's, has no
// metadata.managedFields: the field manager removes the new object's
// before comparing, so the live object's would only come out as removed
// fields, and removed fields only leave the owners' sets, which never
// hold metadata.managedFields (the field manager strips it). A test runs
// the field manager both ways and compares.
type liveObject struct {
	*unstructured.Unstructured // without metadata.managedFields
	full                       *unstructured.Unstructured
	cmp                        *comparison // nil: compared whole
}

func newLiveObject(live *unstructured.Unstructured) *liveObject {
	o := &liveObject{Unstructured: live, full: live}
	if md, ok := live.Object["metadata"].(map[string]any); ok {
		if _, ok := md["managedFields"]; ok {
			md = maps.Clone(md)
			delete(md, "managedFields")
			top := maps.Clone(live.Object)
			top["metadata"] = md
			o.Unstructured = &unstructured.Unstructured{Object: top}
		}
	}
	return o
}

func (o *liveObject) GetManagedFields() []metav1.ManagedFieldsEntry {
	if entries, ok := ManagedFieldsEntries(o.full.Object); ok {
		return entries
	}
	return o.full.GetManagedFields()
}

// unwrapping is a type converter that sees a managedObject or liveObject
// as the Unstructured in it: the field manager hands some objects to its
// type converter as it got them, and the converters tell Unstructured
// content from Go structs by type.
type unwrapping struct{ managedfields.TypeConverter }

func (u unwrapping) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	return u.TypeConverter.ObjectToTyped(unwrap(obj), opts...)
}

// unwrap is the Unstructured in a managedObject or liveObject.
func unwrap(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *managedObject:
		return o.Unstructured
	case *liveObject:
		return o.Unstructured
	}
	return obj
}

// managedObject is an Unstructured whose SetManagedFields builds the
// entries' maps directly, and remembers the entries it wrote. Every
// other method is Unstructured's.
type managedObject struct {
	*unstructured.Unstructured
	written []metav1.ManagedFieldsEntry
	known   bool        // the map's managedFields are written
	cmp     *comparison // nil: compared whole
}

// SetManagedFields stores entries as Unstructured.SetManagedFields does
// (a test holds the two equal); an entry it can't write directly goes
// through apimachinery's converter.
func (o *managedObject) SetManagedFields(entries []metav1.ManagedFieldsEntry) {
	o.written, o.known = nil, false
	if entries == nil {
		o.Unstructured.SetManagedFields(nil)
		o.known = true
		return
	}
	items := make([]any, 0, len(entries))
	for i := range entries {
		m, ok := managedFieldsEntryMap(&entries[i])
		if !ok {
			o.Unstructured.SetManagedFields(entries)
			return
		}
		items = append(items, m)
	}
	md, ok := o.Object["metadata"].(map[string]any)
	if !ok {
		if _, present := o.Object["metadata"]; present {
			o.Unstructured.SetManagedFields(entries)
			return
		}
		if o.Object == nil {
			o.Object = map[string]any{}
		}
		md = map[string]any{}
		o.Object["metadata"] = md
	}
	md["managedFields"] = items
	o.written, o.known = entries, true
}

// GetManagedFields reads the entries as Unstructured.GetManagedFields
// does (a test holds the two equal), without its deep copy of the list
// and its reflection per entry: the field manager reads the written
// object's entries on every update and patch, and that was 12 % of a
// merge patch's CPU. Entries it can't read directly go to Unstructured's.
func (o *managedObject) GetManagedFields() []metav1.ManagedFieldsEntry {
	if entries, ok := ManagedFieldsEntries(o.Object); ok {
		return entries
	}
	return o.Unstructured.GetManagedFields()
}

// ManagedFieldsEntries is obj's metadata.managedFields as
// runtime.DefaultUnstructuredConverter (and a JSON decode) reads them,
// for entries of the form the field manager writes: strings, a time in
// RFC 3339 and a fieldsV1 that is a tree of objects; false for anything
// else. The HTTP layer's protobuf path reads them with it too.
func ManagedFieldsEntries(obj map[string]any) ([]metav1.ManagedFieldsEntry, bool) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return nil, false
	}
	items, ok := md["managedFields"].([]any)
	if !ok {
		return nil, false
	}
	entries := make([]metav1.ManagedFieldsEntry, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		e := &entries[i]
		for k, v := range m {
			if k == "fieldsV1" {
				if !plain.ObjectTree(v) {
					return nil, false
				}
				raw, err := storage.AppendJSON(nil, v.(map[string]any))
				if err != nil {
					return nil, false
				}
				e.FieldsV1 = new(metav1.FieldsV1)
				e.FieldsV1.SetRawBytes(raw)
				continue
			}
			str, ok := v.(string)
			if !ok {
				return nil, false
			}
			switch k {
			case "manager":
				e.Manager = str
			case "operation":
				e.Operation = metav1.ManagedFieldsOperationType(str)
			case "apiVersion":
				e.APIVersion = str
			case "fieldsType":
				e.FieldsType = str
			case "subresource":
				e.Subresource = str
			case "time":
				t, err := time.Parse(time.RFC3339, str)
				if err != nil {
					return nil, false
				}
				e.Time = &metav1.Time{Time: t.Local()} // as Time.UnmarshalJSON
			default:
				return nil, false
			}
		}
	}
	return entries, true
}

// metaView is an object for metadata validation with its managedFields
// at hand as the entries they were written from. Validation reads their
// operation, fieldsType, manager and subresource, which the map holds
// unchanged (the time it holds to the second).
type metaView struct {
	*unstructured.Unstructured
	managed []metav1.ManagedFieldsEntry
}

func (v metaView) GetManagedFields() []metav1.ManagedFieldsEntry { return v.managed }

// managedFieldsEntryMap is e as runtime.DefaultUnstructuredConverter
// gives it, for the entries the field manager writes: false for anything
// else (fieldsV1 that is not a JSON object).
func managedFieldsEntryMap(e *metav1.ManagedFieldsEntry) (map[string]any, bool) {
	m := make(map[string]any, 7)
	setString := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	setString("manager", e.Manager)
	setString("operation", string(e.Operation))
	setString("apiVersion", e.APIVersion)
	if e.Time != nil {
		m["time"] = e.Time.ToUnstructured()
	}
	setString("fieldsType", e.FieldsType)
	if e.FieldsV1 != nil {
		raw := e.FieldsV1.GetRawBytes()
		if len(raw) == 0 || raw[0] != '{' {
			return nil, false
		}
		var fields map[string]any
		if err := storage.UnmarshalMap(raw, &fields); err != nil {
			return nil, false
		}
		m["fieldsV1"] = fields
	}
	setString("subresource", e.Subresource)
	return m, true
}

// relabel converts between the versions of a kind, which differ only in
// apiVersion (conversion strategy None). It cannot convert to another
// group: the managers of an object's fields who wrote it through the
// other kind of a Cohabit are dropped by a write through this one (the
// field manager drops those of versions it cannot convert to, with a
// "not registered" error), as upstream drops them.
type relabel struct{}

func (relabel) Convert(in, out, _ any) error {
	src, ok1 := in.(*unstructured.Unstructured)
	dst, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	dst.Object = runtime.DeepCopyJSON(src.Object)
	return nil
}

// ConvertToVersion returns in itself when it is of the target version, as
// kube-apiserver's unsafe converter does: the field manager only reads
// what it converts, or converts objects it has just made. The sides of
// an update's comparison come out as the comparison sees them.
func (relabel) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := compared(in).(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	from := u.GroupVersionKind()
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("kplane", from, target)
	}
	if gvk == from {
		return u, nil
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (relabel) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// webhookConvertor is the field manager's convertor for a kind with a
// conversion webhook: the versions of managers who wrote in another
// version than the write's are the webhook's to convert to, as upstream's
// field manager has its CRD's converter call it.
type webhookConvertor struct {
	r *Resource
	k *Kind
}

func (c webhookConvertor) Convert(in, out, ctx any) error { return relabel{}.Convert(in, out, ctx) }

func (c webhookConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := unwrap(in).(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	from := u.GroupVersionKind()
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok || gvk.GroupKind() != c.k.GroupKind() || !slices.Contains(c.k.Versions, gvk.Version) {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("kplane", from, target)
	}
	if gvk == from {
		return u, nil
	}
	// The write's context is not at hand: the call is bounded by the
	// webhook's own timeout.
	return c.r.convertTo(context.Background(), c.k, gvk.Version, u)
}

func (webhookConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
