package core

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The two kinds of API Priority and Fairness's configuration,
// flowcontrol.apiserver.k8s.io/v1 FlowSchema and
// PriorityLevelConfiguration, as kube-apiserver v1.37 serves them:
// cluster-scoped, with /status; the v1 API's defaults; upstream's
// strategies (generation 1 on create and one more whenever the spec
// changes, the status dropped on create and kept by writes of the object,
// the spec and metadata kept by writes of /status) and its validation
// (pkg/apis/flowcontrol/validation), including the fixed specs of the
// mandatory objects exempt and catch-all; the printer's columns. Serving
// the objects is all: the bootstrap objects, their status and the
// dispatching of requests by them are package flowcontrol's business.
//
// Each error is upstream's: its path, type, value and words, in
// upstream's order. Upstream validates its internal types, which have no
// JSON names: a value it shows as JSON is shown here with Go's field names
// (internalForm); one in an enumerated string type is shown as JSON
// (enumValue).

// flowControlKinds returns the two kinds.
func flowControlKinds() []*registry.Kind {
	return []*registry.Kind{FlowSchemas(), PriorityLevelConfigurations()}
}

// FlowSchemas is flowcontrol.apiserver.k8s.io/v1's FlowSchema: which
// requests go to which priority level.
func FlowSchemas() *registry.Kind {
	return &registry.Kind{
		Group: flowcontrolv1.GroupName, Versions: []string{"v1"}, Kind: "FlowSchema", ListKind: "FlowSchemaList",
		Resource: "flowschemas", Singular: "flowschema",
		Status: true, Generation: true, UnconditionalUpdate: true, QualifiedFinalizers: true,
		Typed:   func() runtime.Object { return &flowcontrolv1.FlowSchema{} },
		Default: defaultFlowSchema,
		PrepareForCreate: func(obj *unstructured.Unstructured) {
			defaultFlowSchema(obj)
			obj.Object["status"] = map[string]any{} // the Go type writes an empty status as {}
		},
		PrepareForUpdate: func(obj, _ *unstructured.Unstructured) { defaultFlowSchema(obj) },
		Validate:         func(obj *unstructured.Unstructured) field.ErrorList { return validateFlowSchema(TypedFlowSchema(obj)) },
		ValidateSubresourceUpdate: func(sub string, obj, _ *unstructured.Unstructured) field.ErrorList {
			fs := TypedFlowSchema(obj)
			if sub == "status" {
				return validateFlowSchemaStatus(fs)
			}
			return validateFlowSchema(fs)
		},
		Columns:    flowSchemaColumns,
		TableOrder: flowSchemaOrder,
	}
}

// PriorityLevelConfigurations is flowcontrol.apiserver.k8s.io/v1's
// PriorityLevelConfiguration: a share of the server's concurrency, and
// what a request beyond it meets.
func PriorityLevelConfigurations() *registry.Kind {
	return &registry.Kind{
		Group: flowcontrolv1.GroupName, Versions: []string{"v1"}, Kind: "PriorityLevelConfiguration",
		ListKind: "PriorityLevelConfigurationList", Resource: "prioritylevelconfigurations", Singular: "prioritylevelconfiguration",
		Status: true, Generation: true, UnconditionalUpdate: true, QualifiedFinalizers: true,
		Typed:   func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
		Default: defaultPriorityLevel,
		PrepareForCreate: func(obj *unstructured.Unstructured) {
			defaultPriorityLevel(obj)
			obj.Object["status"] = map[string]any{}
		},
		PrepareForUpdate: func(obj, _ *unstructured.Unstructured) { defaultPriorityLevel(obj) },
		Validate: func(obj *unstructured.Unstructured) field.ErrorList {
			return validatePriorityLevel(TypedPriorityLevelConfiguration(obj), nil)
		},
		ValidateSubresourceUpdate: func(sub string, obj, old *unstructured.Unstructured) field.ErrorList {
			pl := TypedPriorityLevelConfiguration(obj)
			if sub == "status" {
				return validatePriorityLevelStatus(pl)
			}
			return validatePriorityLevel(pl, TypedPriorityLevelConfiguration(old))
		},
		Columns: priorityLevelColumns,
	}
}

// TypedFlowSchema is obj as the Go type (fields that do not convert left
// empty).
func TypedFlowSchema(obj *unstructured.Unstructured) *flowcontrolv1.FlowSchema {
	var fs flowcontrolv1.FlowSchema
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &fs)
	return &fs
}

// TypedPriorityLevelConfiguration is obj as the Go type (fields that do
// not convert left empty).
func TypedPriorityLevelConfiguration(obj *unstructured.Unstructured) *flowcontrolv1.PriorityLevelConfiguration {
	var pl flowcontrolv1.PriorityLevelConfiguration
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pl)
	return &pl
}

// The v1 API's defaults (pkg/apis/flowcontrol/v1/defaults.go).
const (
	DefaultMatchingPrecedence       int32 = 1000
	DefaultNominalConcurrencyShares int32 = 30
	DefaultQueues                   int32 = 64
	DefaultHandSize                 int32 = 8
	DefaultQueueLengthLimit         int32 = 50
)

// DefaultFlowSchema sets the v1 API's defaults in fs
// (SetObjectDefaults_FlowSchema): a matching precedence of 0 becomes
// DefaultMatchingPrecedence.
func DefaultFlowSchema(fs *flowcontrolv1.FlowSchema) {
	if fs.Spec.MatchingPrecedence == 0 {
		fs.Spec.MatchingPrecedence = DefaultMatchingPrecedence
	}
}

// DefaultPriorityLevelConfiguration sets the v1 API's defaults in pl
// (SetObjectDefaults_PriorityLevelConfiguration): a limited level's
// nominal concurrency shares (DefaultNominalConcurrencyShares) and
// lendable percent (0) when unset, and its queuing's zero numbers; an
// exempt level's shares and lendable percent (0) when unset.
func DefaultPriorityLevelConfiguration(pl *flowcontrolv1.PriorityLevelConfiguration) {
	if l := pl.Spec.Limited; l != nil {
		if l.NominalConcurrencyShares == nil {
			l.NominalConcurrencyShares = ptr.To(DefaultNominalConcurrencyShares)
		}
		if l.LendablePercent == nil {
			l.LendablePercent = ptr.To(int32(0))
		}
		if q := l.LimitResponse.Queuing; q != nil {
			q.HandSize = cmp.Or(q.HandSize, DefaultHandSize)
			q.Queues = cmp.Or(q.Queues, DefaultQueues)
			q.QueueLengthLimit = cmp.Or(q.QueueLengthLimit, DefaultQueueLengthLimit)
		}
	}
	if e := pl.Spec.Exempt; e != nil {
		if e.NominalConcurrencyShares == nil {
			e.NominalConcurrencyShares = ptr.To(int32(0))
		}
		if e.LendablePercent == nil {
			e.LendablePercent = ptr.To(int32(0))
		}
	}
}

// defaultFlowSchema is DefaultFlowSchema on the object's map (in place:
// a decoded object is in the Go type's JSON form, numbers int64).
func defaultFlowSchema(obj *unstructured.Unstructured) {
	spec, _ := obj.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		obj.Object["spec"] = spec
	}
	setZero(spec, "matchingPrecedence", DefaultMatchingPrecedence)
}

// defaultPriorityLevel is DefaultPriorityLevelConfiguration on the
// object's map.
func defaultPriorityLevel(obj *unstructured.Unstructured) {
	spec, _ := obj.Object["spec"].(map[string]any)
	if limited, ok := spec["limited"].(map[string]any); ok {
		setNil(limited, "nominalConcurrencyShares", DefaultNominalConcurrencyShares)
		setNil(limited, "lendablePercent", 0)
		response, _ := limited["limitResponse"].(map[string]any)
		if queuing, ok := response["queuing"].(map[string]any); ok {
			setZero(queuing, "handSize", DefaultHandSize)
			setZero(queuing, "queues", DefaultQueues)
			setZero(queuing, "queueLengthLimit", DefaultQueueLengthLimit)
		}
	}
	if exempt, ok := spec["exempt"].(map[string]any); ok {
		setNil(exempt, "nominalConcurrencyShares", 0)
		setNil(exempt, "lendablePercent", 0)
	}
}

// setNil sets an unset (absent or null) pointer member of m to v.
func setNil(m map[string]any, key string, v int32) {
	if m[key] == nil {
		m[key] = int64(v)
	}
}

// setZero sets an int32 member of m that is zero (or absent) to v.
func setZero(m map[string]any, key string, v int32) {
	switch n := m[key].(type) {
	case nil:
	case int64:
		if n != 0 {
			return
		}
	case float64:
		if n != 0 {
			return
		}
	default:
		return
	}
	m[key] = int64(v)
}

// MandatoryFlowSchemas returns upstream's two mandatory FlowSchemas
// (k8s.io/apiserver's bootstrap.MandatoryFlowSchemas, v1.37), whose
// specs validation fixes: exempt, matched first, sends system:masters to
// the exempt level; catch-all, matched last, sends everyone to the
// catch-all level. They are fresh values each call, not defaulted (as
// upstream declares them; defaulting changes nothing in them), each with
// the annotation apf.kubernetes.io/autoupdate-spec "true".
func MandatoryFlowSchemas() []*flowcontrolv1.FlowSchema {
	everything := func(groups ...string) flowcontrolv1.PolicyRulesWithSubjects {
		r := flowcontrolv1.PolicyRulesWithSubjects{
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
				Verbs: []string{flowcontrolv1.VerbAll}, APIGroups: []string{flowcontrolv1.APIGroupAll},
				Resources: []string{flowcontrolv1.ResourceAll}, Namespaces: []string{flowcontrolv1.NamespaceEvery}, ClusterScope: true,
			}},
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{
				Verbs: []string{flowcontrolv1.VerbAll}, NonResourceURLs: []string{flowcontrolv1.NonResourceAll},
			}},
		}
		for _, g := range groups {
			r.Subjects = append(r.Subjects, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: g}})
		}
		return r
	}
	return []*flowcontrolv1.FlowSchema{
		{
			ObjectMeta: mandatoryMeta(flowcontrolv1.FlowSchemaNameExempt),
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: flowcontrolv1.PriorityLevelConfigurationNameExempt},
				MatchingPrecedence:         1,
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{everything(privilegedGroup)},
			},
		},
		{
			ObjectMeta: mandatoryMeta(flowcontrolv1.FlowSchemaNameCatchAll),
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: flowcontrolv1.PriorityLevelConfigurationNameCatchAll},
				MatchingPrecedence:         10000,
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{everything("system:unauthenticated", "system:authenticated")},
			},
		},
	}
}

// MandatoryPriorityLevelConfigurations returns upstream's two mandatory
// priority levels, catch-all and exempt, as MandatoryFlowSchemas does.
func MandatoryPriorityLevelConfigurations() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		{
			ObjectMeta: mandatoryMeta(flowcontrolv1.PriorityLevelConfigurationNameCatchAll),
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type: flowcontrolv1.PriorityLevelEnablementLimited,
				Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
					NominalConcurrencyShares: ptr.To(int32(5)),
					LendablePercent:          ptr.To(int32(0)),
					LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
				},
			},
		},
		{
			ObjectMeta: mandatoryMeta(flowcontrolv1.PriorityLevelConfigurationNameExempt),
			Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
				Type: flowcontrolv1.PriorityLevelEnablementExempt,
				Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{
					NominalConcurrencyShares: ptr.To(int32(0)),
					LendablePercent:          ptr.To(int32(0)),
				},
			},
		},
	}
}

func mandatoryMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}}
}

// The values upstream accepts, in the order its messages list them
// (sorted).
var (
	distinguisherMethods  = []string{"ByNamespace", "ByUser"}
	flowSchemaVerbs       = []string{"create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"}
	subjectKinds          = []string{"Group", "ServiceAccount", "User"}
	priorityLevelTypes    = []string{"Exempt", "Limited"}
	limitResponseTypes    = []string{"Queue", "Reject"}
	maxQueues             = int32(10 * 1000 * 1000)
	maxMatchingPrecedence = int32(10000)
	// maxHashBits is the most bits of a hash shuffle sharding may use
	// (upstream's shufflesharding.MaxHashBits).
	maxHashBits = 60
)

// validateFlowSchema is upstream's ValidateFlowSchema, which an update
// also gets (the metadata is the registry's): the spec, the fixed spec
// of a mandatory schema, then the status.
func validateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	specPath := field.NewPath("spec")
	errs := validateFlowSchemaSpec(fs.Name, &fs.Spec, specPath)
	for _, mand := range MandatoryFlowSchemas() {
		if mand.Name == fs.Name && !equality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
			errs = append(errs, field.Invalid(specPath, internalForm{fs.Spec}, fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
		}
	}
	return append(errs, validateFlowSchemaStatus(fs)...)
}

// validateFlowSchemaStatus is upstream's ValidateFlowSchemaStatus, all a
// write of /status is checked for.
func validateFlowSchemaStatus(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	return validateConditionTypes(field.NewPath("status", "conditions"), fs.Status.Conditions,
		func(c flowcontrolv1.FlowSchemaCondition) string { return string(c.Type) })
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	mp := p.Child("matchingPrecedence")
	if spec.MatchingPrecedence <= 0 {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "must be a positive value"))
	}
	if spec.MatchingPrecedence > maxMatchingPrecedence {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, fmt.Sprintf("must not be greater than %v", maxMatchingPrecedence)))
	}
	if spec.MatchingPrecedence == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(mp, spec.MatchingPrecedence, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if dm := spec.DistinguisherMethod; dm != nil && !slices.Contains(distinguisherMethods, string(dm.Type)) {
		errs = append(errs, field.NotSupported(p.Child("distinguisherMethod", "type"), internalForm{dm}, distinguisherMethods))
	}
	plPath := p.Child("priorityLevelConfiguration", "name")
	if pl := spec.PriorityLevelConfiguration.Name; pl != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(pl, false) {
			errs = append(errs, field.Invalid(plPath, pl, msg))
		}
	} else {
		errs = append(errs, field.Required(plPath, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validatePolicyRules(&spec.Rules[i], p.Child("rules").Index(i))...)
	}
	return errs
}

func validatePolicyRules(rule *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(rule.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range rule.Subjects {
		errs = append(errs, validateSubject(&rule.Subjects[i], p.Child("subjects").Index(i))...)
	}
	if len(rule.ResourceRules) == 0 && len(rule.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range rule.ResourceRules {
		errs = append(errs, validateResourceRule(&rule.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range rule.NonResourceRules {
		errs = append(errs, validateNonResourceRule(&rule.NonResourceRules[i], p.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

// validateSubject checks that a subject has the member its kind names
// and no other.
func validateSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	forbid := func(member string, set bool, kind string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(member), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", member, kind)))
		}
	}
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		sp := p.Child("serviceAccount")
		if sa := s.ServiceAccount; sa == nil {
			errs = append(errs, field.Required(sp, "serviceAccount is required when subject kind is 'ServiceAccount'"))
		} else {
			if sa.Name == "" {
				errs = append(errs, field.Required(sp.Child("name"), ""))
			} else if sa.Name != flowcontrolv1.NameAll {
				for _, msg := range apivalidation.ValidateServiceAccountName(sa.Name, false) {
					errs = append(errs, field.Invalid(sp.Child("name"), sa.Name, msg))
				}
			}
			if sa.Namespace == "" {
				errs = append(errs, field.Required(sp.Child("namespace"), "must specify namespace for service account"))
			} else {
				for _, msg := range apivalidation.ValidateNamespaceName(sa.Namespace, false) {
					errs = append(errs, field.Invalid(sp.Child("namespace"), sa.Namespace, msg))
				}
			}
		}
		forbid("user", s.User != nil, "User")
		forbid("group", s.Group != nil, "Group")
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			errs = append(errs, field.Required(p.Child("user"), "user is required when subject kind is 'User'"))
		} else if s.User.Name == "" {
			errs = append(errs, field.Required(p.Child("user", "name"), ""))
		}
		forbid("serviceAccount", s.ServiceAccount != nil, "ServiceAccount")
		forbid("group", s.Group != nil, "Group")
	case flowcontrolv1.SubjectKindGroup:
		if s.Group == nil {
			errs = append(errs, field.Required(p.Child("group"), "group is required when subject kind is 'Group'"))
		} else if s.Group.Name == "" {
			errs = append(errs, field.Required(p.Child("group", "name"), ""))
		}
		forbid("serviceAccount", s.ServiceAccount != nil, "ServiceAccount")
		forbid("user", s.User != nil, "User")
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), enumValue(s.Kind), subjectKinds))
	}
	return errs
}

// validateVerbs checks a rule's verbs: some, and either "*" alone or
// verbs of the API.
func validateVerbs(verbs []string, p *field.Path) field.ErrorList {
	switch {
	case len(verbs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(verbs, flowcontrolv1.VerbAll):
		if len(verbs) > 1 {
			return field.ErrorList{field.Invalid(p, verbs, "if '*' is present, must not specify other verbs")}
		}
	case slices.ContainsFunc(verbs, func(v string) bool { return !slices.Contains(flowSchemaVerbs, v) }):
		return field.ErrorList{field.NotSupported(p, verbs, flowSchemaVerbs)}
	}
	return nil
}

func validateResourceRule(rule *flowcontrolv1.ResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, p.Child("verbs"))
	if len(rule.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
	} else if len(rule.APIGroups) > 1 && slices.Contains(rule.APIGroups, flowcontrolv1.APIGroupAll) {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), rule.APIGroups, "if '*' is present, must not specify other api groups"))
	}
	if len(rule.Resources) == 0 {
		errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
	} else if len(rule.Resources) > 1 && slices.Contains(rule.Resources, flowcontrolv1.ResourceAll) {
		errs = append(errs, field.Invalid(p.Child("resources"), rule.Resources, "if '*' is present, must not specify other resources"))
	}
	np := p.Child("namespaces")
	switch {
	case len(rule.Namespaces) == 0 && !rule.ClusterScope:
		errs = append(errs, field.Required(np, "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(rule.Namespaces, flowcontrolv1.NamespaceEvery):
		if len(rule.Namespaces) > 1 {
			errs = append(errs, field.Invalid(np, rule.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, ns := range rule.Namespaces {
			for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
				errs = append(errs, field.Invalid(np.Index(i), ns, "each member of this list must be '*' or a DNS-1123 label; "+msg))
			}
		}
	}
	return errs
}

func validateNonResourceRule(rule *flowcontrolv1.NonResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(rule.Verbs, p.Child("verbs"))
	up := p.Child("nonResourceURLs")
	switch {
	case len(rule.NonResourceURLs) == 0:
		errs = append(errs, field.Required(up, "nonResourceURLs must contain at least one value"))
	case slices.Contains(rule.NonResourceURLs, flowcontrolv1.NonResourceAll):
		if len(rule.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(up, rule.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range rule.NonResourceURLs {
			if msg := nonResourceURLError(u); msg != "" {
				errs = append(errs, field.Invalid(up.Index(i), u, msg))
			}
		}
	}
	return errs
}

// nonResourceURLError says what is wrong with a non-resource URL of a
// rule: it must be "/" or start with a slash, have no white space and no
// double slash, and a wildcard only as its last segment ("/apis/*").
func nonResourceURLError(u string) string {
	switch {
	case u == "":
		return "must not be empty"
	case u == "/":
		return ""
	case u[0] != '/':
		return "must start with slash"
	case strings.Contains(u, " "):
		return "must not contain white-space"
	case strings.Contains(u, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(u, "*"); n > 1 || (n == 1 && u[len(u)-2:] != "/*") {
		return "wildcard can only do suffix matching"
	}
	return ""
}

// validateConditionTypes is upstream's status validation of both kinds:
// every condition has a type, and no type is there twice.
func validateConditionTypes[C any](p *field.Path, conds []C, typeOf func(C) string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range conds {
		t := typeOf(c)
		if seen[t] {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), enumValue(t)))
		}
		seen[t] = true
		if t == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		}
	}
	return errs
}

// validatePriorityLevel is upstream's ValidatePriorityLevelConfiguration,
// which an update also gets (old is then the stored object, nil on a
// create), and its declarative validation: the metadata is the
// registry's; the v1beta3 annotation that keeps zero shares is refused;
// then the spec, the fixed spec of a mandatory level, and the status.
//
// Upstream's strategy also validates declaratively (the +k8s tags of
// k8s.io/api's types), and in 1.37 those checks (beta) are enforced: each
// handwritten error they cover (a member the type forbids or requires, a
// type required) is replaced by theirs, worded "Required value" or
// "Forbidden" alone and listed after all the others (declarative).
func validatePriorityLevel(pl, old *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	specPath := field.NewPath("spec")
	errs = append(errs, validatePriorityLevelSpec(pl.Name, &pl.Spec, specPath)...)
	errs = append(errs, validateMandatoryPriorityLevel(pl, specPath)...)
	errs = append(errs, validatePriorityLevelStatus(pl)...)
	var oldSpec *flowcontrolv1.PriorityLevelConfigurationSpec
	if old != nil {
		oldSpec = &old.Spec
	}
	dv := declarativePriorityLevelSpec(&pl.Spec, oldSpec, specPath)
	kept := errs[:0:0]
	for _, e := range errs {
		replaced := e.CoveredByDeclarative && slices.ContainsFunc(dv, func(d *field.Error) bool { return d.Type == e.Type && d.Field == e.Field })
		if !replaced {
			kept = append(kept, e)
		}
	}
	return append(kept, dv...)
}

// validatePriorityLevelStatus is upstream's
// ValidatePriorityLevelConfigurationStatus, all a write of /status is
// checked for.
func validatePriorityLevelStatus(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	return validateConditionTypes(field.NewPath("status", "conditions"), pl.Status.Conditions,
		func(c flowcontrolv1.PriorityLevelConfigurationCondition) string { return string(c.Type) })
}

// validateMandatoryPriorityLevel fixes the spec of a mandatory level: the
// exempt level's but for its exempt member, which admins may tune; the
// catch-all level's whole.
func validateMandatoryPriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration, p *field.Path) field.ErrorList {
	for _, mand := range MandatoryPriorityLevelConfigurations() {
		if mand.Name != pl.Name {
			continue
		}
		have, msg := pl.Spec.DeepCopy(), fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
		if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
			have.Exempt = mand.Spec.Exempt
			msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
		}
		if !equality.Semantic.DeepEqual(&mand.Spec, have) {
			return field.ErrorList{field.Invalid(p, internalForm{pl.Spec}, msg)}
		}
	}
	return nil
}

func validatePriorityLevelSpec(name string, spec *flowcontrolv1.PriorityLevelConfigurationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(p.Child("type"), enumValue(spec.Type), "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(p.Child("limited"), "must be nil if the type is not Limited").MarkCoveredByDeclarative())
		}
		if e := spec.Exempt; e != nil {
			ep := p.Child("exempt")
			if e.NominalConcurrencyShares != nil && *e.NominalConcurrencyShares < 0 {
				errs = append(errs, field.Invalid(ep.Child("nominalConcurrencyShares"), *e.NominalConcurrencyShares, "must be a non-negative integer"))
			}
			errs = append(errs, validateLendablePercent(e.LendablePercent, ep)...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(p.Child("exempt"), "must be nil if the type is Limited").MarkCoveredByDeclarative())
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(p.Child("limited"), "must not be empty when type is Limited").MarkCoveredByDeclarative())
		} else {
			errs = append(errs, validateLimited(spec.Limited, p.Child("limited"))...)
		}
	case "":
		errs = append(errs, field.Required(p.Child("type"), "").MarkCoveredByDeclarative())
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), enumValue(spec.Type), priorityLevelTypes))
	}
	return errs
}

func validateLendablePercent(lendable *int32, p *field.Path) field.ErrorList {
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		return field.ErrorList{field.Invalid(p.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive")}
	}
	return nil
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Upstream's internal type holds the shares as an int32 (unset: 0).
	if shares := ptr.Deref(l.NominalConcurrencyShares, 0); shares < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), shares, "must be a non-negative integer"))
	}
	rp := p.Child("limitResponse")
	switch r := l.LimitResponse; r.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if r.Queuing != nil {
			errs = append(errs, field.Forbidden(rp.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited").MarkCoveredByDeclarative())
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if r.Queuing == nil {
			errs = append(errs, field.Required(rp.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited").MarkCoveredByDeclarative())
		} else {
			errs = append(errs, validateQueuing(r.Queuing, rp.Child("queuing"))...)
		}
	case "":
		errs = append(errs, field.Required(rp.Child("type"), "").MarkCoveredByDeclarative())
	default:
		errs = append(errs, field.NotSupported(rp.Child("type"), enumValue(r.Type), limitResponseTypes))
	}
	errs = append(errs, validateLendablePercent(l.LendablePercent, p)...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return errs
}

// validateQueuing checks a queuing configuration: positive numbers, at
// most maxQueues queues, a hand no larger than the deck, and a shuffle
// sharding whose hash needs at most maxHashBits bits.
func validateQueuing(q *flowcontrolv1.QueuingConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(p.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	hp := p.Child("handSize")
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(hp, q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(hp, q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case entropyBits(q.Queues, q.HandSize) > maxHashBits:
		errs = append(errs, field.Invalid(hp, q.HandSize,
			fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d", q.Queues, q.HandSize, maxHashBits)))
	}
	return errs
}

// entropyBits is the bits of hash that dealing a hand from a deck takes,
// as upstream's shufflesharding.RequiredEntropyBits estimates them.
func entropyBits(deck, hand int32) int {
	return int(math.Ceil(math.Log2(float64(deck)) * float64(hand)))
}

// declarativePriorityLevelSpec is upstream's declarative validation of a
// level's spec (k8s.io/api's +k8s tags: a union of the exempt and limited
// members whose type names the one allowed, and of a limit response's
// queuing), with its errors: on an update, a part equal to the stored one
// is not checked again (old is nil on a create). A queuing is compared
// by identity there, so it is checked whenever its limit response
// changed.
func declarativePriorityLevelSpec(spec, old *flowcontrolv1.PriorityLevelConfigurationSpec, p *field.Path) field.ErrorList {
	if old != nil && equality.Semantic.DeepEqual(spec, old) {
		return nil
	}
	var errs field.ErrorList
	sameType := old != nil && spec.Type == old.Type
	if !(sameType && equality.Semantic.DeepEqual(spec.Exempt, old.Exempt)) &&
		spec.Type != flowcontrolv1.PriorityLevelEnablementExempt && spec.Exempt != nil {
		errs = append(errs, field.Forbidden(p.Child("exempt"), ""))
	}
	if !(sameType && equality.Semantic.DeepEqual(spec.Limited, old.Limited)) {
		isLimited := spec.Type == flowcontrolv1.PriorityLevelEnablementLimited
		if isLimited && spec.Limited == nil {
			errs = append(errs, field.Required(p.Child("limited"), ""))
		} else if !isLimited && spec.Limited != nil {
			errs = append(errs, field.Forbidden(p.Child("limited"), ""))
		}
	}
	if spec.Type == "" && !sameType {
		errs = append(errs, field.Required(p.Child("type"), ""))
	}
	if spec.Limited == nil || (old != nil && equality.Semantic.DeepEqual(spec.Limited, old.Limited)) {
		return errs
	}
	r, rp := &spec.Limited.LimitResponse, p.Child("limited", "limitResponse")
	var was *flowcontrolv1.LimitResponse
	if old != nil && old.Limited != nil {
		was = &old.Limited.LimitResponse
	}
	if was != nil && equality.Semantic.DeepEqual(r, was) {
		return errs
	}
	if !(was != nil && r.Type == was.Type && r.Queuing == nil && was.Queuing == nil) {
		isQueue := r.Type == flowcontrolv1.LimitResponseTypeQueue
		if isQueue && r.Queuing == nil {
			errs = append(errs, field.Required(rp.Child("queuing"), ""))
		} else if !isQueue && r.Queuing != nil {
			errs = append(errs, field.Forbidden(rp.Child("queuing"), ""))
		}
	}
	if r.Type == "" && (was == nil || was.Type != "") {
		errs = append(errs, field.Required(rp.Child("type"), ""))
	}
	return errs
}

// internalForm shows a value of a flowcontrol/v1 type as a field error
// shows the same value of upstream's internal type: JSON whose members
// are the Go fields' names, in their order, every one of them (the
// internal types have no JSON tags). The v1 types have the internal
// ones' fields in the same order; the one that differs, a limited
// level's nominalConcurrencyShares (a pointer in v1), is set by the
// defaults before validation, and shows the same.
type internalForm struct{ v any }

func (f internalForm) MarshalJSON() ([]byte, error) { return appendInternal(nil, reflect.ValueOf(f.v)) }

func appendInternal(b []byte, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendInternal(b, v.Elem())
	case reflect.Struct:
		b = append(b, '{')
		for i := range v.NumField() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(append(b, '"'), v.Type().Field(i).Name...)
			b = append(b, '"', ':')
			var err error
			if b, err = appendInternal(b, v.Field(i)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case reflect.Slice:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i := range v.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendInternal(b, v.Index(i)); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	data, err := json.Marshal(v.Interface())
	return append(b, data...), err
}

// The printer's columns (printFlowSchema, printPriorityLevelConfiguration).
var (
	flowSchemaColumns = []registry.Column{
		{Name: "PriorityLevel", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationReference{}.SwaggerDoc()["name"],
			Reads: []string{"spec"}, Value: str("spec", "priorityLevelConfiguration", "name")},
		{Name: "MatchingPrecedence", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["matchingPrecedence"],
			Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
				n, _, _ := unstructured.NestedInt64(o.Object, "spec", "matchingPrecedence")
				return n
			}},
		{Name: "DistinguisherMethod", Type: "string", Description: flowcontrolv1.FlowSchemaSpec{}.SwaggerDoc()["distinguisherMethod"],
			Reads: []string{"spec"}, Value: func(o *unstructured.Unstructured) any {
				spec, _ := o.Object["spec"].(map[string]any)
				dm, _ := spec["distinguisherMethod"].(map[string]any)
				if dm == nil {
					return "<none>"
				}
				t, _ := dm["type"].(string)
				return t
			}},
		registry.AgeColumn,
		{Name: "MissingPL", Type: "string", Description: "references a broken or non-existent PriorityLevelConfiguration",
			Reads: []string{"status"}, Value: func(o *unstructured.Unstructured) any {
				status, _ := o.Object["status"].(map[string]any)
				conds, _ := status["conditions"].([]any)
				for _, c := range conds {
					if c, _ := c.(map[string]any); c["type"] == flowcontrolv1.FlowSchemaConditionDangling {
						s, _ := c["status"].(string)
						return s
					}
				}
				return "?"
			}},
	}
	priorityLevelColumns = []registry.Column{
		{Name: "Type", Type: "string", Description: flowcontrolv1.PriorityLevelConfigurationSpec{}.SwaggerDoc()["type"],
			Reads: []string{"spec"}, Value: str("spec", "type")},
		limitedColumn("NominalConcurrencyShares", flowcontrolv1.LimitedPriorityLevelConfiguration{}.SwaggerDoc()["nominalConcurrencyShares"],
			"nominalConcurrencyShares"),
		limitedColumn("Queues", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queues"], "limitResponse", "queuing", "queues"),
		limitedColumn("HandSize", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["handSize"], "limitResponse", "queuing", "handSize"),
		limitedColumn("QueueLengthLimit", flowcontrolv1.QueuingConfiguration{}.SwaggerDoc()["queueLengthLimit"],
			"limitResponse", "queuing", "queueLengthLimit"),
		registry.AgeColumn,
	}
)

// limitedColumn is a column of a limited level's number at path under
// spec.limited: "<none>" when the level is not limited or (for its
// queuing's) does not queue; 0 for one unset, as upstream's internal
// type holds it.
func limitedColumn(name, doc string, path ...string) registry.Column {
	return registry.Column{Name: name, Type: "string", Description: doc, Reads: []string{"spec"},
		Value: func(o *unstructured.Unstructured) any {
			spec, _ := o.Object["spec"].(map[string]any)
			m, _ := spec["limited"].(map[string]any)
			if m == nil {
				return "<none>"
			}
			for _, key := range path[:len(path)-1] {
				if m, _ = m[key].(map[string]any); m == nil {
					return "<none>"
				}
			}
			n, _ := m[path[len(path)-1]].(int64)
			return n
		}}
}

// flowSchemaOrder is the order of upstream's FlowSchema list Tables
// (FlowSchemaSequence): by matching precedence, then by name.
func flowSchemaOrder(a, b *unstructured.Unstructured) int {
	pa, _, _ := unstructured.NestedInt64(a.Object, "spec", "matchingPrecedence")
	pb, _, _ := unstructured.NestedInt64(b.Object, "spec", "matchingPrecedence")
	return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(a.GetName(), b.GetName()))
}
