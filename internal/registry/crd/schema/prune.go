package schema

import (
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	"github.com/kplane-dev/kplane/internal/registry/plain"
)

// metaFields are kept at the root of a resource, and of an embedded
// resource, whatever the schema says.
var metaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// Prune removes from obj the fields the schema does not know and returns
// their paths, sorted within each step, as upstream's
// unstructuredSchemaCoercer.apply (customresource_handler.go) reports
// them for fieldValidation: first unknown fields of the root metadata
// ("metadata.foo"), then those pruned by the schema ("spec.foo",
// "spec.list[0].bar"), then unknown fields of embedded resources'
// metadata ("spec.template.metadata.foo").
//
// Like upstream it also drops nulls where the schema is neither nullable
// nor has a default (PruneNonNullableNullsWithoutDefaults), and
// round-trips every metadata through metav1.ObjectMeta. Malformed
// metadata fields are dropped rather than refused.
func (s *Schema) Prune(obj map[string]any) []string {
	var unknown []string
	unknown = append(unknown, coerceMeta(obj, nil)...)
	root := *s.root
	root.embedded = true
	p := pruner{}
	p.prune(obj, &root)
	sort.Strings(p.unknown)
	unknown = append(unknown, p.unknown...)
	pruneNulls(obj, s.root)
	var embedded []string
	coerceEmbedded(nil, obj, s.root, &embedded)
	sort.Strings(embedded)
	return append(unknown, embedded...)
}

// pruner walks an object with its schema, as upstream's pruning.prune.
// path is the current path in upstream's notation: keys joined by ".",
// indexes as "[i]".
type pruner struct {
	path    []string
	unknown []string
}

func (p *pruner) push(k string) {
	if len(p.path) > 0 {
		p.path = append(p.path, ".")
	}
	p.path = append(p.path, k)
}

func (p *pruner) record(k string) {
	n := len(p.path)
	p.push(k)
	p.unknown = append(p.unknown, strings.Join(p.path, ""))
	p.path = p.path[:n]
}

func (p *pruner) prune(x any, s *node) {
	if s != nil && s.preserve {
		p.skip(x, s)
		return
	}
	n := len(p.path)
	switch x := x.(type) {
	case map[string]any:
		// Any order: Prune sorts what is recorded (and a map may lose
		// entries while ranged over).
		for k, v := range x {
			if s != nil && s.embedded && metaFields[k] {
				continue
			}
			var sub *node
			known := false
			if s != nil {
				if c, ok := s.props[k]; ok {
					sub, known = c, true
				} else if s.hasAddl {
					sub, known = s.addl, true
				}
			}
			if !known {
				// At the root the meta fields are restored by the
				// caller; elsewhere they are unknown like any field.
				if !metaFields[k] || n > 0 {
					p.record(k)
				}
				delete(x, k)
				continue
			}
			p.push(k)
			p.prune(v, sub)
			p.path = p.path[:n]
		}
	case []any:
		var items *node
		if s != nil {
			items = s.items
		}
		for i, v := range x {
			p.path = append(p.path, "[", strconv.Itoa(i), "]")
			p.prune(v, items)
			p.path = p.path[:n]
		}
	}
}

// skip walks a preserve-unknown-fields subtree: unknown fields stay, but
// specified properties below are pruned by their own schema.
func (p *pruner) skip(x any, s *node) {
	if s == nil {
		return
	}
	n := len(p.path)
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if s.embedded && metaFields[k] {
				continue
			}
			var sub *node
			if c, ok := s.props[k]; ok {
				sub = c
			} else if s.hasAddl {
				sub = s.addl
			} else {
				continue
			}
			p.push(k)
			p.prune(v, sub)
			p.path = p.path[:n]
		}
	case []any:
		for i, v := range x {
			p.path = append(p.path, "[", strconv.Itoa(i), "]")
			p.skip(v, s.items)
			p.path = p.path[:n]
		}
	}
}

// fieldSchema is the schema of field k of an object with schema s.
func fieldSchema(s *node, k string) *node {
	if s == nil {
		return nil
	}
	if c, ok := s.props[k]; ok {
		return c
	}
	if s.hasAddl {
		return s.addl
	}
	return nil
}

// pruneNulls removes null values whose schema is neither nullable nor
// defaulted (upstream's PruneNonNullableNullsWithoutDefaults): a client
// sending "field: null" for such a field means "unset".
func pruneNulls(x any, s *node) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			c := fieldSchema(s, k)
			if v == nil && c != nil && !c.nullable && c.def == nil {
				delete(x, k)
				continue
			}
			pruneNulls(v, c)
		}
	case []any:
		var items *node
		if s != nil {
			items = s.items
		}
		for _, v := range x {
			pruneNulls(v, items)
		}
	}
}

// coerceEmbedded normalizes the metadata of every embedded resource
// below the root, as upstream's objectmeta.Coerce: the metadata goes
// through metav1.ObjectMeta, so unknown fields are dropped (and
// reported), and a zero creationTimestamp is removed. A non-string
// apiVersion or kind is left for Validate to report.
func coerceEmbedded(pth *field.Path, x any, s *node, unknown *[]string) {
	if s == nil || !s.hasEmbedded {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		if s.embedded && pth != nil {
			*unknown = append(*unknown, coerceMeta(x, pth)...)
		}
		for k, v := range x {
			if c, ok := s.props[k]; ok {
				coerceEmbedded(pth.Child(k), v, c, unknown)
			} else if s.hasAddl {
				coerceEmbedded(pth.Key(k), v, s.addl, unknown)
			}
		}
	case []any:
		for i, v := range x {
			coerceEmbedded(pth.Index(i), v, s.items, unknown)
		}
	}
}

// CheckEmbedded reports what upstream's schema-coercing decoder refuses in
// the embedded resources (x-kubernetes-embedded-resource) of a request
// body, before anything else is done with it (schema/objectmeta
// CoerceWithOptions without DropInvalidFields): an apiVersion or kind that
// is not a string ("spec.template.kind: Invalid value: 5: must be a
// string"), or metadata that does not decode as ObjectMeta. Only places the
// schema describes are checked, as upstream checks after pruning. The first
// error is returned, fields taken in name order (upstream's order is Go's
// map order). The root's metadata is the registry's concern.
func (s *Schema) CheckEmbedded(obj map[string]any) error {
	if e := checkEmbedded(nil, obj, s.root, true); e != nil {
		return e
	}
	return nil
}

// checkEmbedded walks x along s and returns the first embedded resource
// (below the root: pth not nil) whose apiVersion or kind is not a string
// or, when meta is set, whose metadata does not decode as ObjectMeta.
func checkEmbedded(pth *field.Path, x any, s *node, meta bool) *field.Error {
	if s == nil || !s.hasEmbedded {
		return nil
	}
	switch x := x.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			v := x[k]
			if s.embedded && pth != nil {
				switch k {
				case "apiVersion", "kind":
					if _, ok := v.(string); !ok {
						return field.Invalid(pth.Child(k), v, "must be a string")
					}
				case "metadata":
					if !meta {
						break
					}
					raw, err := utiljson.Marshal(v)
					if err == nil {
						err = utiljson.Unmarshal(raw, &metav1.ObjectMeta{})
					}
					if err != nil {
						return field.Invalid(pth.Child("metadata"), v, err.Error())
					}
				}
			}
			if c, ok := s.props[k]; ok {
				if e := checkEmbedded(pth.Child(k), v, c, meta); e != nil {
					return e
				}
			} else if s.hasAddl {
				if e := checkEmbedded(pth.Key(k), v, s.addl, meta); e != nil {
					return e
				}
			}
		}
	case []any:
		for i, v := range x {
			if e := checkEmbedded(pth.Index(i), v, s.items, meta); e != nil {
				return e
			}
		}
	}
	return nil
}

// coerceMeta round-trips obj["metadata"] through metav1.ObjectMeta, as
// upstream's GetObjectMetaWithOptions and SetObjectMeta do, and returns
// the unknown fields as "<pth>.metadata.<field>". Fields that do not
// decode are dropped one by one (upstream's DropMalformedFields).
func coerceMeta(obj map[string]any, pth *field.Path) []string {
	// Plain metadata (every member an ObjectMeta field, of its type,
	// written back the same) is what the round trip gives, less a null
	// creationTimestamp: no need to make it.
	if md, ok := obj["metadata"].(map[string]any); ok {
		if cp, ok := plain.ObjectMeta(md); ok {
			obj["metadata"] = cp
			return nil
		}
	}
	return coerceMetaFull(obj, pth)
}

// coerceMetaFull is coerceMeta by the round trip itself.
func coerceMetaFull(obj map[string]any, pth *field.Path) []string {
	md, found := obj["metadata"]
	if !found {
		return nil
	}
	prefix := pth.Child("metadata").String()
	var unknown []string
	meta := &metav1.ObjectMeta{}
	raw, err := utiljson.Marshal(md)
	if err != nil {
		return nil
	}
	strict, err := kjson.UnmarshalStrict(raw, meta)
	if err == nil {
		unknown = appendStrict(unknown, prefix, strict)
	} else {
		m, ok := md.(map[string]any)
		if !ok {
			delete(obj, "metadata")
			return nil
		}
		meta = &metav1.ObjectMeta{}
		for _, k := range sortedKeys(m) {
			one, err := utiljson.Marshal(map[string]any{k: m[k]})
			if err != nil {
				continue
			}
			if utiljson.Unmarshal(one, &metav1.ObjectMeta{}) != nil {
				continue
			}
			strict, _ := kjson.UnmarshalStrict(one, meta)
			unknown = appendStrict(unknown, prefix, strict)
		}
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(meta)
	if err != nil {
		return unknown
	}
	if meta.CreationTimestamp.IsZero() {
		delete(out, "creationTimestamp")
	}
	obj["metadata"] = out
	sort.Strings(unknown)
	return unknown
}

func appendStrict(unknown []string, prefix string, strict []error) []string {
	for _, e := range strict {
		if fe, ok := e.(kjson.FieldError); ok {
			unknown = append(unknown, prefix+"."+fe.FieldPath())
		}
	}
	return unknown
}
