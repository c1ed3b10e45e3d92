package cel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The expressions of a ValidatingAdmissionPolicy, compiled as
// kube-apiserver's admission plugin compiles them (plugin/cel and
// policy/validating) and checked as its validation of the kind does:
//
//   - every expression sees object, oldObject (any value), request,
//     namespaceObject, and params (any value) when the policy has a
//     paramKind;
//   - matchConditions and validations also see the authorizer;
//     messageExpressions do not; auditAnnotations' valueExpressions do;
//   - a policy with variables has `variables`, an object whose fields are
//     the variables compiled so far, each typed as its expression's result
//     (a variable that does not compile is dyn); matchConditions never see
//     variables;
//   - a validation is a bool, a messageExpression a string, a
//     valueExpression a string or null, a variable anything.
//
// Runtime is upstream's: variables are evaluated lazily, at most once per
// evaluation; each expression has the per-call cost limit, and the
// expressions of one evaluation share a budget (10,000,000 for
// validations, 2,500,000 for matchConditions).

// Cost budgets of one evaluation, kube-apiserver's (apis/cel/config.go).
const (
	policyCostBudget     = 10000000
	conditionsCostBudget = 2500000
	// maxMessageSize is the longest message a messageExpression may give.
	maxMessageSize = 5 * 1024
)

// variablesTypeName is the type of `variables`; compile errors name it.
const variablesTypeName = "kubernetes.variables"

var variablesType = types.NewObjectType(variablesTypeName)

// policyEnvs returns the environments of admission expressions: with or
// without params and the authorizer, and, when vars is not nil, with
// `variables` of type vars.
func policyEnv(hasParams, hasAuthorizer bool, vars *declType) (*cel.Env, error) {
	return envFor(envKey{params: hasParams, authorizer: hasAuthorizer}, vars)
}

// envFor is the environment k describes, with `variables` of type vars
// when vars is not nil.
func envFor(k envKey, vars *declType) (*cel.Env, error) {
	if vars == nil {
		return statelessEnvs(k)
	}
	return newPolicyEnv(k, vars)
}

// envKey says what an admission expression's environment declares:
// params, the authorizer, and (patchTypes, a mutation's) the patch
// types and the jsonpatch library.
type envKey struct{ params, authorizer, patchTypes bool }

var (
	statelessMu   sync.Mutex
	statelessEnvz = map[envKey]*cel.Env{}
)

func statelessEnvs(k envKey) (*cel.Env, error) {
	statelessMu.Lock()
	defer statelessMu.Unlock()
	if env := statelessEnvz[k]; env != nil {
		return env, nil
	}
	env, err := newPolicyEnv(k, nil)
	if err != nil {
		return nil, err
	}
	statelessEnvz[k] = env
	return env, nil
}

func newPolicyEnv(k envKey, vars *declType) (*cel.Env, error) {
	base, err := baseEnv()
	if err != nil {
		return nil, err
	}
	objects := map[string]*declType{}
	request := admissionRequestType(objects)
	namespace := namespaceType(objects)
	opts := []cel.EnvOption{
		cel.CustomTypeProvider(&provider{Provider: base.CELTypeProvider(), adapter: base.CELTypeAdapter(), objects: objects, patchTypes: k.patchTypes}),
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("namespaceObject", namespace.cel),
		cel.Variable("request", request.cel),
	}
	if k.params {
		opts = append(opts, cel.Variable("params", cel.DynType))
	}
	if k.patchTypes {
		opts = append(opts, jsonPatchLibrary())
	}
	if k.authorizer {
		opts = append(opts,
			cel.Variable("authorizer", authorizerType),
			cel.Variable("authorizer.requestResource", resourceCheckType))
	}
	if vars != nil {
		objects[variablesTypeName] = vars
		opts = append(opts, cel.Variable("variables", vars.cel))
	}
	return base.Extend(opts...)
}

// compileAs compiles expression in env, wanting one of the result types
// (none: any), with upstream's words for what is wrong.
func compileAs(env *cel.Env, expression string, want ...*cel.Type) (cel.Program, *cel.Type, error) {
	ast, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, nil, errors.New("compilation failed: " + iss.String())
	}
	out := ast.OutputType()
	if len(want) > 0 {
		found := false
		for _, t := range want {
			if out.IsExactType(t) || cel.AnyType.IsExactType(t) {
				found = true
			}
		}
		if !found {
			if len(want) == 1 {
				return nil, nil, fmt.Errorf("must evaluate to %v but got %v", want[0], out)
			}
			return nil, nil, fmt.Errorf("must evaluate to one of %v but got %v", want, out)
		}
	}
	prog, err := env.Program(ast, programOptions(&estimator{})...)
	if err != nil {
		return nil, nil, fmt.Errorf("program instantiation failed: %v", err)
	}
	return prog, out, nil
}

// PolicySpec is what a policy's expressions need to be compiled: the
// expressions and whether it has a paramKind.
type PolicySpec struct {
	HasParams        bool
	MatchConditions  []NamedExpression
	Variables        []NamedExpression
	Validations      []Validation
	AuditAnnotations []AuditAnnotation
	// Mutations are a MutatingAdmissionPolicy's, in order.
	Mutations []Mutation
}

// NamedExpression is a matchCondition or a variable.
type NamedExpression struct{ Name, Expression string }

// Validation is one of a policy's validations.
type Validation struct {
	Expression, Message, MessageExpression, Reason string
}

// AuditAnnotation is one of a policy's auditAnnotations.
type AuditAnnotation struct{ Key, ValueExpression string }

// PolicyChecker checks a policy's expressions as they are written, in
// the order upstream's validation does: variables first (each adds its
// field to `variables`), then the validations and auditAnnotations.
type PolicyChecker struct {
	hasParams bool
	vars      *declType // nil until a variable is checked
	envs      map[envKey]*cel.Env
}

// NewPolicyChecker returns a checker for a policy with (hasParams) or
// without a paramKind, and with (hasVariables) or without variables:
// `variables` is declared for a policy that has some, even if none
// compiles, as upstream's composition compiler declares it.
func NewPolicyChecker(hasParams, hasVariables bool) *PolicyChecker {
	c := &PolicyChecker{hasParams: hasParams, envs: map[envKey]*cel.Env{}}
	if hasVariables {
		c.vars = newVariablesType()
	}
	return c
}

func (c *PolicyChecker) env(k envKey) (*cel.Env, error) {
	k.params = c.hasParams
	if env := c.envs[k]; env != nil {
		return env, nil
	}
	env, err := envFor(k, c.vars)
	if err == nil && c.vars != nil {
		c.envs[k] = env
	}
	return env, err
}

func newVariablesType() *declType {
	return &declType{cel: types.NewObjectType(variablesTypeName), kind: kindObject, fields: map[string]*declField{}}
}

func (c *PolicyChecker) check(expression, shown string, k envKey, fldPath *field.Path, want ...*cel.Type) (*cel.Type, *field.Error) {
	env, err := c.env(k)
	if err != nil {
		return nil, field.InternalError(fldPath, err)
	}
	_, out, err := compileAs(env, expression, want...)
	if err != nil {
		return nil, field.Invalid(fldPath, shown, err.Error())
	}
	return out, nil
}

// Variable checks a variable's expression and declares the variable for
// the expressions checked after it.
func (c *PolicyChecker) Variable(name, expression string, fldPath *field.Path) *field.Error {
	if c.vars == nil { // NewPolicyChecker was told there are none
		c.vars = newVariablesType()
	}
	out, ferr := c.check(expression, expression, envKey{authorizer: true}, fldPath, cel.AnyType, cel.DynType)
	addVariable(c.vars, name, out)
	return ferr
}

func addVariable(vars *declType, name string, out *cel.Type) {
	if out == nil {
		out = cel.DynType
	}
	vars.fields[name] = &declField{name: name, typ: &declType{cel: out}}
}

// Validation checks a validation's expression: a bool.
func (c *PolicyChecker) Validation(expression string, fldPath *field.Path) *field.Error {
	_, ferr := c.check(expression, expression, envKey{authorizer: true}, fldPath, cel.BoolType)
	return ferr
}

// MessageExpression checks a validation's messageExpression: a string,
// without the authorizer.
func (c *PolicyChecker) MessageExpression(expression string, fldPath *field.Path) *field.Error {
	_, ferr := c.check(expression, expression, envKey{}, fldPath, cel.StringType)
	return ferr
}

// AuditAnnotation checks an auditAnnotation's valueExpression: a string
// or null. The trimmed expression is compiled, the one given shown.
func (c *PolicyChecker) AuditAnnotation(valueExpression string, fldPath *field.Path) *field.Error {
	_, ferr := c.check(strings.TrimSpace(valueExpression), valueExpression, envKey{authorizer: true}, fldPath, cel.StringType, cel.NullType)
	return ferr
}

// ApplyConfiguration checks a mutation's applyConfiguration expression
// (trimmed, as upstream's validation compiles and shows it): an Object.
func (c *PolicyChecker) ApplyConfiguration(expression string, fldPath *field.Path) *field.Error {
	_, ferr := c.check(expression, expression, envKey{authorizer: true, patchTypes: true}, fldPath, patchObjectType)
	return ferr
}

// JSONPatch checks a mutation's jsonPatch expression (trimmed): a list
// of JSONPatch.
func (c *PolicyChecker) JSONPatch(expression string, fldPath *field.Path) *field.Error {
	_, ferr := c.check(expression, expression, envKey{authorizer: true, patchTypes: true}, fldPath, cel.ListType(jsonPatchType))
	return ferr
}

// CheckPolicyMatchCondition checks a policy's matchCondition: a bool,
// with params when the policy has a paramKind, never variables.
func CheckPolicyMatchCondition(expression string, hasParams bool, fldPath *field.Path) *field.Error {
	env, err := policyEnv(hasParams, true, nil)
	if err != nil {
		return field.InternalError(fldPath, err)
	}
	if _, _, err := compileAs(env, expression, cel.BoolType); err != nil {
		return field.Invalid(fldPath, expression, err.Error())
	}
	return nil
}

// compiled is one compiled expression, or why it did not compile.
type compiled struct {
	name, expression string
	prog             cel.Program
	err              error
}

// Policy is a policy's expressions, compiled for evaluation. An
// expression that does not compile (a policy stored by another server)
// fails where it is evaluated, as upstream's.
type Policy struct {
	hasParams   bool
	conditions  []compiled
	variables   []compiled
	validations []compiledValidation
	audits      []compiled // name: the key
	mutations   []compiledMutation
}

type compiledValidation struct {
	compiled
	message, reason string
	messageExpr     *compiled
}

// CompilePolicy compiles spec's expressions.
func CompilePolicy(spec PolicySpec) *Policy {
	p := &Policy{hasParams: spec.HasParams}
	one := func(env *cel.Env, envErr error, name, expression string, want ...*cel.Type) compiled {
		c := compiled{name: name, expression: expression}
		if envErr != nil {
			c.err = envErr
			return c
		}
		c.prog, _, c.err = compileAs(env, expression, want...)
		return c
	}
	env, envErr := policyEnv(spec.HasParams, true, nil)
	for _, m := range spec.MatchConditions {
		p.conditions = append(p.conditions, one(env, envErr, m.Name, m.Expression, cel.BoolType))
	}
	var vars *declType
	if len(spec.Variables) > 0 {
		vars = newVariablesType()
		for _, v := range spec.Variables {
			venv, verr := policyEnv(spec.HasParams, true, vars)
			c := compiled{name: v.Name, expression: v.Expression, err: verr}
			var out *cel.Type
			if verr == nil {
				c.prog, out, c.err = compileAs(venv, v.Expression)
			}
			addVariable(vars, v.Name, out)
			p.variables = append(p.variables, c)
		}
	}
	env, envErr = policyEnv(spec.HasParams, true, vars)
	msgEnv, msgErr := policyEnv(spec.HasParams, false, vars)
	for _, v := range spec.Validations {
		cv := compiledValidation{compiled: one(env, envErr, "", v.Expression, cel.BoolType), message: v.Message, reason: v.Reason}
		if strings.TrimSpace(v.MessageExpression) != "" {
			m := one(msgEnv, msgErr, "", v.MessageExpression, cel.StringType)
			cv.messageExpr = &m
		}
		p.validations = append(p.validations, cv)
	}
	for _, a := range spec.AuditAnnotations {
		p.audits = append(p.audits, one(env, envErr, a.Key, strings.TrimSpace(a.ValueExpression), cel.StringType, cel.NullType))
	}
	if len(spec.Mutations) > 0 {
		env, envErr = envFor(envKey{params: spec.HasParams, authorizer: true, patchTypes: true}, vars)
		for _, m := range spec.Mutations {
			want := patchObjectType
			if m.PatchType == JSONPatch {
				want = cel.ListType(jsonPatchType)
			}
			p.mutations = append(p.mutations, compiledMutation{compiled: one(env, envErr, "", m.Expression, want), patchType: m.PatchType})
		}
	}
	return p
}

// CompileErrors are the errors of the expressions that did not compile.
func (p *Policy) CompileErrors() []error {
	var errs []error
	add := func(c *compiled) {
		if c != nil && c.err != nil {
			errs = append(errs, c.err)
		}
	}
	for i := range p.conditions {
		add(&p.conditions[i])
	}
	for i := range p.variables {
		add(&p.variables[i])
	}
	for i := range p.validations {
		add(&p.validations[i].compiled)
		add(p.validations[i].messageExpr)
	}
	for i := range p.audits {
		add(&p.audits[i])
	}
	for i := range p.mutations {
		add(&p.mutations[i].compiled)
	}
	return errs
}

// PolicyInput is what one evaluation sees. Objects are as JSON decodes
// them (numbers int64 or float64); nil ones are null.
type PolicyInput struct {
	Object, OldObject map[string]any
	// Request is the AdmissionRequest's fields, without uid, object and
	// oldObject.
	Request map[string]any
	// Params is the parameter object (nil: null); used when the policy
	// has a paramKind.
	Params map[string]any
	// Namespace is the request's namespace (nil: null), with only the
	// fields admission expressions see.
	Namespace map[string]any
	// User is the request's user, whom `authorizer` checks are for;
	// Authorize answers them (nil: everything is allowed).
	User      AuthzUser
	Authorize Authorize
	// RequestResource is the request's resource, for
	// authorizer.requestResource.
	RequestResource RequestResource
}

// RequestResource is the resource a request is about.
type RequestResource struct {
	Group, Resource, Subresource, Namespace, Name string
}

// activation is an evaluation's variables.
type activation struct {
	vals map[string]any
	vars *lazyVariables
	cost uint64 // of the variables evaluated
}

func (a *activation) ResolveName(name string) (any, bool) {
	if name == "variables" && a.vars != nil {
		return a.vars, true
	}
	v, ok := a.vals[name]
	return v, ok
}

func (a *activation) Parent() interpreter.Activation { return nil }

func nullable(m map[string]any) any {
	if m == nil {
		return types.NullValue
	}
	return m
}

func (p *Policy) activation(ctx context.Context, in *PolicyInput) *activation {
	vals := map[string]any{
		"object":          nullable(in.Object),
		"oldObject":       nullable(in.OldObject),
		"request":         in.Request,
		"namespaceObject": nullable(in.Namespace),
	}
	if p.hasParams {
		vals["params"] = nullable(in.Params)
	}
	authz := newAuthorizer(ctx, in.User, in.Authorize)
	r := in.RequestResource
	vals["authorizer"] = authz
	vals["authorizer.requestResource"] = requestResourceCheck(authz, r.Group, r.Resource, r.Subresource, r.Namespace, r.Name)
	a := &activation{vals: vals}
	if len(p.variables) > 0 {
		a.vars = &lazyVariables{ctx: ctx, policy: p, act: a, done: map[string]ref.Val{}}
	}
	return a
}

// messageActivation is what messageExpressions see: no authorizer, and
// variables evaluated again without it, as upstream's message filter
// evaluates them (a variable asking the authorizer fails there, and the
// message falls back to the validation's message).
func (p *Policy) messageActivation(ctx context.Context, in *PolicyInput) *activation {
	a := p.activation(ctx, in)
	delete(a.vals, "authorizer")
	delete(a.vals, "authorizer.requestResource")
	return a
}

// eval runs c in a, within the budget left (*budget, lowered by what
// it and the variables it reached cost).
func eval(ctx context.Context, c *compiled, a *activation, budget *int64) (ref.Val, error) {
	if c.err != nil {
		return nil, fmt.Errorf("compilation error: %v", c.err)
	}
	before := a.cost
	out, det, err := c.prog.ContextEval(ctx, a)
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	cost += a.cost - before
	if int64(cost) > *budget || int64(cost) < 0 {
		*budget = -1
		return nil, errOutOfBudget
	}
	*budget -= int64(cost)
	if err != nil {
		return nil, fmt.Errorf("expression '%v' resulted in error: %v", c.expression, err)
	}
	return out, nil
}

var errOutOfBudget = errors.New("validation failed due to running out of cost budget, no further validation rules will be run")

// lazyVariables is the value of `variables`: each variable is evaluated
// when first read, once.
type lazyVariables struct {
	ctx    context.Context
	policy *Policy
	act    *activation
	mu     sync.Mutex
	done   map[string]ref.Val
}

func (l *lazyVariables) get(name string) ref.Val {
	l.mu.Lock()
	if v, ok := l.done[name]; ok {
		l.mu.Unlock()
		return v
	}
	l.mu.Unlock()
	var c *compiled
	for i := range l.policy.variables {
		if l.policy.variables[i].name == name {
			c = &l.policy.variables[i]
		}
	}
	var v ref.Val
	switch {
	case c == nil:
		v = types.NewErr("no such key: %s", name)
	case c.err != nil:
		v = types.NewErr("composited variable %q fails to compile: %v", name, c.err)
	default:
		out, det, err := c.prog.ContextEval(l.ctx, l.act)
		if det != nil && det.ActualCost() != nil {
			l.act.cost += *det.ActualCost()
		}
		if err != nil {
			v = types.NewErr("composited variable %q fails to evaluate: %v", name, err)
		} else {
			v = out
		}
	}
	l.mu.Lock()
	l.done[name] = v
	l.mu.Unlock()
	return v
}

func (l *lazyVariables) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("variables cannot be converted to %v", t)
}
func (l *lazyVariables) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return variablesType
	}
	return types.NewErr("variables cannot be converted to %v", t)
}
func (l *lazyVariables) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(l)) }
func (l *lazyVariables) Type() ref.Type              { return variablesType }
func (l *lazyVariables) Value() any                  { return l }

// Get is a field selection (variables.name).
func (l *lazyVariables) Get(key ref.Val) ref.Val {
	name, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key)
	}
	return l.get(string(name))
}

// IsSet is has(variables.name): whether the policy declares it.
func (l *lazyVariables) IsSet(key ref.Val) ref.Val {
	name, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(key)
	}
	for _, v := range l.policy.variables {
		if v.name == string(name) {
			return types.True
		}
	}
	return types.False
}

// Conditions is how many matchConditions the policy has.
func (p *Policy) Conditions() int { return len(p.conditions) }

// Match evaluates the policy's matchConditions: false as soon as one is
// false; otherwise their errors, if any (several joined as a list).
// failed is how many conditions failed to evaluate before the answer, as
// upstream's metrics count them.
func (p *Policy) Match(ctx context.Context, in *PolicyInput) (ok bool, failed int, err error) {
	if len(p.conditions) == 0 {
		return true, 0, nil
	}
	a := p.activation(ctx, in)
	a.vars = nil // matchConditions have no variables
	budget := int64(conditionsCostBudget)
	var errs []string
	for i := range p.conditions {
		out, err := eval(ctx, &p.conditions[i], a, &budget)
		if errors.Is(err, errOutOfBudget) {
			return false, len(errs), err
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if out == types.False {
			return false, len(errs), nil
		}
	}
	if len(errs) > 0 {
		return false, len(errs), ConditionErrors(errs)
	}
	return true, 0, nil
}

// ConditionErrors are the errors of the matchConditions that failed to
// evaluate, as upstream's aggregate error prints them: one alone, several
// as a list.
func ConditionErrors(msgs []string) error {
	if len(msgs) == 1 {
		return errors.New(msgs[0])
	}
	return errors.New("[" + strings.Join(msgs, ", ") + "]")
}

// Decision is the outcome of one validation that did not pass.
type Decision struct {
	// Index is the validation's.
	Index int
	// Error: the validation could not be evaluated (Message says why),
	// and the policy's failurePolicy decides; otherwise it was false.
	Error   bool
	Message string
	// Reason is the validation's reason (Invalid if it has none) when it
	// was false.
	Reason string
	// Elapsed is how long the validation's expression took.
	Elapsed time.Duration
}

// AnnotationResult is an auditAnnotation's outcome: a value to publish,
// or an error; nothing for a null or empty value.
type AnnotationResult struct {
	Key, Value string
	Err        error
	Elapsed    time.Duration
}

// Validate evaluates the validations and auditAnnotations over in. A
// failure of the whole evaluation (the budget spent) is err.
func (p *Policy) Validate(ctx context.Context, in *PolicyInput) (decisions []Decision, annotations []AnnotationResult, err error) {
	a := p.activation(ctx, in)
	budget := int64(policyCostBudget)
	results := make([]ref.Val, len(p.validations))
	errs := make([]error, len(p.validations))
	elapsed := make([]time.Duration, len(p.validations))
	for i := range p.validations {
		start := time.Now()
		results[i], errs[i] = eval(ctx, &p.validations[i].compiled, a, &budget)
		elapsed[i] = time.Since(start)
		if errors.Is(errs[i], errOutOfBudget) {
			return nil, nil, errs[i]
		}
	}
	var ma *activation // the messageExpressions', made when one is needed
	for i := range p.validations {
		v := &p.validations[i]
		switch {
		case errs[i] != nil:
			decisions = append(decisions, Decision{Index: i, Error: true, Message: errs[i].Error(), Elapsed: elapsed[i]})
		case results[i] != types.True:
			d := Decision{Index: i, Reason: v.reason, Elapsed: elapsed[i]}
			if d.Reason == "" {
				d.Reason = "Invalid"
			}
			if v.messageExpr != nil {
				if ma == nil {
					ma = p.messageActivation(ctx, in)
				}
				out, merr := eval(ctx, v.messageExpr, ma, &budget)
				if errors.Is(merr, errOutOfBudget) {
					decisions = append(decisions, Decision{Index: i, Error: true, Message: "failed messageExpression: " + merr.Error(), Elapsed: elapsed[i]})
					continue
				}
				if s, ok := out.(types.String); ok && merr == nil {
					msg := strings.TrimSpace(string(s))
					if len(msg) <= maxMessageSize && !strings.Contains(msg, "\n") {
						d.Message = msg
					}
				}
			}
			if d.Message == "" {
				d.Message = strings.TrimSpace(v.message)
			}
			if d.Message == "" {
				d.Message = "failed expression: " + strings.TrimSpace(v.expression)
			}
			decisions = append(decisions, d)
		}
	}
	budget = policyCostBudget
	for i := range p.audits {
		c := &p.audits[i]
		start := time.Now()
		out, aerr := eval(ctx, c, a, &budget)
		took := time.Since(start)
		if errors.Is(aerr, errOutOfBudget) {
			return nil, nil, aerr
		}
		switch {
		case aerr != nil:
			annotations = append(annotations, AnnotationResult{Key: c.name, Err: aerr, Elapsed: took})
		case out == types.NullValue:
		default:
			s, ok := out.(types.String)
			if !ok {
				//lint:ignore ST1005 upstream's words
				annotations = append(annotations, AnnotationResult{Key: c.name, Elapsed: took, Err: fmt.Errorf(
					"valueExpression '%v' resulted in unsupported return type: %v. Return type must be either string or null.", c.expression, out.Type())})
				continue
			}
			if v := strings.TrimSpace(string(s)); v != "" {
				annotations = append(annotations, AnnotationResult{Key: c.name, Value: v})
			}
		}
	}
	return decisions, annotations, nil
}
