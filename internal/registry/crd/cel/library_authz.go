package cel

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
)

// The Kubernetes authorizer library (1.27) and its selectors (1.31),
// which kube-apiserver's base environment carries for admission
// policies. CRD rules have no `authorizer` variable, so no value of these
// types reaches them: the functions are declared so that a CRD rule
// calling them is refused with upstream's compile errors ("undeclared
// reference to 'authorizer'" alone, not one error per method), and priced
// as upstream prices them when reached through dyn(). A
// ValidatingAdmissionPolicy's expressions get an authorizer that asks
// the server's (PolicyInput.Authorize), as the request's user.

var (
	authorizerType    = cel.ObjectType("kubernetes.authorization.Authorizer")
	pathCheckType     = cel.ObjectType("kubernetes.authorization.PathCheck")
	groupCheckType    = cel.ObjectType("kubernetes.authorization.GroupCheck")
	resourceCheckType = cel.ObjectType("kubernetes.authorization.ResourceCheck")
	decisionType      = cel.ObjectType("kubernetes.authorization.Decision")
)

// AuthzUser is who an authorizer check is for.
type AuthzUser struct {
	Name, UID string
	Groups    []string
	Extra     map[string][]string
}

// AuthzCheck is a question an expression asks the authorizer: a verb on
// a path (ResourceRequest false) or on a resource. APIVersion is always
// "*", as upstream's.
type AuthzCheck struct {
	User                                          AuthzUser
	Verb                                          string
	ResourceRequest                               bool
	Path                                          string
	Group, Resource, Subresource, Namespace, Name string
	FieldSelector, LabelSelector                  string
}

// Authorize answers an AuthzCheck: whether it is allowed, and why.
type Authorize func(ctx context.Context, c AuthzCheck) (allowed bool, reason string, err error)

// receiverOnly is the ref.Val of a value with methods and no fields.
type receiverOnly struct{ typ *types.Type }

func (r receiverOnly) ConvertToNative(t reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion error from '%s' to '%v'", r.typ, t)
}

func (r receiverOnly) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return r.typ
	}
	return types.NewErr("type conversion error from '%s' to '%s'", r.typ, t)
}

func (r receiverOnly) Equal(other ref.Val) ref.Val { return types.MaybeNoSuchOverloadErr(other) }
func (r receiverOnly) Type() ref.Type              { return r.typ }
func (r receiverOnly) Value() any                  { return types.NoSuchOverloadErr() }

type authorizerVal struct {
	receiverOnly
	ctx       context.Context
	user      AuthzUser
	authorize Authorize
}

type pathCheckVal struct {
	receiverOnly
	authz *authorizerVal
	path  string
}

type groupCheckVal struct {
	receiverOnly
	authz *authorizerVal
	group string
}

type resourceCheckVal struct {
	receiverOnly
	authz                                         *authorizerVal
	group, resource, subresource, namespace, name string
	fieldSelector, labelSelector                  string
}

type decisionVal struct {
	receiverOnly
	allowed bool
	reason  string
	err     error
}

func newAuthorizer(ctx context.Context, user AuthzUser, authorize Authorize) *authorizerVal {
	return &authorizerVal{receiverOnly: receiverOnly{authorizerType}, ctx: ctx, user: user, authorize: authorize}
}

func (a *authorizerVal) group(g string) groupCheckVal {
	return groupCheckVal{receiverOnly: receiverOnly{groupCheckType}, authz: a, group: g}
}

func (g groupCheckVal) resourceCheck(resource string) resourceCheckVal {
	return resourceCheckVal{receiverOnly: receiverOnly{resourceCheckType}, authz: g.authz, group: g.group, resource: resource}
}

// requestResourceCheck is authorizer.requestResource: a check of the
// request's own resource, subresource, namespace and name.
func requestResourceCheck(a *authorizerVal, group, resource, subresource, namespace, name string) resourceCheckVal {
	r := a.group(group).resourceCheck(resource)
	r.subresource, r.namespace, r.name = subresource, namespace, name
	return r
}

func (a *authorizerVal) decide(c AuthzCheck) ref.Val {
	c.User = a.user
	d := decisionVal{receiverOnly: receiverOnly{decisionType}}
	if a.authorize == nil {
		d.allowed = true // no authorizer: everything is allowed
		return d
	}
	d.allowed, d.reason, d.err = a.authorize(a.ctx, c)
	return d
}

func str(v ref.Val) (string, bool) {
	s, ok := v.(types.String)
	return string(s), ok
}

func authzLibrary() []cel.EnvOption {
	unary := func(f func(ref.Val) ref.Val) cel.OverloadOpt { return cel.UnaryBinding(f) }
	binary := func(f func(a, b ref.Val) ref.Val) cel.OverloadOpt { return cel.BinaryBinding(f) }
	member := func(name, id string, args []*cel.Type, out *cel.Type, impl cel.OverloadOpt) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, args, out, impl))
	}
	// Each binding refuses a receiver of another type (reached through
	// dyn) as upstream's do.
	withResource := func(set func(r *resourceCheckVal, s string)) cel.OverloadOpt {
		return binary(func(a, b ref.Val) ref.Val {
			r, ok := a.(resourceCheckVal)
			s, ok2 := str(b)
			if !ok || !ok2 {
				return types.MaybeNoSuchOverloadErr(a)
			}
			set(&r, s)
			return r
		})
	}
	decision := func(f func(d decisionVal) ref.Val) cel.OverloadOpt {
		return unary(func(a ref.Val) ref.Val {
			d, ok := a.(decisionVal)
			if !ok {
				return types.MaybeNoSuchOverloadErr(a)
			}
			return f(d)
		})
	}
	s := cel.StringType
	return []cel.EnvOption{
		member("path", "kplane_authorizer_path", []*cel.Type{authorizerType, s}, pathCheckType, binary(func(a, b ref.Val) ref.Val {
			authz, ok := a.(*authorizerVal)
			path, ok2 := str(b)
			if !ok || !ok2 {
				return types.MaybeNoSuchOverloadErr(a)
			}
			if strings.TrimSpace(path) == "" {
				return types.NewErr("path must not be empty")
			}
			return pathCheckVal{receiverOnly: receiverOnly{pathCheckType}, authz: authz, path: path}
		})),
		member("group", "kplane_authorizer_group", []*cel.Type{authorizerType, s}, groupCheckType, binary(func(a, b ref.Val) ref.Val {
			authz, ok := a.(*authorizerVal)
			group, ok2 := str(b)
			if !ok || !ok2 {
				return types.MaybeNoSuchOverloadErr(a)
			}
			return authz.group(group)
		})),
		member("serviceAccount", "kplane_authorizer_service_account", []*cel.Type{authorizerType, s, s}, authorizerType, cel.FunctionBinding(func(args ...ref.Val) ref.Val {
			if len(args) != 3 {
				return types.NoSuchOverloadErr()
			}
			authz, ok := args[0].(*authorizerVal)
			if !ok {
				return types.MaybeNoSuchOverloadErr(args[0])
			}
			ns, ok := str(args[1])
			if !ok {
				return types.MaybeNoSuchOverloadErr(args[1])
			}
			name, ok := str(args[2])
			if !ok {
				return types.MaybeNoSuchOverloadErr(args[2])
			}
			if len(apivalidation.ValidateServiceAccountName(name, false)) > 0 {
				return types.NewErr("Invalid service account name")
			}
			if len(apivalidation.ValidateNamespaceName(ns, false)) > 0 {
				return types.NewErr("Invalid service account namespace")
			}
			user := AuthzUser{
				Name:   "system:serviceaccount:" + ns + ":" + name,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			}
			return newAuthorizer(authz.ctx, user, authz.authorize)
		})),
		member("resource", "kplane_groupcheck_resource", []*cel.Type{groupCheckType, s}, resourceCheckType, binary(func(a, b ref.Val) ref.Val {
			g, ok := a.(groupCheckVal)
			resource, ok2 := str(b)
			if !ok || !ok2 {
				return types.MaybeNoSuchOverloadErr(a)
			}
			if strings.TrimSpace(resource) == "" {
				return types.NewErr("resource must not be empty")
			}
			return g.resourceCheck(resource)
		})),
		member("subresource", "kplane_resourcecheck_subresource", []*cel.Type{resourceCheckType, s}, resourceCheckType,
			withResource(func(r *resourceCheckVal, v string) { r.subresource = v })),
		member("namespace", "kplane_resourcecheck_namespace", []*cel.Type{resourceCheckType, s}, resourceCheckType,
			withResource(func(r *resourceCheckVal, v string) { r.namespace = v })),
		member("name", "kplane_resourcecheck_name", []*cel.Type{resourceCheckType, s}, resourceCheckType,
			withResource(func(r *resourceCheckVal, v string) { r.name = v })),
		cel.Function("check",
			cel.MemberOverload("kplane_pathcheck_check", []*cel.Type{pathCheckType, s}, decisionType, binary(func(a, b ref.Val) ref.Val {
				p, ok := a.(pathCheckVal)
				verb, ok2 := str(b)
				if !ok || !ok2 {
					return types.MaybeNoSuchOverloadErr(a)
				}
				return p.authz.decide(AuthzCheck{Verb: verb, Path: p.path})
			})),
			cel.MemberOverload("kplane_resourcecheck_check", []*cel.Type{resourceCheckType, s}, decisionType, binary(func(a, b ref.Val) ref.Val {
				r, ok := a.(resourceCheckVal)
				verb, ok2 := str(b)
				if !ok || !ok2 {
					return types.MaybeNoSuchOverloadErr(a)
				}
				return r.authz.decide(AuthzCheck{
					Verb: verb, ResourceRequest: true, Group: r.group, Resource: r.resource, Subresource: r.subresource,
					Namespace: r.namespace, Name: r.name, FieldSelector: r.fieldSelector, LabelSelector: r.labelSelector,
				})
			}))),
		member("errored", "kplane_decision_errored", []*cel.Type{decisionType}, cel.BoolType,
			decision(func(d decisionVal) ref.Val { return types.Bool(d.err != nil) })),
		member("error", "kplane_decision_error", []*cel.Type{decisionType}, cel.StringType, decision(func(d decisionVal) ref.Val {
			if d.err == nil {
				return types.String("")
			}
			return types.String(d.err.Error())
		})),
		member("allowed", "kplane_decision_allowed", []*cel.Type{decisionType}, cel.BoolType,
			decision(func(d decisionVal) ref.Val { return types.Bool(d.allowed) })),
		member("reason", "kplane_decision_reason", []*cel.Type{decisionType}, cel.StringType,
			decision(func(d decisionVal) ref.Val { return types.String(d.reason) })),
		member("fieldSelector", "kplane_authorizer_field_selector", []*cel.Type{resourceCheckType, s}, resourceCheckType,
			withResource(func(r *resourceCheckVal, v string) { r.fieldSelector = v })),
		member("labelSelector", "kplane_authorizer_label_selector", []*cel.Type{resourceCheckType, s}, resourceCheckType,
			withResource(func(r *resourceCheckVal, v string) { r.labelSelector = v })),
	}
}
