package v1

import "k8s.io/apimachinery/pkg/runtime"

// Hand-written deep-copy functions. No code generator is used for this
// example, so keep these in sync with foo_types.go when fields change.

// DeepCopyInto copies the receiver into out. FooSpec holds only a string,
// so a value copy is already deep.
func (in *FooSpec) DeepCopyInto(out *FooSpec) {
	*out = *in
}

// DeepCopy returns a new FooSpec equal to the receiver.
func (in *FooSpec) DeepCopy() *FooSpec {
	if in == nil {
		return nil
	}
	out := &FooSpec{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *FooStatus) DeepCopyInto(out *FooStatus) {
	*out = *in
}

// DeepCopy returns a new FooStatus equal to the receiver.
func (in *FooStatus) DeepCopy() *FooStatus {
	if in == nil {
		return nil
	}
	out := &FooStatus{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out, duplicating every reference
// held by the object metadata.
func (in *Foo) DeepCopyInto(out *Foo) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a new Foo that shares no memory with the receiver.
func (in *Foo) DeepCopy() *Foo {
	if in == nil {
		return nil
	}
	out := &Foo{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Foo) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies the receiver into out, including a fresh Items slice
// whose elements are deep copies.
func (in *FooList) DeepCopyInto(out *FooList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		items := make([]Foo, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&items[i])
		}
		out.Items = items
	}
}

// DeepCopy returns a new FooList that shares no memory with the receiver.
func (in *FooList) DeepCopy() *FooList {
	if in == nil {
		return nil
	}
	out := &FooList{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *FooList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
