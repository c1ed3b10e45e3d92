package cel

import (
	"fmt"
	"net/url"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes URL library (kube-apiserver since 1.24), written from its
// documentation (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-url-library):
//
//	url(string) URL                   an absolute URI or an absolute path, else an error
//	isURL(string) bool                whether url() would succeed
//	<URL>.getScheme() string          "" when absent
//	<URL>.getHost() string            with the port; IPv6 in brackets
//	<URL>.getHostname() string        without the port; IPv6 without brackets
//	<URL>.getPort() string            "" when absent
//	<URL>.getEscapedPath() string     the path, URL-escaped
//	<URL>.getQuery() map(string, list(string))
//
// Acceptance is net/url's ParseRequestURI, as the OpenAPI "uri" format uses;
// the components are those of url.Parse, which keeps a fragment out of the
// path and query.

// urlType is the CEL type of url() values: an object type named as upstream
// names it, so compile errors read the same.
var urlType = cel.ObjectType("kubernetes.URL")

// urlVal is a parsed URL. Two URLs are equal when they print the same.
type urlVal struct{ u *url.URL }

func (v urlVal) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(v.u).AssignableTo(t):
		return v.u, nil
	case reflect.TypeOf("").AssignableTo(t):
		return v.u.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'URL' to '%v'", t)
}

func (v urlVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case urlType:
		return v
	case types.TypeType:
		return urlType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", urlType, t)
}

func (v urlVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(urlVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.u.String() == o.u.String())
}

func (v urlVal) Type() ref.Type { return urlType }
func (v urlVal) Value() any     { return v.u }

func urlLibrary() []cel.EnvOption {
	getter := func(name, id string, get func(*url.URL) string) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, []*cel.Type{urlType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				u, ok := v.Value().(*url.URL)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.String(get(u))
			})))
	}
	return []cel.EnvOption{
		cel.Function("url", cel.Overload("kplane_string_to_url", []*cel.Type{cel.StringType}, urlType,
			cel.UnaryBinding(stringToURL))),
		cel.Function("isURL", cel.Overload("kplane_is_url_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				_, err := url.ParseRequestURI(s)
				return types.Bool(err == nil)
			}))),
		getter("getScheme", "kplane_url_get_scheme", func(u *url.URL) string { return u.Scheme }),
		getter("getHost", "kplane_url_get_host", func(u *url.URL) string { return u.Host }),
		getter("getHostname", "kplane_url_get_hostname", (*url.URL).Hostname),
		getter("getPort", "kplane_url_get_port", (*url.URL).Port),
		getter("getEscapedPath", "kplane_url_get_escaped_path", (*url.URL).EscapedPath),
		cel.Function("getQuery", cel.MemberOverload("kplane_url_get_query", []*cel.Type{urlType},
			cel.MapType(cel.StringType, cel.ListType(cel.StringType)),
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				u, ok := v.Value().(*url.URL)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				m := map[ref.Val]ref.Val{}
				for k, vs := range u.Query() {
					m[types.String(k)] = types.NewStringList(types.DefaultTypeAdapter, vs)
				}
				return types.NewRefValMap(types.DefaultTypeAdapter, m)
			}))),
	}
}

// stringToURL checks the string with ParseRequestURI (absolute URIs and
// absolute paths only) and then parses it with Parse, which unlike
// ParseRequestURI splits off a fragment. Errors read as kube-apiserver's.
func stringToURL(v ref.Val) ref.Val {
	s, ok := v.Value().(string)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	if _, err := url.ParseRequestURI(s); err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	u, err := url.Parse(s)
	if err != nil {
		return types.NewErr("URL parse error during conversion from string: %v", err)
	}
	return urlVal{u}
}
