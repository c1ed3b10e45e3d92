package cel

import (
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The Kubernetes quantity library (kube-apiserver since 1.28), written from
// its documentation (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-quantity-library):
//
//	quantity(string) Quantity            resource.ParseQuantity, its error on failure
//	isQuantity(string) bool
//	sign(Quantity) int                   a global function, not a method, as upstream declares it
//	<Quantity>.isInteger() bool          whether asInteger would succeed
//	<Quantity>.asInteger() int           "cannot convert value to integer" on overflow or a fraction
//	<Quantity>.asApproximateFloat() double
//	<Quantity>.add(Quantity|int) Quantity
//	<Quantity>.sub(Quantity|int) Quantity
//	<Quantity>.isGreaterThan(Quantity) bool
//	<Quantity>.isLessThan(Quantity) bool
//	<Quantity>.compareTo(Quantity) int
//
// Two quantities are equal when they are the same amount ("200M" ==
// "0.2G"). As upstream, add and sub return the value by reference, and the
// equality of a plain quantity accepts only a plain quantity: so
// `x.add(y) == z` holds or not, while `z == x.add(y)` is a "no such
// overload" error. Kept, since rules must pass and fail as they do in
// kube-apiserver.

var quantityType = cel.ObjectType("kubernetes.Quantity")

// quantityVal is a parsed quantity. *quantityVal, returned by add and sub,
// is a value too.
type quantityVal struct{ q *resource.Quantity }

func (v quantityVal) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(v.q).AssignableTo(t):
		return v.q, nil
	case reflect.TypeOf("").AssignableTo(t):
		return v.q.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'Quantity' to '%v'", t)
}

func (v quantityVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case quantityType:
		return v
	case types.TypeType:
		return quantityType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", quantityType, t)
}

func (v quantityVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(quantityVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v.q.Equal(*o.q))
}

func (v quantityVal) Type() ref.Type { return quantityType }
func (v quantityVal) Value() any     { return v.q }

func quantityLibrary() []cel.EnvOption {
	q := quantityType
	return []cel.EnvOption{
		cel.Function("quantity", cel.Overload("kplane_string_to_quantity", []*cel.Type{cel.StringType}, q,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				parsed, err := resource.ParseQuantity(s)
				if err != nil {
					return types.WrapErr(err)
				}
				return quantityVal{&parsed}
			}))),
		cel.Function("isQuantity", cel.Overload("kplane_is_quantity_string", []*cel.Type{cel.StringType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				_, err := resource.ParseQuantity(s)
				return types.Bool(err == nil)
			}))),
		cel.Function("sign", cel.Overload("kplane_quantity_sign", []*cel.Type{q}, cel.IntType,
			quantityUnary(func(x *resource.Quantity) ref.Val { return types.Int(x.Sign()) }))),
		cel.Function("isInteger", cel.MemberOverload("kplane_quantity_is_integer", []*cel.Type{q}, cel.BoolType,
			quantityUnary(func(x *resource.Quantity) ref.Val { _, ok := x.AsInt64(); return types.Bool(ok) }))),
		cel.Function("asInteger", cel.MemberOverload("kplane_quantity_as_integer", []*cel.Type{q}, cel.IntType,
			quantityUnary(func(x *resource.Quantity) ref.Val {
				i, ok := x.AsInt64()
				if !ok {
					return types.NewErr("cannot convert value to integer")
				}
				return types.Int(i)
			}))),
		cel.Function("asApproximateFloat", cel.MemberOverload("kplane_quantity_as_approximate_float", []*cel.Type{q}, cel.DoubleType,
			quantityUnary(func(x *resource.Quantity) ref.Val { return types.Double(x.AsApproximateFloat64()) }))),
		cel.Function("add",
			cel.MemberOverload("kplane_quantity_add", []*cel.Type{q, q}, q, quantityArith(false)),
			cel.MemberOverload("kplane_quantity_add_int", []*cel.Type{q, cel.IntType}, q, quantityArith(false))),
		cel.Function("sub",
			cel.MemberOverload("kplane_quantity_sub", []*cel.Type{q, q}, q, quantityArith(true)),
			cel.MemberOverload("kplane_quantity_sub_int", []*cel.Type{q, cel.IntType}, q, quantityArith(true))),
		cel.Function("isGreaterThan", cel.MemberOverload("kplane_quantity_is_greater_than", []*cel.Type{q, q}, cel.BoolType,
			quantityCompare(func(c int) ref.Val { return types.Bool(c == 1) }))),
		cel.Function("isLessThan", cel.MemberOverload("kplane_quantity_is_less_than", []*cel.Type{q, q}, cel.BoolType,
			quantityCompare(func(c int) ref.Val { return types.Bool(c == -1) }))),
		cel.Function("compareTo", cel.MemberOverload("kplane_quantity_compare_to", []*cel.Type{q, q}, cel.IntType,
			quantityCompare(func(c int) ref.Val { return types.Int(c) }))),
	}
}

func quantityUnary(f func(*resource.Quantity) ref.Val) cel.OverloadOpt {
	return cel.UnaryBinding(func(v ref.Val) ref.Val {
		x, ok := v.Value().(*resource.Quantity)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		return f(x)
	})
}

func quantityCompare(f func(int) ref.Val) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		x, ok1 := a.Value().(*resource.Quantity)
		y, ok2 := b.Value().(*resource.Quantity)
		if !ok1 || !ok2 {
			return types.MaybeNoSuchOverloadErr(a)
		}
		return f(x.Cmp(*y))
	})
}

// quantityArith adds or subtracts a quantity or an int (taken as a plain
// decimal number) without changing the receiver.
func quantityArith(sub bool) cel.OverloadOpt {
	return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
		x, ok := a.Value().(*resource.Quantity)
		if !ok {
			return types.MaybeNoSuchOverloadErr(a)
		}
		var y resource.Quantity
		switch o := b.Value().(type) {
		case *resource.Quantity:
			y = *o
		case int64:
			y = *resource.NewQuantity(o, resource.DecimalExponent)
		default:
			return types.MaybeNoSuchOverloadErr(a)
		}
		r := x.DeepCopy()
		if sub {
			r.Sub(y)
		} else {
			r.Add(y)
		}
		return &quantityVal{&r}
	})
}
