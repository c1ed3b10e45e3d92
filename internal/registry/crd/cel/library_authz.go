package cel

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The declarations of the Kubernetes authorizer library (1.27) and its
// selectors (1.31), which kube-apiserver's base environment carries for
// admission policies. CRD rules have no `authorizer` variable, so no value
// of these types exists and none of these functions can run: they are
// declared only so that a CRD rule calling them is refused with upstream's
// compile errors ("undeclared reference to 'authorizer'" alone, not one
// error per method), and priced as upstream prices them when reached
// through dyn(). Admission webhooks' matchConditions are compiled with an
// authorizer variable of these types (CheckMatchCondition), and not run.

var (
	authorizerType    = cel.ObjectType("kubernetes.authorization.Authorizer")
	pathCheckType     = cel.ObjectType("kubernetes.authorization.PathCheck")
	groupCheckType    = cel.ObjectType("kubernetes.authorization.GroupCheck")
	resourceCheckType = cel.ObjectType("kubernetes.authorization.ResourceCheck")
	decisionType      = cel.ObjectType("kubernetes.authorization.Decision")
)

func authzLibrary() []cel.EnvOption {
	// Only reachable with a value of another type (through dyn), which
	// upstream's bindings refuse the same way. The binding has the call's
	// arity, as upstream's: cel-go then evaluates every argument before
	// refusing one, which decides what the call costs.
	refuse := func(args ...ref.Val) ref.Val { return types.MaybeNoSuchOverloadErr(args[0]) }
	binding := func(arity int) cel.OverloadOpt {
		switch arity {
		case 1:
			return cel.UnaryBinding(func(a ref.Val) ref.Val { return refuse(a) })
		case 2:
			return cel.BinaryBinding(func(a, b ref.Val) ref.Val { return refuse(a, b) })
		}
		return cel.FunctionBinding(refuse)
	}
	member := func(name, id string, args []*cel.Type, out *cel.Type) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, args, out, binding(len(args))))
	}
	s := cel.StringType
	return []cel.EnvOption{
		member("path", "kplane_authorizer_path", []*cel.Type{authorizerType, s}, pathCheckType),
		member("group", "kplane_authorizer_group", []*cel.Type{authorizerType, s}, groupCheckType),
		member("serviceAccount", "kplane_authorizer_service_account", []*cel.Type{authorizerType, s, s}, authorizerType),
		member("resource", "kplane_groupcheck_resource", []*cel.Type{groupCheckType, s}, resourceCheckType),
		member("subresource", "kplane_resourcecheck_subresource", []*cel.Type{resourceCheckType, s}, resourceCheckType),
		member("namespace", "kplane_resourcecheck_namespace", []*cel.Type{resourceCheckType, s}, resourceCheckType),
		member("name", "kplane_resourcecheck_name", []*cel.Type{resourceCheckType, s}, resourceCheckType),
		cel.Function("check",
			cel.MemberOverload("kplane_pathcheck_check", []*cel.Type{pathCheckType, s}, decisionType, binding(2)),
			cel.MemberOverload("kplane_resourcecheck_check", []*cel.Type{resourceCheckType, s}, decisionType, binding(2))),
		member("errored", "kplane_decision_errored", []*cel.Type{decisionType}, cel.BoolType),
		member("error", "kplane_decision_error", []*cel.Type{decisionType}, cel.StringType),
		member("allowed", "kplane_decision_allowed", []*cel.Type{decisionType}, cel.BoolType),
		member("reason", "kplane_decision_reason", []*cel.Type{decisionType}, cel.StringType),
		member("fieldSelector", "kplane_authorizer_field_selector", []*cel.Type{resourceCheckType, s}, resourceCheckType),
		member("labelSelector", "kplane_authorizer_label_selector", []*cel.Type{resourceCheckType, s}, resourceCheckType),
	}
}
