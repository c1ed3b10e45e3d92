package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// builtInObjects are objects of every built-in kind kplane answers in
// protobuf, with the values a transcoder could get wrong: times with and
// without fractions, micro-times, negative and 64-bit integers, floats,
// bytes, escapes and non-ASCII text, strings longer than 127 bytes, empty
// and null members, nested lists and maps, and a CRD schema's raw JSON
// and unions.
var builtInObjects = []struct{ path, body string }{
	{"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"pb","labels":{"team":"a"},"annotations":{"note":"<&>\u2028"}}}`},
	{"/api/v1/namespaces/pb/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","finalizers":["x.io/keep"]},
		"data":{"long":"` + strings.Repeat("0123456789", 30) + `","empty":"","tab":"a\tb\"c\\d"},"binaryData":{"bin":"AAH/","none":""},"immutable":false}`},
	{"/api/v1/namespaces/pb/secrets", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":"{{cm}}","controller":true,"blockOwnerDeletion":false}]},
		"type":"kubernetes.io/tls","data":{"tls.crt":"LS0tLQ==","tls.key":"AAECAwQ="},"immutable":true}`},
	{"/api/v1/namespaces/pb/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa"},
		"secrets":[{"name":"s"},{"kind":"Secret","namespace":"pb","name":"t","uid":"u","apiVersion":"v1","resourceVersion":"1","fieldPath":"x"}],
		"imagePullSecrets":[{"name":"pull"}],"automountServiceAccountToken":false}`},
	{"/api/v1/namespaces/pb/events", `{"apiVersion":"v1","kind":"Event","metadata":{"name":"e"},
		"involvedObject":{"kind":"ConfigMap","namespace":"pb","name":"cm","uid":"0d1e2f","apiVersion":"v1","resourceVersion":"9"},
		"reason":"Changed","message":"the value went from \u003cnone\u003e to 日本語","source":{"component":"test","host":"h"},
		"firstTimestamp":"2026-11-26T01:02:03Z","lastTimestamp":"2026-11-26T01:02:03.750+02:00","count":-3,"type":"Warning",
		"eventTime":"2026-11-26T01:02:03.123456Z","series":{"count":2147483647,"lastObservedTime":"2026-11-26T01:02:04.000001Z"},
		"action":"Update","related":{"kind":"Secret","name":"s"},"reportingComponent":"rc","reportingInstance":"ri"}`},
	// Served over the core Events: its list has both, converted.
	{"/apis/events.k8s.io/v1/namespaces/pb/events", `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e2"},
		"eventTime":"2026-11-26T01:02:03.123456Z","series":{"count":3,"lastObservedTime":"2026-11-26T01:02:05.000001Z"},
		"reportingController":"example.com/c","reportingInstance":"i","action":"Update","reason":"Changed",
		"regarding":{"kind":"ConfigMap","namespace":"pb","name":"cm","uid":"{{cm}}"},"related":{"kind":"Secret","name":"s"},"note":"日本語","type":"Normal"}`},
	{"/apis/coordination.k8s.io/v1/namespaces/pb/leases", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},
		"spec":{"holderIdentity":"pod-1","leaseDurationSeconds":15,"acquireTime":"2026-11-26T01:00:00.000000Z","renewTime":"2026-11-26T01:02:03.999999Z","leaseTransitions":2147483647}}`},
	{"/apis/rbac.authorization.k8s.io/v1/namespaces/pb/roles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"r"},
		"rules":[{"apiGroups":[""],"resources":["configmaps","secrets"],"verbs":["get","list"],"resourceNames":["cm"]},{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}`},
	// An aggregated role's rules are its controller's (none match here):
	// the URLs are another role's.
	{"/apis/rbac.authorization.k8s.io/v1/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"pb-agg"},
		"aggregationRule":{"clusterRoleSelectors":[{"matchLabels":{"agg":"yes"},"matchExpressions":[{"key":"tier","operator":"In","values":["a","b"]},{"key":"x","operator":"Exists"}]}]}}`},
	{"/apis/rbac.authorization.k8s.io/v1/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"pb-urls"},
		"rules":[{"nonResourceURLs":["/healthz","/version"],"verbs":["get"]}]}`},
	{"/apis/rbac.authorization.k8s.io/v1/namespaces/pb/rolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"rb"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},
		"subjects":[{"kind":"ServiceAccount","name":"sa","namespace":"pb"},{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"jane"}]}`},
	{"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"pb-crb"},
		"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"pb-agg"},"subjects":[{"kind":"Group","apiGroup":"rbac.authorization.k8s.io","name":"devs"}]}`},
	{"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"pb-checks"},
		"webhooks":[{"name":"v.pb.example.com","clientConfig":{"url":"https://127.0.0.1:1/v","caBundle":"Y2E="},"failurePolicy":"Ignore",
			"rules":[{"operations":["CREATE"],"apiGroups":["nothing.example.com"],"apiVersions":["v1"],"resources":["none/*"],"scope":"Namespaced"}],
			"objectSelector":{"matchExpressions":[{"key":"a","operator":"In","values":["b"]}]},"sideEffects":"None","timeoutSeconds":3,"admissionReviewVersions":["v1"],
			"matchConditions":[{"name":"c","expression":"request.name != 'x'"}]}]}`},
	{"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"pb-defaults"},
		"webhooks":[{"name":"m.pb.example.com","clientConfig":{"service":{"namespace":"pb","name":"hooks","path":"/m","port":8443}},"failurePolicy":"Ignore",
			"rules":[{"operations":["*"],"apiGroups":["nothing.example.com"],"apiVersions":["*"],"resources":["*"]}],
			"sideEffects":"NoneOnDryRun","reinvocationPolicy":"IfNeeded","admissionReviewVersions":["v1","v1beta1"]}]}`},
	{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.pb.example.com"},
		"spec":{"group":"pb.example.com","scope":"Namespaced","names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","shortNames":["gd"],"categories":["all"]},
		"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{},"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
		"additionalPrinterColumns":[{"name":"Size","type":"number","jsonPath":".spec.size","priority":1}],
		"schema":{"openAPIV3Schema":{"type":"object","description":"a gadget \u003cpb\u003e","properties":{
			"spec":{"type":"object","required":["size"],"properties":{
				"size":{"type":"number","minimum":-1.5,"maximum":1e3,"multipleOf":0.5,"default":2.5},
				"replicas":{"type":"integer","format":"int32","default":1},
				"mode":{"type":"string","enum":["a","b"],"default":"a","maxLength":10,"pattern":"^[ab]$"},
				"port":{"x-kubernetes-int-or-string":true},
				"labels":{"type":"object","additionalProperties":{"type":"string"}},
				"extra":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
				"items":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["name"],"maxItems":5,
					"items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}},
				"config":{"type":"object","default":{"a":[1,{"b":null}]},"properties":{"a":{"type":"array","items":{"x-kubernetes-preserve-unknown-fields":true}}}}},
				"x-kubernetes-validations":[{"rule":"self.size \u003e= 0.0","message":"size must not be negative","fieldPath":".size","reason":"FieldValueInvalid"}]},
			"status":{"type":"object","properties":{"replicas":{"type":"integer"}}}}}}}]}}`},
	{"/api/v1/namespaces/pb/resourcequotas", `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},
		"spec":{"hard":{"pods":"4","requests.cpu":"1500m"},"scopeSelector":{"matchExpressions":[{"scopeName":"PriorityClass","operator":"In","values":["high"]}]}}}`},
	{"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{"name":"pb-policy"},
		"spec":{"failurePolicy":"Fail","paramKind":{"apiVersion":"v1","kind":"ConfigMap"},
			"matchConstraints":{"resourceRules":[{"apiGroups":["nothing.example.com"],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resources":["things"]}]},
			"variables":[{"name":"n","expression":"object.metadata.name"}],
			"validations":[{"expression":"variables.n.size() < 64","message":"too long","reason":"Invalid"},{"expression":"true","messageExpression":"'ok ' + variables.n"}],
			"auditAnnotations":[{"key":"name","valueExpression":"string(variables.n)"}],"matchConditions":[{"name":"m","expression":"true"}]}}`},
	{"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicyBinding","metadata":{"name":"pb-binding"},
		"spec":{"policyName":"pb-policy","validationActions":["Deny","Audit"],"paramRef":{"name":"cm","namespace":"pb","parameterNotFoundAction":"Deny"},
			"matchResources":{"namespaceSelector":{"matchLabels":{"team":"a"}},"excludeResourceRules":[{"apiGroups":["*"],"apiVersions":["*"],"operations":["DELETE"],"resources":["*"],"resourceNames":["keep"]}]}}}`},
	{"/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicy","metadata":{"name":"pb-mutation"},
		"spec":{"failurePolicy":"Ignore","reinvocationPolicy":"IfNeeded",
			"matchConstraints":{"resourceRules":[{"apiGroups":["nothing.example.com"],"apiVersions":["v1"],"operations":["CREATE"],"resources":["things"]}]},
			"mutations":[{"patchType":"ApplyConfiguration","applyConfiguration":{"expression":"Object{metadata: Object.metadata{labels: {'pb': 'yes'}}}"}},
				{"patchType":"JSONPatch","jsonPatch":{"expression":"[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}]"}}]}}`},
	{"/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicyBinding","metadata":{"name":"pb-mbinding"},
		"spec":{"policyName":"pb-mutation","matchResources":{"objectSelector":{"matchExpressions":[{"key":"x","operator":"DoesNotExist"}]}}}}`},
	// spec.extra is a map of named lists, each a message of its own in
	// protobuf; request is bytes.
	{"/apis/certificates.k8s.io/v1/certificatesigningrequests", `{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"pb-csr"},
		"spec":{"request":"{{csr}}","signerName":"example.com/pb","expirationSeconds":3600,"usages":["digital signature","client auth"],
		"username":"jane","uid":"u-1","groups":["devs","system:authenticated"],"extra":{"a.example.com/empty":[],"a.example.com/scopes":["x","y"],"b.example.com/one":["z"]}}}`},
	{"/apis/certificates.k8s.io/v1/clustertrustbundles", `{"apiVersion":"certificates.k8s.io/v1","kind":"ClusterTrustBundle","metadata":{"name":"pb-bundle"},
		"spec":{"trustBundle":"{{pem}}"}}`},
	{"/apis/storagemigration.k8s.io/v1/storageversionmigrations", `{"apiVersion":"storagemigration.k8s.io/v1","kind":"StorageVersionMigration","metadata":{"name":"pb-migration"},
		"spec":{"resource":{"group":"","resource":"configmaps"}}}`},
	{"/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"pb-level"},
		"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":0,"lendablePercent":50,"borrowingLimitPercent":200,
		"limitResponse":{"type":"Queue","queuing":{"queues":16,"handSize":4,"queueLengthLimit":7}}}}}`},
	{"/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"pb-schema"},
		"spec":{"priorityLevelConfiguration":{"name":"pb-level"},"matchingPrecedence":4000,"distinguisherMethod":{"type":"ByNamespace"},
		"rules":[{"subjects":[{"kind":"User","user":{"name":"nobody@example.com"}},{"kind":"Group","group":{"name":"pb-group"}},
			{"kind":"ServiceAccount","serviceAccount":{"namespace":"pb","name":"*"}}],
			"resourceRules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"],"clusterScope":false,"namespaces":["pb"]}],
			"nonResourceRules":[{"verbs":["get"],"nonResourceURLs":["/pb/*"]}]}]}}`},
}

// pbCertificates are a certificate request and a certificate, to stand
// for {{csr}} (base64) and {{pem}} (a JSON string's contents) in
// builtInObjects.
func pbCertificates(t *testing.T) (csr, certPEM string) {
	t.Helper()
	req, _ := csrFor(t, "jane", "devs")
	cert, err := json.Marshal(string(webhookCerts(t, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(req), string(cert[1 : len(cert)-1])
}

// Every built-in kind's objects read the same in protobuf as in JSON, as
// lists and one by one: protobuf answers are transcoded from the stored
// JSON (internal/apiserver/transcode), JSON ones are the stored JSON, so
// this holds the transcoder to the objects a real server stores.
func TestProtobufMatchesJSONForEveryBuiltInKind(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{admissionregistrationv1.AddToScheme, corev1.AddToScheme, eventsv1.AddToScheme, coordinationv1.AddToScheme, rbacv1.AddToScheme, apiextensionsv1.AddToScheme,
		certificatesv1.AddToScheme, svmv1.AddToScheme, flowcontrolv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	csr, certPEM := pbCertificates(t)
	// "{{name}}" → the uid of the object named so
	uids := map[string]string{"{{csr}}": csr, "{{pem}}": certPEM}
	for _, o := range builtInObjects {
		reqBody := o.body
		for ref, uid := range uids {
			reqBody = strings.ReplaceAll(reqBody, ref, uid)
		}
		code, _, body := s.call(t, "POST", o.path, "application/json", []byte(reqBody))
		if code != 201 {
			t.Fatalf("POST %s: %d %s", o.path, code, body)
		}
		var meta struct {
			Kind     string
			Metadata struct{ Name, UID, ResourceVersion string }
		}
		if err := json.Unmarshal(body, &meta); err != nil {
			t.Fatal(err)
		}
		uids["{{"+meta.Metadata.Name+"}}"] = meta.Metadata.UID
		// The list at the create's revision: kplane's own controllers may
		// write meanwhile (a new namespace's ServiceAccount), which would
		// move a list's resourceVersion between the two reads.
		list := o.path + "?resourceVersionMatch=Exact&resourceVersion=" + meta.Metadata.ResourceVersion
		for _, path := range []string{list, o.path + "/" + meta.Metadata.Name} {
			// A controller may write the object between the two reads
			// (a migration runs): they are read again until they agree
			// on its resourceVersion.
			for attempt := 0; ; attempt++ {
				code, h, pbBody := s.call(t, "GET", path, "", nil, "Accept", "application/vnd.kubernetes.protobuf")
				if code != 200 || h.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
					t.Fatalf("GET %s in protobuf: %d %q %s", path, code, h.Get("Content-Type"), pbBody)
				}
				fromPB, _, err := pb.Decode(pbBody, nil, nil)
				if err != nil {
					t.Fatalf("GET %s: decoding the protobuf: %v", path, err)
				}
				code, _, jsonBody := s.call(t, "GET", path, "", nil, "Accept", "application/json")
				if code != 200 {
					t.Fatalf("GET %s in JSON: %d %s", path, code, jsonBody)
				}
				fromJSON, err := scheme.New(fromPB.GetObjectKind().GroupVersionKind())
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(jsonBody, fromJSON); err != nil {
					t.Fatalf("GET %s: decoding the JSON: %v", path, err)
				}
				pbMeta, _ := apimeta.CommonAccessor(fromPB)
				jsonMeta, _ := apimeta.CommonAccessor(fromJSON)
				if pbMeta.GetResourceVersion() != jsonMeta.GetResourceVersion() && attempt < 10 {
					continue
				}
				if got, want := normalized(t, fromPB), normalized(t, fromJSON); !reflect.DeepEqual(got, want) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want)
					t.Errorf("%s %s: protobuf and JSON differ:\nprotobuf %s\nJSON     %s", meta.Kind, path, g, w)
				}
				break
			}
		}
		// And created from a protobuf body, as client-go's typed clients
		// send them: the object read back, renamed (a CRD's name is its
		// spec's, so it is left out).
		if meta.Kind == "CustomResourceDefinition" {
			continue
		}
		code, _, pbBody := s.call(t, "GET", o.path+"/"+meta.Metadata.Name, "", nil, "Accept", "application/vnd.kubernetes.protobuf")
		if code != 200 {
			t.Fatalf("GET %s/%s: %d", o.path, meta.Metadata.Name, code)
		}
		obj, _, err := pb.Decode(pbBody, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := apimeta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		m.SetName(meta.Metadata.Name + "-from-pb")
		m.SetUID("")
		m.SetResourceVersion("")
		m.SetCreationTimestamp(metav1.Time{})
		m.SetManagedFields(nil)
		var sent bytes.Buffer
		if err := pb.Encode(obj, &sent); err != nil {
			t.Fatal(err)
		}
		code, h, created := s.call(t, "POST", o.path, "application/vnd.kubernetes.protobuf", sent.Bytes(), "Accept", "application/vnd.kubernetes.protobuf")
		if code != 201 || h.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
			t.Fatalf("POST %s in protobuf: %d %q %s", o.path, code, h.Get("Content-Type"), created)
		}
		back, _, err := pb.Decode(created, nil, nil)
		if err != nil {
			t.Fatalf("POST %s: decoding the answer: %v", o.path, err)
		}
		if bm, _ := apimeta.Accessor(back); bm.GetName() != meta.Metadata.Name+"-from-pb" || bm.GetUID() == "" {
			t.Errorf("POST %s in protobuf: answered %s, uid %q", o.path, bm.GetName(), bm.GetUID())
		}
	}
}

// normalized is obj as JSON members, without what protobuf cannot tell
// from absent (empty lists and maps, nulls) nor the type, which a list's
// protobuf items do not carry.
func normalized(t *testing.T, obj runtime.Object) any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if top, ok := v.(map[string]any); ok {
		delete(top, "apiVersion")
		delete(top, "kind")
		items, _ := top["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				delete(m, "apiVersion")
				delete(m, "kind")
			}
		}
	}
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if e = strip(e); e == nil {
					delete(x, k)
				} else {
					x[k] = e
				}
			}
			if len(x) == 0 {
				return nil
			}
		case []any:
			for i := range x {
				x[i] = strip(x[i])
			}
			if len(x) == 0 {
				return nil
			}
		}
		return v
	}
	return strip(v)
}
