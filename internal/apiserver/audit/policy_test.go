package audit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// header opens every policy the tests write.
const header = "apiVersion: audit.k8s.io/v1\nkind: Policy\n"

// mustParse parses the policy header+body or fails the test.
func mustParse(t *testing.T, body string) *Policy {
	t.Helper()
	p, err := parsePolicy([]byte(header + body))
	if err != nil {
		t.Fatalf("parsePolicy(%q): %v", body, err)
	}
	return p
}

// resource is a resource request by alice (group dev) for verb on
// group/resource[/sub] named name in namespace ns.
func resource(verb, group, res, sub, ns, name string) Attributes {
	return Attributes{User: "alice", Groups: []string{"dev"}, Verb: verb, ResourceRequest: true,
		APIGroup: group, Resource: res, Subresource: sub, Namespace: ns, Name: name}
}

// nonResource is a get of path by alice (group dev).
func nonResource(path string) Attributes {
	return Attributes{User: "alice", Groups: []string{"dev"}, Verb: "get", Path: path}
}

func TestLevelLess(t *testing.T) {
	order := []Level{LevelNone, LevelMetadata, LevelRequest, LevelRequestResponse}
	for i, a := range order {
		for j, b := range order {
			if got := a.Less(b); got != (i < j) {
				t.Errorf("%s.Less(%s) = %v, want %v", a, b, got, i < j)
			}
		}
	}
	if Level("Bogus").Less(LevelNone) || !Level("Bogus").Less(LevelMetadata) {
		t.Errorf("an unknown level should rank with None")
	}
}

func TestDecideLevel(t *testing.T) {
	pods := resource("get", "", "pods", "", "default", "web")
	for _, c := range []struct {
		name  string
		rules string // the policy's rules, in YAML
		attrs Attributes
		want  Level
	}{
		// users
		{"user listed", `[{level: Metadata, users: [bob, alice]}]`, pods, LevelMetadata},
		{"user not listed", `[{level: Metadata, users: [bob]}]`, pods, LevelNone},
		{"user on a non-resource request", `[{level: Metadata, users: [alice]}]`, nonResource("/version"), LevelMetadata},

		// userGroups: any of the user's groups
		{"group listed", `[{level: Metadata, userGroups: [ops, dev]}]`, pods, LevelMetadata},
		{"second group listed", `[{level: Metadata, userGroups: [ops]}]`,
			Attributes{User: "alice", Groups: []string{"dev", "ops"}, Verb: "get", ResourceRequest: true, Resource: "pods"}, LevelMetadata},
		{"no group listed", `[{level: Metadata, userGroups: [ops]}]`, pods, LevelNone},
		{"user without groups", `[{level: Metadata, userGroups: [ops]}]`, Attributes{User: "alice", Verb: "get"}, LevelNone},
		{"group named like the user", `[{level: Metadata, userGroups: [alice]}]`, pods, LevelNone},

		// verbs
		{"verb listed", `[{level: Metadata, verbs: [list, get]}]`, pods, LevelMetadata},
		{"verb not listed", `[{level: Metadata, verbs: [delete]}]`, pods, LevelNone},
		{"every list must match", `[{level: Metadata, users: [alice], userGroups: [dev], verbs: [delete]}]`, pods, LevelNone},

		// resources: groups
		{"core group", `[{level: Metadata, resources: [{group: "", resources: [pods]}]}]`, pods, LevelMetadata},
		{"core group by omission", `[{level: Metadata, resources: [{resources: [pods]}]}]`, pods, LevelMetadata},
		{"core group is not apps", `[{level: Metadata, resources: [{group: "", resources: [deployments]}]}]`,
			resource("get", "apps", "deployments", "", "default", "web"), LevelNone},
		{"named group", `[{level: Metadata, resources: [{group: apps, resources: [deployments]}]}]`,
			resource("get", "apps", "deployments", "", "default", "web"), LevelMetadata},
		{"named group is not core", `[{level: Metadata, resources: [{group: apps, resources: [pods]}]}]`, pods, LevelNone},
		{"any group", `[{level: Metadata, resources: [{group: "*", resources: [deployments]}]}]`,
			resource("get", "apps", "deployments", "", "default", "web"), LevelMetadata},
		{"group without resources: all of it", `[{level: Metadata, resources: [{group: apps}]}]`,
			resource("get", "apps", "replicasets", "scale", "default", "web"), LevelMetadata},
		{"group without resources: only it", `[{level: Metadata, resources: [{group: apps}]}]`, pods, LevelNone},
		{"second group entry", `[{level: Metadata, resources: [{group: apps}, {group: "", resources: [pods]}]}]`, pods, LevelMetadata},

		// resources: names and subresources
		{"resource listed", `[{level: Metadata, resources: [{resources: [services, pods]}]}]`, pods, LevelMetadata},
		{"resource not listed", `[{level: Metadata, resources: [{resources: [services]}]}]`, pods, LevelNone},
		{"resource is not its subresource", `[{level: Metadata, resources: [{resources: [pods]}]}]`,
			resource("get", "", "pods", "log", "default", "web"), LevelNone},
		{"subresource listed", `[{level: Metadata, resources: [{resources: [pods/log]}]}]`,
			resource("get", "", "pods", "log", "default", "web"), LevelMetadata},
		{"subresource is not its resource", `[{level: Metadata, resources: [{resources: [pods/log]}]}]`, pods, LevelNone},
		{"subresource is not another", `[{level: Metadata, resources: [{resources: [pods/log]}]}]`,
			resource("create", "", "pods", "exec", "default", "web"), LevelNone},
		{"* is every resource", `[{level: Metadata, resources: [{resources: ["*"]}]}]`, pods, LevelMetadata},
		{"* is every subresource", `[{level: Metadata, resources: [{resources: ["*"]}]}]`,
			resource("get", "", "pods", "log", "default", "web"), LevelMetadata},
		{"pods/* is pods' subresources", `[{level: Metadata, resources: [{resources: [pods/*]}]}]`,
			resource("get", "", "pods", "log", "default", "web"), LevelMetadata},
		{"pods/* is pods", `[{level: Metadata, resources: [{resources: [pods/*]}]}]`, pods, LevelMetadata},
		{"pods/* is not services'", `[{level: Metadata, resources: [{resources: [pods/*]}]}]`,
			resource("update", "", "services", "status", "default", "web"), LevelNone},
		{"*/scale is any resource's scale", `[{level: Metadata, resources: [{group: "*", resources: ["*/scale"]}]}]`,
			resource("update", "apps", "deployments", "scale", "default", "web"), LevelMetadata},
		{"*/scale is not the resource", `[{level: Metadata, resources: [{group: "*", resources: ["*/scale"]}]}]`,
			resource("update", "apps", "deployments", "", "default", "web"), LevelNone},
		{"*/ is not the resource", `[{level: Metadata, resources: [{resources: ["*/"]}]}]`, pods, LevelNone},
		{"*/scale is not status", `[{level: Metadata, resources: [{group: "*", resources: ["*/scale"]}]}]`,
			resource("update", "apps", "deployments", "status", "default", "web"), LevelNone},

		// resources: resourceNames
		{"name listed", `[{level: Metadata, resources: [{resources: [pods], resourceNames: [db, web]}]}]`, pods, LevelMetadata},
		{"name not listed", `[{level: Metadata, resources: [{resources: [pods], resourceNames: [db]}]}]`, pods, LevelNone},
		{"no name (a list)", `[{level: Metadata, resources: [{resources: [pods], resourceNames: [web]}]}]`,
			resource("list", "", "pods", "", "default", ""), LevelNone},
		{"name listed, resource not", `[{level: Metadata, resources: [{resources: [services], resourceNames: [web]}]}]`, pods, LevelNone},

		// namespaces
		{"namespace listed", `[{level: Metadata, namespaces: [kube-system, default]}]`, pods, LevelMetadata},
		{"namespace not listed", `[{level: Metadata, namespaces: [kube-system]}]`, pods, LevelNone},
		{`"" is cluster-scoped`, `[{level: Metadata, namespaces: [""]}]`, resource("get", "", "nodes", "", "", "n1"), LevelMetadata},
		{`"" is not namespaced`, `[{level: Metadata, namespaces: [""]}]`, pods, LevelNone},
		{"cluster-scoped is not a namespace", `[{level: Metadata, namespaces: [default]}]`, resource("get", "", "nodes", "", "", "n1"), LevelNone},
		{"namespace and resource", `[{level: Metadata, namespaces: [default], resources: [{resources: [pods]}]}]`, pods, LevelMetadata},
		{"namespace but not resource", `[{level: Metadata, namespaces: [default], resources: [{resources: [services]}]}]`, pods, LevelNone},
		{"resource but not namespace", `[{level: Metadata, namespaces: [other], resources: [{resources: [pods]}]}]`, pods, LevelNone},

		// resource rules and non-resource requests, and the other way round
		{"namespaces skip non-resource requests", `[{level: Metadata, namespaces: [""]}]`, nonResource("/healthz"), LevelNone},
		{"resources skip non-resource requests", `[{level: Metadata, resources: [{group: "*"}]}]`, nonResource("/healthz"), LevelNone},
		{"nonResourceURLs skip resource requests", `[{level: Metadata, nonResourceURLs: ["*"]}]`, pods, LevelNone},
		{"a rule with neither is for both (resource)", `[{level: Metadata, verbs: [get]}]`, pods, LevelMetadata},
		{"a rule with neither is for both (non-resource)", `[{level: Metadata, verbs: [get]}]`, nonResource("/healthz"), LevelMetadata},

		// nonResourceURLs
		{"URL exact", `[{level: Metadata, nonResourceURLs: [/version, /healthz]}]`, nonResource("/healthz"), LevelMetadata},
		{"URL exact is not a prefix", `[{level: Metadata, nonResourceURLs: [/healthz]}]`, nonResource("/healthz/etcd"), LevelNone},
		{"URL prefix", `[{level: Metadata, nonResourceURLs: [/healthz*]}]`, nonResource("/healthz/etcd"), LevelMetadata},
		{"URL prefix matches itself", `[{level: Metadata, nonResourceURLs: [/healthz*]}]`, nonResource("/healthz"), LevelMetadata},
		{"URL prefix is a string prefix", `[{level: Metadata, nonResourceURLs: [/healthz*]}]`, nonResource("/healthzz"), LevelMetadata},
		{"URL prefix does not match others", `[{level: Metadata, nonResourceURLs: [/healthz*]}]`, nonResource("/livez"), LevelNone},
		{"URL prefix is not a suffix", `[{level: Metadata, nonResourceURLs: [/api/*]}]`, nonResource("/apis/apps"), LevelNone},
		{"URL *", `[{level: Metadata, nonResourceURLs: ["*"]}]`, nonResource("/openapi/v3"), LevelMetadata},

		// order and default
		{"first rule wins over a later higher one", `[{level: Metadata, users: [alice]}, {level: RequestResponse}]`, pods, LevelMetadata},
		{"first rule wins over a later lower one", `[{level: Request}, {level: None, users: [alice]}]`, pods, LevelRequest},
		{"first matching rule", `[{level: Request, users: [bob]}, {level: Metadata}]`, pods, LevelMetadata},
		{"None rule stops", `[{level: None, users: [alice]}, {level: RequestResponse}]`, pods, LevelNone},
		{"no rule: None", `[{level: RequestResponse, users: [bob]}]`, pods, LevelNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustParse(t, "rules: "+c.rules+"\n")
			if got, _, _ := p.Decide(c.attrs); got != c.want {
				t.Errorf("Decide(%+v) = %s, want %s", c.attrs, got, c.want)
			}
		})
	}
}

func TestDecideNilPolicy(t *testing.T) {
	var p *Policy
	level, omit, omf := p.Decide(resource("get", "", "pods", "", "default", "web"))
	if level != LevelNone || omit != nil || omf {
		t.Errorf("nil policy: Decide = %s, %v, %v, want None, [], false", level, omit, omf)
	}
}

func TestDecideOmitStages(t *testing.T) {
	p := mustParse(t, `omitStages: [ResponseComplete]
rules:
- level: Metadata
  users: [alice]
  omitStages: [Panic, RequestReceived, ResponseComplete]
- level: Request
  users: [bob]
- level: Metadata
  users: [carol]
  omitStages: [ResponseStarted, ResponseStarted]
`)
	for _, c := range []struct {
		user string
		want []Stage
	}{
		{"alice", []Stage{StageRequestReceived, StageResponseComplete, StagePanic}}, // the union, once each, in order
		{"bob", []Stage{StageResponseComplete}},                                     // the policy's alone
		{"carol", []Stage{StageResponseStarted, StageResponseComplete}},             // the rule's and the policy's
		{"dave", []Stage{StageResponseComplete}},                                    // no rule: the policy's
	} {
		_, got, _ := p.Decide(Attributes{User: c.user, Verb: "get", Path: "/version"})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: omitStages = %v, want %v", c.user, got, c.want)
		}
	}

	p = mustParse(t, "rules: [{level: Metadata}]\n")
	if _, got, _ := p.Decide(Attributes{}); len(got) != 0 {
		t.Errorf("no omitStages anywhere: got %v", got)
	}
}

func TestDecideOmitManagedFields(t *testing.T) {
	rules := `rules:
- {level: Metadata, users: [alice], omitManagedFields: false}
- {level: Metadata, users: [bob], omitManagedFields: true}
- {level: Metadata, users: [carol]}
`
	for _, c := range []struct {
		policy string // the policy-wide omitManagedFields
		user   string
		want   bool
	}{
		{"true", "alice", false}, // the rule's false overrides the policy's true
		{"true", "bob", true},
		{"true", "carol", true}, // unset: the policy's
		{"true", "dave", true},  // no rule: the policy's
		{"false", "alice", false},
		{"false", "bob", true}, // the rule's true overrides the policy's false
		{"false", "carol", false},
		{"false", "dave", false},
	} {
		p := mustParse(t, "omitManagedFields: "+c.policy+"\n"+rules)
		if _, _, got := p.Decide(Attributes{User: c.user}); got != c.want {
			t.Errorf("policy omitManagedFields %s, user %s: got %v, want %v", c.policy, c.user, got, c.want)
		}
	}
}

// TestReadPolicy reads a policy like the one in Kubernetes' auditing
// documentation, in YAML and in JSON.
func TestReadPolicy(t *testing.T) {
	const yamlPolicy = `apiVersion: audit.k8s.io/v1 # This is required.
kind: Policy
metadata:
  name: example
omitStages:
  - "RequestReceived"
rules:
  - level: RequestResponse
    resources:
    - group: ""
      resources: ["pods"]
  - level: Metadata
    resources:
    - group: ""
      resources: ["pods/log", "pods/status"]
  - level: None
    resources:
    - group: ""
      resources: ["configmaps"]
      resourceNames: ["controller-leader"]
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
    resources:
    - group: "" # core API group
      resources: ["endpoints", "services"]
  - level: None
    userGroups: ["system:authenticated"]
    nonResourceURLs:
    - "/api*" # Wildcard matching.
    - "/version"
  - level: Request
    resources:
    - group: "" # core API group
      resources: ["configmaps"]
    namespaces: ["kube-system"]
  - level: Metadata
    resources:
    - group: "" # core API group
      resources: ["secrets", "configmaps"]
  - level: Request
    resources:
    - group: "" # core API group
    - group: "extensions" # Version of group should NOT be included.
  - level: Metadata
    omitStages:
      - "RequestReceived"
`
	const jsonPolicy = `{"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitManagedFields": true,
  "rules": [{"level": "Metadata", "nonResourceURLs": ["/healthz*"], "omitStages": ["Panic"], "omitManagedFields": false},
            {"level": "Request"}]}`
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		attrs      Attributes
		level      Level
		omit       []Stage
		omf        bool
	}{
		{"policy.yaml", yamlPolicy, resource("get", "", "pods", "", "default", "web"), LevelRequestResponse, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, resource("get", "", "pods", "log", "default", "web"), LevelMetadata, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, resource("update", "", "configmaps", "", "kube-system", "controller-leader"), LevelNone, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, resource("update", "", "configmaps", "", "kube-system", "other"), LevelRequest, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, resource("update", "", "configmaps", "", "default", "other"), LevelMetadata, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, Attributes{User: "system:kube-proxy", Verb: "watch", ResourceRequest: true, Resource: "services"}, LevelNone, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, Attributes{User: "u", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/apis/apps"}, LevelNone, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, Attributes{User: "u", Groups: []string{"system:authenticated"}, Verb: "get", Path: "/healthz"}, LevelMetadata, []Stage{StageRequestReceived}, false},
		{"policy.yaml", yamlPolicy, resource("create", "extensions", "ingresses", "", "default", ""), LevelRequest, []Stage{StageRequestReceived}, false},
		{"policy.json", jsonPolicy, nonResource("/healthz/etcd"), LevelMetadata, []Stage{StagePanic}, false},
		{"policy.json", jsonPolicy, nonResource("/version"), LevelRequest, nil, true},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := ReadPolicy(path)
		if err != nil {
			t.Fatalf("ReadPolicy(%s): %v", c.name, err)
		}
		level, omit, omf := p.Decide(c.attrs)
		if level != c.level || !slices.Equal(omit, c.omit) || omf != c.omf {
			t.Errorf("%s: Decide(%+v) = %s, %v, %v, want %s, %v, %v", c.name, c.attrs, level, omit, omf, c.level, c.omit, c.omf)
		}
	}
}

func TestReadPolicyErrors(t *testing.T) {
	dnsMsg := strings.Join(validation.IsDNS1123Subdomain("apps/v1"), ",")
	for _, c := range []struct {
		name string
		text string
		want string // the error, with FILE for the file's path
	}{
		{"wrong apiVersion", "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n",
			`unknown group version "audit.k8s.io/v1beta1" in policy: want audit.k8s.io/v1: from file FILE`},
		{"no apiVersion", "kind: Policy\nrules: [{level: None}]\n",
			`policy has no apiVersion: want audit.k8s.io/v1: from file FILE`},
		{"wrong kind", "apiVersion: audit.k8s.io/v1\nkind: PolicyList\nrules: [{level: None}]\n",
			`unknown kind "PolicyList" in policy: want Policy: from file FILE`},
		{"empty file", "",
			`policy has no apiVersion: want audit.k8s.io/v1: from file FILE`},
		{"unknown field", header + "rules: [{level: None}]\nomitStage: [Panic]\n",
			`failed decoding: strict decoding error: unknown field "omitStage": from file FILE`},
		{"unknown rule field", header + "rules: [{level: None, user: [alice]}]\n",
			`failed decoding: strict decoding error: unknown field "rules[0].user": from file FILE`},
		{"unknown resources field", header + "rules: [{level: None, resources: [{groups: [apps]}]}]\n",
			`failed decoding: strict decoding error: unknown field "rules[0].resources[0].groups": from file FILE`},
		{"wrong type", header + "rules: [{level: None, users: alice}]\n",
			`failed decoding: json: cannot unmarshal string into Go struct field policyRule.rules.users of type []string: from file FILE`},
		{"not YAML", header + "rules: [\n",
			`failed decoding: yaml: line 3: did not find expected node content: from file FILE`},
		{"invalid level", header + "rules: [{level: Foo}]\n",
			`rules[0].level: Unsupported value: "Foo": supported values: "None", "Metadata", "Request", "RequestResponse": from file FILE`},
		{"no level", header + "rules: [{level: None}, {users: [alice]}]\n",
			`rules[1].level: Required value: from file FILE`},
		{"invalid rule stage", header + "rules: [{level: None, omitStages: [RequestReceived, Foo]}]\n",
			`rules[0].omitStages[1]: Invalid value: "Foo": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic: from file FILE`},
		{"invalid policy stage", header + "omitStages: [responseComplete]\nrules: [{level: None}]\n",
			`omitStages[0]: Invalid value: "responseComplete": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic: from file FILE`},
		{"no rules", header + "omitStages: [Panic]\n",
			`loaded illegal policy with 0 rules: from file FILE`},
		{"empty rules", header + "rules: []\n",
			`loaded illegal policy with 0 rules: from file FILE`},
		{"URL and resources", header + "rules: [{level: None, nonResourceURLs: [/healthz], resources: [{group: apps}]}]\n",
			`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs: from file FILE`},
		{"URL and namespaces", header + "rules: [{level: None, nonResourceURLs: [/healthz], namespaces: [default]}]\n",
			`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs: from file FILE`},
		{"URL without /", header + "rules: [{level: None, nonResourceURLs: [/healthz, healthz]}]\n",
			`rules[0].nonResourceURLs[1]: Invalid value: "healthz": non-resource URL rules must begin with a '/' character: from file FILE`},
		{"empty URL", header + "rules: [{level: None, nonResourceURLs: [\"\"]}]\n",
			`rules[0].nonResourceURLs[0]: Invalid value: "": non-resource URL rules must begin with a '/' character: from file FILE`},
		{"URL * not last", header + "rules: [{level: None, nonResourceURLs: [/api/*/v1]}]\n",
			`rules[0].nonResourceURLs[0]: Invalid value: "/api/*/v1": non-resource URL wildcards '*' must be the final character of the rule: from file FILE`},
		{"URL ** ", header + "rules: [{level: None, nonResourceURLs: [/api**]}]\n",
			`rules[0].nonResourceURLs[0]: Invalid value: "/api**": non-resource URL wildcards '*' must be the final character of the rule: from file FILE`},
		{"group with version", header + "rules: [{level: None, resources: [{group: apps/v1, resources: [deployments]}]}]\n",
			`rules[0].resources.group: Invalid value: "apps/v1": ` + dnsMsg + `: from file FILE`},
		{"resourceNames without resources", header + "rules: [{level: None, resources: [{group: apps, resourceNames: [web]}]}]\n",
			`rules[0].resources.resourceNames: Invalid value: ["web"]: using resourceNames requires at least one resource: from file FILE`},
		{"several errors", header + "omitStages: [Foo]\nrules: [{level: None}, {level: Bar, nonResourceURLs: [x]}]\n",
			`[omitStages[0]: Invalid value: "Foo": allowed stages are RequestReceived,ResponseStarted,ResponseComplete,Panic, ` +
				`rules[1].level: Unsupported value: "Bar": supported values: "None", "Metadata", "Request", "RequestResponse", ` +
				`rules[1].nonResourceURLs[0]: Invalid value: "x": non-resource URL rules must begin with a '/' character]: from file FILE`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := ReadPolicy(path)
			want := strings.ReplaceAll(c.want, "FILE", path)
			if err == nil || err.Error() != want {
				t.Errorf("ReadPolicy = %v, %v\nwant error %s", p, err, want)
			}
		})
	}
}

// TestReadPolicyValid checks that what validation allows is read.
func TestReadPolicyValid(t *testing.T) {
	for _, rules := range []string{
		`[{level: None, nonResourceURLs: ["*", "/healthz*", /version]}]`,
		`[{level: Metadata, resources: [{group: "*", resources: ["*", "*/scale", pods/*, pods/log]}]}]`,
		`[{level: Request, resources: [{group: rbac.authorization.k8s.io}], namespaces: [""]}]`,
		`[{level: RequestResponse, omitStages: [RequestReceived, ResponseStarted, ResponseComplete, Panic]}]`,
	} {
		if _, err := parsePolicy([]byte(header + "rules: " + rules + "\n")); err != nil {
			t.Errorf("rules %s: %v", rules, err)
		}
	}
	// kube-apiserver takes a policy without a kind for a Policy.
	if _, err := parsePolicy([]byte("apiVersion: audit.k8s.io/v1\nrules: [{level: None}]\n")); err != nil {
		t.Errorf("policy without a kind: %v", err)
	}
}

func TestReadPolicyFile(t *testing.T) {
	if _, err := ReadPolicy(""); err == nil || err.Error() != "file path not specified" {
		t.Errorf(`ReadPolicy("") = %v, want "file path not specified"`, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := ReadPolicy(missing)
	if err == nil || !strings.HasPrefix(err.Error(), `failed to read file path "`+missing+`": `) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPolicy(missing) = %v", err)
	}
}

// A field named in another case is an unknown one, as Kubernetes'
// decoder reads it (a rule's "Users" would otherwise match everyone).
func TestReadPolicyIsCaseSensitive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  Users: [alice]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPolicy(path); err == nil || !strings.Contains(err.Error(), `unknown field "rules[0].Users"`) {
		t.Errorf("a mis-cased field: %v", err)
	}
}
