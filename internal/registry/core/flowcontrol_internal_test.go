package core

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// prepared is body decoded as a request's object of kind k: through the
// Go type, defaulted, and prepared for a create.
func prepared(t *testing.T, k *registry.Kind, body string) *unstructured.Unstructured {
	t.Helper()
	obj, _, err := registry.Decode(k, []byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	k.PrepareForCreate(obj)
	return obj
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkErrors(t *testing.T, what string, errs field.ErrorList, want []string) {
	t.Helper()
	if got := errorStrings(errs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

var (
	subdomainMsg = validation.IsDNS1123Subdomain("A_b")[0]
	labelMsg     = validation.IsDNS1123Label("Bad")[0]
)

// Every rule of upstream's FlowSchema validation, with its path, type,
// value and words, in upstream's order.
func TestFlowSchemaValidation(t *testing.T) {
	k := FlowSchemas()
	const rules = `"rules":[{"subjects":[{"kind":"User","user":{"name":"u"}}],"nonResourceRules":[{"verbs":["get"],"nonResourceURLs":["/x"]}]}]`
	rule := func(r string) string {
		return `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},"rules":[` + r + `]}}`
	}
	nonResource := func(verbs, urls string) string {
		return rule(`{"subjects":[{"kind":"Group","group":{"name":"g"}}],"nonResourceRules":[{"verbs":` + verbs + `,"nonResourceURLs":` + urls + `}]}`)
	}
	resource := func(r string) string {
		return rule(`{"subjects":[{"kind":"Group","group":{"name":"g"}}],"resourceRules":[` + r + `]}`)
	}
	subject := func(s string) string {
		return rule(`{"subjects":[` + s + `],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}`)
	}
	const nr = "spec.rules[0].nonResourceRules[0]"
	const rr = "spec.rules[0].resourceRules[0]"
	const s0 = "spec.rules[0].subjects[0]"
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"valid", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},` + rules + `}}`, nil},
		{"precedence not positive", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":-1}}`,
			[]string{"spec.matchingPrecedence: Invalid value: -1: must be a positive value"}},
		{"precedence too high", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":10001}}`,
			[]string{"spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000"}},
		{"precedence 1 not exempt", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},"matchingPrecedence":1}}`,
			[]string{"spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"}},
		{"distinguisher", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"p"},"distinguisherMethod":{"type":"ByGroup"}}}`,
			[]string{`spec.distinguisherMethod.type: Unsupported value: {"Type":"ByGroup"}: supported values: "ByNamespace", "ByUser"`}},
		{"no priority level", `{"metadata":{"name":"f"},"spec":{}}`,
			[]string{"spec.priorityLevelConfiguration.name: Required value: must reference a priority level"}},
		{"priority level name", `{"metadata":{"name":"f"},"spec":{"priorityLevelConfiguration":{"name":"A_b"}}}`,
			[]string{`spec.priorityLevelConfiguration.name: Invalid value: "A_b": ` + subdomainMsg}},
		{"empty rule", rule(`{}`), []string{
			"spec.rules[0].subjects: Required value: subjects must contain at least one value",
			"spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty"}},
		{"service account subject without one", subject(`{"kind":"ServiceAccount"}`),
			[]string{s0 + ".serviceAccount: Required value: serviceAccount is required when subject kind is 'ServiceAccount'"}},
		{"service account subject with others", subject(`{"kind":"ServiceAccount","serviceAccount":{"name":"","namespace":""},"user":{"name":"u"},"group":{"name":"g"}}`), []string{
			s0 + ".serviceAccount.name: Required value",
			s0 + ".serviceAccount.namespace: Required value: must specify namespace for service account",
			s0 + ".user: Forbidden: user is forbidden when subject kind is not 'User'",
			s0 + ".group: Forbidden: group is forbidden when subject kind is not 'Group'"}},
		{"service account names", subject(`{"kind":"ServiceAccount","serviceAccount":{"name":"A_b","namespace":"Bad"}}`), []string{
			s0 + `.serviceAccount.name: Invalid value: "A_b": ` + subdomainMsg,
			s0 + `.serviceAccount.namespace: Invalid value: "Bad": ` + labelMsg}},
		{"every service account", subject(`{"kind":"ServiceAccount","serviceAccount":{"name":"*","namespace":"ns"}}`), nil},
		{"user subject", subject(`{"kind":"User","serviceAccount":{"name":"a","namespace":"b"},"group":{"name":"g"}}`), []string{
			s0 + ".user: Required value: user is required when subject kind is 'User'",
			s0 + ".serviceAccount: Forbidden: serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
			s0 + ".group: Forbidden: group is forbidden when subject kind is not 'Group'"}},
		{"user name", subject(`{"kind":"User","user":{"name":""}}`), []string{s0 + ".user.name: Required value"}},
		{"group subject", subject(`{"kind":"Group","serviceAccount":{"name":"a","namespace":"b"},"user":{"name":"u"}}`), []string{
			s0 + ".group: Required value: group is required when subject kind is 'Group'",
			s0 + ".serviceAccount: Forbidden: serviceAccount is forbidden when subject kind is not 'ServiceAccount'",
			s0 + ".user: Forbidden: user is forbidden when subject kind is not 'User'"}},
		{"group name", subject(`{"kind":"Group","group":{"name":""}}`), []string{s0 + ".group.name: Required value"}},
		{"subject kind", subject(`{"kind":"Robot"}`),
			[]string{s0 + `.kind: Unsupported value: "Robot": supported values: "Group", "ServiceAccount", "User"`}},
		{"resource rule empty", resource(`{}`), []string{
			rr + ".verbs: Required value: verbs must contain at least one value",
			rr + ".apiGroups: Required value: resource rules must supply at least one api group",
			rr + ".resources: Required value: resource rules must supply at least one resource",
			rr + ".namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"}},
		{"resource rule wildcards", resource(`{"verbs":["*","get"],"apiGroups":["*",""],"resources":["*","pods"],"namespaces":["*","a"]}`), []string{
			rr + `.verbs: Invalid value: ["*","get"]: if '*' is present, must not specify other verbs`,
			rr + `.apiGroups: Invalid value: ["*",""]: if '*' is present, must not specify other api groups`,
			rr + `.resources: Invalid value: ["*","pods"]: if '*' is present, must not specify other resources`,
			rr + `.namespaces: Invalid value: ["*","a"]: if '*' is present, must not specify other namespaces`}},
		{"resource rule verbs and namespaces", resource(`{"verbs":["get","fly"],"apiGroups":[""],"resources":["pods"],"namespaces":["ok","Bad"]}`), []string{
			rr + `.verbs: Unsupported value: ["get","fly"]: supported values: "create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"`,
			rr + `.namespaces[1]: Invalid value: "Bad": each member of this list must be '*' or a DNS-1123 label; ` + labelMsg}},
		{"cluster-scoped resource rule", resource(`{"verbs":["get"],"apiGroups":[""],"resources":["nodes"],"clusterScope":true}`), nil},
		{"non-resource rule empty", nonResource(`[]`, `[]`), []string{
			nr + ".verbs: Required value: verbs must contain at least one value",
			nr + ".nonResourceURLs: Required value: nonResourceURLs must contain at least one value"}},
		{"non-resource wildcard", nonResource(`["get"]`, `["*","/a"]`),
			[]string{nr + `.nonResourceURLs: Invalid value: ["*","/a"]: if '*' is present, must not specify other non-resource URLs`}},
		{"non-resource URLs", nonResource(`["get"]`, `["","a","/a b","//a","/a*","/a/*/b/*","/","/a/*"]`), []string{
			nr + `.nonResourceURLs[0]: Invalid value: "": must not be empty`,
			nr + `.nonResourceURLs[1]: Invalid value: "a": must start with slash`,
			nr + `.nonResourceURLs[2]: Invalid value: "/a b": must not contain white-space`,
			nr + `.nonResourceURLs[3]: Invalid value: "//a": must not contain double slash`,
			nr + `.nonResourceURLs[4]: Invalid value: "/a*": wildcard can only do suffix matching`,
			nr + `.nonResourceURLs[5]: Invalid value: "/a/*/b/*": wildcard can only do suffix matching`}},
		{"exempt changed", `{"metadata":{"name":"exempt"},"spec":{"priorityLevelConfiguration":{"name":"exempt"},"matchingPrecedence":1,"distinguisherMethod":{"type":"ByUser"}}}`,
			[]string{`spec: Invalid value: {"PriorityLevelConfiguration":{"Name":"exempt"},"MatchingPrecedence":1,"DistinguisherMethod":{"Type":"ByUser"},"Rules":null}: spec of 'exempt' must equal the fixed value`}},
		{"catch-all changed", `{"metadata":{"name":"catch-all"},"spec":{"priorityLevelConfiguration":{"name":"catch-all"},"matchingPrecedence":10000,"distinguisherMethod":{"type":"ByUser"},"rules":[{"subjects":[{"kind":"Group","group":{"name":"system:authenticated"}}],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}}`,
			[]string{`spec: Invalid value: {"PriorityLevelConfiguration":{"Name":"catch-all"},"MatchingPrecedence":10000,"DistinguisherMethod":{"Type":"ByUser"},` +
				`"Rules":[{"Subjects":[{"Kind":"Group","User":null,"Group":{"Name":"system:authenticated"},"ServiceAccount":null}],"ResourceRules":null,` +
				`"NonResourceRules":[{"Verbs":["*"],"NonResourceURLs":["*"]}]}]}: spec of 'catch-all' must equal the fixed value`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkErrors(t, c.body, k.Validate(prepared(t, k, c.body)), c.want)
		})
	}
	// A precedence of 0 (which the defaults replace) is not positive.
	checkErrors(t, "precedence 0", validateFlowSchemaSpec("f", &flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "p"}}, field.NewPath("spec")),
		[]string{"spec.matchingPrecedence: Invalid value: 0: must be a positive value"})
	// The mandatory schemas as upstream declares them are valid.
	for _, fs := range MandatoryFlowSchemas() {
		data, _ := json.Marshal(fs)
		checkErrors(t, fs.Name, k.Validate(prepared(t, k, string(data))), nil)
	}
}

// Every rule of upstream's PriorityLevelConfiguration validation, and the
// errors of its declarative checks: after the others, in their own
// words, in place of the handwritten ones they cover.
func TestPriorityLevelValidation(t *testing.T) {
	k := PriorityLevelConfigurations()
	pl := func(name, spec string) string { return `{"metadata":{"name":"` + name + `"},"spec":` + spec + `}` }
	limited := func(l string) string { return pl("p", `{"type":"Limited","limited":`+l+`}`) }
	queuing := func(q string) string {
		return limited(`{"limitResponse":{"type":"Queue","queuing":` + q + `}}`)
	}
	const lp = "spec.limited"
	const rp = "spec.limited.limitResponse"
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"valid limited", limited(`{"limitResponse":{"type":"Reject"}}`), nil},
		{"valid queuing", queuing(`{}`), nil},
		{"valid exempt", pl("exempt", `{"type":"Exempt","exempt":{"nominalConcurrencyShares":10,"lendablePercent":50}}`), nil},
		{"exempt type for another name", pl("p", `{"type":"Exempt"}`),
			[]string{`spec.type: Invalid value: "Exempt": must be 'Exempt' if and only if ` + "`name`" + ` is 'exempt'`}},
		{"exempt with a limited", pl("p", `{"type":"Exempt","limited":{"limitResponse":{"type":"Reject"}}}`), []string{
			`spec.type: Invalid value: "Exempt": must be 'Exempt' if and only if ` + "`name`" + ` is 'exempt'`,
			"spec.limited: Forbidden"}},
		{"limited with an exempt", pl("p", `{"type":"Limited","exempt":{}}`), []string{
			"spec.exempt: Forbidden", "spec.limited: Required value"}},
		{"unknown type", pl("p", `{"type":"Bogus","limited":{"limitResponse":{"type":"Reject"}},"exempt":{}}`), []string{
			`spec.type: Unsupported value: "Bogus": supported values: "Exempt", "Limited"`,
			"spec.exempt: Forbidden", "spec.limited: Forbidden"}},
		{"no type", pl("p", `{"limited":{"limitResponse":{"type":"Queue"}}}`), []string{
			"spec.limited: Forbidden", "spec.type: Required value", rp + ".queuing: Required value"}},
		{"limited numbers", limited(`{"nominalConcurrencyShares":-1,"lendablePercent":101,"borrowingLimitPercent":-1,"limitResponse":{"type":"Reject"}}`), []string{
			lp + ".nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
			lp + ".lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
			lp + ".borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer"}},
		{"lendable below 0", limited(`{"lendablePercent":-1,"limitResponse":{"type":"Reject"}}`),
			[]string{lp + ".lendablePercent: Invalid value: -1: must be between 0 and 100, inclusive"}},
		{"reject with queuing", limited(`{"limitResponse":{"type":"Reject","queuing":{}}}`), []string{rp + ".queuing: Forbidden"}},
		{"queue without queuing", limited(`{"limitResponse":{"type":"Queue"}}`), []string{rp + ".queuing: Required value"}},
		{"no response type", limited(`{"limitResponse":{}}`), []string{rp + ".type: Required value"}},
		{"unknown response type", limited(`{"limitResponse":{"type":"Drop","queuing":{}}}`), []string{
			rp + `.type: Unsupported value: "Drop": supported values: "Queue", "Reject"`, rp + ".queuing: Forbidden"}},
		{"queuing negative", queuing(`{"queues":-1,"handSize":-1,"queueLengthLimit":-1}`), []string{
			rp + ".queuing.queueLengthLimit: Invalid value: -1: must be positive",
			rp + ".queuing.queues: Invalid value: -1: must be positive",
			rp + ".queuing.handSize: Invalid value: -1: must be positive"}},
		{"too many queues", queuing(`{"queues":10000001,"handSize":2}`),
			[]string{rp + ".queuing.queues: Invalid value: 10000001: must not be greater than 10000000"}},
		{"hand larger than deck", queuing(`{"queues":4,"handSize":5}`),
			[]string{rp + ".queuing.handSize: Invalid value: 5: should not be greater than queues (4)"}},
		{"hash too long", queuing(`{"queues":10000000,"handSize":8}`),
			[]string{rp + ".queuing.handSize: Invalid value: 8: required entropy bits of deckSize 10000000 and handSize 8 should not be greater than 60"}},
		{"hash just short enough", queuing(`{"queues":1024,"handSize":6}`), nil},
		{"exempt numbers", pl("exempt", `{"type":"Exempt","exempt":{"nominalConcurrencyShares":-1,"lendablePercent":-1}}`), []string{
			"spec.exempt.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
			"spec.exempt.lendablePercent: Invalid value: -1: must be between 0 and 100, inclusive"}},
		{"v1beta3 annotation", `{"metadata":{"name":"p","annotations":{"flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares":""}},"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}}`,
			[]string{"metadata.annotations: Forbidden: annotation 'flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares' is forbidden"}},
		{"catch-all changed", pl("catch-all", `{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}`), []string{
			`spec: Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":30,"LimitResponse":{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: spec of 'catch-all' must equal the fixed value`}},
		{"catch-all as fixed", pl("catch-all", `{"type":"Limited","limited":{"nominalConcurrencyShares":5,"limitResponse":{"type":"Reject"}}}`), nil},
		{"exempt limited", pl("exempt", `{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}`), []string{
			`spec.type: Invalid value: "Limited": must be 'Exempt' if and only if ` + "`name`" + ` is 'exempt'`,
			`spec: Invalid value: {"Type":"Limited","Limited":{"NominalConcurrencyShares":30,"LimitResponse":{"Type":"Reject","Queuing":null},"LendablePercent":0,"BorrowingLimitPercent":null},"Exempt":null}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value`}},
		{"exempt without its member", pl("exempt", `{"type":"Exempt"}`), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkErrors(t, c.body, k.Validate(prepared(t, k, c.body)), c.want)
		})
	}
	for _, p := range MandatoryPriorityLevelConfigurations() {
		data, _ := json.Marshal(p)
		checkErrors(t, p.Name, k.Validate(prepared(t, k, string(data))), nil)
	}
}

// On an update, the declarative checks skip what the update left as it
// was, as upstream's do: a stored spec broken the same way keeps the
// handwritten error's words; a change is checked again.
func TestPriorityLevelUpdateRatchets(t *testing.T) {
	k := PriorityLevelConfigurations()
	const broken = `{"metadata":{"name":"p"},"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject","queuing":{}}}}}`
	old := prepared(t, k, broken)
	checkErrors(t, "unchanged", k.ValidateSubresourceUpdate("", prepared(t, k, broken), old), []string{
		"spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"})
	// Another share: the limit response, unchanged, is not checked again.
	shares := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":3,"limitResponse":{"type":"Reject","queuing":{}}}}}`)
	checkErrors(t, "other shares", k.ValidateSubresourceUpdate("", shares, old), []string{
		"spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"})
	changed := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Reject","queuing":{"queues":2}}}}}`)
	checkErrors(t, "changed", k.ValidateSubresourceUpdate("", changed, old), []string{"spec.limited.limitResponse.queuing: Forbidden"})
	// A type left empty is not required again by the declarative checks:
	// the handwritten error stays, in its place.
	noType := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"exempt":{}}}`)
	noTypeChanged := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"exempt":{"lendablePercent":5}}}`)
	checkErrors(t, "no type", k.ValidateSubresourceUpdate("", noTypeChanged, noType), []string{"spec.type: Required value", "spec.exempt: Forbidden"})
	noResponseType := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"type":"Limited","limited":{"limitResponse":{}}}}`)
	noResponseTypeChanged := prepared(t, k, `{"metadata":{"name":"p"},"spec":{"type":"Limited","limited":{"limitResponse":{"queuing":{}}}}}`)
	checkErrors(t, "no response type", k.ValidateSubresourceUpdate("", noResponseTypeChanged, noResponseType), []string{
		"spec.limited.limitResponse.type: Required value", "spec.limited.limitResponse.queuing: Forbidden"})
	// /status checks the status alone.
	status := old.DeepCopy()
	status.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "A"}, map[string]any{"type": "A"}, map[string]any{"type": ""}}}
	checkErrors(t, "status", k.ValidateSubresourceUpdate("status", status, old), []string{
		`status.conditions[1].type: Duplicate value: "A"`, "status.conditions[2].type: Required value"})
}

// The v1 API's defaults, set as a request's object is decoded, and the
// typed ones the bootstrap objects get agree.
func TestFlowControlDefaults(t *testing.T) {
	for _, c := range []struct {
		k          *registry.Kind
		body, want string
	}{
		{FlowSchemas(), `{"spec":{}}`, `{"matchingPrecedence":1000,"priorityLevelConfiguration":{"name":""}}`},
		{FlowSchemas(), `{"spec":{"matchingPrecedence":5}}`, `{"matchingPrecedence":5,"priorityLevelConfiguration":{"name":""}}`},
		{PriorityLevelConfigurations(), `{"spec":{"type":"Limited","limited":{"limitResponse":{"type":"Queue","queuing":{}}}}}`,
			`{"limited":{"lendablePercent":0,"limitResponse":{"queuing":{"handSize":8,"queueLengthLimit":50,"queues":64},"type":"Queue"},"nominalConcurrencyShares":30},"type":"Limited"}`},
		{PriorityLevelConfigurations(), `{"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":0,"lendablePercent":7,"limitResponse":{"type":"Queue","queuing":{"queues":3,"handSize":2,"queueLengthLimit":1}}}}}`,
			`{"limited":{"lendablePercent":7,"limitResponse":{"queuing":{"handSize":2,"queueLengthLimit":1,"queues":3},"type":"Queue"},"nominalConcurrencyShares":0},"type":"Limited"}`},
		{PriorityLevelConfigurations(), `{"spec":{"type":"Exempt","exempt":{}}}`,
			`{"exempt":{"lendablePercent":0,"nominalConcurrencyShares":0},"type":"Exempt"}`},
		{PriorityLevelConfigurations(), `{"spec":{"type":"Limited"}}`, `{"type":"Limited"}`},
	} {
		obj, _, err := registry.Decode(c.k, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(obj.Object["spec"])
		if string(got) != c.want {
			t.Errorf("%s %s: spec %s, want %s", c.k.Kind, c.body, got, c.want)
		}
		// The typed defaults give the same.
		typed := c.k.Typed()
		if err := json.Unmarshal([]byte(c.body), typed); err != nil {
			t.Fatal(err)
		}
		switch o := typed.(type) {
		case *flowcontrolv1.FlowSchema:
			DefaultFlowSchema(o)
		case *flowcontrolv1.PriorityLevelConfiguration:
			DefaultPriorityLevelConfiguration(o)
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(m["spec"]); string(got) != c.want {
			t.Errorf("%s %s typed: spec %s, want %s", c.k.Kind, c.body, got, c.want)
		}
	}
}

// Writes go as upstream's strategies have them: a create drops the
// status and starts the generation at 1; a write of the object keeps the
// stored status and bumps the generation when the spec changes; a write
// of /status changes the status alone.
func TestFlowControlWrites(t *testing.T) {
	f := newTokenFixture(t)
	ctx := context.Background()
	for _, c := range []struct {
		resource, spec, otherSpec string
	}{
		{"flowschemas", `{"priorityLevelConfiguration":{"name":"p"}}`, `{"priorityLevelConfiguration":{"name":"q"}}`},
		{"prioritylevelconfigurations", `{"type":"Limited","limited":{"limitResponse":{"type":"Reject"}}}`,
			`{"type":"Limited","limited":{"nominalConcurrencyShares":3,"limitResponse":{"type":"Reject"}}}`},
	} {
		t.Run(c.resource, func(t *testing.T) {
			res, ok := f.reg.Get(schema.GroupResource{Group: flowcontrolv1.GroupName, Resource: c.resource})
			if !ok {
				t.Fatalf("no %s", c.resource)
			}
			k := res.Kind()
			obj := func(labels, spec, status string) *unstructured.Unstructured {
				o, _, err := registry.Decode(k, fmt.Appendf(nil, `{"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":%q,"metadata":{"name":"x","labels":%s},"spec":%s,"status":%s}`,
					k.Kind, labels, spec, status))
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			state := func() string {
				cur, err := res.Get(ctx, "v1", "", "x", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				spec, _ := json.Marshal(cur.Object["spec"])
				status, _ := json.Marshal(cur.Object["status"])
				return fmt.Sprintf("%d %v %s %s", cur.GetGeneration(), cur.GetLabels(), spec, status)
			}
			const conds = `{"conditions":[{"type":"Dangling","status":"False"}]}`
			if _, err := res.Create(ctx, "v1", "", obj(`{"a":"1"}`, c.spec, conds), registry.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			spec0 := strings.TrimPrefix(strings.TrimSuffix(state(), " {}"), "1 map[a:1] ")
			if got := state(); got != "1 map[a:1] "+spec0+" {}" {
				t.Fatalf("after create: %s", got)
			}
			// /status: the status, not the spec nor the labels.
			if _, err := res.Update(ctx, "v1", "", "x", obj(`{"a":"2"}`, c.otherSpec, conds), registry.WriteOptions{Subresource: "status"}); err != nil {
				t.Fatal(err)
			}
			withStatus := `{"conditions":[{"lastTransitionTime":null,"status":"False","type":"Dangling"}]}`
			if got := state(); got != "1 map[a:1] "+spec0+" "+withStatus {
				t.Fatalf("after a status write: %s", got)
			}
			// The object: labels alone keep the generation; the status
			// sent is ignored.
			if _, err := res.Update(ctx, "v1", "", "x", obj(`{"a":"3"}`, c.spec, `{}`), registry.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := state(); got != "1 map[a:3] "+spec0+" "+withStatus {
				t.Fatalf("after a label write: %s", got)
			}
			if _, err := res.Update(ctx, "v1", "", "x", obj(`{"a":"3"}`, c.otherSpec, `{}`), registry.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := state(); !strings.HasPrefix(got, "2 map[a:3] ") || strings.Contains(got, spec0) || !strings.HasSuffix(got, withStatus) {
				t.Fatalf("after a spec write: %s", got)
			}
		})
	}
}
