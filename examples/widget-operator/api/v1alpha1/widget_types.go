package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GroupVersion identifies the API group and version of the types in this
// package.
var GroupVersion = schema.GroupVersion{Group: "example.kplane.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that register this package's
	// types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme registers Widget and WidgetList with the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// Size is the resource class of a Widget.
//
// +kubebuilder:validation:Enum=small;medium;large
type Size string

// WidgetSpec is the desired state of a Widget.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.replicas",message="minReplicas must not exceed replicas",fieldPath=".minReplicas",reason=FieldValueInvalid
type WidgetSpec struct {
	// Replicas is the number of widget pods to run.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=1
	// +optional
	Replicas int32 `json:"replicas"`

	// MinReplicas is the floor an autoscaler may not go below.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// Image is the container image the widget runs.
	//
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9./:-]*$`
	Image string `json:"image"`

	// Size is the resource class: small, medium or large.
	//
	// +kubebuilder:default=medium
	// +optional
	Size Size `json:"size,omitempty"`

	// Host is the DNS name the widget answers on.
	//
	// +kubebuilder:validation:Format=hostname
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="!self.endsWith('.local')",messageExpression="'host ' + self + ' must not end in .local'"
	// +optional
	Host string `json:"host,omitempty"`

	// Memory is the memory each widget pod gets, as a Kubernetes quantity.
	//
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="quantity(self).compareTo(quantity('64Gi')) <= 0",message="memory must be at most 64Gi"
	// +optional
	Memory string `json:"memory,omitempty"`

	// ExpiresAt is when the widget is torn down (RFC 3339).
	//
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// StorageClass names the volume class; it cannot change once set.
	//
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storageClass is immutable"
	// +kubebuilder:validation:MaxLength=63
	// +optional
	StorageClass string `json:"storageClass,omitempty"`

	// Ports are the named ports the widget listens on, keyed by name.
	//
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	// +optional
	Ports []Port `json:"ports,omitempty"`

	// Tags are free-form labels; each may appear once.
	//
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +optional
	Tags []string `json:"tags,omitempty"`

	// Params are string settings passed to the widget.
	//
	// +kubebuilder:validation:MaxProperties=3
	// +optional
	Params map[string]string `json:"params,omitempty"`

	// MaxUnavailable is how many pods may be down during an update, as a
	// number or a percentage.
	//
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// Note is a free-form remark; null clears it.
	//
	// +nullable
	// +optional
	Note *string `json:"note"`

	// Template is a Kubernetes object the widget creates alongside its pods.
	//
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Template *runtime.RawExtension `json:"template,omitempty"`

	// Config is opaque configuration kept as written: the server neither
	// prunes nor validates it.
	//
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Config *runtime.RawExtension `json:"config,omitempty"`
}

// Port is one named port of a Widget.
type Port struct {
	// Name identifies the port within the widget.
	//
	// +kubebuilder:validation:MaxLength=15
	// +required
	Name string `json:"name"`

	// Port is the port number.
	//
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +required
	Port int32 `json:"port"`

	// Protocol is TCP or UDP.
	//
	// +kubebuilder:validation:Enum=TCP;UDP
	// +kubebuilder:default=TCP
	// +optional
	Protocol string `json:"protocol,omitempty"`
}

// WidgetStatus is the observed state of a Widget.
type WidgetStatus struct {
	// Replicas is the number of widget pods running.
	//
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Selector is the label selector of the widget's pods, in string form,
	// for the scale subresource.
	//
	// +optional
	Selector string `json:"selector,omitempty"`

	// Conditions describe the widget's state.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Widget is a toy workload that exercises every CRD schema feature.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=wd
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   WidgetSpec   `json:"spec"`
	Status WidgetStatus `json:"status,omitempty"`
}

// WidgetList is a list of Widgets.
//
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Widget `json:"items"`
}
