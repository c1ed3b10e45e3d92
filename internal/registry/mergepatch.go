package registry

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kplane-dev/kplane/internal/registry/plain"
)

// A JSON merge patch is applied, as kube-apiserver applies it, to the
// current object's JSON by evanphx/json-patch, and the result decoded as
// a request body is (Decode). For a kind with a Go type, mergePlain does
// the same on the maps: it merges the patch into a copy of the object
// the way the library merges the JSON, and keeps the result when the
// Go type's round trip would leave it as it is (plain.Type.Plain), which
// makes decoding its JSON give it back; for a custom resource, when the
// result holds no float and its metadata decodes. Anything else (a float,
// a field the type doesn't have, a value of another type) goes the
// library's way. The patch library and the decode were half of a merge
// patch's handling. A test holds the two paths equal.

// mergePlain returns the object that applying merge patch patch to cur
// and decoding the result as k gives, when it can vouch for it.
func mergePlain(k *Kind, cur, patch map[string]any) (map[string]any, bool) {
	doc := runtime.DeepCopyJSON(cur)
	mergeInto(doc, patch)
	if k.Typed != nil {
		if !plain.Of(goType(k)).Plain(doc) {
			return nil, false
		}
		return doc, true
	}
	// A custom resource's body decodes into the map its JSON gives, which
	// is doc itself unless it holds a float (a whole one comes back an
	// int; the library keeps a patch's number as it was written), and its
	// metadata must decode as ObjectMeta (Decode).
	if hasFloat(doc) || !metadataDecodes(doc["metadata"]) {
		return nil, false
	}
	if md, ok := doc["metadata"]; ok && md == nil {
		delete(doc, "metadata")
	}
	return doc, true
}

// hasFloat reports a float64 anywhere in v.
func hasFloat(v any) bool {
	switch x := v.(type) {
	case float64:
		return true
	case map[string]any:
		for _, e := range x {
			if hasFloat(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasFloat(e) {
				return true
			}
		}
	}
	return false
}

// mergeInto merges patch into doc as the library's mergeDocs does: a null
// removes the member; an object merges into an object; anything else
// replaces, with the nulls inside it pruned when it lands where there was
// no value or no object. patch is not changed: what doc takes is copied.
func mergeInto(doc, patch map[string]any) {
	for k, v := range patch {
		if v == nil {
			delete(doc, k)
			continue
		}
		cur, ok := doc[k]
		if !ok || cur == nil {
			doc[k] = pruned(v)
			continue
		}
		curDoc, ok := cur.(map[string]any)
		if !ok {
			doc[k] = pruned(v)
			continue
		}
		patchDoc, ok := v.(map[string]any)
		if !ok {
			doc[k] = runtime.DeepCopyJSONValue(v) // an object replaced: not pruned
			continue
		}
		mergeInto(curDoc, patchDoc)
	}
}

// pruned is a copy of v without the null members of its objects, at any
// depth (null items of arrays stay), as the library's pruneNulls.
func pruned(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = pruned(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = pruned(e)
		}
		return out
	default:
		return runtime.DeepCopyJSONValue(v)
	}
}
