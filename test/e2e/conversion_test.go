package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The Widget kind of conv.example.com, in two versions, as an operator
// built with kubebuilder declares them: v1 is the hub and the version
// stored; v2 is a spoke that moves v1's two spec fields under
// spec.template and adds spec.tier, which v1 has no field for.
var (
	widgetsV1 = schema.GroupVersion{Group: "conv.example.com", Version: "v1"}
	widgetsV2 = schema.GroupVersion{Group: "conv.example.com", Version: "v2"}
)

// tierAnnotation keeps v2's spec.tier in v1: a conversion webhook may
// change labels and annotations only (kube-apiserver's
// restoreObjectMeta puts back every other metadata field), so that is
// where a field without a place in the hub survives a round trip.
const tierAnnotation = "conv.example.com/tier"

type widgetV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              widgetV1Spec   `json:"spec,omitempty"`
	Status            widgetV1Status `json:"status,omitempty"`
}

type widgetV1Spec struct {
	Replicas int32  `json:"replicas,omitempty"`
	Image    string `json:"image,omitempty"`
}

type widgetV1Status struct {
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
}

type widgetV1List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []widgetV1 `json:"items"`
}

type widgetV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              widgetV2Spec   `json:"spec,omitempty"`
	Status            widgetV2Status `json:"status,omitempty"`
}

type widgetV2Spec struct {
	Template widgetTemplate `json:"template,omitempty"`
	Tier     string         `json:"tier,omitempty"`
}

type widgetTemplate struct {
	Image    string `json:"image,omitempty"`
	Replicas int32  `json:"replicas,omitempty"`
}

type widgetV2Status struct {
	Ready int32 `json:"ready,omitempty"`
}

type widgetV2List struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []widgetV2 `json:"items"`
}

// Every field but ObjectMeta is a value, so a shallow copy and a deep
// copy of the metadata make a deep copy.

func (w *widgetV1) DeepCopyInto(out *widgetV1) {
	*out = *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (w *widgetV1) DeepCopyObject() runtime.Object {
	out := new(widgetV1)
	w.DeepCopyInto(out)
	return out
}

func (l *widgetV1List) DeepCopyObject() runtime.Object {
	out := &widgetV1List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]widgetV1, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (w *widgetV2) DeepCopyInto(out *widgetV2) {
	*out = *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

func (w *widgetV2) DeepCopy() *widgetV2 {
	out := new(widgetV2)
	w.DeepCopyInto(out)
	return out
}

func (w *widgetV2) DeepCopyObject() runtime.Object { return w.DeepCopy() }

func (l *widgetV2List) DeepCopyObject() runtime.Object {
	out := &widgetV2List{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]widgetV2, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// Hub marks v1 as the version every other converts through.
func (*widgetV1) Hub() {}

// ConvertTo converts a v2 Widget to the hub. The TypeMeta of dst is
// left alone: controller-runtime's handler has set it to the version
// asked for.
func (w *widgetV2) ConvertTo(dst conversion.Hub) error {
	hub := dst.(*widgetV1)
	w.ObjectMeta.DeepCopyInto(&hub.ObjectMeta)
	hub.Spec = widgetV1Spec{Replicas: w.Spec.Template.Replicas, Image: w.Spec.Template.Image}
	hub.Status = widgetV1Status{ReadyReplicas: w.Status.Ready}
	if w.Spec.Tier == "" {
		delete(hub.Annotations, tierAnnotation)
		return nil
	}
	if hub.Annotations == nil {
		hub.Annotations = map[string]string{}
	}
	hub.Annotations[tierAnnotation] = w.Spec.Tier
	return nil
}

// ConvertFrom converts the hub to a v2 Widget, taking spec.tier back
// out of its annotation: the annotation is v1's way of holding the
// field, and a v2 client never sees it.
func (w *widgetV2) ConvertFrom(src conversion.Hub) error {
	hub := src.(*widgetV1)
	hub.ObjectMeta.DeepCopyInto(&w.ObjectMeta)
	w.Spec = widgetV2Spec{
		Template: widgetTemplate{Image: hub.Spec.Image, Replicas: hub.Spec.Replicas},
		Tier:     hub.Annotations[tierAnnotation],
	}
	w.Status = widgetV2Status{Ready: hub.Status.ReadyReplicas}
	delete(w.Annotations, tierAnnotation)
	if len(w.Annotations) == 0 {
		w.Annotations = nil
	}
	return nil
}

// addWidgets registers both versions of Widget, as the AddToScheme of
// an operator's api packages does.
func addWidgets(s *runtime.Scheme) error {
	s.AddKnownTypeWithName(widgetsV1.WithKind("Widget"), &widgetV1{})
	s.AddKnownTypeWithName(widgetsV1.WithKind("WidgetList"), &widgetV1List{})
	s.AddKnownTypeWithName(widgetsV2.WithKind("Widget"), &widgetV2{})
	s.AddKnownTypeWithName(widgetsV2.WithKind("WidgetList"), &widgetV2List{})
	metav1.AddToGroupVersion(s, widgetsV1)
	metav1.AddToGroupVersion(s, widgetsV2)
	return nil
}

// widgetScheme is an operator's scheme: client-go's kinds, the CRD kind
// and both Widget versions.
func widgetScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, addWidgets} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// widgetCRD declares both versions with structural schemas (fields
// outside them are pruned), a status subresource on each, and a
// conversion webhook at url.
func widgetCRD(url string, caBundle []byte) *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	i32 := apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}
	object := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	version := func(name string, storage bool, spec, status apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: ptr.To(object(map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "status": status}))},
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.conv.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "conv.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				version("v1", true,
					object(map[string]apiextensionsv1.JSONSchemaProps{"replicas": i32, "image": str}),
					object(map[string]apiextensionsv1.JSONSchemaProps{"readyReplicas": i32})),
				version("v2", false,
					object(map[string]apiextensionsv1.JSONSchemaProps{
						"template": object(map[string]apiextensionsv1.JSONSchemaProps{"image": str, "replicas": i32}),
						"tier":     str,
					}),
					object(map[string]apiextensionsv1.JSONSchemaProps{"ready": i32})),
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ConversionReviewVersions: []string{"v1"},
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(url), CABundle: caBundle},
				},
			},
		},
	}
}

// setConversionURL points the CRD's conversion webhook at url, with a
// merge patch so that the CRD controller's status writes cannot make it
// conflict.
func setConversionURL(t *testing.T, c client.Client, url string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "widgets.conv.example.com"}, crd); err != nil {
		t.Fatal(err)
	}
	before := crd.DeepCopy()
	crd.Spec.Conversion.Webhook.ClientConfig.URL = ptr.To(url)
	if err := c.Patch(ctx, crd, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// TestConversionWebhook runs an operator's conversion webhook, built
// with controller-runtime from a Hub and a Convertible, and has kplane
// call it for every read and write of the version not stored: clients
// of either version see the same objects, each in its own shape.
func TestConversionWebhook(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	caBundle := webhookCerts(t, dir)
	port := freePort(t)
	convertURL := fmt.Sprintf("https://127.0.0.1:%d/convert", port)

	c, err := client.New(s.config(), client.Options{Scheme: widgetScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, widgetCRD(convertURL, caBundle)); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/widgets.conv.example.com")

	// The manager's scheme gets both versions before the builder looks
	// for a Hub and its spokes: with them it serves /convert.
	mgr := startManager(t, s, ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
	}, func(mgr ctrl.Manager) error {
		if err := addWidgets(mgr.GetScheme()); err != nil {
			return err
		}
		return ctrl.NewWebhookManagedBy(mgr, &widgetV1{}).Complete()
	})
	waitServing(t, port)

	key := client.ObjectKey{Namespace: "default", Name: "w"}
	getV1 := func(key client.ObjectKey) *widgetV1 {
		t.Helper()
		var w widgetV1
		if err := c.Get(ctx, key, &w); err != nil {
			t.Fatalf("get %s in v1: %v", key.Name, err)
		}
		return &w
	}
	getV2 := func(key client.ObjectKey) *widgetV2 {
		t.Helper()
		var w widgetV2
		if err := c.Get(ctx, key, &w); err != nil {
			t.Fatalf("get %s in v2: %v", key.Name, err)
		}
		return &w
	}

	// A create in v2 is converted to v1 to be stored, and what was
	// stored is converted back to v2 for the answer: the webhook's
	// annotation is gone again, and spec.tier came back out of it.
	w2 := &widgetV2{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default"},
		Spec:       widgetV2Spec{Template: widgetTemplate{Image: "nginx:1", Replicas: 3}, Tier: "gold"},
	}
	if err := c.Create(ctx, w2); err != nil {
		t.Fatalf("create in v2: %v", err)
	}
	if w2.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "nginx:1", Replicas: 3}, Tier: "gold"}) || w2.ResourceVersion == "" || w2.UID == "" {
		t.Errorf("create in v2 answered %+v (rv %q, uid %q)", w2.Spec, w2.ResourceVersion, w2.UID)
	}
	if _, ok := w2.Annotations[tierAnnotation]; ok {
		t.Errorf("create in v2 answered the v1 annotation: %v", w2.Annotations)
	}

	// Stored in v1: a v1 read needs no conversion and shows the hub's
	// fields, with spec.tier kept in the annotation.
	w1 := getV1(key)
	if w1.Spec != (widgetV1Spec{Replicas: 3, Image: "nginx:1"}) || w1.Annotations[tierAnnotation] != "gold" {
		t.Errorf("read in v1: spec %+v, annotations %v; want nginx:1 x3, tier gold", w1.Spec, w1.Annotations)
	}
	if w1.UID != w2.UID || w1.ResourceVersion != w2.ResourceVersion {
		t.Errorf("read in v1: uid %s rv %s, want the create's %s %s (the webhook may not change them)", w1.UID, w1.ResourceVersion, w2.UID, w2.ResourceVersion)
	}

	// A v2 read converts the stored object again.
	got := getV2(key)
	if got.Spec != w2.Spec || got.ResourceVersion != w2.ResourceVersion {
		t.Errorf("read in v2: %+v at rv %s, want %+v at %s", got.Spec, got.ResourceVersion, w2.Spec, w2.ResourceVersion)
	}
	if _, ok := got.Annotations[tierAnnotation]; ok {
		t.Errorf("read in v2 shows the v1 annotation: %v", got.Annotations)
	}

	// An update in v1 is seen in v2.
	w1.Spec.Replicas = 5
	if err := c.Update(ctx, w1); err != nil {
		t.Fatalf("update in v1: %v", err)
	}
	if got := getV2(key); got.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "nginx:1", Replicas: 5}, Tier: "gold"}) || got.ResourceVersion != w1.ResourceVersion {
		t.Errorf("read in v2 after an update in v1: %+v at rv %s, want 5 replicas at %s", got.Spec, got.ResourceVersion, w1.ResourceVersion)
	}

	// An update in v2, from the object and resourceVersion just read in
	// v2, is converted to v1: the new tier replaces the annotation.
	w2 = getV2(key)
	w2.Spec.Template.Image, w2.Spec.Tier = "nginx:2", "silver"
	if err := c.Update(ctx, w2); err != nil {
		t.Fatalf("update in v2: %v", err)
	}
	if w2.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "nginx:2", Replicas: 5}, Tier: "silver"}) {
		t.Errorf("update in v2 answered %+v", w2.Spec)
	}
	if w1 := getV1(key); w1.Spec != (widgetV1Spec{Replicas: 5, Image: "nginx:2"}) || w1.Annotations[tierAnnotation] != "silver" || w1.ResourceVersion != w2.ResourceVersion {
		t.Errorf("read in v1 after an update in v2: spec %+v, annotations %v, rv %s; want nginx:2 x5, tier silver, rv %s",
			w1.Spec, w1.Annotations, w1.ResourceVersion, w2.ResourceVersion)
	}

	// A merge patch in v2 is applied to the object converted to v2, and
	// the result is converted back to v1.
	before := w2.DeepCopy()
	w2.Spec.Template.Image = "nginx:3"
	if err := c.Patch(ctx, w2, client.MergeFrom(before)); err != nil {
		t.Fatalf("merge patch in v2: %v", err)
	}
	if w2.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "nginx:3", Replicas: 5}, Tier: "silver"}) {
		t.Errorf("merge patch in v2 answered %+v", w2.Spec)
	}
	if w1 := getV1(key); w1.Spec != (widgetV1Spec{Replicas: 5, Image: "nginx:3"}) || w1.Annotations[tierAnnotation] != "silver" {
		t.Errorf("read in v1 after a merge patch in v2: spec %+v, annotations %v", w1.Spec, w1.Annotations)
	}

	// The status subresource, written in either version, is seen in the
	// other; a status write in v2 changes no spec field.
	w2.Status.Ready = 2
	w2.Spec.Template.Replicas = 99
	if err := c.Status().Update(ctx, w2); err != nil {
		t.Fatalf("status update in v2: %v", err)
	}
	if w2.Status.Ready != 2 || w2.Spec.Template.Replicas != 5 {
		t.Errorf("status update in v2 answered status %+v, replicas %d; want ready 2, replicas 5", w2.Status, w2.Spec.Template.Replicas)
	}
	w1 = getV1(key)
	if w1.Status.ReadyReplicas != 2 || w1.Spec.Replicas != 5 || w1.Annotations[tierAnnotation] != "silver" {
		t.Errorf("read in v1 after a status update in v2: status %+v, spec %+v, annotations %v", w1.Status, w1.Spec, w1.Annotations)
	}
	w1.Status.ReadyReplicas = 4
	if err := c.Status().Update(ctx, w1); err != nil {
		t.Fatalf("status update in v1: %v", err)
	}
	if got := getV2(key); got.Status.Ready != 4 || got.Spec.Tier != "silver" {
		t.Errorf("read in v2 after a status update in v1: status %+v, spec %+v", got.Status, got.Spec)
	}

	// A list in v2 converts every item: each has v2's apiVersion and
	// spec.template, and none has v1's spec.image.
	images := map[string]string{"w": "nginx:3"}
	for i, name := range []string{"a", "b", "c"} {
		image := fmt.Sprintf("busybox:%d", i+1)
		if err := c.Create(ctx, &widgetV1{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: widgetV1Spec{Replicas: int32(i + 1), Image: image}}); err != nil {
			t.Fatalf("create in v1: %v", err)
		}
		images[name] = image
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(widgetsV2.WithKind("WidgetList"))
	if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
		t.Fatalf("list in v2: %v", err)
	}
	if len(list.Items) != len(images) {
		t.Errorf("list in v2: %d items, want %d", len(list.Items), len(images))
	}
	for _, item := range list.Items {
		image, _, _ := unstructured.NestedString(item.Object, "spec", "template", "image")
		_, v1Field, _ := unstructured.NestedFieldNoCopy(item.Object, "spec", "image")
		if item.GetAPIVersion() != "conv.example.com/v2" || image != images[item.GetName()] || v1Field {
			t.Errorf("list in v2: item %s is %s with spec %v; want conv.example.com/v2 with template.image %q",
				item.GetName(), item.GetAPIVersion(), item.Object["spec"], images[item.GetName()])
		}
	}

	// kubectl names either version; each answers in its own shape.
	out := s.mustKubectl(t, "get", "widgets.v2.conv.example.com", "-n", "default", "-o", "json")
	var kubectlList struct {
		Items []struct {
			APIVersion string            `json:"apiVersion"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
			Spec       map[string]any    `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &kubectlList); err != nil {
		t.Fatalf("kubectl get -o json: %v\n%s", err, out)
	}
	if len(kubectlList.Items) != len(images) {
		t.Errorf("kubectl get widgets.v2: %d items, want %d\n%s", len(kubectlList.Items), len(images), out)
	}
	for _, item := range kubectlList.Items {
		template, _ := item.Spec["template"].(map[string]any)
		if item.APIVersion != "conv.example.com/v2" || template["image"] != images[item.Metadata.Name] || item.Spec["image"] != nil {
			t.Errorf("kubectl get widgets.v2: %s is %s with spec %v", item.Metadata.Name, item.APIVersion, item.Spec)
		}
	}
	if out := s.mustKubectl(t, "get", "widgets.v1.conv.example.com", "w", "-n", "default", "-o", "jsonpath={.spec.image}"); out != "nginx:3" {
		t.Errorf("kubectl get widgets.v1 w -o jsonpath={.spec.image}: %q, want nginx:3", out)
	}

	// An informer in v2, as an operator's cache runs it, is fed by a
	// watch in v2: an object created in v1 arrives converted, and so
	// does its update.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	inf, err := mgr.GetCache().GetInformer(ictx, &widgetV2{})
	if err != nil {
		t.Fatalf("informer in v2: %v", err)
	}
	events := make(chan *widgetV2, 256)
	seen := func(o any) {
		if w, ok := o.(*widgetV2); ok && w.Name == "watched" {
			select {
			case events <- w.DeepCopy():
			default: // The checks below fail on a missed event.
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, o any) { seen(o) },
	}); err != nil {
		t.Fatal(err)
	}
	waitForEvent := func(what string, match func(*widgetV2) bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		var last *widgetV2
		for {
			select {
			case w := <-events:
				if match(w) {
					return
				}
				last = w
			case <-timeout:
				t.Fatalf("%s: not seen in 30s; last event %+v", what, last)
			}
		}
	}
	watched := &widgetV1{
		ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: "default", Annotations: map[string]string{tierAnnotation: "bronze"}},
		Spec:       widgetV1Spec{Replicas: 1, Image: "redis:7"},
	}
	if err := c.Create(ctx, watched); err != nil {
		t.Fatalf("create in v1: %v", err)
	}
	waitForEvent("the v1 create, converted, in the v2 informer", func(w *widgetV2) bool {
		return w.Spec == widgetV2Spec{Template: widgetTemplate{Image: "redis:7", Replicas: 1}, Tier: "bronze"} && w.ResourceVersion == watched.ResourceVersion
	})
	watched.Spec.Replicas = 2
	if err := c.Update(ctx, watched); err != nil {
		t.Fatalf("update in v1: %v", err)
	}
	waitForEvent("the v1 update, converted, in the v2 informer", func(w *widgetV2) bool {
		return w.Spec.Template.Replicas == 2 && w.ResourceVersion == watched.ResourceVersion
	})
	var cached widgetV2
	if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(watched), &cached); err != nil ||
		cached.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "redis:7", Replicas: 2}, Tier: "bronze"}) {
		t.Errorf("cached read in v2: %+v, %v", cached.Spec, err)
	}

	// Server-side apply in v2 merges into the object converted to v2;
	// the other fields stay, and the manager's entry keeps the version
	// it applied in.
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "conv.example.com/v2", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"template": map[string]any{"image": "nginx:4"}},
	}}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(apply), client.FieldOwner("conv-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("server-side apply in v2: %v", err)
	}
	w1 = getV1(key)
	if w1.Spec != (widgetV1Spec{Replicas: 5, Image: "nginx:4"}) || w1.Annotations[tierAnnotation] != "silver" || w1.Status.ReadyReplicas != 4 {
		t.Errorf("read in v1 after an apply in v2: spec %+v, status %+v, annotations %v", w1.Spec, w1.Status, w1.Annotations)
	}
	applied := false
	for _, e := range w1.ManagedFields {
		applied = applied || e.Manager == "conv-e2e" && e.Operation == metav1.ManagedFieldsOperationApply && e.APIVersion == "conv.example.com/v2"
	}
	if !applied {
		t.Errorf("no Apply entry of conv-e2e in conv.example.com/v2 in managedFields: %+v", w1.ManagedFields)
	}

	// With the webhook unreachable, a read in v2 fails as
	// kube-apiserver v1.37.2's did: 500, its storage's words around the
	// webhook converter's error, which names the stored object's version
	// and the call that failed. A read in the storage version converts
	// nothing and still succeeds.
	closed := freePort(t)
	setConversionURL(t, c, fmt.Sprintf("https://127.0.0.1:%d/convert", closed))
	const corrupt = "Internal error occurred: StorageError: corrupt object, Code: 7, Key: /conv.example.com/widgets/default/w, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision="
	failed := fmt.Sprintf(": conversion webhook for conv.example.com/v1, Kind=Widget failed: Post \"https://127.0.0.1:%d/convert?timeout=30s\": dial tcp 127.0.0.1:%d: connect: connection refused", closed, closed)
	eventually(t, 30*time.Second, "a read in v2 failing while the webhook is unreachable", func() (bool, string) {
		err := c.Get(ctx, key, &widgetV2{})
		return apierrors.IsInternalError(err) && strings.HasPrefix(err.Error(), corrupt) && strings.HasSuffix(err.Error(), failed), fmt.Sprint(err)
	})
	if w1 := getV1(key); w1.Spec.Image != "nginx:4" {
		t.Errorf("read in v1 with the webhook unreachable: %+v", w1.Spec)
	}
	setConversionURL(t, c, convertURL)
	eventually(t, 30*time.Second, "reads in v2 once the webhook is back", func() (bool, string) {
		var w widgetV2
		err := c.Get(ctx, key, &w)
		return err == nil && w.Spec.Template.Image == "nginx:4", fmt.Sprint(err, w.Spec)
	})

	// The CRD's webhook is read again at start-up: after a restart, a
	// read in v2 still converts.
	s.restart()
	if got := getV2(key); got.Spec != (widgetV2Spec{Template: widgetTemplate{Image: "nginx:4", Replicas: 5}, Tier: "silver"}) || got.Status.Ready != 4 {
		t.Errorf("read in v2 after a restart: spec %+v, status %+v", got.Spec, got.Status)
	}

	// A delete in v2 removes the one stored object.
	if err := c.Delete(ctx, &widgetV2{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default"}}); err != nil {
		t.Fatalf("delete in v2: %v", err)
	}
	if err := c.Get(ctx, key, &widgetV1{}); !apierrors.IsNotFound(err) {
		t.Errorf("read in v1 after a delete in v2: %v, want not found", err)
	}
}
