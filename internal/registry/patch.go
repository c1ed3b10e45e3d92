package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/storage"
)

// maxJSONPatchOperations bounds a JSON patch, as kube-apiserver does.
const maxJSONPatchOperations = 10000

// PatchOptions qualify a patch.
type PatchOptions struct {
	WriteOptions
	Type types.PatchType
	// Force, for an apply, takes the fields other managers own.
	Force bool
}

// PatchTypes are the patch media types kind k accepts, in the order
// kube-apiserver lists them: strategic merge patch needs a Go type, so
// custom resources don't take it.
func PatchTypes(k *Kind) []string {
	if k.Typed != nil {
		return []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)}
	}
	return []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
}

// Patch changes ns/name by the patch data, applied to the current object
// in version: an RFC 6902 JSON patch, an RFC 7386 merge patch, a strategic
// merge patch, or a server-side apply configuration, which creates the
// object when it is absent (created reports that). A patch that sets
// metadata.resourceVersion is conditional on it (409 when stale); one
// that doesn't is reapplied to the fresh object when a concurrent write
// wins, so it never conflicts. Unknown or duplicate fields are refused
// or reported as opts.Strict and opts.Warn say.
func (r *Resource) Patch(ctx context.Context, version, ns, name string, data []byte, opts PatchOptions) (out *unstructured.Unstructured, created bool, err error) {
	out, _, created, err = r.PatchEncoded(ctx, version, ns, name, data, opts)
	return out, created, err
}

// PatchEncoded is Patch, and also returns the JSON of the object it
// returns when it has it from the store (see CreateEncoded).
func (r *Resource) PatchEncoded(ctx context.Context, version, ns, name string, data []byte, opts PatchOptions) (out *unstructured.Unstructured, enc *storage.Encoded, created bool, err error) {
	k := r.Kind()
	fm, err := r.fieldManager(k, version, opts.Subresource)
	if err != nil {
		return nil, nil, false, apierrors.NewInternalError(err)
	}
	// A patch that changed nothing at the object's revision changes
	// nothing again (noopwrites.go). Only a patch type k takes gets into
	// the memo, so the lookup may come before the type is checked.
	key, memo := noopKey(k, string(opts.Type), version, ns, name, func() [sha256.Size]byte { return sha256.Sum256(data) }, opts.WriteOptions, opts.Force)
	var watch noopWatch
	if memo {
		if out, ok := r.unchanged(ctx, k, version, ns, name, key); ok {
			return out, nil, false, nil
		}
		watch.wrap(&opts.WriteOptions)
	}
	var strict []error // of the last attempt
	var produce func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error)
	switch opts.Type {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		p, err := r.parsePatch(k, data, opts)
		if err != nil {
			return nil, nil, false, err
		}
		produce = func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			watch.seen = cur.GetResourceVersion()
			obj, errs, err := r.applyPatch(k, version, cur, p, opts)
			if err != nil {
				return nil, err
			}
			strict = errs
			return updateManagedFor(k, version, opts.Subresource, fm, cur, obj, opts.FieldManager), nil
		}
	case types.ApplyYAMLPatchType:
		applied, errs, err := parseApply(k, version, data, opts)
		if err != nil {
			return nil, nil, false, err
		}
		strict = errs
		produce = func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			watch.seen = cur.GetResourceVersion()
			return r.apply(k, version, cur, applied, fm, opts)
		}
	default:
		return nil, nil, false, unsupportedPatch(k)
	}

	opts.patch = true
	out, enc, err = r.update(ctx, k, version, ns, name, opts.WriteOptions, true, produce)
	if apierrors.IsNotFound(err) && opts.Type == types.ApplyYAMLPatchType && opts.Subresource == "" {
		out, err = r.applyCreate(ctx, k, version, ns, name, produce, opts)
		created = err == nil
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile: apply to it.
			opts.patch = true
			out, enc, err = r.update(ctx, k, version, ns, name, opts.WriteOptions, true, produce)
			created = false
		}
	}
	if err != nil {
		return nil, nil, false, err
	}
	for _, e := range strict {
		opts.warn(e.Error())
	}
	if memo && !created {
		r.noopDone(key, &watch, out, nil)
	}
	return out, enc, created, nil
}

// unsupportedPatch is the 415 of a patch type k does not take.
func unsupportedPatch(k *Kind) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(PatchTypes(k), ", "),
	}}
}

// parsedPatch is a JSON, merge or strategic merge patch, decoded once.
type parsedPatch struct {
	typ    types.PatchType
	raw    []byte
	ops    jsonpatch.Patch
	fields map[string]any // merge and strategic merge patches
	strict []error        // unknown or duplicate fields in the patch itself
}

func (r *Resource) parsePatch(k *Kind, data []byte, opts PatchOptions) (*parsedPatch, error) {
	p := &parsedPatch{typ: opts.Type, raw: data}
	checkFields := opts.Strict || opts.Warn != nil
	switch opts.Type {
	case types.JSONPatchType:
		if checkFields {
			var ops []struct {
				Op    string `json:"op"`
				Path  string `json:"path"`
				From  string `json:"from"`
				Value any    `json:"value"`
			}
			errs, err := sigsjson.UnmarshalStrict(data, &ops)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			for _, e := range errs {
				p.strict = append(p.strict, fmt.Errorf("json patch %v", e))
			}
		}
		ops, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		p.ops = ops
	case types.MergePatchType, types.StrategicMergePatchType:
		if opts.Type == types.StrategicMergePatchType && k.Typed == nil {
			return nil, unsupportedPatch(k)
		}
		var err error
		if checkFields {
			p.strict, err = sigsjson.UnmarshalStrict(data, &p.fields)
		} else {
			err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, &p.fields)
		}
		if err != nil {
			if opts.Type == types.MergePatchType {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if p.fields == nil {
			return nil, apierrors.NewBadRequest(jsonpatch.ErrBadJSONPatch.Error())
		}
	}
	return p, nil
}

// applyPatch applies p to cur (in version) and decodes the result as k,
// returning the strict errors (patch and result) to warn about.
func (r *Resource) applyPatch(k *Kind, version string, cur *unstructured.Unstructured, p *parsedPatch, opts PatchOptions) (*unstructured.Unstructured, []error, error) {
	if p.typ == types.MergePatchType && !(opts.Strict && len(p.strict) > 0) {
		if m, ok := mergePlain(k, cur.Object, p.fields); ok {
			obj := &unstructured.Unstructured{Object: m}
			if k.Default != nil {
				k.Default(obj) // as Decode defaults a body
			}
			return obj, append([]error(nil), p.strict...), nil
		}
	}
	return applyPatchFull(k, cur, p, opts)
}

// applyPatchFull is applyPatch on JSON: the patch applied to the current
// object's JSON by the patch libraries, the result decoded as a body is.
func applyPatchFull(k *Kind, cur *unstructured.Unstructured, p *parsedPatch, opts PatchOptions) (*unstructured.Unstructured, []error, error) {
	var patched []byte
	var smp map[string]any // a strategic merge's result
	switch p.typ {
	case types.JSONPatchType:
		curJSON, err := storage.AppendJSON(nil, cur.Object)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		if patched, err = p.ops.Apply(curJSON); err != nil {
			return nil, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		curJSON, err := storage.AppendJSON(nil, cur.Object)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		if patched, err = jsonpatch.MergePatch(curJSON, p.raw); err != nil {
			if errors.Is(err, jsonpatch.ErrBadJSONPatch) {
				return nil, nil, apierrors.NewBadRequest(err.Error())
			}
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		m, err := strategicpatch.StrategicMergeMapPatch(runtime.DeepCopyJSON(cur.Object), runtime.DeepCopyJSON(p.fields), k.Typed())
		if err != nil {
			return nil, nil, strategicPatchError(err)
		}
		smp = m
		// The same bytes as encoding/json's Marshal (a test in storage
		// holds the two equal), at several times its speed. The result
		// is a strategicpatch.JSONMap: as itself, a type AppendJSON does
		// not know, it would go to encoding/json whole.
		if patched, err = storage.AppendJSON(nil, map[string]any(m)); err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
	}
	obj, resultErrs, err := Decode(k, patched)
	if err != nil {
		if smp != nil {
			// Upstream converts a strategic merge's result to the Go
			// type, and names the patch (as Go prints its map) with the
			// converter's error; the other patches name their result.
			if cerr := runtime.DefaultUnstructuredConverter.FromUnstructured(smp, k.Typed()); cerr != nil {
				err = cerr
			}
			return nil, nil, invalidPatch(fmt.Sprintf("%v", p.fields), err)
		}
		return nil, nil, invalidPatch(string(patched), err)
	}
	strict := append(append([]error(nil), p.strict...), resultErrs...)
	if len(strict) > 0 && opts.Strict {
		if smp != nil {
			return nil, nil, invalidPatch(fmt.Sprintf("%v", p.fields), strictError(strict))
		}
		return nil, nil, invalidPatch(string(patched), strictError(strict))
	}
	return obj, strict, nil
}

// strictError joins strict decoding errors as kube-apiserver prints them.
func strictError(errs []error) error {
	msg := "strict decoding error: "
	for i, e := range errs {
		if i > 0 {
			msg += ", "
		}
		msg += e.Error()
	}
	return errors.New(msg)
}

// invalidPatch is the 422 of a patch whose result is not a valid object.
func invalidPatch(result string, err error) error {
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), result, err.Error())})
}

// strategicPatchError gives strategic merge patch errors their status.
func strategicPatchError(err error) error {
	switch {
	case errors.Is(err, mergepatch.ErrBadJSONDoc), errors.Is(err, mergepatch.ErrBadPatchFormatForPrimitiveList),
		errors.Is(err, mergepatch.ErrBadPatchFormatForRetainKeys), errors.Is(err, mergepatch.ErrBadPatchFormatForSetElementOrderList),
		errors.Is(err, mergepatch.ErrUnsupportedStrategicMergePatchFormat):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, mergepatch.ErrNoListOfLists), errors.Is(err, mergepatch.ErrPatchContentNotMatchRetainKeys):
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return apierrors.NewBadRequest(err.Error())
}

// yamlApplyError is the 400 of an apply configuration that yaml.Unmarshal
// refused. YAML that does not parse fails upstream's first check of an
// apply, in its words ("error encoding patch: yaml: line 1: ..."); YAML
// that is not an object fails later, in kplane's.
func yamlApplyError(err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "error converting YAML to JSON: "); ok {
		return apierrors.NewBadRequest("error encoding patch: " + msg)
	}
	return apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
}

// parseApply decodes an apply configuration (YAML or JSON).
func parseApply(k *Kind, version string, data []byte, opts PatchOptions) (*unstructured.Unstructured, []error, error) {
	applied := &unstructured.Unstructured{Object: map[string]any{}}
	m, plainJSON := applyJSON(data)
	if plainJSON {
		applied.Object = m
	} else if err := yaml.Unmarshal(data, &applied.Object); err != nil {
		return nil, nil, yamlApplyError(err)
	}
	if applied.Object == nil {
		return nil, nil, apierrors.NewBadRequest("error decoding YAML: the configuration is empty")
	}
	var strict []error
	if (opts.Strict || opts.Warn != nil) && !plainJSON { // applyJSON's have no repeated key
		if err := yaml.UnmarshalStrict(data, &map[string]any{}); err != nil {
			if opts.Strict {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding YAML: %v", err))
			}
			strict = append(strict, err)
		}
	}
	if err := checkApplyType(applied, k.GroupVersionKind(version)); err != nil {
		return nil, nil, err
	}
	return applied, strict, nil
}

// checkApplyType refuses an apply configuration of another type than
// want (400), in upstream's words: "invalid object type: apps/v1,
// Kind=Deployment"; a missing apiVersion shows as "/".
func checkApplyType(applied *unstructured.Unstructured, want schema.GroupVersionKind) error {
	got := schema.FromAPIVersionAndKind(applied.GetAPIVersion(), applied.GetKind())
	if got == want {
		return nil
	}
	return apierrors.NewBadRequest("invalid object type: " + got.String())
}

// applyJSON decodes an apply configuration sent as JSON, as client-go and
// kubectl send it, to what yaml.Unmarshal makes of it (numbers as
// float64), when the JSON is of a form that YAML reads exactly as JSON
// does: printable ASCII between tokens (spaces and newlines), strings of
// the characters (yamlRune) and escapes (yamlEscape) YAML reads as JSON
// does, integers of up to 15 digits (no "-0"), no repeated member and no
// "<<" key (YAML's merge key). false leaves the body to YAML; tests hold
// the two equal over random bodies and every character. YAML parsing was
// 30 % of a server-side apply's CPU, and half of it with a value of many
// lines.
func applyJSON(data []byte) (map[string]any, bool) {
	if len(data) == 0 || data[0] != '{' {
		return nil, false
	}
	inString, depth := false, 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\\' && inString:
			n := yamlEscape(data[i:])
			if n == 0 {
				return nil, false
			}
			i += n - 1
		case c >= utf8.RuneSelf && inString:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 || !yamlRune(r) {
				return nil, false
			}
			i += n - 1
		case c == '\\', c == '\n' && inString, c != '\n' && (c < 0x20 || c > 0x7e):
			return nil, false
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			if depth++; depth > 64 {
				return nil, false // YAML's parser has limits of its own
			}
		case c == '}' || c == ']':
			depth--
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(data) && (data[j] == '-' || data[j] >= '0' && data[j] <= '9' || data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] == '+') {
				j++
			}
			tok := data[i:j]
			if j-i > 15 || bytes.ContainsAny(tok, ".eE+") || bytes.HasPrefix(tok, []byte("-0")) || tok[0] == '-' && len(tok) == 1 {
				return nil, false
			}
			i = j - 1
		}
	}
	m, ok := storage.DecodeObjectNoDuplicates(data)
	if !ok || !yamlPlain(m) {
		return nil, false
	}
	return m, true
}

// yamlRune reports whether YAML reads r, written as it is in a
// double-quoted string, as JSON does: a character YAML counts printable,
// and not one it takes for a line break (U+0085, U+2028, U+2029, which it
// folds) or a byte-order mark.
func yamlRune(r rune) bool {
	switch {
	case r == 0x85, r == 0x2028, r == 0x2029, r == 0xfeff:
		return false
	case r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= utf8.MaxRune:
		return true
	}
	return false
}

// yamlEscape is the length of the escape that esc starts with, when
// YAML's double-quoted style reads it as JSON does: \" \\ \b \f \n \r \t,
// and \u with four hex digits that are not half of a surrogate pair
// (YAML refuses those, and \/). 0 for any other.
func yamlEscape(esc []byte) int {
	if len(esc) < 2 {
		return 0
	}
	switch esc[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(esc) < 6 {
			return 0
		}
		r, err := strconv.ParseUint(string(esc[2:6]), 16, 16)
		if err != nil || r >= 0xd800 && r <= 0xdfff {
			return 0
		}
		return 6
	}
	return 0
}

// yamlPlain converts v's integers to float64 in place, as encoding/json
// decodes numbers into an interface, and reports false for a "<<" key.
func yamlPlain(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "<<" {
				return false
			}
			if n, ok := e.(int64); ok {
				x[k] = float64(n)
			} else if !yamlPlain(e) {
				return false
			}
		}
	case []any:
		for i, e := range x {
			if n, ok := e.(int64); ok {
				x[i] = float64(n)
			} else if !yamlPlain(e) {
				return false
			}
		}
	case float64:
		return false // a fraction or an exponent: the scan lets none through
	}
	return true
}

// apply merges the applied configuration into cur for its manager.
func (r *Resource) apply(k *Kind, version string, cur, applied *unstructured.Unstructured, fm *managedfields.FieldManager, opts PatchOptions) (*unstructured.Unstructured, error) {
	// cur as a managedObject: the field manager reads its entries.
	out, err := fm.Apply(&managedObject{Unstructured: cur}, applied.DeepCopy(), opts.FieldManager, opts.Force)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return nil, err
		}
		// The configuration does not fit the kind's schema.
		return nil, apierrors.NewBadRequest(err.Error())
	}
	obj := out.(*unstructured.Unstructured)
	if k.Typed != nil {
		// Check field types through the Go type, as for any write. The
		// same bytes as obj.MarshalJSON (encoding/json and a newline),
		// by the fast encoder.
		data, err := storage.AppendJSON(make([]byte, 0, 2048), obj.Object)
		data = append(data, '\n')
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		normal, _, err := Decode(k, data)
		if err != nil {
			return nil, invalidPatch(string(data), err)
		}
		obj = normal
	}
	return obj, nil
}

// applyCreate creates ns/name from an apply configuration.
func (r *Resource) applyCreate(ctx context.Context, k *Kind, version, ns, name string, produce func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error), opts PatchOptions) (*unstructured.Unstructured, error) {
	live, _ := creater{}.New(k.GroupVersionKind(version))
	obj, err := produce(live.(*unstructured.Unstructured))
	if err != nil {
		return nil, err
	}
	if uid := obj.GetUID(); uid != "" {
		return nil, apierrors.NewConflict(k.GroupResource(), name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	}
	if err := checkURLName(obj.GetName(), name); err != nil {
		return nil, err
	}
	// System fields of the configuration don't survive a create.
	obj.SetResourceVersion("")
	obj.SetCreationTimestamp(metav1.Time{})
	w := opts.WriteOptions
	w.applied = true
	return r.Create(ctx, version, ns, obj, w)
}
