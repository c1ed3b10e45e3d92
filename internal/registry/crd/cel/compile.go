package cel

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validator holds the compiled rules of one CRD version's schema, in a tree
// that follows the schema. A nil *Validator has no rules; its Validate
// returns nil.
type Validator struct {
	root *node
}

// node is one schema node that has rules itself or below it. Children
// without rules are absent.
type node struct {
	schema *apiextensionsv1.JSONSchemaProps
	typ    *declType // nil when the node has no rules
	rules  []rule
	props  map[string]*node // by property name
	values *node            // additionalProperties
	items  *node
}

type rule struct {
	src         apiextensionsv1.ValidationRule
	prog        cel.Program
	msg         cel.Program // nil without messageExpression
	usesOldSelf bool
	optional    bool // optionalOldSelf: oldSelf is an optional, and the rule runs on create
	fieldPath   string
}

// typeSeq numbers compilations, to give each its own object type names.
var typeSeq atomic.Uint64

// compiler holds what the rules of one schema share.
type compiler struct {
	env     *cel.Env
	builder *typeBuilder
	total   totalCost
}

// Compile compiles every x-kubernetes-validations rule of a CRD version's
// openAPIV3Schema, as kube-apiserver does when the CRD is created or
// updated. fldPath is the schema's own path
// (spec.versions[i].schema.openAPIV3Schema); errors are below it, in the
// form kube-apiserver gives:
// <fldPath>.properties[spec].items.x-kubernetes-validations[0].rule.
//
// A schema without rules gives a nil Validator and no errors. If errors are
// returned, the Validator must not be used: the CRD is to be refused.
func Compile(s *apiextensionsv1.JSONSchemaProps, fldPath *field.Path) (*Validator, field.ErrorList) {
	if !hasRules(s) {
		return nil, nil
	}
	base, err := baseEnv()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(fldPath, fmt.Errorf("CEL environment: %w", err))}
	}
	b := &typeBuilder{objects: map[string]*declType{}}
	rootType := b.build(s, typeName(typeSeq.Add(1)), true)
	env, err := base.Extend(
		cel.CustomTypeProvider(&provider{Provider: base.CELTypeProvider(), adapter: base.CELTypeAdapter(), objects: b.objects}),
	)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(fldPath, fmt.Errorf("CEL environment: %w", err))}
	}
	c := &compiler{env: env, builder: b}
	one := uint64(1)
	root, errs, _ := c.compile(s, rootType, fldPath, &one, nil)
	if c.total.sum > staticEstimatedCRDCostLimit {
		for _, e := range c.total.top {
			errs = append(errs, field.Forbidden(e.path, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"))
		}
		errs = append(errs, field.Forbidden(fldPath, costErrorMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", c.total.sum, staticEstimatedCRDCostLimit)))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &Validator{root: root}, nil
}

// compile compiles the rules of s and below. t is s's declType (nil if CEL
// cannot see s). card is how many times s can occur in one object, nil if
// unbounded. uncorrelatable is the path of the nearest list or map above s
// whose old and new elements cannot be paired, where oldSelf is refused.
// schemaErrs reports whether a rule was malformed (not a CEL error), in which
// case kube-apiserver does not compile the rules above it either.
func (c *compiler) compile(s *apiextensionsv1.JSONSchemaProps, t *declType, fldPath *field.Path, card *uint64, uncorrelatable *field.Path) (n *node, errs field.ErrorList, schemaErrs bool) {
	n = &node{schema: s}
	keep := len(s.XValidations) > 0

	// Children first, in kube-apiserver's order: additionalProperties,
	// properties, items.
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		cs := s.AdditionalProperties.Schema
		var ct *declType
		if t != nil && t.kind == kindMap {
			ct = t.elem
		}
		child, cerrs, serrs := c.compile(cs, ct, fldPath.Child("additionalProperties"), childCardinality(s, card), uncorrelatable)
		errs, schemaErrs = append(errs, cerrs...), schemaErrs || serrs
		if child != nil {
			n.values, keep = child, true
		}
	}
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		if !hasRules(&p) {
			continue
		}
		var ct *declType
		if t != nil && t.kind == kindObject {
			if esc, ok := escapeName(name); ok {
				if f, ok := t.fields[esc]; ok {
					ct = f.typ
				}
			}
		}
		if ct == nil {
			// Not reachable from the parent's type (an unescapable name, or
			// a parent CEL cannot see): type it on its own.
			ct = c.builder.build(&p, typeName(typeSeq.Add(1)), p.XEmbeddedResource)
		}
		unc := uncorrelatable
		if unc == nil && s.XMapType != nil && *s.XMapType != "granular" && *s.XMapType != "atomic" {
			unc = fldPath
		}
		child, cerrs, serrs := c.compile(&p, ct, fldPath.Child("properties").Key(name), childCardinality(s, card), unc)
		errs, schemaErrs = append(errs, cerrs...), schemaErrs || serrs
		if child != nil {
			if n.props == nil {
				n.props = map[string]*node{}
			}
			n.props[name], keep = child, true
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		cs := s.Items.Schema
		var ct *declType
		if t != nil && t.kind == kindList {
			ct = t.elem
		}
		unc := uncorrelatable
		if unc == nil && (s.XListType == nil || *s.XListType != "map") {
			// Only map lists pair old and new items (by key).
			unc = fldPath
		}
		child, cerrs, serrs := c.compile(cs, ct, fldPath.Child("items"), childCardinality(s, card), unc)
		errs, schemaErrs = append(errs, cerrs...), schemaErrs || serrs
		if child != nil {
			n.items, keep = child, true
		}
	}
	if !keep {
		return nil, errs, schemaErrs
	}
	if len(s.XValidations) == 0 {
		return n, errs, schemaErrs
	}

	vpath := fldPath.Child("x-kubernetes-validations")
	if rerrs := checkRules(s, vpath); len(rerrs) > 0 {
		return n, append(errs, rerrs...), true
	}
	if schemaErrs {
		// kube-apiserver skips CEL when the schema below is malformed: the
		// CEL errors would not be actionable yet.
		return n, errs, schemaErrs
	}
	if t == nil {
		return n, append(errs, field.InternalError(vpath, fmt.Errorf("internal error: failed to construct type information for x-kubernetes-validations rules: unable to convert structural schema to CEL declarations"))), schemaErrs
	}
	n.typ = t
	rules, rerrs := c.compileRules(s, t, vpath, card, uncorrelatable)
	n.rules = rules
	return n, append(errs, rerrs...), schemaErrs
}

// compileRules compiles the rules on one node.
func (c *compiler) compileRules(s *apiextensionsv1.JSONSchemaProps, t *declType, vpath *field.Path, card *uint64, uncorrelatable *field.Path) ([]rule, field.ErrorList) {
	var errs field.ErrorList
	env, err := c.env.Extend(cel.Variable("self", t.cel), cel.Variable("oldSelf", t.cel))
	if err != nil {
		return nil, field.ErrorList{field.InternalError(vpath, err)}
	}
	var optEnv *cel.Env
	est := &estimator{root: t}
	// How many times the rule may run in one object: the product of the
	// maxItems/maxProperties above it, or, if one is missing, as many
	// values of this node's smallest size as fit in a request.
	times := maxRequestSizeBytes / (t.minSize + 1)
	if card != nil {
		times = int64(min(*card, math.MaxInt64))
	}
	rules := make([]rule, len(s.XValidations))
	for i, src := range s.XValidations {
		rpath := vpath.Index(i)
		r := rule{src: src, optional: src.OptionalOldSelf != nil && *src.OptionalOldSelf}
		renv := env
		if r.optional {
			if optEnv == nil {
				if optEnv, err = c.env.Extend(cel.Variable("self", t.cel), cel.Variable("oldSelf", cel.OptionalType(t.cel))); err != nil {
					return nil, append(errs, field.InternalError(vpath, err))
				}
			}
			renv = optEnv
		}
		rules[i] = r
		if strings.TrimSpace(src.Rule) == "" {
			continue
		}
		ast, iss := renv.Compile(src.Rule)
		if iss != nil && iss.Err() != nil {
			errs = append(errs, field.Invalid(rpath.Child("rule"), ruleValue(src), "compilation failed: "+iss.String()))
			continue
		}
		if ast.OutputType() != cel.BoolType {
			errs = append(errs, field.Invalid(rpath.Child("rule"), ruleValue(src), "cel expression must evaluate to a bool"))
			continue
		}
		for _, ref := range ast.NativeRep().ReferenceMap() {
			if ref.Name == "oldSelf" {
				r.usesOldSelf = true
				break
			}
		}
		prog, err := renv.Program(ast, programOptions(est)...)
		if err != nil {
			errs = append(errs, field.Invalid(rpath.Child("rule"), ruleValue(src), "program instantiation failed: "+err.Error()))
			continue
		}
		ce, err := renv.EstimateCost(ast, est)
		if err != nil {
			errs = append(errs, field.InternalError(rpath.Child("rule"), fmt.Errorf("cost estimation failed: %w", err)))
			continue
		}
		cost := saturatingMul(ce.Max, uint64(times))
		if cost > staticEstimatedCostLimit {
			errs = append(errs, field.Forbidden(rpath.Child("rule"), costErrorMessage("estimated rule cost", cost, staticEstimatedCostLimit)))
		}
		c.total.observe(rpath.Child("rule"), cost)
		r.prog = prog

		if src.MessageExpression != "" {
			mast, iss := renv.Compile(src.MessageExpression)
			switch {
			case iss != nil && iss.Err() != nil:
				errs = append(errs, field.Invalid(rpath.Child("messageExpression"), ruleValue(src), "messageExpression compilation failed: "+iss.String()))
			case mast.OutputType() != cel.StringType:
				errs = append(errs, field.Invalid(rpath.Child("messageExpression"), ruleValue(src), "messageExpression must evaluate to a string"))
			default:
				mprog, err := renv.Program(mast, programOptions(est)...)
				if err != nil {
					errs = append(errs, field.Invalid(rpath.Child("messageExpression"), ruleValue(src), "messageExpression instantiation failed: "+err.Error()))
					break
				}
				mce, err := renv.EstimateCost(mast, est)
				if err != nil {
					errs = append(errs, field.InternalError(rpath.Child("messageExpression"), fmt.Errorf("cost estimation failed for messageExpression: %w", err)))
					break
				}
				// As upstream, a messageExpression's cost is not multiplied by
				// how often it can run.
				if mce.Max > staticEstimatedCostLimit {
					errs = append(errs, field.Forbidden(rpath.Child("messageExpression"), costErrorMessage("estimated messageExpression cost", mce.Max, staticEstimatedCostLimit)))
				}
				c.total.observe(rpath.Child("messageExpression"), mce.Max)
				r.msg = mprog
			}
		}
		if r.usesOldSelf {
			if uncorrelatable != nil {
				errs = append(errs, field.Invalid(rpath.Child("rule"), src.Rule, fmt.Sprintf("oldSelf cannot be used on the uncorrelatable portion of the schema within %v", uncorrelatable)))
			}
		} else if src.OptionalOldSelf != nil {
			errs = append(errs, field.Invalid(rpath.Child("optionalOldSelf"), *src.OptionalOldSelf, "may not be set if oldSelf is not used in rule"))
		}
		if src.FieldPath != "" {
			if p, err := validFieldPath(src.FieldPath, s); err == nil {
				r.fieldPath = p.String()
			}
		}
		rules[i] = r
	}
	return rules, errs
}

var supportedReasons = []string{
	string(apiextensionsv1.FieldValueDuplicate),
	string(apiextensionsv1.FieldValueForbidden),
	string(apiextensionsv1.FieldValueInvalid),
	string(apiextensionsv1.FieldValueRequired),
}

var newlines = regexp.MustCompile(`[\n\r]+`)

// checkRules checks the shape of a node's rules before compiling them, with
// kube-apiserver's messages (ValidateCustomResourceDefinitionOpenAPISchema).
func checkRules(s *apiextensionsv1.JSONSchemaProps, vpath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range s.XValidations {
		p := vpath.Index(i)
		rule, msg := strings.TrimSpace(r.Rule), strings.TrimSpace(r.Message)
		switch {
		case rule == "":
			errs = append(errs, field.Required(p.Child("rule"), "rule is not specified"))
		case r.Message != "" && msg == "":
			errs = append(errs, field.Invalid(p.Child("message"), r.Message, "must be non-empty if specified"))
		case newlines.MatchString(msg):
			errs = append(errs, field.Invalid(p.Child("message"), r.Message, "must not contain line breaks"))
		case newlines.MatchString(rule) && msg == "":
			errs = append(errs, field.Required(p.Child("message"), "message must be specified if rule contains line breaks"))
		}
		if r.MessageExpression != "" && strings.TrimSpace(r.MessageExpression) == "" {
			errs = append(errs, field.Required(p.Child("messageExpression"), "messageExpression must be non-empty if specified"))
		}
		if r.Reason != nil && !contains(supportedReasons, string(*r.Reason)) {
			errs = append(errs, field.NotSupported(p.Child("reason"), *r.Reason, supportedReasons))
		}
		if r.FieldPath != "" {
			if strings.TrimSpace(r.FieldPath) == "" {
				errs = append(errs, field.Invalid(p.Child("fieldPath"), r.FieldPath, "must be non-empty if specified"))
			}
			if newlines.MatchString(r.FieldPath) {
				errs = append(errs, field.Invalid(p.Child("fieldPath"), r.FieldPath, "must not contain line breaks"))
			}
			if _, err := validFieldPath(r.FieldPath, s); err != nil {
				errs = append(errs, field.Invalid(p.Child("fieldPath"), r.FieldPath, "must be a valid path"))
			}
		}
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// childCardinality is how many times a child of s can occur in one object,
// or nil if unbounded (extractMaxElements in kube-apiserver).
func childCardinality(s *apiextensionsv1.JSONSchemaProps, card *uint64) *uint64 {
	if card == nil {
		return nil
	}
	var n uint64 = 1
	switch s.Type {
	case "object":
		if s.AdditionalProperties != nil {
			if s.MaxProperties == nil {
				return nil
			}
			n = uint64(nonNegative(*s.MaxProperties))
		}
	case "array":
		if s.MaxItems == nil {
			return nil
		}
		n = uint64(nonNegative(*s.MaxItems))
	}
	r := saturatingMul(*card, n)
	return &r
}

func saturatingMul(a, b uint64) uint64 {
	if a == 0 {
		return 0
	}
	if math.MaxUint64/a < b {
		return math.MaxUint64
	}
	return a * b
}

// totalCost adds up the estimated costs of a CRD's rules and keeps the four
// most expensive ones that are at least 1% of the limit, to name them when
// the total is over (TotalCost in kube-apiserver).
type totalCost struct {
	sum uint64
	top []ruleCost
}

type ruleCost struct {
	path *field.Path
	cost uint64
}

func (t *totalCost) observe(p *field.Path, cost uint64) {
	if math.MaxUint64-t.sum < cost {
		t.sum = math.MaxUint64
	} else {
		t.sum += cost
	}
	if cost < staticEstimatedCRDCostLimit/100 {
		return
	}
	t.top = append(t.top, ruleCost{p, cost})
	sort.SliceStable(t.top, func(i, j int) bool { return t.top[i].cost > t.top[j].cost })
	if len(t.top) > 4 {
		t.top = t.top[:4]
	}
}

// costErrorMessage is kube-apiserver's wording for a cost over its limit
// (getCostErrorMessage in apiextensions-apiserver's validation).
func costErrorMessage(what string, cost, limit uint64) string {
	f := float64(cost) / float64(limit)
	var factor string
	switch {
	case f > 100:
		factor = "more than 100x"
	case f < 1.5:
		factor = fmt.Sprintf("%fx", f)
	default:
		factor = fmt.Sprintf("%.1fx", f)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", what, factor)
}

func hasRules(s *apiextensionsv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 {
		return true
	}
	if s.Items != nil && hasRules(s.Items.Schema) {
		return true
	}
	if s.AdditionalProperties != nil && hasRules(s.AdditionalProperties.Schema) {
		return true
	}
	for _, p := range s.Properties {
		if hasRules(&p) {
			return true
		}
	}
	return false
}

// ruleValue renders a rule as the bad value of a field error the way
// kube-apiserver's errors show it: the JSON of its internal ValidationRule
// type, whose fields have no JSON names.
type ruleValue apiextensionsv1.ValidationRule

func (r ruleValue) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Rule, Message, MessageExpression string
		Reason                           *apiextensionsv1.FieldValueErrorReason
		FieldPath                        string
		OptionalOldSelf                  *bool
	}{r.Rule, r.Message, r.MessageExpression, r.Reason, r.FieldPath, r.OptionalOldSelf})
}
