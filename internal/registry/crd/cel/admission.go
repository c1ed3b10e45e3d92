package cel

import (
	"context"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CheckMatchCondition compiles the expression of an admission webhook's
// matchCondition as kube-apiserver's validation of webhook configurations
// does (validateMatchConditionsExpression): in the base environment with
// the variables of admission, object and oldObject (any value), request
// (an AdmissionRequest), namespaceObject (a Namespace), authorizer and
// authorizer.requestResource, and no params; the expression must be a
// bool. expression is the trimmed expression, as upstream compiles it.
// The error, if any, is upstream's, at fldPath. Nothing is evaluated.
//
// As for CRD rules, every expression is compiled in the environment of new
// expressions; upstream compiles an expression the stored configuration
// already has in its stored-expressions environment, which knows a little
// more (see the package documentation).
func CheckMatchCondition(expression string, fldPath *field.Path) *field.Error {
	env, err := admissionEnv()
	if err != nil {
		return field.InternalError(fldPath, err)
	}
	ast, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return field.Invalid(fldPath, expression, "compilation failed: "+iss.String())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) && !ast.OutputType().IsExactType(cel.AnyType) {
		return field.Invalid(fldPath, expression, "must evaluate to bool but got "+ast.OutputType().String())
	}
	return nil
}

// admissionEnv is the environment of admission expressions without
// params and variables (upstream's plugin/cel createEnvForOpts with
// HasAuthorizer).
func admissionEnv() (*cel.Env, error) { return policyEnv(false, true, nil) }

// objectType declares an object type of admission's (their names are
// upstream's, and show in compile errors) in objects, with fields of the
// given types.
func objectType(objects map[string]*declType, name string, fields map[string]*types.Type) *declType {
	t := &declType{cel: types.NewObjectType(name), kind: kindObject, fields: map[string]*declField{}}
	for f, ft := range fields {
		t.fields[f] = &declField{name: f, typ: &declType{cel: ft}}
	}
	objects[name] = t
	return t
}

// admissionRequestType is upstream's BuildRequestType: the request an
// admission expression sees, without uid, object and oldObject.
func admissionRequestType(objects map[string]*declType) *declType {
	s := types.StringType
	gvk := objectType(objects, "kubernetes.GroupVersionKind", map[string]*types.Type{"group": s, "version": s, "kind": s}).cel
	gvr := objectType(objects, "kubernetes.GroupVersionResource", map[string]*types.Type{"group": s, "version": s, "resource": s}).cel
	strs := types.NewListType(s)
	user := objectType(objects, "kubernetes.UserInfo", map[string]*types.Type{
		"username": s, "uid": s, "groups": strs, "extra": types.NewMapType(s, strs),
	}).cel
	return objectType(objects, "kubernetes.AdmissionRequest", map[string]*types.Type{
		"kind": gvk, "resource": gvr, "subResource": s,
		"requestKind": gvk, "requestResource": gvr, "requestSubResource": s,
		"name": s, "namespace": s, "operation": s, "userInfo": user,
		"dryRun": types.BoolType, "options": types.DynType,
	})
}

// namespaceType is upstream's BuildNamespaceType: the parts of a
// Namespace an admission expression sees.
func namespaceType(objects map[string]*declType) *declType {
	s, strs := types.StringType, types.NewListType(types.StringType)
	labels := types.NewMapType(s, s)
	condition := objectType(objects, "kubernetes.NamespaceCondition", map[string]*types.Type{
		"status": s, "type": s, "lastTransitionTime": types.TimestampType, "message": s, "reason": s,
	}).cel
	spec := objectType(objects, "kubernetes.NamespaceSpec", map[string]*types.Type{"finalizers": strs}).cel
	status := objectType(objects, "kubernetes.NamespaceStatus", map[string]*types.Type{
		"conditions": types.NewListType(condition), "phase": s,
	}).cel
	meta := objectType(objects, "kubernetes.NamespaceMetadata", map[string]*types.Type{
		"name": s, "generateName": s, "namespace": s, "labels": labels, "annotations": labels, "UID": s,
		"creationTimestamp": types.TimestampType, "deletionGracePeriodSeconds": types.IntType,
		"deletionTimestamp": types.TimestampType, "generation": types.IntType, "resourceVersion": s, "finalizers": strs,
	}).cel
	return objectType(objects, "kubernetes.Namespace", map[string]*types.Type{"metadata": meta, "spec": spec, "status": status})
}

// MatchCondition is an admission webhook's matchCondition, compiled for
// evaluation.
type MatchCondition struct {
	Name, Expression string
	prog             cel.Program
}

// CompileMatchCondition compiles a matchCondition's expression in the
// environment CheckMatchCondition checks it in. Stored configurations
// were checked when written, so an error here is unexpected.
func CompileMatchCondition(name, expression string) (*MatchCondition, error) {
	env, err := admissionEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %s", iss.String())
	}
	prog, err := env.Program(ast, programOptions(&estimator{})...)
	if err != nil {
		return nil, err
	}
	return &MatchCondition{Name: name, Expression: expression, prog: prog}, nil
}

// Eval evaluates c over a request: object and oldObject are the objects
// as the webhook would be sent them (nil: null), request the
// AdmissionRequest's fields as JSON decodes them. namespaceObject is null
// and the authorizer has no implementation, as for kube-apiserver's
// webhooks: an expression calling it fails. The error is upstream's
// ("expression '...' resulted in error: ...").
func (c *MatchCondition) Eval(ctx context.Context, object, oldObject, request map[string]any) (bool, error) {
	val := func(m map[string]any) any {
		if m == nil {
			return types.NullValue
		}
		return m
	}
	res, _, err := c.prog.ContextEval(ctx, map[string]any{
		"object": val(object), "oldObject": val(oldObject), "request": val(request),
		"namespaceObject": types.NullValue,
	})
	if err != nil {
		return false, fmt.Errorf("expression '%s' resulted in error: %v", c.Expression, err)
	}
	b, ok := res.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression '%s' resulted in error: result is not a bool", c.Expression)
	}
	return bool(b), nil
}
