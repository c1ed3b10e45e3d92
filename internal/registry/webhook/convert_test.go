package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
	"github.com/kplane-dev/kplane/internal/storage"
)

// converter is a conversion webhook server for Widgets: v1 has
// spec.image and spec.replicas, v2 has them under spec.template. It records every review
// and answers by path: /convert, /fail (a Failure result), /label (also
// sets a label and the generation), /rename (also renames the object),
// /v1beta1 (answers with another uid, which v1beta1 reviews may), /slow
// (after 200 ms).
type converter struct {
	*httptest.Server
	mu      sync.Mutex
	reviews []apiextensionsv1.ConversionReview
}

func newConverter(t testing.TB) *converter {
	c := &converter{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rev apiextensionsv1.ConversionReview
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.reviews = append(c.reviews, rev)
		c.mu.Unlock()
		resp := &apiextensionsv1.ConversionResponse{UID: rev.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range rev.Request.Objects {
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(raw.Raw); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, f := range []string{"image", "replicas"} {
				if strings.HasSuffix(rev.Request.DesiredAPIVersion, "/v2") {
					if v, ok, _ := unstructured.NestedFieldCopy(obj.Object, "spec", f); ok {
						unstructured.RemoveNestedField(obj.Object, "spec", f)
						unstructured.SetNestedField(obj.Object, v, "spec", "template", f)
					}
				} else if v, ok, _ := unstructured.NestedFieldCopy(obj.Object, "spec", "template", f); ok {
					unstructured.RemoveNestedField(obj.Object, "spec", "template", f)
					unstructured.SetNestedField(obj.Object, v, "spec", f)
				}
			}
			if t, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template"); ok && len(t) == 0 {
				unstructured.RemoveNestedField(obj.Object, "spec", "template")
			}
			obj.SetAPIVersion(rev.Request.DesiredAPIVersion)
			switch r.URL.Path {
			case "/label":
				obj.SetLabels(map[string]string{"converted-to": strings.ReplaceAll(rev.Request.DesiredAPIVersion, "/", ".")})
				obj.SetGeneration(99)
			case "/rename":
				obj.SetName("other")
			}
			data, _ := obj.MarshalJSON()
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: data})
		}
		switch r.URL.Path {
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		case "/fail":
			resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "not today"}
		case "/v1beta1":
			resp.UID = "another"
		}
		rev.Request, rev.Response = nil, resp
		json.NewEncoder(w).Encode(&rev)
	}))
	c.Config.ErrorLog = log.New(io.Discard, "", 0)
	c.StartTLS()
	t.Cleanup(c.Close)
	return c
}

func (c *converter) got() []apiextensionsv1.ConversionReview {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]apiextensionsv1.ConversionReview(nil), c.reviews...)
}

// widgets serves Widgets (stored in v1, served in v1 and v2) converted by
// c's webhook at path, with review version review.
func (c *converter) widgets(t testing.TB, path, review string) (context.Context, *registry.Resource) {
	t.Helper()
	return c.serve(t, c.widgetKind(path, review))
}

// serve serves kind k in a registry of its own, converting by webhooks.
func (c *converter) serve(t testing.TB, k *registry.Kind) (context.Context, *registry.Resource) {
	t.Helper()
	ctx, reg, _ := newRegistry(t, func(*registry.Registry) []*registry.Kind { return []*registry.Kind{k} })
	res, _ := reg.Get(k.GroupResource())
	return ctx, res
}

// widgetKind is the Widget kind, converted by c's webhook at path with
// review version review.
func (c *converter) widgetKind(path, review string) *registry.Kind {
	url := c.URL + path
	return &registry.Kind{Group: "conv.example.com", Versions: []string{"v1", "v2"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Namespaced: true, Generation: true,
		Scale:        &registry.ScalePaths{SpecReplicas: ".spec.replicas"},
		VersionScale: map[string]*registry.ScalePaths{"v2": {SpecReplicas: ".spec.template.replicas"}},
		ConversionWebhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				URL:      &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate().Raw}),
			},
			ConversionReviewVersions: []string{review},
		}}
}

func widget(version, name, image string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "conv.example.com/" + version, "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": "default"},
	}}
	if version == "v1" {
		unstructured.SetNestedField(obj.Object, image, "spec", "image")
	} else {
		unstructured.SetNestedField(obj.Object, image, "spec", "template", "image")
	}
	return obj
}

// image is the image of a Widget in its version's shape, and "" when the
// object is not in that shape.
func image(obj *unstructured.Unstructured) string {
	path := []string{"spec", "template", "image"}
	if obj.GetAPIVersion() == "conv.example.com/v1" {
		path = []string{"spec", "image"}
	}
	s, _, _ := unstructured.NestedString(obj.Object, path...)
	return s
}

// Every read and write in a version other than the storage version goes
// through the webhook: writes are stored converted, reads answered
// converted (a list's items in one review), watches see converted
// objects, and an object in the requested version already is not sent.
func TestConversionWebhookConvertsReadsAndWrites(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/convert", "v1")
	created, err := res.Create(ctx, "v2", "default", widget("v2", "a", "nginx:1"), registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetAPIVersion() != "conv.example.com/v2" || image(created) != "nginx:1" {
		t.Errorf("created %s with image %q, want v2 with nginx:1", created.GetAPIVersion(), image(created))
	}
	stored, err := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{})
	if err != nil || image(stored) != "nginx:1" {
		t.Fatalf("stored in v1: image %q (%v), want nginx:1", image(stored), err)
	}
	if _, err := res.Create(ctx, "v1", "default", widget("v1", "b", "redis:7"), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := len(c.got())
	if _, err := res.Get(ctx, "v1", "default", "b", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.got()); n != before {
		t.Errorf("a read in the storage version sent %d reviews, want none", n-before)
	}
	list, err := res.List(ctx, "v2", "default", registry.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || image(&list.Items[0]) != "nginx:1" || image(&list.Items[1]) != "redis:7" || list.Items[1].GetAPIVersion() != "conv.example.com/v2" {
		t.Errorf("list in v2: %v", list.Items)
	}
	reviews := c.got()
	last := reviews[len(reviews)-1].Request
	if len(last.Objects) != 1 || last.DesiredAPIVersion != "conv.example.com/v2" {
		t.Errorf("the list sent %d objects for %s, want only b's (a's conversion is remembered from the create's answer)", len(last.Objects), last.DesiredAPIVersion)
	}
	// What was converted is remembered, by resourceVersion, as
	// upstream's per-version caches convert each change once.
	before = len(c.got())
	again, err := res.List(ctx, "v2", "default", registry.ListOptions{})
	if err != nil || len(again.Items) != 2 || image(&again.Items[1]) != "redis:7" {
		t.Fatalf("second list in v2: %v (%v)", again, err)
	}
	if _, err := res.Get(ctx, "v2", "default", "a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.got()); n != before {
		t.Errorf("reading unchanged objects again in v2 sent %d reviews, want none", n-before)
	}

	w, err := res.Watch(ctx, "v2", "default", registry.ListOptions{ListOptions: storage.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cur, _ := res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})
	next := cur.DeepCopy()
	unstructured.SetNestedField(next.Object, "nginx:2", "spec", "template", "image")
	updated, err := res.Update(ctx, "v2", "default", "a", next, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if image(updated) != "nginx:2" || updated.GetGeneration() != 2 {
		t.Errorf("updated: image %q, generation %d; want nginx:2, 2", image(updated), updated.GetGeneration())
	}
	if stored, _ := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{}); image(stored) != "nginx:2" {
		t.Errorf("stored after the update in v2: image %q", image(stored))
	}
	select {
	case ev := <-w.ResultChan():
		obj, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Modified || obj == nil || obj.GetAPIVersion() != "conv.example.com/v2" || image(obj) != "nginx:2" {
			t.Errorf("watch in v2 saw %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch in v2 saw nothing")
	}

	dry, err := res.Create(ctx, "v2", "default", widget("v2", "dry", "busybox"), registry.WriteOptions{DryRun: true})
	if err != nil || image(dry) != "busybox" || dry.GetAPIVersion() != "conv.example.com/v2" {
		t.Errorf("dry run in v2: %v %v", dry, err)
	}
	reviews = c.got()
	if n := len(reviews); n < 2 || reviews[n-2].Request.DesiredAPIVersion != "conv.example.com/v1" || reviews[n-1].Request.DesiredAPIVersion != "conv.example.com/v2" {
		t.Errorf("a dry run is converted to the storage version and back, as upstream's; the last reviews: %v", reviews[max(0, n-2):])
	}
	if _, _, err := res.Delete(ctx, "v2", "default", "a", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete in v2: %v, want not found", err)
	}
}

// A webhook that fails fails the request in another version with
// upstream's words, and nothing is written or deleted; the storage
// version is served still.
func TestConversionWebhookFailures(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/fail", "v1")
	stored, err := res.Create(ctx, "v1", "default", widget("v1", "a", "nginx:1"), registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const failed = "conversion webhook for conv.example.com/v1, Kind=Widget failed: not today"
	read := "Internal error occurred: StorageError: corrupt object, Code: 7, Key: /conv.example.com/widgets/default/a, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=" + stored.GetResourceVersion() + ": " + failed
	for _, tc := range []struct {
		what string
		err  error
		want string
	}{
		{"get", second(res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})), read},
		{"list", second(res.List(ctx, "v2", "default", registry.ListOptions{})), failed},
		{"create", second(res.Create(ctx, "v2", "default", widget("v2", "b", "x"), registry.WriteOptions{})),
			"conversion webhook for conv.example.com/v2, Kind=Widget failed: not today"},
		{"update", second(res.Update(ctx, "v2", "default", "a", widget("v2", "a", "x"), registry.WriteOptions{})),
			"object not decodable revision=" + stored.GetResourceVersion() + ": " + failed},
		{"delete", third(res.Delete(ctx, "v2", "default", "a", metav1.DeleteOptions{}, registry.WriteOptions{})), read},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s in v2: %v\nwant %s", tc.what, tc.err, tc.want)
		}
		if code := statusCode(tc.err); code != http.StatusInternalServerError {
			t.Errorf("%s in v2: code %d, want 500", tc.what, code)
		}
	}
	got, err := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{})
	if err != nil || image(got) != "nginx:1" || got.GetResourceVersion() != stored.GetResourceVersion() {
		t.Errorf("after the failures the object is %v (%v), want it as created", got, err)
	}
	if _, err := res.Get(ctx, "v1", "default", "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the create that failed wrote b: %v", err)
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

// A webhook may change labels and annotations and nothing else of the
// metadata: the rest is the original's, and a changed name fails (words
// for one object and for a list's items, as upstream's).
func TestConversionWebhookChangesOnlyLabelsAndAnnotations(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/label", "v1")
	if _, err := res.Create(ctx, "v1", "default", widget("v1", "a", "nginx:1"), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["converted-to"] != "conv.example.com.v2" || got.GetGeneration() != 1 {
		t.Errorf("converted by /label: labels %v, generation %d; want the webhook's label and generation 1", got.GetLabels(), got.GetGeneration())
	}

	ctx, res = c.widgets(t, "/rename", "v1")
	for _, name := range []string{"a", "b"} {
		if _, err := res.Create(ctx, "v1", "default", widget("v1", name, "nginx:1"), registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})
	if one := "returned invalid object: must have the same name: a != other"; err == nil || !strings.HasSuffix(err.Error(), one) {
		t.Errorf("get converted by /rename: %v, want ...%s", err, one)
	}
	_, err = res.List(ctx, "v2", "default", registry.ListOptions{})
	const want = "conversion webhook for conv.example.com/v1, Kind=Widget returned invalid converted object at index 0: must have the same name: a != other"
	if err == nil || err.Error() != want {
		t.Errorf("list converted by /rename: %v\nwant %s", err, want)
	}
}

// A v1beta1 ConversionReview is sent to a webhook that asks for it, and
// its answer's uid is not checked, as upstream's.
func TestConversionWebhookV1beta1(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/v1beta1", "v1beta1")
	if _, err := res.Create(ctx, "v1", "default", widget("v1", "a", "nginx:1"), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})
	if err != nil || image(got) != "nginx:1" {
		t.Fatalf("read in v2: %v (%v)", got, err)
	}
	reviews := c.got()
	if len(reviews) == 0 || reviews[0].APIVersion != "apiextensions.k8s.io/v1beta1" {
		t.Errorf("reviews sent: %v, want v1beta1", reviews)
	}
}

// An admission webhook whose rule names another version of a kind with a
// conversion webhook (matchPolicy Equivalent, the default) sees the
// objects converted to that version, as kube-apiserver v1.37.2's did.
func TestAdmissionSeesObjectsConvertedToItsVersion(t *testing.T) {
	c := newConverter(t)
	e := newEnv(t, c.widgetKind("/convert", "v1"))
	e.configure("Validating", "widgets-v1", map[string]any{"name": "v1.widgets.example.com", "path": "/allow",
		"rules": []any{map[string]any{"operations": []any{"CREATE", "UPDATE"}, "apiGroups": []any{"conv.example.com"}, "apiVersions": []any{"v1"}, "resources": []any{"widgets"}}},
	})
	res := e.res("conv.example.com", "widgets")
	created, err := res.Create(e.ctx, "v2", "default", widget("v2", "a", "nginx:1"), registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := created.DeepCopy()
	unstructured.SetNestedField(next.Object, "nginx:2", "spec", "template", "image")
	if _, err := res.Update(e.ctx, "v2", "default", "a", next, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	revs := e.srv.got("/allow")
	if len(revs) != 2 {
		t.Fatalf("%d reviews, want the create's and the update's", len(revs))
	}
	for i, want := range []struct{ obj, old string }{{"nginx:1", ""}, {"nginx:2", "nginx:1"}} {
		req := revs[i].Request
		if req.Kind.Version != "v1" || req.RequestKind.Version != "v2" {
			t.Errorf("review %d: kind %v, requestKind %v; want v1 and v2", i, req.Kind, req.RequestKind)
		}
		obj := decode(t, req.Object.Raw)
		if obj.GetAPIVersion() != "conv.example.com/v1" || image(obj) != want.obj {
			t.Errorf("review %d shows %s, want a v1 Widget of image %s", i, req.Object.Raw, want.obj)
		}
		if want.old != "" {
			if old := decode(t, req.OldObject.Raw); old.GetAPIVersion() != "conv.example.com/v1" || image(old) != want.old {
				t.Errorf("review %d shows old %s, want a v1 Widget of image %s", i, req.OldObject.Raw, want.old)
			}
		}
	}
}

// A /scale in v2 reads and writes v2's replicas path of the object
// converted to v2, as upstream's per-version scale subresource does.
func TestConversionWebhookScaleInEachVersion(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/convert", "v1")
	w := widget("v1", "a", "nginx:1")
	unstructured.SetNestedField(w.Object, int64(2), "spec", "replicas")
	if _, err := res.Create(ctx, "v1", "default", w, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"v1", "v2"} {
		s, err := res.GetScale(ctx, v, "default", "a")
		if err != nil || s.Spec.Replicas != 2 {
			t.Errorf("scale in %s: %v (%v), want 2 replicas", v, s, err)
		}
	}
	s, err := res.UpdateScale(ctx, "v2", "default", "a", registry.WriteOptions{}, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		next := cur.DeepCopy()
		next.Spec.Replicas = 7
		return next, nil
	})
	if err != nil || s.Spec.Replicas != 7 {
		t.Fatalf("scale update in v2: %v (%v)", s, err)
	}
	stored, _ := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{})
	if n, _, _ := unstructured.NestedInt64(stored.Object, "spec", "replicas"); n != 7 || image(stored) != "nginx:1" {
		t.Errorf("stored after the scale in v2: %v", stored.Object["spec"])
	}
}

// Readers of one object in a version not stored, at once (the watchers of
// that version, each given the same event), wait for one conversion
// rather than each call the webhook.
func TestConversionWebhookOneCallForConcurrentReaders(t *testing.T) {
	c := newConverter(t)
	ctx, res := c.widgets(t, "/slow", "v1")
	if _, err := res.Create(ctx, "v1", "default", widget("v1", "a", "nginx:1"), registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	const readers = 10
	var wg sync.WaitGroup
	images := make([]string, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj, err := res.Get(ctx, "v2", "default", "a", metav1.GetOptions{})
			if err == nil {
				images[i] = image(obj)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i := range readers {
		if errs[i] != nil || images[i] != "nginx:1" {
			t.Errorf("reader %d: image %q (%v)", i, images[i], errs[i])
		}
	}
	if n := len(c.got()); n != 1 {
		t.Errorf("%d concurrent reads sent %d reviews, want 1", readers, n)
	}
}

// A field selector in a version not stored selects by that version's
// fields, read from the objects converted to it, as upstream's
// per-version caches select: lists and watches.
func TestConversionWebhookFieldSelectorsInEachVersion(t *testing.T) {
	c := newConverter(t)
	k := c.widgetKind("/convert", "v1")
	k.Fields = func(obj *unstructured.Unstructured) fields.Set {
		set := fields.Set{"spec.image": "", "spec.template.image": ""}
		if v, ok, _ := unstructured.NestedString(obj.Object, "spec", "image"); ok {
			set["spec.image"] = v
		}
		if v, ok, _ := unstructured.NestedString(obj.Object, "spec", "template", "image"); ok {
			set["spec.template.image"] = v
		}
		return set
	}
	k.VersionFields = map[string][]string{"v1": {"spec.image"}, "v2": {"spec.template.image"}}
	ctx, res := c.serve(t, k)
	for _, w := range []*unstructured.Unstructured{widget("v1", "a", "nginx:1"), widget("v1", "b", "redis:7")} {
		if _, err := res.Create(ctx, "v1", "default", w, registry.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	selecting := func(sel string) registry.ListOptions {
		return registry.ListOptions{ListOptions: storage.ListOptions{Predicate: storage.Predicate{Field: fields.ParseSelectorOrDie(sel)}}}
	}
	list, err := res.List(ctx, "v2", "default", selecting("spec.template.image=redis:7"))
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "b" || image(&list.Items[0]) != "redis:7" {
		t.Fatalf("list in v2 by spec.template.image: %v (%v), want b", list, err)
	}
	w, err := res.Watch(ctx, "v2", "default", selecting("spec.template.image=nginx:2"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cur, _ := res.Get(ctx, "v1", "default", "a", metav1.GetOptions{})
	unstructured.SetNestedField(cur.Object, "nginx:2", "spec", "image")
	if _, err := res.Update(ctx, "v1", "default", "a", cur, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				continue
			}
			obj, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type != watch.Added || obj == nil || obj.GetName() != "a" || image(obj) != "nginx:2" {
				t.Errorf("watch in v2 by spec.template.image saw %s %#v, want a added (now selected)", ev.Type, ev.Object)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("the watch in v2 by spec.template.image saw nothing")
		}
	}
}

// Each call is counted as kube-apiserver counts it: by result and failure
// type, and by CRD and the versions converted from and to.
func TestConversionWebhookMetrics(t *testing.T) {
	c := newConverter(t)
	ctx := context.Background()
	conv := &webhook.Conversions{}
	objs := []*unstructured.Unstructured{widget("v1", "a", "nginx:1")}
	if _, err := conv.Convert(ctx, c.widgetKind("/convert", "v1"), objs, "v2"); err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Convert(ctx, c.widgetKind("/fail", "v1"), objs, "v2"); err == nil {
		t.Fatal("the /fail conversion succeeded")
	}
	if _, err := conv.Convert(ctx, c.widgetKind("/rename", "v1"), objs, "v2"); err == nil {
		t.Fatal("the /rename conversion succeeded")
	}
	count := func(s webhook.Series) (n uint64) {
		for _, c := range s.Counts {
			n += c
		}
		return n
	}
	calls, crds := conv.Metrics()
	var got []string
	for _, s := range calls {
		got = append(got, fmt.Sprint(s.Labels, count(s)))
	}
	want := []string{
		"[failure_type  result success] 1",
		"[failure_type conversion_webhook_invalid_converted_object_failure result failure] 1",
		"[failure_type conversion_webhook_malformed_response_failure result failure] 1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls: %v\nwant %v", got, want)
	}
	got = nil
	for _, s := range crds {
		got = append(got, fmt.Sprint(s.Labels, count(s)))
	}
	want = []string{
		"[crd_name widgets.conv.example.com from_version v1 succeeded false to_version v2] 2",
		"[crd_name widgets.conv.example.com from_version v1 succeeded true to_version v2] 1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("by CRD: %v\nwant %v", got, want)
	}
}
