package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// crdValidationBase is the CRD each case of TestCRDValidationAsKubeAPIServer
// changes with a JSON patch.
const crdValidationBase = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.ex.com"},
"spec":{"group":"ex.com","scope":"Namespaced","names":{"plural":"widgets","kind":"Widget"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"size":{"type":"integer"},"items":{"type":"array","items":{"type":"string"}}}},"status":{"type":"object","properties":{"size":{"type":"integer"}}}}}},
"subresources":{"status":{},"scale":{"specReplicasPath":".spec.size","statusReplicasPath":".status.size"}}}]}}`

// A CRD is checked as kube-apiserver v1.37.2 checks it: each case is the
// answer it gave to the same dry-run create. Where upstream names a field
// of its internal form, into which what every version shares is hoisted
// (spec.validation.openAPIV3Schema, spec.subresources,
// spec.additionalPrinterColumns, spec.selectableFields), the answer here
// names the v1 field the client sent (spec.versions[0]...), as kplane does
// on purpose.
func TestCRDValidationAsKubeAPIServer(t *testing.T) {
	_, h := newCustomResourcesHandler(t, gizmoCRD)
	tests := []struct{ name, patch, want string }{
		{"kind and listKind the same",
			`[{"op": "add", "path": "/spec/names/listKind", "value": "Widget"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same`},
		{"kind not a label",
			`[{"op": "replace", "path": "/spec/names/kind", "value": "wid_get"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.names.singular: Invalid value: "wid_get": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.kind: Invalid value: "wid_get": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.listKind: Invalid value: "wid_getList": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]`},
		{"no kind or plural",
			`[{"op": "remove", "path": "/spec/names/kind"}, {"op": "remove", "path": "/spec/names/plural"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [metadata.name: Invalid value: "widgets.ex.com": must be spec.names.plural+"."+spec.group, spec.names.plural: Required value, spec.names.singular: Required value, spec.names.kind: Required value, spec.names.listKind: Required value]`},
		{"short names and categories",
			`[{"op": "add", "path": "/spec/names/shortNames", "value": ["ok", "Bad"]}, {"op": "add", "path": "/spec/names/categories", "value": ["all", "a b"]}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.names.shortNames[1]: Invalid value: "Bad": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.names.categories[1]: Invalid value: "a b": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')]`},
		{"no scope",
			`[{"op": "remove", "path": "/spec/scope"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.scope: Required value`},
		{"unknown scope",
			`[{"op": "replace", "path": "/spec/scope", "value": "Bogus"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.scope: Unsupported value: "Bogus": supported values: "Cluster", "Namespaced"`},
		{"group without a dot",
			`[{"op": "replace", "path": "/spec/group", "value": "com"}, {"op": "replace", "path": "/metadata/name", "value": "widgets.com"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.com" is invalid: spec.group: Invalid value: "com": should be a domain with at least one dot`},
		{"no versions",
			`[{"op": "replace", "path": "/spec/versions", "value": []}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions: Invalid value: []: must have exactly one version marked as storage version, status.storedVersions: Invalid value: null: must have at least one stored version]`},
		{"no storage version",
			`[{"op": "replace", "path": "/spec/versions/0/storage", "value": false}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":false,"Deprecated":false,"DeprecationWarning":null,"Schema":null,"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null}]: must have exactly one version marked as storage version, status.storedVersions: Invalid value: null: must have at least one stored version]`},
		{"a version twice",
			`[{"op": "copy", "from": "/spec/versions/0", "path": "/spec/versions/-"}, {"op": "replace", "path": "/spec/versions/1/storage", "value": false}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions: Invalid value: [{"Name":"v1","Served":true,"Storage":true,"Deprecated":false,"DeprecationWarning":null,"Schema":null,"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null},{"Name":"v1","Served":true,"Storage":false,"Deprecated":false,"DeprecationWarning":null,"Schema":null,"Subresources":null,"AdditionalPrinterColumns":null,"SelectableFields":null}]: must contain unique version names`},
		{"no schema",
			`[{"op": "remove", "path": "/spec/versions/0/schema"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].schema.openAPIV3Schema: Required value`},
		{"a second version without a schema",
			`[{"op": "add", "path": "/spec/versions/-", "value": {"name": "v2", "served": true, "storage": false}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[1].schema.openAPIV3Schema: Required value`},
		{"a rule that does not compile",
			`[{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations", "value": [{"rule": "self.size >"}]}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.size \u003e","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:12: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}
 | self.size >
 | ...........^`},
		{"warning on a version not deprecated",
			`[{"op": "add", "path": "/spec/versions/0/deprecationWarning", "value": "x"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].deprecationWarning: Invalid value: "x": can only be set for deprecated versions`},
		{"empty warning",
			`[{"op": "add", "path": "/spec/versions/0/deprecated", "value": true}, {"op": "add", "path": "/spec/versions/0/deprecationWarning", "value": ""}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].deprecationWarning: Invalid value: "": must not be an empty string`},
		{"long warning",
			`[{"op": "add", "path": "/spec/versions/0/deprecated", "value": true}, {"op": "add", "path": "/spec/versions/0/deprecationWarning", "value": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].deprecationWarning: Invalid value: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx": must be <= 256 characters long`},
		{"warning with a tab",
			`[{"op": "add", "path": "/spec/versions/0/deprecated", "value": true}, {"op": "add", "path": "/spec/versions/0/deprecationWarning", "value": "a\tb"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].deprecationWarning: Invalid value: "a\tb": must only contain printable UTF-8 characters; non-printable character found at index 1`},
		{"scale paths empty",
			`[{"op": "replace", "path": "/spec/versions/0/subresources/scale", "value": {"specReplicasPath": "", "statusReplicasPath": ""}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].subresources.scale.specReplicasPath: Required value, spec.versions[0].subresources.scale.statusReplicasPath: Required value]`},
		{"scale paths without a dot",
			`[{"op": "replace", "path": "/spec/versions/0/subresources/scale", "value": {"specReplicasPath": "spec.size", "statusReplicasPath": "status.size", "labelSelectorPath": "x"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].subresources.scale.specReplicasPath: Invalid value: "spec.size": must be a simple json path starting with ., spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: "status.size": must be a simple json path starting with ., spec.versions[0].subresources.scale.labelSelectorPath: Invalid value: "x": must be a simple json path starting with .]`},
		{"scale paths elsewhere",
			`[{"op": "replace", "path": "/spec/versions/0/subresources/scale", "value": {"specReplicasPath": ".status.x", "statusReplicasPath": ".spec.x", "labelSelectorPath": ".metadata.x"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.x": should be a json path under .spec, spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: ".spec.x": should be a json path under .status, spec.versions[0].subresources.scale.labelSelectorPath: Invalid value: ".metadata.x": should be a json path under either .spec or .status]`},
		{"scale paths at the roots",
			`[{"op": "replace", "path": "/spec/versions/0/subresources/scale", "value": {"specReplicasPath": ".spec", "statusReplicasPath": ".status"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".spec": should be a json path under .spec, spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: ".status": should be a json path under .status]`},
		{"column empty",
			`[{"op": "add", "path": "/spec/versions/0/additionalPrinterColumns", "value": [{"name": "", "type": "", "jsonPath": ""}]}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].additionalPrinterColumns[0].name: Required value, spec.versions[0].additionalPrinterColumns[0].type: Required value: must be one of boolean,date,integer,number,string, spec.versions[0].additionalPrinterColumns[0].JSONPath: Required value]`},
		{"column type, format and path",
			`[{"op": "add", "path": "/spec/versions/0/additionalPrinterColumns", "value": [{"name": "A", "type": "bogus", "format": "bogus", "jsonPath": "spec.size"}]}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.versions[0].additionalPrinterColumns[0].type: Invalid value: "bogus": must be one of boolean,date,integer,number,string, spec.versions[0].additionalPrinterColumns[0].format: Invalid value: "bogus": must be one of byte,date,date-time,double,float,int32,int64,password, spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: "spec.size": must be a simple json path starting with .]`},
		{"selectable field of a list",
			`[{"op": "add", "path": "/spec/versions/0/selectableFields", "value": [{"jsonPath": ".spec.items"}]}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.versions[0].selectableFields[0].jsonPath: Invalid value: ".spec.items": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.`},
		{"unknown strategy",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Bogus"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.strategy: Unsupported value: "Bogus": supported values: "None", "Webhook"`},
		{"empty strategy",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": ""}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.strategy: Required value`},
		{"webhook config with strategy None",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "None", "webhook": {"clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook, spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook]`},
		{"webhook without config",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook, spec.conversion.conversionReviewVersions: Required value]`},
		{"webhook with neither url nor service",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required`},
		{"webhook with both url and service",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x", "service": {"name": "s", "namespace": "n"}}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required`},
		{"webhook url and review versions",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://u:p@/x?y=1#f"}, "conversionReviewVersions": ["v9", "v9", "V1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path], spec.conversion.webhookClientConfig.url: Invalid value: "": host must be specified; desired format: https://host[/path], spec.conversion.webhookClientConfig.url: Invalid value: "u:p": user information is not permitted in the URL, spec.conversion.webhookClientConfig.url: Invalid value: "f": fragments are not permitted in the URL, spec.conversion.webhookClientConfig.url: Invalid value: "y=1": query parameters are not permitted in the URL, spec.conversion.conversionReviewVersions[1]: Invalid value: "v9": duplicate version, spec.conversion.conversionReviewVersions[2]: Invalid value: "V1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), spec.conversion.conversionReviewVersions: Invalid value: ["v9","v9","V1"]: must include at least one of v1, v1beta1]`},
		{"webhook url that does not parse",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x y"}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.webhookClientConfig.url: Required value: url must be a valid URL: parse "https://x y": invalid character " " in host name; desired format: https://host[/path]`},
		{"webhook service",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "", "namespace": "", "port": 0, "path": "x//Y/"}}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.conversion.webhookClientConfig.service.name: Required value, spec.conversion.webhookClientConfig.service.namespace: Required value, spec.conversion.webhookClientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive, spec.conversion.webhookClientConfig.service.path: Invalid value: "x//Y/": must start with a '/', spec.conversion.webhookClientConfig.service.path: Invalid value: "x//Y/": segment[0] may not be empty, spec.conversion.webhookClientConfig.service.path: Invalid value: "x//Y/": segment[1] may not be empty, spec.conversion.webhookClientConfig.service.path: Invalid value: "x//Y/": segment[2]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]`},
		{"webhook service path //",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s", "namespace": "n", "path": "//"}}, "conversionReviewVersions": ["v1beta1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: spec.conversion.webhookClientConfig.service.path: Invalid value: "//": segment[0] may not be empty`},
		{"webhook with preserveUnknownFields",
			`[{"op": "add", "path": "/spec/preserveUnknownFields", "value": true}, {"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x"}, "conversionReviewVersions": ["v1"]}}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.conversion.strategy: Invalid value: "Webhook": must be None if spec.preserveUnknownFields is true, spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead]`},
		{"defaults with preserveUnknownFields",
			`[{"op": "add", "path": "/spec/preserveUnknownFields", "value": true}, {"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/default", "value": 1}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.ex.com" is invalid: [spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema, spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead]`},
		{"protected group without approval",
			`[{"op": "replace", "path": "/spec/group", "value": "foo.k8s.io"}, {"op": "replace", "path": "/metadata/name", "value": "widgets.foo.k8s.io"}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.foo.k8s.io" is invalid: metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111`},
		{"protected group with a bad approval",
			`[{"op": "replace", "path": "/spec/group", "value": "foo.kubernetes.io"}, {"op": "replace", "path": "/metadata/name", "value": "widgets.foo.kubernetes.io"}, {"op": "add", "path": "/metadata/annotations", "value": {"api-approved.kubernetes.io": "nope"}}]`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "widgets.foo.kubernetes.io" is invalid: metadata.annotations[api-approved.kubernetes.io]: Invalid value: "nope": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111`},
		{"protected group unapproved",
			`[{"op": "replace", "path": "/spec/group", "value": "k8s.io"}, {"op": "replace", "path": "/metadata/name", "value": "widgets.k8s.io"}, {"op": "add", "path": "/metadata/annotations", "value": {"api-approved.kubernetes.io": "unapproved, testing"}}]`,
			`201`},
		{"protected group approved",
			`[{"op": "replace", "path": "/spec/group", "value": "x.k8s.io"}, {"op": "replace", "path": "/metadata/name", "value": "widgets.x.k8s.io"}, {"op": "add", "path": "/metadata/annotations", "value": {"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1111"}}]`,
			`201`},
		{"valid, with a webhook",
			`[{"op": "add", "path": "/spec/conversion", "value": {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x/convert"}, "conversionReviewVersions": ["v1"]}}}]`,
			`201`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := jsonpatch.DecodePatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			body, err := p.Apply([]byte(crdValidationBase))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := statusLine(h, http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?dryRun=All", "application/json", string(body))
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A CRD's updates, status writes and delete answer as kube-apiserver
// v1.37.2 answered the same requests: the defaults CRD v1 sets, what may
// not change, the versions ever stored (which must stay until a storage
// migration drops them from status.storedVersions), the accepted names,
// and a first delete that only marks the CRD (no generation bump, no grace
// period, no garbage collector finalizer, a Terminating condition).
func TestCRDUpdatesAsKubeAPIServer(t *testing.T) {
	_, h := newCustomResourcesHandler(t, gizmoCRD)
	const path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
	const part = path + "/parts.ex.com"
	const schema = `"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}`
	const invalid = `422 CustomResourceDefinition.apiextensions.k8s.io "parts.ex.com" is invalid: `
	// summary is the answer's code, then the CRD's generation, stored
	// versions, names and conversion strategy, or the Status's message.
	summary := func(method, path, ctype, body string) string {
		line, data := statusLine(h, method, path, ctype, body)
		if !strings.HasPrefix(line, "20") {
			return line
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		n := crd.Spec.Names
		strategy := "nil"
		if crd.Spec.Conversion != nil {
			strategy = string(crd.Spec.Conversion.Strategy)
		}
		return strings.Join([]string{line, "gen=" + strconv.FormatInt(crd.Generation, 10), "stored=" + strings.Join(crd.Status.StoredVersions, ","),
			"names=" + n.Plural + "," + n.Singular + "," + n.Kind + "," + n.ListKind, "conversion=" + strategy}, " ")
	}
	const merge = "application/merge-patch+json"
	steps := []struct{ method, path, ctype, body, want string }{
		{http.MethodPost, path, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"parts.ex.com"},
"spec":{"group":"ex.com","scope":"Namespaced","names":{"plural":"parts","kind":"Part"},"versions":[{"name":"v1","served":true,"storage":true,` + schema + `}]}}`,
			"201 gen=1 stored=v1 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"scope":"Cluster"}}`, invalid + `spec.scope: Invalid value: "Cluster": field is immutable`},
		{http.MethodPatch, part, merge, `{"spec":{"names":{"kind":"Piece"}}}`, invalid + `spec.names.kind: Invalid value: "Piece": field is immutable`},
		{http.MethodPatch, part, merge, `{"spec":{"names":{"plural":"pieces"}}}`, invalid + `spec.names.plural: Invalid value: "pieces": field is immutable`},
		{http.MethodPatch, part, merge, `{"spec":{"group":"ex2.com"}}`, invalid + `spec.group: Invalid value: "ex2.com": field is immutable`},
		{http.MethodPatch, part, merge, `{"spec":{"names":{"listKind":"","singular":""}}}`, "200 gen=1 stored=v1 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"conversion":null}}`, "200 gen=1 stored=v1 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"versions":[{"name":"v1","served":true,"storage":false,` + schema + `},{"name":"v2","served":true,"storage":true,` + schema + `}]}}`,
			"200 gen=2 stored=v1,v2 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"versions":[{"name":"v2","served":true,"storage":true,` + schema + `}]}}`,
			invalid + `status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions`},
		{http.MethodPatch, part + "/status", merge, `{"status":{"storedVersions":["v2"]}}`, "200 gen=2 stored=v2 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"versions":[{"name":"v2","served":true,"storage":true,` + schema + `}]}}`,
			"200 gen=3 stored=v2 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part + "/status", merge, `{"status":{"acceptedNames":{"plural":"Bad","kind":"Part","listKind":"Part"}}}`,
			invalid + `[status.acceptedNames.plural: Invalid value: "Bad": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'), status.acceptedNames.listKind: Invalid value: "Part": kind and listKind may not be the same]`},
		{http.MethodPatch, part + "/status", merge, `{"status":{"storedVersions":[]}}`, "200 gen=3 stored=v2 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, part, merge, `{"spec":{"preserveUnknownFields":true}}`,
			invalid + `spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead`},
		{http.MethodPatch, part, merge, `{"metadata":{"annotations":{"api-approved.kubernetes.io":"nope"}}}`, "200 gen=3 stored=v2 names=parts,part,Part,PartList conversion=None"},
	}
	// A protected group's approval may not become invalid, nor go.
	const approved = path + "/parts.x.k8s.io"
	const approval = `metadata.annotations[api-approved.kubernetes.io]: `
	steps = append(steps, []struct{ method, path, ctype, body, want string }{
		{http.MethodPost, path, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"parts.x.k8s.io","annotations":{"api-approved.kubernetes.io":"unapproved, testing"}},
"spec":{"group":"x.k8s.io","scope":"Namespaced","names":{"plural":"parts","kind":"Part"},"versions":[{"name":"v1","served":true,"storage":true,` + schema + `}]}}`,
			"201 gen=1 stored=v1 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, approved, merge, `{"metadata":{"annotations":{"api-approved.kubernetes.io":"nope"}}}`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "parts.x.k8s.io" is invalid: ` + approval + `Invalid value: "nope": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111`},
		{http.MethodPatch, approved, merge, `{"metadata":{"annotations":{"api-approved.kubernetes.io":"unapproved, again"}}}`, "200 gen=1 stored=v1 names=parts,part,Part,PartList conversion=None"},
		{http.MethodPatch, approved, merge, `{"metadata":{"annotations":{"api-approved.kubernetes.io":null}}}`,
			`422 CustomResourceDefinition.apiextensions.k8s.io "parts.x.k8s.io" is invalid: ` + approval + `Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111`},
	}...)
	for _, s := range steps {
		if got := summary(s.method, s.path, s.ctype, s.body); got != s.want {
			t.Errorf("%s %s %s:\n got  %s\n want %s", s.method, s.path, s.body, got, s.want)
		}
	}

	line, data := statusLine(h, http.MethodDelete, part+"?propagationPolicy=Foreground", "", "")
	var crd apiextensionsv1.CustomResourceDefinition
	if err := json.Unmarshal(data, &crd); err != nil || line != "200" {
		t.Fatalf("DELETE: %s %s", line, data)
	}
	var terminating *apiextensionsv1.CustomResourceDefinitionCondition
	for i, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Terminating {
			terminating = &crd.Status.Conditions[i]
		}
	}
	if crd.DeletionTimestamp == nil || crd.Generation != 3 || crd.DeletionGracePeriodSeconds != nil ||
		strings.Join(crd.Finalizers, ",") != "customresourcecleanup.apiextensions.k8s.io" ||
		terminating == nil || terminating.Reason != "InstanceDeletionPending" ||
		terminating.Message != "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon" {
		t.Errorf("DELETE marked the CRD so: deletionTimestamp %v, generation %d, grace %v, finalizers %v, Terminating %+v",
			crd.DeletionTimestamp, crd.Generation, crd.DeletionGracePeriodSeconds, crd.Finalizers, terminating)
	}
}

// A CRD that converts with a webhook that cannot be reached is served in
// its storage version only: a request in another version fails (500) with
// the answers kube-apiserver v1.37.2 gave (reason InternalError for a
// read or delete, Unknown for a create or patch), and nothing is written
// or deleted. registry/webhook tests the conversions themselves.
func TestUnreachableConversionWebhookAsKubeAPIServer(t *testing.T) {
	do, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"hooks.ex.com"},
"spec":{"group":"ex.com","scope":"Namespaced","names":{"plural":"hooks","kind":"Hook"},
"conversion":{"strategy":"Webhook","webhook":{"clientConfig":{"url":"https://127.0.0.1:1/convert"},"conversionReviewVersions":["v1"]}},
"versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
{"name":"v2","served":true,"storage":false,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	const v1, v2 = "/apis/ex.com/v1/namespaces/default/hooks", "/apis/ex.com/v2/namespaces/default/hooks"
	w := do(http.MethodPost, v1, `{"apiVersion":"ex.com/v1","kind":"Hook","metadata":{"name":"h1"},"a":1}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create in the storage version: %d %s", w.Code, w.Body)
	}
	var created struct {
		Metadata struct{ ResourceVersion string }
	}
	json.Unmarshal(w.Body.Bytes(), &created)
	rev := created.Metadata.ResourceVersion
	const unreachable = `Post "https://127.0.0.1:1/convert?timeout=30s": dial tcp 127.0.0.1:1: connect: connection refused`
	const stored = "conversion webhook for ex.com/v1, Kind=Hook failed: " + unreachable
	read := "500 Internal error occurred: StorageError: corrupt object, Code: 7, Key: /ex.com/hooks/default/h1, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=" + rev + ": " + stored
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodGet, v1 + "/h1", "", "200"},
		{http.MethodGet, v2 + "/h1", "", read},
		{http.MethodGet, v2, "", "500 " + stored},
		{http.MethodPost, v2, `{"apiVersion":"ex.com/v2","kind":"Hook","metadata":{"name":"h2"},"a":1}`, "500 conversion webhook for ex.com/v2, Kind=Hook failed: " + unreachable},
		{http.MethodPatch, v2 + "/h1", `{"a":2}`, "500 object not decodable revision=" + rev + ": " + stored},
		{http.MethodDelete, v2 + "/h1", "", read},
	} {
		ctype := "application/json"
		if c.method == http.MethodPatch {
			ctype = "application/merge-patch+json"
		}
		if got, _ := statusLine(h, c.method, c.path, ctype, c.body); got != c.want {
			t.Errorf("%s %s: %s\nwant %s", c.method, c.path, got, c.want)
		}
	}
	w = do(http.MethodGet, v1, "")
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			A        int
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || len(list.Items) != 1 || list.Items[0].Metadata.Name != "h1" || list.Items[0].A != 1 {
		t.Errorf("after the refused requests, the objects are %s", w.Body)
	}
}

// A request to a deprecated version of a CRD gets its deprecation warning
// on every answer (lists, gets, a 404, creates, watches), as kube-apiserver
// v1.37.2 answered the same requests: the version's deprecationWarning,
// or a default naming the highest served version that is not deprecated
// and ranks above it (v1 above v2beta1, so v3alpha1 is told v1 too).
func TestDeprecatedVersionsWarn(t *testing.T) {
	schema := `"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}`
	_, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.dep.example.com"},
"spec":{"group":"dep.example.com","scope":"Namespaced","names":{"plural":"gizmos","kind":"Gizmo"},"versions":[
{"name":"v1alpha1","served":true,"storage":false,"deprecated":true,`+schema+`},
{"name":"v1beta1","served":true,"storage":false,"deprecated":true,"deprecationWarning":"dep.example.com/v1beta1 Gizmo goes away in 2027; move to v1",`+schema+`},
{"name":"v1","served":true,"storage":true,`+schema+`},
{"name":"v2beta1","served":true,"storage":false,`+schema+`},
{"name":"v3alpha1","served":true,"storage":false,"deprecated":true,`+schema+`}]}}`)
	const (
		alpha = `299 - "dep.example.com/v1alpha1 Gizmo is deprecated; use dep.example.com/v1 Gizmo"`
		beta  = `299 - "dep.example.com/v1beta1 Gizmo goes away in 2027; move to v1"`
		three = `299 - "dep.example.com/v3alpha1 Gizmo is deprecated; use dep.example.com/v1 Gizmo"`
	)
	path := func(v, rest string) string { return "/apis/dep.example.com/" + v + "/namespaces/default/gizmos" + rest }
	for _, c := range []struct {
		method, path, body string
		code               int
		warning            string
	}{
		{"GET", path("v1alpha1", ""), "", 200, alpha},
		{"GET", path("v1beta1", ""), "", 200, beta},
		{"GET", path("v1", ""), "", 200, ""},
		{"GET", path("v2beta1", ""), "", 200, ""},
		{"GET", path("v3alpha1", ""), "", 200, three},
		{"GET", path("v1alpha1", "/nope"), "", 404, alpha},
		{"POST", path("v1alpha1", ""), `{"apiVersion":"dep.example.com/v1alpha1","kind":"Gizmo","metadata":{"name":"g1"}}`, 201, alpha},
		{"GET", path("v1alpha1", "/g1/status"), "", 404, alpha},
		{"GET", path("v1alpha1", "?watch=1&timeoutSeconds=1"), "", 200, alpha},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := strings.Join(w.Header().Values("Warning"), " | "); w.Code != c.code || got != c.warning {
			t.Errorf("%s %s: %d, warning %q; want %d, %q", c.method, c.path, w.Code, got, c.code, c.warning)
		}
	}
	// /metrics names the deprecated versions requested on a route served
	// (not the status subresource this CRD lacks), as upstream's did.
	r := httptest.NewRequest("GET", "/metrics", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var got []string
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.Contains(line, "apiserver_requested_deprecated_apis") {
			got = append(got, line)
		}
	}
	want := []string{
		"# HELP apiserver_requested_deprecated_apis Deprecated API versions requested since the start (1), by group, version, resource, subresource and the release that removes them.",
		"# TYPE apiserver_requested_deprecated_apis gauge",
		`apiserver_requested_deprecated_apis{group="dep.example.com",removed_release="",resource="gizmos",subresource="",version="v1alpha1"} 1`,
		`apiserver_requested_deprecated_apis{group="dep.example.com",removed_release="",resource="gizmos",subresource="",version="v1beta1"} 1`,
		`apiserver_requested_deprecated_apis{group="dep.example.com",removed_release="",resource="gizmos",subresource="",version="v3alpha1"} 1`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("/metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A write of a custom resource that adds finalizers without a domain gets
// upstream's warnings, one per finalizer added (not those it had), in
// name order, dry runs too, as kube-apiserver v1.37.2 answered the same
// requests; the standard finalizers and domain/path names get none.
func TestFinalizerWarnings(t *testing.T) {
	_, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.dep.example.com"},
"spec":{"group":"dep.example.com","scope":"Namespaced","names":{"plural":"gizmos","kind":"Gizmo"},"versions":[
{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`)
	const (
		path = "/apis/dep.example.com/v1/namespaces/default/gizmos"
		pre  = `299 - "metadata.finalizers: \"`
	)
	warning := func(name string) string {
		return pre + name + `\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"`
	}
	for _, c := range []struct {
		method, path, ctype, body string
		code                      int
		warnings                  []string
	}{
		{"POST", path, "application/json", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f1","finalizers":["foo","a.b","example.com/x","kubernetes","orphan","foo"]}}`, 201,
			[]string{pre + `a.b\": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers"`, warning("foo")}},
		{"PATCH", path + "/f1", "application/merge-patch+json", `{"metadata":{"finalizers":["foo","bar"]}}`, 200, []string{warning("bar")}},
		{"PATCH", path + "/f1?fieldManager=me", "application/apply-patch+yaml", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f1","finalizers":["baz"]}}`, 200, []string{warning("baz")}},
		{"PUT", path + "/f1", "application/json", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f1","resourceVersion":"RV","finalizers":["foo","bar","baz","qux"]}}`, 200, []string{warning("qux")}},
		{"PUT", path + "/f1/status", "application/json", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f1","resourceVersion":"RV","finalizers":["zzz"]},"status":{"a":1}}`, 200, nil},
		{"GET", path + "/f1", "", "", 200, nil},
		{"POST", path + "?dryRun=All", "application/json", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f2","finalizers":["zed"]}}`, 201, []string{warning("zed")}},
		{"POST", path, "application/json", `{"apiVersion":"dep.example.com/v1","kind":"Gizmo","metadata":{"name":"f3","finalizers":["bad name"]}}`, 422, nil},
	} {
		if strings.Contains(c.body, `"RV"`) { // an update: the current resourceVersion
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", path+"/f1", nil))
			var cur struct {
				Metadata struct{ ResourceVersion string }
			}
			if err := json.Unmarshal(w.Body.Bytes(), &cur); err != nil {
				t.Fatal(err)
			}
			c.body = strings.Replace(c.body, `"RV"`, `"`+cur.Metadata.ResourceVersion+`"`, 1)
		}
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		if c.ctype != "" {
			r.Header.Set("Content-Type", c.ctype)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Header().Values("Warning"); w.Code != c.code || strings.Join(got, "\n") != strings.Join(c.warnings, "\n") {
			t.Errorf("%s %s %s: %d, warnings\n%s\nwant %d,\n%s", c.method, c.path, c.body, w.Code, strings.Join(got, "\n"), c.code, strings.Join(c.warnings, "\n"))
		}
	}
}

// A write through /status is checked as kube-apiserver v1.37.2 checked
// the same patches: the status alone, by the status property's schema
// (a message names the path from the status, the field from the root).
func TestStatusWritesValidateTheStatusAsKubeAPIServer(t *testing.T) {
	do, h := newCustomResourcesHandler(t, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"things.ex.com"},
"spec":{"group":"ex.com","scope":"Namespaced","names":{"plural":"things","kind":"Thing"},"versions":[
{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"size":{"type":"integer"}}},
"status":{"type":"object","properties":{"ready":{"type":"boolean"},"sub":{"type":"object","properties":{"m":{"type":"string","pattern":"^a"}}}}}}}}}]}}`)
	const things = "/apis/ex.com/v1/namespaces/default/things"
	if w := do(http.MethodPost, things, `{"apiVersion":"ex.com/v1","kind":"Thing","metadata":{"name":"t"},"spec":{"size":1}}`); w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct{ patch, want string }{
		{`{"status":{"ready":"no"}}`, `Thing.ex.com "t" is invalid: status.ready: Invalid value: "string": ready in body must be of type boolean: "string"`},
		{`{"status":{"sub":{"m":"b"}}}`, `Thing.ex.com "t" is invalid: status.sub.m: Invalid value: "b": sub.m in body should match '^a'`},
		{`{"status":{"ready":true}}`, ""},
	} {
		r := httptest.NewRequest(http.MethodPatch, things+"/t/status", strings.NewReader(c.patch))
		r.Header.Set("Content-Type", "application/merge-patch+json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var st metav1.Status
		json.Unmarshal(w.Body.Bytes(), &st)
		if c.want == "" && w.Code != http.StatusOK || c.want != "" && (w.Code != http.StatusUnprocessableEntity || st.Message != c.want) {
			t.Errorf("%s: %d %s; want %q", c.patch, w.Code, w.Body, c.want)
		}
	}
}
