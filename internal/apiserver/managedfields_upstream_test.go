package apiserver_test

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// The managedFields of creates, updates, patches and applies of the
// built-in kinds and CRDs are kube-apiserver v1.37.2's for the same
// requests (its answers below): the defaults a decode sets (a Secret's
// type, a binding's API groups, a namespace's name label, a CRD's
// singular, listKind and conversion) are the writer's, stringData is
// owned as the data it becomes, and a create owns what it set in a struct
// field of the Go type (a Lease's spec) without owning the field itself.
// An apply owns only what its configuration sets.
func TestManagedFieldsAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	for _, c := range []struct{ method, path, ctype, body, want string }{
		{"POST", "/api/v1/namespaces/default/secrets?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"stringData":{"a":"b"}}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}]]`},
		{"POST", "/api/v1/namespaces/default/secrets?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"data":{"a":"Yg=="}}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}]]`},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"spec":{"holderIdentity":"x"}}`,
			`[["curl", "Update", {"f:spec": {"f:holderIdentity": {}}}]]`},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases?dryRun=All", "application/json", `{"metadata":{"name":"mf1"}}`,
			`[]`},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"roleRef":{"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"u"},{"kind":"ServiceAccount","name":"s"}]}`,
			`[["curl", "Update", {"f:roleRef": {}, "f:subjects": {}}]]`},
		{"POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"rules":[{"verbs":["get"],"apiGroups":[""],"resources":["pods"]}],"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"a":"b"}}]}}`,
			`[["curl", "Update", {"f:aggregationRule": {".": {}, "f:clusterRoleSelectors": {}}, "f:rules": {}}]]`},
		{"POST", "/api/v1/namespaces?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"spec":{"finalizers":["x.io/y"]}}`,
			`[["curl", "Update", {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}, "f:spec": {"f:finalizers": {}}}]]`},
		{"POST", "/api/v1/namespaces?dryRun=All", "application/json", `{"metadata":{"name":"mf1"}}`,
			`[["curl", "Update", {"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}]]`},
		{"POST", "/api/v1/namespaces/default/events?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default"},"reason":"R","message":"m","source":{"component":"c"},"count":1,"firstTimestamp":"2026-01-01T00:00:00Z"}`,
			`[["curl", "Update", {"f:count": {}, "f:firstTimestamp": {}, "f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:source": {"f:component": {}}}]]`},
		{"POST", "/api/v1/namespaces/default/serviceaccounts?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"secrets":[{"name":"s"}],"automountServiceAccountToken":false}`,
			`[["curl", "Update", {"f:automountServiceAccountToken": {}, "f:secrets": {".": {}, "k:{\"name\":\"s\"}": {}}}]]`},
		{"POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All", "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"mfs.ex.com"},"spec":{"group":"ex.com","scope":"Namespaced","names":{"plural":"mfs","kind":"Mf"},"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}
`,
			`[["curl", "Update", {"f:spec": {"f:conversion": {".": {}, "f:strategy": {}}, "f:group": {}, "f:names": {"f:kind": {}, "f:listKind": {}, "f:plural": {}, "f:singular": {}}, "f:scope": {}, "f:versions": {}}}]]`},
		{"POST", "/api/v1/namespaces/default/configmaps?dryRun=All", "application/json", `{"metadata":{"name":"mf1"},"data":{"a":"b"},"immutable":true}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:immutable": {}}]]`},
		{"POST", "/api/v1/namespaces/default/secrets", "application/json", `{"metadata":{"name":"mh2"},"stringData":{"a":"b"}}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}]]`},
		{"PATCH", "/api/v1/namespaces/default/secrets/mh2?fieldManager=patcher", "application/merge-patch+json", `{"stringData":{"c":"d"}}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}], ["patcher", "Update", {"f:data": {"f:c": {}}}]]`},
		{"PATCH", "/api/v1/namespaces/default/secrets/mh2?fieldManager=smp", "application/strategic-merge-patch+json", `{"stringData":{"e":"f"},"type":"Opaque"}`,
			`[["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}], ["patcher", "Update", {"f:data": {"f:c": {}}}], ["smp", "Update", {"f:data": {"f:e": {}}}]]`},
		{"PATCH", "/api/v1/namespaces/default/secrets/mh2?fieldManager=applier", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"mh2"},"stringData":{"g":"h"}}`,
			`[["applier", "Apply", {"f:stringData": {"f:g": {}}}], ["curl", "Update", {"f:data": {".": {}, "f:a": {}}, "f:type": {}}], ["patcher", "Update", {"f:data": {"f:c": {}}}], ["smp", "Update", {"f:data": {"f:e": {}}}]]`},
		{"PATCH", "/api/v1/namespaces/default/secrets/mh3?fieldManager=applier", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"mh3"},"stringData":{"g":"h"}}`,
			`[["applier", "Apply", {"f:stringData": {"f:g": {}}}]]`},
		{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/mh4?fieldManager=applier", "application/apply-patch+yaml", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"mh4"},"spec":{"holderIdentity":"x"}}`,
			`[["applier", "Apply", {"f:spec": {"f:holderIdentity": {}}}]]`},
		{"PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/mh4?fieldManager=patcher", "application/merge-patch+json", `{"spec":{"leaseDurationSeconds":5}}`,
			`[["applier", "Apply", {"f:spec": {"f:holderIdentity": {}}}], ["patcher", "Update", {"f:spec": {"f:leaseDurationSeconds": {}}}]]`},
		{"PATCH", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings/mh5?fieldManager=applier", "application/apply-patch+yaml", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"mh5"},"roleRef":{"kind":"ClusterRole","name":"view","apiGroup":"rbac.authorization.k8s.io"},"subjects":[{"kind":"User","name":"u"}]}`,
			`[["applier", "Apply", {"f:roleRef": {}, "f:subjects": {}}]]`},
		{"PATCH", "/api/v1/namespaces/mh6?fieldManager=applier", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"mh6"}}`,
			`[]`},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", c.ctype)
		r.Header.Set("User-Agent", "curl/8.14.1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var obj struct {
			Metadata struct {
				ManagedFields []struct {
					Manager, Operation string
					FieldsV1           any
				}
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &obj); err != nil || w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
		got := []any{}
		for _, e := range obj.Metadata.ManagedFields {
			got = append(got, []any{e.Manager, e.Operation, e.FieldsV1})
		}
		var want []any
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.Marshal(got)
			t.Errorf("%s %s %s:\n got  %s\n want %s", c.method, c.path, c.body, g, c.want)
		}
	}
}
