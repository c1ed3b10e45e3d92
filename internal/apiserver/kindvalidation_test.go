package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The built-in kinds' own checks answer as kube-apiserver v1.37.2
// answered the same writes, one after another: what each Secret type
// requires, immutable ConfigMaps and Secrets and a Secret's type, RBAC
// rules, roleRefs and subjects (and the groups a binding may leave out),
// a Lease's numbers, and an Event's namespaces and reporter.
func TestKindValidationAsKubeAPIServer(t *testing.T) {
	h := newInProcess(t)
	send := func(method, path, ctype, body string) (string, []byte) {
		return statusLine(h, method, path, ctype, body)
	}
	const (
		secrets  = "/api/v1/namespaces/default/secrets"
		cms      = "/api/v1/namespaces/default/configmaps"
		rbac     = "/apis/rbac.authorization.k8s.io/v1/"
		leases   = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
		evns     = "/api/v1/namespaces/evns/events"
		fixed    = "Forbidden: field is immutable when `immutable` is set"
		jsonType = "application/json"
	)
	invalid := func(kind, name string, causes ...string) string {
		if len(causes) == 1 {
			return "422 " + kind + ` "` + name + `" is invalid: ` + causes[0]
		}
		return "422 " + kind + ` "` + name + `" is invalid: [` + strings.Join(causes, ", ") + "]"
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", secrets, `{"metadata":{"name":"s1"},"type":"kubernetes.io/tls","data":{}}`,
			invalid("Secret", "s1", "data[tls.crt]: Required value", "data[tls.key]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"t4"},"type":"kubernetes.io/tls","data":{"tls.crt":""}}`, invalid("Secret", "t4", "data[tls.key]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"s2"},"type":"kubernetes.io/dockerconfigjson","data":{}}`, invalid("Secret", "s2", "data[.dockerconfigjson]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"t1"},"type":"kubernetes.io/dockercfg","data":{".dockercfg":"bm90IGpzb24="}}`,
			invalid("Secret", "t1", `data[.dockercfg]: Invalid value: "<secret contents redacted>": invalid character 'o' in literal null (expecting 'u')`)},
		{"POST", secrets, `{"metadata":{"name":"s5"},"type":"kubernetes.io/service-account-token","data":{}}`,
			invalid("Secret", "s5", "metadata.annotations[kubernetes.io/service-account.name]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"s6"},"type":"kubernetes.io/basic-auth","data":{}}`,
			invalid("Secret", "s6", "data[username]: Required value", "data[password]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"t2"},"type":"kubernetes.io/basic-auth","data":{"username":""}}`, "201"},
		{"POST", secrets, `{"metadata":{"name":"t3"},"type":"kubernetes.io/ssh-auth","data":{"ssh-privatekey":""}}`, invalid("Secret", "t3", "data[ssh-privatekey]: Required value")},
		{"POST", secrets, `{"metadata":{"name":"t5"},"type":"Bad Type!","data":{}}`, "201"},
		{"POST", secrets, `{"metadata":{"name":"t6"},"data":{"a":"YQ=="}}`, "201"},
		{"PUT", secrets + "/t6", `{"metadata":{"name":"t6"},"type":"kubernetes.io/basic-auth","data":{"username":""}}`,
			invalid("Secret", "t6", `type: Invalid value: "kubernetes.io/basic-auth": field is immutable`)},
		{"POST", secrets, `{"metadata":{"name":"t7"},"immutable":true,"data":{"a":"YQ=="}}`, "201"},
		{"PUT", secrets + "/t7", `{"metadata":{"name":"t7"},"data":{"a":"Yg=="}}`, invalid("Secret", "t7", "immutable: "+fixed, "data: "+fixed)},
		{"POST", cms, `{"metadata":{"name":"m7"},"immutable":true,"data":{"a":"a"},"binaryData":{"b":"YQ=="}}`, "201"},
		{"PUT", cms + "/m7", `{"metadata":{"name":"m7","labels":{"x":"y"}},"immutable":true,"data":{"a":"a"},"binaryData":{"b":"YQ=="}}`, "200"},
		{"PUT", cms + "/m7", `{"metadata":{"name":"m7"},"data":{"a":"b"}}`, invalid("ConfigMap", "m7", "immutable: "+fixed, "data: "+fixed, "binaryData: "+fixed)},
		{"MERGE", cms + "/m7", `{"immutable":null}`, invalid("ConfigMap", "m7", "immutable: "+fixed)},
		{"POST", cms, `{"metadata":{"name":"m8"},"immutable":false,"data":{"a":"a"}}`, "201"},
		{"MERGE", cms + "/m8", `{"immutable":true,"data":{"a":"b"}}`, "200"},

		{"POST", rbac + "clusterroles", `{"metadata":{"name":"x7"},"rules":[{}]}`, invalid("ClusterRole.rbac.authorization.k8s.io", "x7",
			"rules[0].apiGroups: Required value: resource rules must supply at least one api group",
			"rules[0].resources: Required value: resource rules must supply at least one resource", "rules[0].verbs: Required value")},
		{"POST", rbac + "clusterroles", `{"metadata":{"name":"x4"},"rules":[{"verbs":["get"],"nonResourceURLs":["/x"],"resources":["pods"]}]}`,
			invalid("ClusterRole.rbac.authorization.k8s.io", "x4", `rules[0].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both regular resources and non-resource URLs`)},
		{"POST", rbac + "clusterroles", `{"metadata":{"name":"x5"},"rules":[{"verbs":["get"],"nonResourceURLs":["/x"]}]}`, "201"},
		{"POST", rbac + "namespaces/default/roles", `{"metadata":{"name":"x6"},"rules":[{"verbs":["get"],"nonResourceURLs":["/x"]}]}`,
			invalid("Role.rbac.authorization.k8s.io", "x6", `rules[0].nonResourceURLs: Invalid value: ["/x"]: namespaced rules cannot apply to non-resource URLs`)},
		{"POST", rbac + "clusterrolebindings", `{"metadata":{"name":"y1"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r1"},"subjects":[{"kind":"User","name":"u"}]}`, "201"},
		{"PUT", rbac + "clusterrolebindings/y1", `{"metadata":{"name":"y1"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r2"},"subjects":[{"kind":"User","name":"u"}]}`,
			invalid("ClusterRoleBinding.rbac.authorization.k8s.io", "y1", `roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole","Name":"r2"}: field is immutable`)},
		{"POST", rbac + "clusterrolebindings", `{"metadata":{"name":"y3"},"roleRef":{"apiGroup":"bogus","kind":"ClusterRole","name":""}}`,
			invalid("ClusterRoleBinding.rbac.authorization.k8s.io", "y3", `roleRef.apiGroup: Unsupported value: "bogus": supported values: "rbac.authorization.k8s.io"`, "roleRef.name: Required value")},
		{"POST", rbac + "clusterrolebindings", `{"metadata":{"name":"y4"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r1"},"subjects":[{"kind":"Bogus","name":"u"},{"kind":"User","name":""},{"kind":"ServiceAccount","name":"s"},{"kind":"ServiceAccount","name":"s","namespace":"default","apiGroup":"x"},{"kind":"Group","name":"g","apiGroup":"y"}]}`,
			invalid("ClusterRoleBinding.rbac.authorization.k8s.io", "y4", `subjects[0].kind: Unsupported value: "Bogus": supported values: "ServiceAccount", "User", "Group"`,
				"subjects[2].namespace: Required value", `subjects[3].apiGroup: Unsupported value: "x": supported values: ""`,
				`subjects[4].apiGroup: Unsupported value: "y": supported values: "rbac.authorization.k8s.io"`, "subjects[1].name: Required value")},
		{"POST", rbac + "clusterrolebindings", `{"metadata":{"name":"y2"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r1"}}`,
			invalid("ClusterRoleBinding.rbac.authorization.k8s.io", "y2", `roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`)},
		{"POST", rbac + "namespaces/default/rolebindings", `{"metadata":{"name":"y5"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Bogus","name":"r1"},"subjects":[{"kind":"ServiceAccount","name":"s"}]}`,
			invalid("RoleBinding.rbac.authorization.k8s.io", "y5", `roleRef.kind: Unsupported value: "Bogus": supported values: "Role", "ClusterRole"`)},
		{"POST", rbac + "namespaces/default/rolebindings", `{"metadata":{"name":"y6"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"a/b"}}`,
			invalid("RoleBinding.rbac.authorization.k8s.io", "y6", `roleRef.name: Invalid value: "a/b": may not contain '/'`)},
		{"POST", leases, `{"metadata":{"name":"l1"},"spec":{"leaseDurationSeconds":0,"leaseTransitions":-1}}`, invalid("Lease.coordination.k8s.io", "l1",
			"spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0", "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0")},

		// Events: the old form's namespaces agree; the new form names its
		// reporter, action and reason.
		{"POST", "/api/v1/namespaces", `{"metadata":{"name":"evns"}}`, "201"},
		{"POST", evns, `{"metadata":{"name":"ev1"},"involvedObject":{}}`, invalid("Event", "ev1", `involvedObject.namespace: Invalid value: "": does not match event.namespace`)},
		{"POST", evns, `{"metadata":{"name":"ev2"},"involvedObject":{"namespace":"default"}}`, invalid("Event", "ev2", `involvedObject.namespace: Invalid value: "default": does not match event.namespace`)},
		{"POST", evns, `{"metadata":{"name":"ev3"},"involvedObject":{"namespace":"evns"}}`, "201"},
		{"POST", "/api/v1/namespaces/default/events", `{"metadata":{"name":"ev6"},"involvedObject":{}}`, "201"},
		{"POST", evns, `{"metadata":{"name":"ev4"},"involvedObject":{},"eventTime":"2026-11-26T01:02:03.123456Z"}`, invalid("Event", "ev4",
			`involvedObject.namespace: Invalid value: "": does not match event.namespace`, "reportingComponent: Required value",
			`reportingComponent: Invalid value: "": name part must be non-empty`,
			`reportingComponent: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			"reportingInstance: Required value", "action: Required value", "reason: Required value")},
		{"POST", evns, `{"metadata":{"name":"ev5"},"involvedObject":{"namespace":"evns"},"eventTime":"2026-11-26T01:02:03.123456Z","reportingComponent":"a","reportingInstance":"b","action":"c","reason":"d"}`, "201"},
		{"POST", evns, `{"metadata":{"name":"ev7"},"involvedObject":{"namespace":"evns"},"eventTime":"2026-11-26T01:02:03.123456Z","reportingComponent":"a",` +
			`"reportingInstance":"` + strings.Repeat("i", 129) + `","action":"` + strings.Repeat("a", 129) + `","reason":"` + strings.Repeat("r", 129) +
			`","message":"` + strings.Repeat("m", 1025) + `"}`, invalid("Event", "ev7",
			`reportingInstance: Invalid value: "": can have at most 128 characters`, `action: Invalid value: "": can have at most 128 characters`,
			`reason: Invalid value: "": can have at most 128 characters`, `message: Invalid value: "": can have at most 1024 characters`)},
		{"POST", evns, `{"metadata":{"name":"ev8"},"involvedObject":{"namespace":"evns"},"eventTime":"2026-11-26T01:02:03.123456Z","reportingComponent":"a",` +
			`"reportingInstance":"` + strings.Repeat("i", 128) + `","action":"` + strings.Repeat("a", 128) + `","reason":"` + strings.Repeat("r", 128) +
			`","message":"` + strings.Repeat("m", 1024) + `"}`, "201"},
	} {
		method, ctype := c.method, jsonType
		if method == "MERGE" {
			method, ctype = http.MethodPatch, "application/merge-patch+json"
		}
		if got, _ := send(method, c.path, ctype, c.body); got != c.want {
			t.Errorf("%s %s %s:\n got %s\nwant %s", c.method, c.path, c.body, got, c.want)
		}
	}

	// A binding may leave out the groups of its roleRef and of its User
	// and Group subjects; a ServiceAccount's stays empty.
	got, body := send(http.MethodPost, rbac+"namespaces/default/rolebindings", jsonType,
		`{"metadata":{"name":"y8"},"roleRef":{"kind":"Role","name":"r"},"subjects":[{"kind":"User","name":"u"},{"kind":"ServiceAccount","name":"s"}]}`)
	var rb struct {
		RoleRef  struct{ APIGroup string }
		Subjects []struct{ APIGroup string }
	}
	if err := json.Unmarshal(body, &rb); got != "201" || err != nil || rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" ||
		len(rb.Subjects) != 2 || rb.Subjects[0].APIGroup != "rbac.authorization.k8s.io" || rb.Subjects[1].APIGroup != "" {
		t.Errorf("defaults: %s %s", got, body)
	}
}

// A Lease's coordinated leader election fields are dropped, as
// kube-apiserver v1.37.2 drops them with CoordinatedLeaderElection off
// (its default): on create, and on update unless the Lease has them.
func TestLeaseElectionFieldsAreDropped(t *testing.T) {
	h := newInProcess(t)
	const leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	for _, c := range []struct{ method, path, ctype, body string }{
		{http.MethodPost, leases, "application/json", `{"metadata":{"name":"l1"},"spec":{"holderIdentity":"a","strategy":"Bogus","preferredHolder":"x"}}`},
		{http.MethodPatch, leases + "/l1", "application/merge-patch+json", `{"spec":{"strategy":"OldestEmulationVersion","preferredHolder":"x"}}`},
	} {
		line, body := statusLine(h, c.method, c.path, c.ctype, c.body)
		var lease struct{ Spec map[string]any }
		if err := json.Unmarshal(body, &lease); err != nil || !strings.HasPrefix(line, "20") {
			t.Fatalf("%s %s: %s", c.method, c.path, line)
		}
		if _, ok := lease.Spec["strategy"]; ok || lease.Spec["preferredHolder"] != nil || lease.Spec["holderIdentity"] != "a" {
			t.Errorf("%s %s: spec %v", c.method, c.path, lease.Spec)
		}
	}
}
