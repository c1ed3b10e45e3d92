package openapi

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"testing"
)

// served are the kinds kplane serves, with their lists, and Status.
func served() map[schema.GroupVersionKind]runtime.Object {
	core := corev1.SchemeGroupVersion.WithKind
	coordination := coordinationv1.SchemeGroupVersion.WithKind
	rbac := rbacv1.SchemeGroupVersion.WithKind
	apiextensions := apiextensionsv1.SchemeGroupVersion.WithKind
	authentication := authenticationv1.SchemeGroupVersion.WithKind
	authorization := authorizationv1.SchemeGroupVersion.WithKind
	admission := admissionregistrationv1.SchemeGroupVersion.WithKind
	certificates := certificatesv1.SchemeGroupVersion.WithKind
	svm := svmv1.SchemeGroupVersion.WithKind
	flowcontrol := flowcontrolv1.SchemeGroupVersion.WithKind
	return map[schema.GroupVersionKind]runtime.Object{
		core("Namespace"):                                 &corev1.Namespace{},
		core("NamespaceList"):                             &corev1.NamespaceList{},
		core("ConfigMap"):                                 &corev1.ConfigMap{},
		core("ConfigMapList"):                             &corev1.ConfigMapList{},
		core("Secret"):                                    &corev1.Secret{},
		core("SecretList"):                                &corev1.SecretList{},
		core("ServiceAccount"):                            &corev1.ServiceAccount{},
		core("ServiceAccountList"):                        &corev1.ServiceAccountList{},
		core("ResourceQuota"):                             &corev1.ResourceQuota{},
		core("ResourceQuotaList"):                         &corev1.ResourceQuotaList{},
		certificates("CertificateSigningRequest"):         &certificatesv1.CertificateSigningRequest{},
		certificates("CertificateSigningRequestList"):     &certificatesv1.CertificateSigningRequestList{},
		certificates("ClusterTrustBundle"):                &certificatesv1.ClusterTrustBundle{},
		certificates("ClusterTrustBundleList"):            &certificatesv1.ClusterTrustBundleList{},
		svm("StorageVersionMigration"):                    &svmv1.StorageVersionMigration{},
		svm("StorageVersionMigrationList"):                &svmv1.StorageVersionMigrationList{},
		flowcontrol("FlowSchema"):                         &flowcontrolv1.FlowSchema{},
		flowcontrol("FlowSchemaList"):                     &flowcontrolv1.FlowSchemaList{},
		flowcontrol("PriorityLevelConfiguration"):         &flowcontrolv1.PriorityLevelConfiguration{},
		flowcontrol("PriorityLevelConfigurationList"):     &flowcontrolv1.PriorityLevelConfigurationList{},
		core("Event"):                                     &corev1.Event{},
		core("EventList"):                                 &corev1.EventList{},
		eventsv1.SchemeGroupVersion.WithKind("Event"):     &eventsv1.Event{},
		eventsv1.SchemeGroupVersion.WithKind("EventList"): &eventsv1.EventList{},
		core("Status"):                                    &metav1.Status{},
		coordination("Lease"):                             &coordinationv1.Lease{},
		coordination("LeaseList"):                         &coordinationv1.LeaseList{},
		rbac("Role"):                                      &rbacv1.Role{},
		rbac("RoleList"):                                  &rbacv1.RoleList{},
		rbac("ClusterRole"):                               &rbacv1.ClusterRole{},
		rbac("ClusterRoleList"):                           &rbacv1.ClusterRoleList{},
		rbac("RoleBinding"):                               &rbacv1.RoleBinding{},
		rbac("RoleBindingList"):                           &rbacv1.RoleBindingList{},
		rbac("ClusterRoleBinding"):                        &rbacv1.ClusterRoleBinding{},
		rbac("ClusterRoleBindingList"):                    &rbacv1.ClusterRoleBindingList{},
		admission("ValidatingWebhookConfiguration"):       &admissionregistrationv1.ValidatingWebhookConfiguration{},
		admission("ValidatingWebhookConfigurationList"):   &admissionregistrationv1.ValidatingWebhookConfigurationList{},
		admission("MutatingWebhookConfiguration"):         &admissionregistrationv1.MutatingWebhookConfiguration{},
		admission("MutatingWebhookConfigurationList"):     &admissionregistrationv1.MutatingWebhookConfigurationList{},
		admission("ValidatingAdmissionPolicy"):            &admissionregistrationv1.ValidatingAdmissionPolicy{},
		admission("ValidatingAdmissionPolicyList"):        &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		admission("ValidatingAdmissionPolicyBinding"):     &admissionregistrationv1.ValidatingAdmissionPolicyBinding{},
		admission("ValidatingAdmissionPolicyBindingList"): &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{},
		admission("MutatingAdmissionPolicy"):              &admissionregistrationv1.MutatingAdmissionPolicy{},
		admission("MutatingAdmissionPolicyList"):          &admissionregistrationv1.MutatingAdmissionPolicyList{},
		admission("MutatingAdmissionPolicyBinding"):       &admissionregistrationv1.MutatingAdmissionPolicyBinding{},
		admission("MutatingAdmissionPolicyBindingList"):   &admissionregistrationv1.MutatingAdmissionPolicyBindingList{},
		apiextensions("CustomResourceDefinition"):         &apiextensionsv1.CustomResourceDefinition{},
		apiextensions("CustomResourceDefinitionList"):     &apiextensionsv1.CustomResourceDefinitionList{},
		// Never stored: created and answered.
		authentication("TokenRequest"):            &authenticationv1.TokenRequest{},
		authentication("TokenReview"):             &authenticationv1.TokenReview{},
		authentication("SelfSubjectReview"):       &authenticationv1.SelfSubjectReview{},
		authorization("SubjectAccessReview"):      &authorizationv1.SubjectAccessReview{},
		authorization("LocalSubjectAccessReview"): &authorizationv1.LocalSubjectAccessReview{},
		authorization("SelfSubjectAccessReview"):  &authorizationv1.SelfSubjectAccessReview{},
		authorization("SelfSubjectRulesReview"):   &authorizationv1.SelfSubjectRulesReview{},
	}
}

// servedDefinitions builds the definitions of served for OpenAPI v2.
func servedDefinitions(t testing.TB) map[string]*spec.Schema {
	t.Helper()
	defs, err := Definitions(served(), V2RefPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return defs
}

func unstructuredOf(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}
