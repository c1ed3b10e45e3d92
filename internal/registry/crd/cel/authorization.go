package cel

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// AuthorizationMatchCondition is an authorization webhook's
// matchCondition (--authorization-config), compiled as kube-apiserver's
// authorization CEL compiler compiles it: in the base environment with
// request, a kubernetes.SubjectAccessReviewSpec; it must be a bool.
type AuthorizationMatchCondition struct {
	Expression string
	prog       cel.Program
	// UsesFieldSelector and UsesLabelSelector: the expression names the
	// field, so the request's selectors are given to it (upstream gives
	// them only then).
	UsesFieldSelector, UsesLabelSelector bool
}

// CompileAuthorizationMatchCondition compiles expression. The error's
// text is upstream's detail ("compilation failed: ...", "must evaluate
// to bool but got ..."), for the caller to put at the field.
func CompileAuthorizationMatchCondition(expression string) (*AuthorizationMatchCondition, error) {
	env, err := authorizationEnv()
	if err != nil {
		return nil, err
	}
	checked, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %s", iss.String())
	}
	if !checked.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("must evaluate to bool but got %s", checked.OutputType())
	}
	prog, err := env.Program(checked, programOptions(&estimator{})...)
	if err != nil {
		return nil, fmt.Errorf("program instantiation failed: %v", err)
	}
	c := &AuthorizationMatchCondition{Expression: expression, prog: prog}
	c.UsesFieldSelector, c.UsesLabelSelector = selectsField(checked, "fieldSelector"), selectsField(checked, "labelSelector")
	return c, nil
}

// selectsField reports whether the checked expression selects a field
// of that name (x.name or x.?name) anywhere.
func selectsField(checked *cel.Ast, name string) bool {
	found := false
	ast.PreOrderVisit(ast.NavigateAST(checked.NativeRep()), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			found = found || e.AsSelect().FieldName() == name
		case ast.CallKind:
			if call := e.AsCall(); call.FunctionName() == operators.OptSelect && len(call.Args()) == 2 && call.Args()[1].Kind() == ast.LiteralKind {
				field, _ := call.Args()[1].AsLiteral().Value().(string)
				found = found || field == name
			}
		}
	}))
	return found
}

// Eval evaluates c over request, the SubjectAccessReview spec as
// upstream shows it to expressions (every attribute, empty ones too;
// extra an empty map if none). The error is upstream's.
func (c *AuthorizationMatchCondition) Eval(ctx context.Context, request map[string]any) (bool, error) {
	res, _, err := c.prog.ContextEval(ctx, map[string]any{"request": request})
	if err != nil {
		return false, fmt.Errorf("cel evaluation error: expression '%v' resulted in error: %w", c.Expression, err)
	}
	b, ok := res.(types.Bool)
	if !ok {
		return false, fmt.Errorf("cel evaluation error: expression '%v' eval result type should be bool but got %v", c.Expression, res.Type())
	}
	return bool(b), nil
}

// authorizationEnv is the environment of authorization match conditions.
var authorizationEnv = sync.OnceValues(func() (*cel.Env, error) {
	base, err := baseEnv()
	if err != nil {
		return nil, err
	}
	objects := map[string]*declType{}
	request := subjectAccessReviewSpecType(objects)
	return base.Extend(
		cel.CustomTypeProvider(&provider{Provider: base.CELTypeProvider(), adapter: base.CELTypeAdapter(), objects: objects}),
		cel.Variable("request", request.cel),
	)
})

// subjectAccessReviewSpecType is upstream's buildRequestType: the
// SubjectAccessReview spec a match condition sees.
func subjectAccessReviewSpecType(objects map[string]*declType) *declType {
	s, strs := types.StringType, types.NewListType(types.StringType)
	requirement := objectType(objects, "kubernetes.SelectorRequirement", map[string]*types.Type{"key": s, "operator": s, "values": strs}).cel
	selector := func(name string) *types.Type {
		return objectType(objects, name, map[string]*types.Type{"rawSelector": s, "requirements": types.NewListType(requirement)}).cel
	}
	resource := objectType(objects, "kubernetes.ResourceAttributes", map[string]*types.Type{
		"namespace": s, "verb": s, "group": s, "version": s, "resource": s, "subresource": s, "name": s,
		"fieldSelector": selector("kubernetes.FieldSelectorAttributes"), "labelSelector": selector("kubernetes.LabelSelectorAttributes"),
	}).cel
	nonResource := objectType(objects, "kubernetes.NonResourceAttributes", map[string]*types.Type{"path": s, "verb": s}).cel
	return objectType(objects, "kubernetes.SubjectAccessReviewSpec", map[string]*types.Type{
		"resourceAttributes": resource, "nonResourceAttributes": nonResource,
		"user": s, "groups": strs, "extra": types.NewMapType(s, strs), "uid": s,
	})
}
