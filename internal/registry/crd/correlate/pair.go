package correlate

import (
	"reflect"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Pair is a value of the new object and its old value, at a place the
// schema describes.
type Pair struct {
	value, old any
	schema     *apiextensionsv1.JSONSchemaProps

	children map[any]*Pair // by field name or index; nil children cached too
	items    *Index        // the old list-type=map items by key, once built
	equal    *bool
}

// New pairs value, of schema s, with old.
func New(value, old any, s *apiextensionsv1.JSONSchemaProps) *Pair {
	return &Pair{value: value, old: old, schema: s}
}

// Value is the new value.
func (p *Pair) Value() any { return p.value }

// OldItems indexes old, the old value of a list of schema s, for the new
// list's items to find their old items in: only an
// x-kubernetes-list-type=map list pairs items; for any other it holds
// nothing.
func OldItems(s *apiextensionsv1.JSONSchemaProps, old any) Index {
	l, _ := old.([]any)
	if s == nil || s.XListType == nil || *s.XListType != "map" {
		return Index{}
	}
	return NewIndex(s.XListMapKeys, l)
}

func (p *Pair) child(id any, build func() *Pair) *Pair {
	if ch, ok := p.children[id]; ok {
		return ch
	}
	ch := build()
	if p.children == nil {
		p.children = map[any]*Pair{}
	}
	p.children[id] = ch
	return ch
}

// Key is field k's pair; nil if k is not in both objects or the schema
// does not describe it.
func (p *Pair) Key(k string) *Pair {
	if p == nil || p.schema == nil {
		return nil
	}
	return p.child(k, func() *Pair {
		nm, ok1 := p.value.(map[string]any)
		om, ok2 := p.old.(map[string]any)
		if !ok1 || !ok2 {
			return nil
		}
		nv, ok1 := nm[k]
		ov, ok2 := om[k]
		if !ok1 || !ok2 {
			return nil
		}
		var s *apiextensionsv1.JSONSchemaProps
		if prop, ok := p.schema.Properties[k]; ok {
			s = &prop
		} else if ap := p.schema.AdditionalProperties; ap != nil && ap.Schema != nil {
			s = ap.Schema
		} else {
			return nil
		}
		return &Pair{value: nv, old: ov, schema: s}
	})
}

// Index is item i's pair: only an item of a list-type=map list has one,
// with the old item of the same keys.
func (p *Pair) Index(i int) *Pair {
	if p == nil || p.schema == nil {
		return nil
	}
	return p.child(i, func() *Pair {
		nl, ok1 := p.value.([]any)
		_, ok2 := p.old.([]any)
		if !ok1 || !ok2 || i >= len(nl) || p.schema.Items == nil || p.schema.Items.Schema == nil {
			return nil
		}
		if p.items == nil {
			items := OldItems(p.schema, p.old)
			p.items = &items
		}
		o := p.items.Get(nl[i])
		if o == nil {
			return nil
		}
		return &Pair{value: nl[i], old: o, schema: p.schema.Items.Schema}
	})
}

// Unchanged reports whether the value equals its old value (upstream's
// CachedDeepEqual). A nil Pair is not unchanged.
func (p *Pair) Unchanged() bool {
	if p == nil {
		return false
	}
	if p.equal == nil {
		eq := p.computeEqual()
		p.equal = &eq
	}
	return *p.equal
}

func (p *Pair) computeEqual() bool {
	if p.value == nil || p.old == nil {
		return p.value == nil && p.old == nil
	}
	switch nv := p.value.(type) {
	case []any:
		ov, ok := p.old.([]any)
		if !ok || len(ov) != len(nv) {
			return false
		}
		if p.schema == nil || p.schema.XListType == nil || *p.schema.XListType != "map" {
			return reflect.DeepEqual(ov, nv)
		}
		for i := range nv {
			if !p.Index(i).Unchanged() {
				return false
			}
		}
		return true
	case map[string]any:
		ov, ok := p.old.(map[string]any)
		if !ok || len(ov) != len(nv) {
			return false
		}
		for k := range nv {
			if !p.Key(k).Unchanged() {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(p.old, p.value)
	}
}
