// Package v1alpha1 holds the Go types of example.kplane.dev/v1alpha1, the older
// served version of the widget-operator example's Widget kind. Its schema
// is the same as v1's (the CRD converts with strategy None).
//
// The types exist for their kubebuilder markers: controller-gen turns them
// into config/crd/example.kplane.dev_widgets.yaml (see the package
// widgetop for the command). The markers cover every schema feature the
// kplane API server enforces for custom resources, so the generated CRD
// doubles as a conformance fixture. zz_generated.deepcopy.go is written by
// the same controller-gen run.
//
// +kubebuilder:object:generate=true
// +groupName=example.kplane.dev
package v1alpha1
