package registry

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
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
	m  map[fieldManagerKey]*managedfields.FieldManager
}

type fieldManagerKey struct {
	kind        *Kind
	version     string
	subresource string
}

// fieldManager returns the FieldManager for writes of version v of k
// through subresource ("" or "status").
func (r *Resource) fieldManager(k *Kind, v, subresource string) (*managedfields.FieldManager, error) {
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
	gvk := k.GroupVersionKind(v)
	hub := k.GroupVersionKind(k.StorageVersion()).GroupVersion()
	reset := resetFields(k, subresource)
	var m *managedfields.FieldManager
	var err error
	if k.Typed == nil {
		// Custom resources, with their CRD's schema or a deduced one, as
		// apiextensions-apiserver's scopeWithFieldManager.
		m, err = managedfields.NewDefaultCRDFieldManager(tc, relabel{}, noDefaults{}, creater{}, gvk, hub, subresource, reset)
	} else {
		m, err = managedfields.NewDefaultFieldManager(tc, relabel{}, noDefaults{}, creater{}, gvk, hub, subresource, reset)
	}
	if err != nil {
		return nil, err
	}
	if fm.m == nil {
		fm.m = make(map[fieldManagerKey]*managedfields.FieldManager)
	}
	// Forget the managers of a replaced Kind.
	for old := range fm.m {
		if old.kind != k {
			delete(fm.m, old)
		}
	}
	fm.m[key] = m
	return m, nil
}

// resetFields are the fields a write through subresource does not own,
// because the write drops them: a kind with a status subresource ignores
// status on the main resource, and everything but status on /status.
func resetFields(k *Kind, subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !k.Status {
		return nil
	}
	var set *fieldpath.Set
	if subresource == "status" {
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
	} else {
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

// relabel converts between the versions of a kind, which differ only in
// apiVersion (conversion strategy None).
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

func (relabel) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok {
		return nil, fmt.Errorf("%v is not a version of %v", target, u.GroupVersionKind())
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(gvk)
	return out, nil
}

func (relabel) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
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
