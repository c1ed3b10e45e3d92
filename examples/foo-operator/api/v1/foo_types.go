package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion identifies the API group and version of the types in this
// package.
var GroupVersion = schema.GroupVersion{Group: "webapp.my.domain", Version: "v1"}

var (
	// SchemeBuilder collects the functions that register this package's
	// types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme registers Foo and FooList (and the meta/v1 helper types
	// for this group version) with the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns a GroupResource in this package's group for the given
// (plural, lower-case) resource name, e.g. Resource("foos").
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// FooSpec is the desired state of a Foo.
type FooSpec struct {
	// Foo is an arbitrary string that the example reconcilers write to.
	Foo string `json:"foo,omitempty"`
}

// FooStatus is the observed state of a Foo. The example does not use it.
type FooStatus struct{}

// Foo is the Schema for the foos API.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Foo",type=string,JSONPath=`.spec.foo`
type Foo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FooSpec   `json:"spec,omitempty"`
	Status FooStatus `json:"status,omitempty"`
}

// FooList is a list of Foo objects.
//
// +kubebuilder:object:root=true
type FooList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Foo `json:"items"`
}
