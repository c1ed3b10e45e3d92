package cel

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes semver library (kube-apiserver since 1.33, with the
// normalize argument of its version 1), written from its documentation
// (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-semver-library):
//
//	semver(string) Semver                 strict semver.org 2.0.0, blang/semver's error on failure
//	semver(string, bool) Semver           true normalizes first: a "v" prefix, a missing minor
//	isSemver(string) bool                 or patch and leading zeros are accepted
//	isSemver(string, bool) bool
//	<Semver>.major() / minor() / patch() int
//	<Semver>.isGreaterThan(Semver) bool   semver precedence: build metadata is ignored,
//	<Semver>.isLessThan(Semver) bool      a pre-release is below its release
//	<Semver>.compareTo(Semver) int
//
// blang/semver is the parser kube-apiserver uses, so versions are accepted
// and refused, and errors worded, the same. Two versions are equal when
// they have the same precedence ("1.0.0+a" == "1.0.0+b").

var semverType = cel.ObjectType("kubernetes.Semver")

type semverVal struct{ v semver.Version }

func (v semverVal) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(v.v).AssignableTo(t):
		return v.v, nil
	case reflect.TypeOf("").AssignableTo(t):
		return v.v.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Semver' to '%v'", t)
}

func (v semverVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case semverType:
		return v
	case types.TypeType:
		return semverType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", semverType, t)
}

func (v semverVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(semverVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.v.EQ(o.v))
}

func (v semverVal) Type() ref.Type { return semverType }
func (v semverVal) Value() any     { return v.v }

func semverLibrary() []cel.EnvOption {
	s := semverType
	part := func(name string, get func(semver.Version) uint64) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload("kplane_semver_"+name, []*cel.Type{s}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				x, ok := v.Value().(semver.Version)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.Int(get(x))
			})))
	}
	compare := func(name string, f func(int) ref.Val, out *cel.Type) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload("kplane_semver_"+name, []*cel.Type{s, s}, out,
			cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				x, ok1 := a.Value().(semver.Version)
				y, ok2 := b.Value().(semver.Version)
				if !ok1 || !ok2 {
					return types.MaybeNoSuchOverloadErr(a)
				}
				return f(x.Compare(y))
			})))
	}
	return []cel.EnvOption{
		cel.Function("semver",
			cel.Overload("kplane_string_to_semver", []*cel.Type{cel.StringType}, s,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return toSemver(v, types.False) })),
			cel.Overload("kplane_string_bool_to_semver", []*cel.Type{cel.StringType, cel.BoolType}, s,
				cel.BinaryBinding(toSemver))),
		cel.Function("isSemver",
			cel.Overload("kplane_is_semver_string", []*cel.Type{cel.StringType}, cel.BoolType,
				cel.UnaryBinding(func(v ref.Val) ref.Val { return isSemver(v, types.False) })),
			cel.Overload("kplane_is_semver_string_bool", []*cel.Type{cel.StringType, cel.BoolType}, cel.BoolType,
				cel.BinaryBinding(isSemver))),
		part("major", func(v semver.Version) uint64 { return v.Major }),
		part("minor", func(v semver.Version) uint64 { return v.Minor }),
		part("patch", func(v semver.Version) uint64 { return v.Patch }),
		compare("isGreaterThan", func(c int) ref.Val { return types.Bool(c == 1) }, cel.BoolType),
		compare("isLessThan", func(c int) ref.Val { return types.Bool(c == -1) }, cel.BoolType),
		compare("compareTo", func(c int) ref.Val { return types.Int(c) }, cel.IntType),
	}
}

// semverArgs parses the arguments of semver and isSemver: the version
// string and whether to normalize it. bad is set when the arguments have
// the wrong types.
func semverArgs(str, normalize ref.Val) (v semver.Version, bad ref.Val, err error) {
	s, ok1 := str.Value().(string)
	n, ok2 := normalize.Value().(bool)
	if !ok1 || !ok2 {
		return v, types.MaybeNoSuchOverloadErr(str), nil
	}
	if n {
		v, err = normalizeSemver(s)
	} else {
		v, err = semver.Parse(s)
	}
	return v, nil, err
}

func toSemver(str, normalize ref.Val) ref.Val {
	v, bad, err := semverArgs(str, normalize)
	switch {
	case bad != nil:
		return bad
	case err != nil:
		return types.WrapErr(err)
	}
	return semverVal{v}
}

func isSemver(str, normalize ref.Val) ref.Val {
	_, bad, err := semverArgs(str, normalize)
	if bad != nil {
		return bad
	}
	return types.Bool(err == nil)
}

// normalizeSemver parses s after the normalization upstream documents for
// semver(s, true): drop one leading "v", strip leading zeros from each of
// the first three dot-separated parts (keeping a lone zero, or a zero before
// a non-digit), and add ".0" for a missing minor or patch, which a short
// version with a pre-release or build suffix may not have. Unlike
// semver.ParseTolerant it does not trim spaces.
func normalizeSemver(s string) (semver.Version, error) {
	s = strings.TrimPrefix(s, "v")
	parts := strings.SplitN(s, ".", 3)
	for i, p := range parts {
		if len(p) < 2 {
			continue
		}
		p = strings.TrimLeft(p, "0")
		if p == "" || p[0] < '0' || p[0] > '9' {
			p = "0" + p
		}
		parts[i] = p
	}
	if len(parts) < 3 {
		if strings.ContainsAny(parts[len(parts)-1], "+-") {
			return semver.Version{}, errors.New("short version cannot contain PreRelease/Build meta data")
		}
		for len(parts) < 3 {
			parts = append(parts, "0")
		}
	}
	return semver.Parse(strings.Join(parts, "."))
}
