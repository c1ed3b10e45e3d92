package v1

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func sampleFoo() *Foo {
	return &Foo{
		TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "Foo"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            "sample",
			Namespace:       "default",
			ResourceVersion: "7",
			Labels:          map[string]string{"app": "foo"},
			Annotations:     map[string]string{"note": "x"},
			Finalizers:      []string{"webapp.my.domain/cleanup"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u1"}},
		},
		Spec: FooSpec{Foo: "Hello"},
	}
}

func TestFooDeepCopyIsIndependent(t *testing.T) {
	orig := sampleFoo()
	cp := orig.DeepCopy()

	cp.Name = "changed"
	cp.Spec.Foo = "World"
	cp.Labels["app"] = "bar"
	cp.Annotations["new"] = "y"
	cp.Finalizers[0] = "other"
	cp.OwnerReferences[0].Name = "someone-else"

	want := sampleFoo()
	if orig.Name != want.Name || orig.Spec.Foo != want.Spec.Foo {
		t.Fatalf("scalar fields of original changed: %+v", orig)
	}
	if orig.Labels["app"] != "foo" || len(orig.Annotations) != 1 {
		t.Fatalf("maps of original changed: labels=%v annotations=%v", orig.Labels, orig.Annotations)
	}
	if orig.Finalizers[0] != "webapp.my.domain/cleanup" || orig.OwnerReferences[0].Name != "owner" {
		t.Fatalf("slices of original changed: %v %v", orig.Finalizers, orig.OwnerReferences)
	}

	obj := orig.DeepCopyObject()
	f, ok := obj.(*Foo)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T", obj)
	}
	if f == orig || f.Spec.Foo != "Hello" || f.Labels["app"] != "foo" {
		t.Fatalf("DeepCopyObject returned %p %+v", f, f)
	}

	var nilFoo *Foo
	if nilFoo.DeepCopy() != nil || nilFoo.DeepCopyObject() != nil {
		t.Fatal("deep copy of nil *Foo should be nil")
	}
}

func TestFooListDeepCopyIsIndependent(t *testing.T) {
	orig := &FooList{
		ListMeta: metav1.ListMeta{ResourceVersion: "10"},
		Items:    []Foo{*sampleFoo(), *sampleFoo()},
	}
	obj := orig.DeepCopyObject()
	cp, ok := obj.(*FooList)
	if !ok {
		t.Fatalf("DeepCopyObject returned %T", obj)
	}
	cp.Items[0].Spec.Foo = "World"
	cp.Items[1].Labels["app"] = "bar"
	cp.Items = append(cp.Items, Foo{})
	cp.ResourceVersion = "11"

	if len(orig.Items) != 2 || orig.ResourceVersion != "10" {
		t.Fatalf("original list changed: %+v", orig)
	}
	if orig.Items[0].Spec.Foo != "Hello" || orig.Items[1].Labels["app"] != "foo" {
		t.Fatalf("original items changed: %+v", orig.Items)
	}

	if (&FooList{}).DeepCopy().Items != nil {
		t.Fatal("nil Items should stay nil")
	}
	var nilList *FooList
	if nilList.DeepCopyObject() != nil {
		t.Fatal("deep copy of nil *FooList should be nil")
	}
}

func TestSchemeRoundTripsGVK(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		obj  runtime.Object
		kind string
	}{
		{&Foo{}, "Foo"},
		{&FooList{}, "FooList"},
	} {
		want := GroupVersion.WithKind(tc.kind)
		gvks, _, err := scheme.ObjectKinds(tc.obj)
		if err != nil {
			t.Fatalf("ObjectKinds(%T): %v", tc.obj, err)
		}
		if len(gvks) != 1 || gvks[0] != want {
			t.Fatalf("ObjectKinds(%T) = %v, want [%v]", tc.obj, gvks, want)
		}
		newObj, err := scheme.New(want)
		if err != nil {
			t.Fatalf("New(%v): %v", want, err)
		}
		if got, wantT := typeName(newObj), typeName(tc.obj); got != wantT {
			t.Fatalf("New(%v) = %s, want %s", want, got, wantT)
		}
	}

	// metav1.AddToGroupVersion registers the shared option types too.
	if !scheme.Recognizes(GroupVersion.WithKind("ListOptions")) {
		t.Fatal("ListOptions not registered for the group version")
	}

	// Encode and decode through a codec: the GVK must survive the trip.
	codecs := serializer.NewCodecFactory(scheme)
	var buf bytes.Buffer
	in := sampleFoo()
	in.TypeMeta = metav1.TypeMeta{} // the encoder fills it in
	if err := codecs.LegacyCodec(GroupVersion).Encode(in, &buf); err != nil {
		t.Fatalf("encode: %v", err)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"apiVersion":"webapp.my.domain/v1"`)) ||
		!bytes.Contains(buf.Bytes(), []byte(`"kind":"Foo"`)) {
		t.Fatalf("encoded object lacks apiVersion/kind: %s", buf.String())
	}
	out, gvk, err := codecs.UniversalDeserializer().Decode(buf.Bytes(), nil, nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if *gvk != GroupVersion.WithKind("Foo") {
		t.Fatalf("decoded GVK = %v", gvk)
	}
	got, ok := out.(*Foo)
	if !ok {
		t.Fatalf("decoded %T", out)
	}
	if got.Spec.Foo != "Hello" || got.Name != "sample" || got.Labels["app"] != "foo" {
		t.Fatalf("decoded object differs: %+v", got)
	}
}

func TestResource(t *testing.T) {
	want := schema.GroupResource{Group: "webapp.my.domain", Resource: "foos"}
	if got := Resource("foos"); got != want {
		t.Fatalf("Resource = %v, want %v", got, want)
	}
}

func typeName(o runtime.Object) string {
	switch o.(type) {
	case *Foo:
		return "*Foo"
	case *FooList:
		return "*FooList"
	default:
		return "other"
	}
}
