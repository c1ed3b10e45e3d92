package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// The /scale subresource of custom resources: an autoscaling/v1 Scale
// read from and written to the paths the CRD names.

var scaleKind = schema.GroupKind{Group: "autoscaling", Kind: "Scale"}

// scalePath splits ".spec.replicas" into its fields.
func scalePath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

// noReplicas stands for replicas the object does not have, in the Scale a
// write through /scale starts from, as upstream marks them: a write that
// leaves them so is refused.
const noReplicas = math.MinInt32

// scaleOf is obj's Scale; without replicas at the CRD's path, its
// replicas are 0 and found is false.
func scaleOf(sp *ScalePaths, obj *unstructured.Unstructured) (out *autoscalingv1.Scale, found bool, err error) {
	out = &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{
			Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(),
			ResourceVersion: obj.GetResourceVersion(), CreationTimestamp: obj.GetCreationTimestamp(),
		},
	}
	if v, ok, err := unstructured.NestedFieldNoCopy(obj.Object, scalePath(sp.SpecReplicas)...); err == nil && ok {
		n, ok := asInt(v)
		if !ok {
			return nil, false, fmt.Errorf("%s is not an integer: %v", sp.SpecReplicas, v)
		}
		out.Spec.Replicas = int32(n)
		found = true
	}
	if v, ok, err := unstructured.NestedFieldNoCopy(obj.Object, scalePath(sp.StatusReplicas)...); err == nil && ok {
		n, ok := asInt(v)
		if !ok {
			return nil, false, fmt.Errorf("%s is not an integer: %v", sp.StatusReplicas, v)
		}
		out.Status.Replicas = int32(n)
	}
	if sp.LabelSelector != "" {
		if v, ok, _ := unstructured.NestedString(obj.Object, scalePath(sp.LabelSelector)...); ok {
			out.Status.Selector = v
		}
	}
	return out, found, nil
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), float64(int64(n)) == n
	}
	return 0, false
}

// GetScale reads ns/name's Scale.
func (r *Resource) GetScale(ctx context.Context, version, ns, name string) (*autoscalingv1.Scale, error) {
	k := r.Kind()
	obj, err := r.Get(ctx, version, ns, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	sp := k.ScaleIn(version)
	if sp == nil {
		return nil, apierrors.NewNotFound(k.GroupResource(), name)
	}
	s, found, err := scaleOf(sp, obj)
	if err == nil && !found {
		err = fmt.Errorf("the spec replicas field %q does not exist", sp.SpecReplicas)
	}
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return s, nil
}

// UpdateScale sets ns/name's replicas from scale, which produce computes
// from the current Scale (so a patch is reapplied on retries). A
// resourceVersion in the result makes the write conditional. An object
// without replicas gives produce a Scale whose replicas are noReplicas,
// and a result that still has them is refused, as upstream's.
func (r *Resource) UpdateScale(ctx context.Context, version, ns, name string, opts WriteOptions, produce func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error)) (*autoscalingv1.Scale, error) {
	k := r.Kind()
	sp := k.ScaleIn(version)
	if sp == nil {
		return nil, apierrors.NewNotFound(k.GroupResource(), name)
	}
	opts.Subresource = "scale"
	fm, err := r.fieldManager(k, version, opts.Subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	// produce only reads cur: the new object is its own copy.
	out, _, err := r.update(ctx, k, version, ns, name, opts, false, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		curScale, found, err := scaleOf(sp, cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if !found {
			curScale.Spec.Replicas = noReplicas
		}
		want, err := produce(curScale)
		if err != nil {
			return nil, err
		}
		if want.Spec.Replicas == noReplicas {
			return nil, emptyReplicas(sp)
		}
		if err := checkURLName(want.Name, name); err != nil {
			return nil, err
		}
		if want.Spec.Replicas < 0 {
			return nil, apierrors.NewInvalid(scaleKind, name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), want.Spec.Replicas, "must be greater than or equal to 0")})
		}
		if want.ResourceVersion != "" && want.ResourceVersion != cur.GetResourceVersion() {
			return nil, apierrors.NewConflict(scaleGroupResource(k), name, errors.New(msgModified))
		}
		next := cur.DeepCopy()
		if err := unstructured.SetNestedField(next.Object, int64(want.Spec.Replicas), scalePath(sp.SpecReplicas)...); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return updateManagedFor(k, version, opts.Subresource, fm, cur, next, opts.FieldManager), nil
	})
	return scaleAnswer(sp, out, err)
}

// emptyReplicas refuses a write through /scale that leaves an object
// without replicas.
func emptyReplicas(sp *ScalePaths) error {
	return apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", sp.SpecReplicas))
}

// scaleAnswer is the Scale of out, the object a write through /scale
// left, or that write's error.
func scaleAnswer(sp *ScalePaths, out *unstructured.Unstructured, err error) (*autoscalingv1.Scale, error) {
	if err != nil {
		return nil, err
	}
	s, _, err := scaleOf(sp, out)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return s, nil
}

// scaleGroupResource is the resource a scale conflict names upstream.
func scaleGroupResource(k *Kind) schema.GroupResource {
	return schema.GroupResource{Group: k.Group, Resource: k.Resource}
}

// ScalePatchTypes are the patch media types /scale accepts: the Scale
// is a Go type, so strategic merge patches too.
var ScalePatchTypes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)}

// PatchScale applies a JSON, merge or strategic merge patch to ns/name's
// Scale, then updates as UpdateScale; or applies a Scale configuration
// (server-side apply, see applyScale).
func (r *Resource) PatchScale(ctx context.Context, version, ns, name string, data []byte, opts PatchOptions) (*autoscalingv1.Scale, error) {
	var patch func(cur []byte) ([]byte, error)
	switch opts.Type {
	case types.ApplyYAMLPatchType:
		return r.applyScale(ctx, version, ns, name, data, opts)
	case types.JSONPatchType:
		ops, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		patch = func(cur []byte) ([]byte, error) {
			out, err := ops.Apply(cur)
			if err != nil {
				return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
			}
			return out, nil
		}
	case types.MergePatchType:
		patch = func(cur []byte) ([]byte, error) {
			out, err := jsonpatch.MergePatch(cur, data)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			return out, nil
		}
	case types.StrategicMergePatchType:
		patch = func(cur []byte) ([]byte, error) {
			out, err := strategicpatch.StrategicMergePatch(cur, data, &autoscalingv1.Scale{})
			if err != nil {
				return nil, strategicPatchError(err)
			}
			return out, nil
		}
	default:
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(ScalePatchTypes, ", "),
		}}
	}
	return r.UpdateScale(ctx, version, ns, name, opts.WriteOptions, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		curJSON, err := json.Marshal(cur)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		patched, err := patch(curJSON)
		if err != nil {
			return nil, err
		}
		out := &autoscalingv1.Scale{}
		if err := json.Unmarshal(patched, out); err != nil {
			return nil, invalidPatch(string(patched), err)
		}
		return out, nil
	})
}

// applyScale applies a Scale configuration to ns/name for opts's field
// manager: the configuration's spec.replicas becomes an apply
// configuration of the object's replicas path, applied through the
// "scale" subresource's field manager. Its managedFields then read as
// upstream's: the manager's entry has subresource "scale" and owns the
// replicas path, and a replicas value owned by another manager is a
// conflict unless forced. Other fields of the configuration are ignored,
// as they are upstream (only the replicas reach the object); a
// resourceVersion makes the apply conditional. Replicas the configuration
// leaves out and the manager owned are given up, and then, as upstream
// writes the Scale's int32 into the object, are 0; an object left without
// replicas is refused.
func (r *Resource) applyScale(ctx context.Context, version, ns, name string, data []byte, opts PatchOptions) (*autoscalingv1.Scale, error) {
	k := r.Kind()
	sp := k.ScaleIn(version)
	if sp == nil {
		return nil, apierrors.NewNotFound(k.GroupResource(), name)
	}
	var config map[string]any
	if err := yaml.Unmarshal(data, &config); err != nil {
		return nil, yamlApplyError(err)
	}
	if config == nil {
		return nil, apierrors.NewBadRequest("error decoding YAML: the configuration is empty")
	}
	applied := &unstructured.Unstructured{Object: config}
	// Refused once the object is found: upstream answers a missing one
	// first.
	typeErr := checkApplyType(applied, autoscalingv1.SchemeGroupVersion.WithKind("Scale"))
	// A configuration may leave the name out: it is the URL's.
	if n := applied.GetName(); n != "" {
		if err := checkURLName(n, name); err != nil {
			return nil, err
		}
	}
	parent := &unstructured.Unstructured{Object: map[string]any{}}
	parent.SetAPIVersion(k.GroupVersionKind(version).GroupVersion().String())
	parent.SetKind(k.Kind)
	parent.SetName(name)
	if ns != "" {
		parent.SetNamespace(ns)
	}
	parent.SetResourceVersion(applied.GetResourceVersion())
	if v, ok, _ := unstructured.NestedFieldNoCopy(config, "spec", "replicas"); ok {
		n, isInt := asInt(v)
		if !isInt || n != int64(int32(n)) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("Scale in version \"v1\" cannot be handled as a Scale: spec.replicas: %v is not a 32-bit integer", v))
		}
		if n < 0 {
			return nil, apierrors.NewInvalid(scaleKind, name, field.ErrorList{
				field.Invalid(field.NewPath("spec", "replicas"), n, "must be greater than or equal to 0")})
		}
		if err := unstructured.SetNestedField(parent.Object, n, scalePath(sp.SpecReplicas)...); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	opts.Subresource = "scale"
	opts.patch = true
	fm, err := r.fieldManager(k, version, opts.Subresource)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	replicas := scalePath(sp.SpecReplicas)
	out, _, err := r.update(ctx, k, version, ns, name, opts.WriteOptions, true, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if typeErr != nil {
			return nil, typeErr
		}
		next, err := r.apply(k, version, cur, parent, fm, opts)
		if err != nil {
			return nil, err
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(next.Object, replicas...); !ok {
			if _, had, _ := unstructured.NestedFieldNoCopy(cur.Object, replicas...); !had {
				return nil, emptyReplicas(sp)
			}
			if err := unstructured.SetNestedField(next.Object, int64(0), replicas...); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
		}
		return next, nil
	})
	return scaleAnswer(sp, out, asScaleConflict(k, err))
}

// asScaleConflict words err, a Scale apply's conflict, as upstream's: its
// scale handler applies the Scale itself over the owners' entries turned
// into Scale entries, so conflicts name .spec.replicas in
// autoscaling/v1, where kplane applies the replicas path of the object.
func asScaleConflict(k *Kind, err error) error {
	var st *apierrors.StatusError
	if !errors.As(err, &st) || st.ErrStatus.Reason != metav1.StatusReasonConflict || st.ErrStatus.Details == nil {
		return err
	}
	var pairs []string
	for _, v := range k.Versions {
		pairs = append(pairs, " using "+k.GroupVersionKind(v).GroupVersion().String(), " using autoscaling/v1")
		if sp := k.ScaleIn(v); sp != nil && sp.SpecReplicas != ".spec.replicas" {
			pairs = append(pairs, sp.SpecReplicas, ".spec.replicas")
		}
	}
	words := strings.NewReplacer(pairs...)
	out := st.ErrStatus
	out.Message = words.Replace(out.Message)
	details := *out.Details
	details.Causes = slices.Clone(details.Causes)
	for i := range details.Causes {
		c := &details.Causes[i]
		c.Field, c.Message = words.Replace(c.Field), words.Replace(c.Message)
	}
	out.Details = &details
	return &apierrors.StatusError{ErrStatus: out}
}
