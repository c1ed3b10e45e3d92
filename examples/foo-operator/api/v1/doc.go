// Package v1 holds the Go types of the webapp.my.domain/v1 API group used by
// the foo-operator example: a single namespaced kind, Foo, whose spec carries
// one string field.
//
// The deep-copy methods live in zz_deepcopy.go and are written by hand, so
// they must be kept in step with the struct definitions in foo_types.go.
//
// +kubebuilder:object:generate=true
// +groupName=webapp.my.domain
package v1
