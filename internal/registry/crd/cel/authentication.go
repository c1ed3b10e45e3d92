package cel

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// AuthenticationExpression is an expression of a JWT authenticator
// (--authentication-config), compiled as kube-apiserver's authentication
// CEL compiler compiles it: in the base environment with one variable,
// claims (a map of the token's claims, as JSON decodes them) for the
// claim mappings and claim validation rules, or user (a
// kubernetes.UserInfo: username, uid, groups, extra) for the user
// validation rules.
type AuthenticationExpression struct {
	Expression string
	variable   string
	checked    *cel.Ast
	prog       cel.Program
}

// CompileClaimsExpression compiles expression over claims; a
// validation rule's (mustBool) must be a bool, a mapping's may be
// anything (its result is checked when it runs, as upstream's). The
// error's text is upstream's detail ("compilation failed: ...", "must
// evaluate to bool"), for the caller to put at the field.
func CompileClaimsExpression(expression string, mustBool bool) (*AuthenticationExpression, error) {
	return compileAuthentication(expression, "claims", mustBool)
}

// CompileUserExpression compiles a user validation rule over user: a
// bool.
func CompileUserExpression(expression string) (*AuthenticationExpression, error) {
	return compileAuthentication(expression, "user", true)
}

func compileAuthentication(expression, variable string, mustBool bool) (*AuthenticationExpression, error) {
	env, err := authenticationEnv(variable)
	if err != nil {
		return nil, err
	}
	checked, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %s", iss.String())
	}
	if mustBool && checked.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("must evaluate to bool")
	}
	prog, err := env.Program(checked, programOptions(&estimator{})...)
	if err != nil {
		return nil, fmt.Errorf("program instantiation failed: %v", err)
	}
	return &AuthenticationExpression{Expression: expression, variable: variable, checked: checked, prog: prog}, nil
}

// Selects reports whether the expression reads claims.<name> (or
// claims.?name) anywhere, as upstream looks for claims.email and
// claims.email_verified.
func (e *AuthenticationExpression) Selects(name string) bool {
	found := false
	ast.PreOrderVisit(ast.NavigateAST(e.checked.NativeRep()), ast.NewExprVisitor(func(x ast.Expr) {
		switch x.Kind() {
		case ast.SelectKind:
			s := x.AsSelect()
			found = found || (s.FieldName() == name && isIdent(s.Operand(), e.variable))
		case ast.CallKind:
			call := x.AsCall()
			if call.FunctionName() == operators.OptSelect && len(call.Args()) == 2 && isIdent(call.Args()[0], e.variable) && call.Args()[1].Kind() == ast.LiteralKind {
				field, _ := call.Args()[1].AsLiteral().Value().(string)
				found = found || field == name
			}
		}
	}))
	return found
}

func isIdent(x ast.Expr, name string) bool {
	return x.Kind() == ast.IdentKind && x.AsIdent() == name
}

// EvalClaims evaluates the expression over a token's claims, as JSON
// decodes them into any. A claim's name may be written escaped
// (claims.foo__dash__bar reads "foo-bar"), as upstream allows. The error
// is upstream's ("expression '...' resulted in error: ...").
func (e *AuthenticationExpression) EvalClaims(ctx context.Context, claims map[string]any) (ref.Val, error) {
	return e.eval(ctx, unescapeVal(types.DefaultTypeAdapter.NativeToValue(claims)))
}

// EvalUser evaluates a user validation rule over the user the mappings
// made.
func (e *AuthenticationExpression) EvalUser(ctx context.Context, username, uid string, groups []string, extra map[string][]string) (ref.Val, error) {
	if groups == nil {
		groups = []string{}
	}
	if extra == nil {
		extra = map[string][]string{}
	}
	return e.eval(ctx, map[string]any{"username": username, "uid": uid, "groups": groups, "extra": extra})
}

func (e *AuthenticationExpression) eval(ctx context.Context, value any) (ref.Val, error) {
	res, _, err := e.prog.ContextEval(ctx, map[string]any{e.variable: value})
	if err != nil {
		return nil, fmt.Errorf("expression '%s' resulted in error: %w", e.Expression, err)
	}
	return res, nil
}

// authenticationEnvs are the two environments, by variable.
var authenticationEnvs = sync.OnceValues(func() (map[string]*cel.Env, error) {
	base, err := baseEnv()
	if err != nil {
		return nil, err
	}
	claims, err := base.Extend(cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		return nil, err
	}
	objects := map[string]*declType{}
	s := types.StringType
	strs := types.NewListType(s)
	userInfo := objectType(objects, "kubernetes.UserInfo", map[string]*types.Type{
		"username": s, "uid": s, "groups": strs, "extra": types.NewMapType(s, strs),
	})
	user, err := base.Extend(
		cel.CustomTypeProvider(&provider{Provider: base.CELTypeProvider(), adapter: base.CELTypeAdapter(), objects: objects}),
		cel.Variable("user", userInfo.cel),
	)
	if err != nil {
		return nil, err
	}
	return map[string]*cel.Env{"claims": claims, "user": user}, nil
})

func authenticationEnv(variable string) (*cel.Env, error) {
	envs, err := authenticationEnvs()
	if err != nil {
		return nil, err
	}
	return envs[variable], nil
}

// unescapeVal wraps v so that its maps, at any depth, find a key by its
// escaped name too.
func unescapeVal(v ref.Val) ref.Val {
	switch v := v.(type) {
	case traits.Mapper:
		return unescapeMapper{v}
	case traits.Lister:
		return unescapeLister{v}
	}
	return v
}

type unescapeMapper struct{ traits.Mapper }

func (m unescapeMapper) Find(key ref.Val) (ref.Val, bool) {
	if s, ok := key.(types.String); ok {
		if name, ok := unescapeName(string(s)); ok && name != string(s) {
			key = types.String(name)
		}
	}
	v, ok := m.Mapper.Find(key)
	if !ok {
		return v, ok
	}
	return unescapeVal(v), true
}

type unescapeLister struct{ traits.Lister }

func (l unescapeLister) Get(index ref.Val) ref.Val { return unescapeVal(l.Lister.Get(index)) }

// escapeSequence is one __word__ of an escaped name.
var escapeSequence = regexp.MustCompile(`__[^_]+__`)

// unescapeName is escapeName's inverse: __underscores__, __dot__,
// __dash__ and __slash__ become "__", ".", "-" and "/", and a whole name
// __word__ of a reserved word the word. Another __word__ makes the name
// not an escaped one (false).
func unescapeName(escaped string) (string, bool) {
	ok := true
	name := escapeSequence.ReplaceAllStringFunc(escaped, func(s string) string {
		word := s[2 : len(s)-2]
		switch word {
		case "underscores":
			return "__"
		case "dot":
			return "."
		case "dash":
			return "-"
		case "slash":
			return "/"
		}
		if celReserved[word] && len(s) == len(escaped) {
			return word
		}
		ok = false
		return ""
	})
	return name, ok
}
