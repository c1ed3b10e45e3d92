package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// On an update the field manager converts the live object and the new one
// to typed values and compares them whole, though an update mostly
// leaves most of the object as it was: a controller's status write, a
// label, a replica count. For a status update of a small custom resource
// the conversions and the comparison were a third of the server's CPU,
// and the comparison's recursion grew the handler's stack on every
// request.
//
// So the comparison is handed only what differs: both objects without the
// members that are equal in the two, at any depth through objects (not
// into lists: an equal list goes whole, a list that differs stays whole).
// Members equal in both sides add nothing to the comparison, whatever
// the schema says of them: a field, a granular map's key, an atomic
// map's member (the atomic map stays equal or unequal without it). So
// the field sets come out as the full comparison's; a test runs both ways
// over random histories. apiVersion and kind stay: the conversion between
// versions reads them.
//
// One difference from upstream: a part of the new object that the schema
// rejects, left as it was, is no longer converted. Upstream's field
// manager then fails and drops the object's managedFields; here they are
// recorded.

// comparison holds the two sides of an update's field comparison, worked
// out when the field manager first converts one of them (by then it has
// taken the managedFields out of the new object).
type comparison struct {
	live, obj         *unstructured.Unstructured
	liveDiff, objDiff *unstructured.Unstructured // nil until worked out
}

// side is u, the live or the new object, as the comparison sees it.
func (c *comparison) side(u *unstructured.Unstructured) *unstructured.Unstructured {
	if c.liveDiff == nil {
		a, b := differing(c.live.Object, c.obj.Object, true)
		c.liveDiff = &unstructured.Unstructured{Object: a}
		c.objDiff = &unstructured.Unstructured{Object: b}
	}
	if u == c.live {
		return c.liveDiff
	}
	return c.objDiff
}

// compared is the object the field manager's comparison converts for in:
// the differing part of a live or new object that has a comparison, in
// itself otherwise.
func compared(in runtime.Object) runtime.Object {
	switch o := in.(type) {
	case *liveObject:
		if o.cmp != nil {
			return o.cmp.side(o.Unstructured)
		}
	case *managedObject:
		if o.cmp != nil {
			return o.cmp.side(o.Unstructured)
		}
	}
	return unwrap(in)
}

// differing returns a and b without the members equal in both, through
// nested objects; top keeps apiVersion and kind. Maps are new along the
// paths that differ; everything else is shared with a and b.
func differing(a, b map[string]any, top bool) (map[string]any, map[string]any) {
	da := make(map[string]any)
	db := make(map[string]any)
	for k, av := range a {
		bv, ok := b[k]
		switch {
		case !ok:
			da[k] = av
		case top && (k == "apiVersion" || k == "kind"):
			da[k], db[k] = av, bv
		default:
			am, aIsMap := av.(map[string]any)
			bm, bIsMap := bv.(map[string]any)
			if aIsMap && bIsMap {
				if sa, sb := differing(am, bm, false); len(sa) > 0 || len(sb) > 0 {
					da[k], db[k] = sa, sb
				} else if (am == nil) != (bm == nil) {
					da[k], db[k] = av, bv // a nil map and an empty one
				}
			} else if !jsonEqual(av, bv) {
				da[k], db[k] = av, bv
			}
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			db[k] = bv
		}
	}
	return da, db
}

// jsonEqual reports whether a and b are the same JSON value of the same
// Go types. Anything else, a number of another type among them, is
// unequal: the comparison then sees it.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case int64:
		b, ok := b.(int64)
		return ok && a == b
	case float64:
		b, ok := b.(float64)
		return ok && a == b
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return false
}
