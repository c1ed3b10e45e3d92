package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// conversionTimeout bounds a conversion webhook's call, as upstream's
// webhook clients are bounded.
const conversionTimeout = 30 * time.Second

// Conversions calls CRDs' conversion webhooks: the registry's Converter.
// The zero value is ready.
type Conversions struct {
	clients clientCache
	metrics conversionMetrics
}

var _ registry.Converter = (*Conversions)(nil)

// Convert sends objs to k's conversion webhook in a ConversionReview (the
// first of the CRD's conversionReviewVersions kplane speaks, v1 or
// v1beta1) asking for version v, and checks what it answers as upstream
// does: the converted objects in order, in v, of the same kind, name,
// namespace and uid; of their metadata only labels and annotations may
// change (and must be valid), the rest is the original's. Errors are
// worded as upstream's.
func (c *Conversions) Convert(ctx context.Context, k *registry.Kind, objs []*unstructured.Unstructured, v string) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, len(objs))
	var send []*unstructured.Unstructured
	var at []int
	for i, o := range objs {
		if bare(o) {
			// Nothing to convert, as upstream's converter skips it.
			out[i] = o.DeepCopy()
			out[i].SetAPIVersion(k.GroupVersionKind(v).GroupVersion().String())
			continue
		}
		send, at = append(send, o), append(at, i)
	}
	if len(send) == 0 {
		return out, nil
	}
	got, err := c.call(ctx, k, send, v)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = got[j]
	}
	return out, nil
}

// bare reports whether obj has nothing but apiVersion and kind.
func bare(obj *unstructured.Unstructured) bool {
	_, kind := obj.Object["kind"]
	_, version := obj.Object["apiVersion"]
	return len(obj.Object) == 2 && kind && version
}

// call converts objs (at least one) by the webhook of k.
func (c *Conversions) call(ctx context.Context, k *registry.Kind, objs []*unstructured.Unstructured, v string) (_ []*unstructured.Unstructured, err error) {
	from := objs[0].GroupVersionKind()
	failed := func(err error) error { return fmt.Errorf("conversion webhook for %v failed: %v", from, err) }
	cfg := k.ConversionWebhook
	review := reviewVersion(cfg.ConversionReviewVersions)
	if review == "" {
		return nil, errors.New("no supported conversion review versions")
	}
	// Measured from here, as upstream's: failure is what an error
	// returned at this stage counts as.
	start, failure := time.Now(), failureCall
	defer func() {
		if err == nil {
			failure = ""
		}
		c.metrics.observe(k.Resource+"."+k.Group, from.Version, v, failure, time.Since(start))
	}()
	desired := k.GroupVersionKind(v).GroupVersion()
	uid := types.UID(uuid.NewUUID())
	body, err := conversionRequest(review, uid, desired.String(), objs)
	if err != nil {
		return nil, failed(err)
	}
	cc := clientConfig(cfg)
	target, serverName, err := location(cc)
	if err != nil {
		return nil, failed(err)
	}
	client, err := c.clients.get(cc.CABundle, serverName, nil) // upstream calls conversion webhooks anonymously
	if err != nil {
		return nil, failed(err)
	}
	ctx, cancel := context.WithTimeout(ctx, conversionTimeout)
	defer cancel()
	q := target.Query()
	q.Set("timeout", conversionTimeout.String())
	target.RawQuery = q.Encode()
	var resp apiextensionsv1.ConversionReview
	if err := post(ctx, client, target.String(), "kplane-conversion", nil, body, &resp); err != nil {
		return nil, failed(err)
	}
	failure = failureMalformed
	converted, err := convertedObjects(review, uid, &resp)
	if err != nil {
		return nil, failed(err)
	}
	failure = failurePartial
	if len(converted) != len(objs) {
		return nil, fmt.Errorf("conversion webhook for %v returned %d objects, expected %d", from, len(converted), len(objs))
	}
	// Upstream converts one object at a time on reads, a list's items
	// together otherwise, and words the two apart.
	invalid := func(i int, err error) error {
		if len(objs) == 1 {
			return fmt.Errorf("conversion webhook for %v returned invalid object at index 0: %v", from, err)
		}
		return fmt.Errorf("conversion webhook for %v returned invalid converted object at index %v: %v", from, i, err)
	}
	failure = failureInvalidObject
	out := make([]*unstructured.Unstructured, len(objs))
	for i, raw := range converted {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw.Raw); err != nil {
			if len(objs) == 1 {
				return nil, err
			}
			return nil, invalid(i, err)
		}
		if got := u.GroupVersionKind().GroupVersion(); got != desired {
			return nil, invalid(i, fmt.Errorf("invalid groupVersion (expected %v, received %v)", desired, got))
		}
		if want, got := objs[i].GetKind(), u.GetKind(); want != got {
			return nil, invalid(i, fmt.Errorf("invalid kind (expected %v, received %v)", want, got))
		}
		if err := sameIdentity(objs[i], u); err != nil {
			if len(objs) == 1 {
				return nil, fmt.Errorf("conversion webhook for %v returned invalid object: %v", from, err)
			}
			return nil, invalid(i, err)
		}
		if err := keepMetadata(objs[i], u); err != nil {
			if len(objs) == 1 {
				return nil, fmt.Errorf("conversion webhook for %v returned invalid metadata: %v", from, err)
			}
			return nil, fmt.Errorf("conversion webhook for %v returned invalid metadata in object at index %v: %v", from, i, err)
		}
		out[i] = u
	}
	return out, nil
}

// clientConfig is a CRD's webhook client configuration in the form
// admission webhooks have (the same fields); a caBundle of only spaces is
// none, as upstream reads it.
func clientConfig(w *apiextensionsv1.WebhookConversion) admissionregistrationv1.WebhookClientConfig {
	var cc admissionregistrationv1.WebhookClientConfig
	c := w.ClientConfig
	if c == nil {
		return cc
	}
	cc.URL = c.URL
	if len(bytes.TrimSpace(c.CABundle)) > 0 {
		cc.CABundle = c.CABundle
	}
	if s := c.Service; s != nil {
		cc.Service = &admissionregistrationv1.ServiceReference{Namespace: s.Namespace, Name: s.Name, Path: s.Path, Port: s.Port}
	}
	return cc
}

// conversionRequest is the ConversionReview asking for objs in
// apiVersion desired, in review version review. The empty response
// member is upstream's too.
func conversionRequest(review string, uid types.UID, desired string, objs []*unstructured.Unstructured) ([]byte, error) {
	raws := make([]runtime.RawExtension, len(objs))
	for i, o := range objs {
		data, err := o.MarshalJSON()
		if err != nil {
			return nil, err
		}
		raws[i] = runtime.RawExtension{Raw: data}
	}
	return json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.GroupName + "/" + review, Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: uid, DesiredAPIVersion: desired, Objects: raws},
		Response: &apiextensionsv1.ConversionResponse{},
	})
}

// convertedObjects checks a webhook's ConversionReview as upstream does
// by the review version sent (v1beta1's answers had no kind or uid
// checked) and returns its converted objects.
func convertedObjects(review string, uid types.UID, r *apiextensionsv1.ConversionReview) ([]runtime.RawExtension, error) {
	if review == "v1" {
		want := apiextensionsv1.SchemeGroupVersion.WithKind("ConversionReview")
		if got := r.GroupVersionKind(); got != want {
			return nil, fmt.Errorf("expected webhook response of %v, got %v", want, got)
		}
	}
	resp := r.Response
	if resp == nil {
		return nil, errors.New("no response provided")
	}
	if review == "v1" && resp.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, resp.UID)
	}
	if resp.Result.Status != metav1.StatusSuccess {
		if resp.Result.Message != "" {
			return nil, errors.New(resp.Result.Message)
		}
		return nil, fmt.Errorf("response.result.status was '%s', not 'Success'", resp.Result.Status)
	}
	return resp.ConvertedObjects, nil
}

// sameIdentity checks that a webhook kept what names the object.
func sameIdentity(in, out *unstructured.Unstructured) error {
	for _, f := range []struct {
		what      string
		want, got string
	}{
		{"kind", in.GetKind(), out.GetKind()},
		{"name", in.GetName(), out.GetName()},
		{"namespace", in.GetNamespace(), out.GetNamespace()},
		{"UID", string(in.GetUID()), string(out.GetUID())},
	} {
		if f.want != f.got {
			return fmt.Errorf("must have the same %s: %v != %v", f.what, f.want, f.got)
		}
	}
	return nil
}

// keepMetadata gives out, a converted object, the metadata of in, its
// original, but for the labels and annotations out has: those a webhook
// may change, and, when it did, must be valid.
func keepMetadata(in, out *unstructured.Unstructured) error {
	md, ok := out.Object["metadata"]
	if !ok {
		return errors.New("missing metadata in converted object")
	}
	sent, ok := md.(map[string]any)
	if !ok {
		return fmt.Errorf("invalid metadata of type %T in converted object", md)
	}
	kept := map[string]any{}
	if orig, ok := in.Object["metadata"]; ok {
		m, ok := runtime.DeepCopyJSONValue(orig).(map[string]any)
		if !ok {
			return fmt.Errorf("invalid metadata of type %T in input object", orig)
		}
		kept = m
	}
	for _, member := range []string{"labels", "annotations"} {
		got, ok := sent[member]
		if !ok || got == nil {
			delete(kept, member)
			continue
		}
		gotMap, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("invalid metadata.%s of type %T in converted object", member, got)
		}
		had, ok := kept[member].(map[string]any)
		if !ok && kept[member] != nil {
			return fmt.Errorf("invalid metadata.%s of type %T in original object", member, kept[member])
		}
		changed := len(had) != len(gotMap)
		strs := make(map[string]string, len(gotMap))
		for key, val := range gotMap {
			s, ok := val.(string)
			if !ok {
				return fmt.Errorf("metadata.%s[%s] must be a string, but is %T in converted object", member, key, val)
			}
			if prev, ok := had[key].(string); !ok || prev != s {
				changed = true
			}
			strs[key] = s
		}
		if changed {
			var errs field.ErrorList
			if member == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
			} else {
				// Upstream's path, singular.
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotation"))
			}
			if len(errs) > 0 {
				return errs.ToAggregate()
			}
		}
		kept[member] = gotMap
	}
	out.Object["metadata"] = kept
	return nil
}
