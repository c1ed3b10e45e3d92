package cel

import (
	"regexp"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The Kubernetes list and regex libraries, written from their documentation
// (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-list-library
// and #kubernetes-regex-library). Function names, signatures and runtime
// error texts match kube-apiserver; overload ids are our own. The other
// Kubernetes libraries are in library_<name>.go, and their prices in
// cost.go.

var (
	comparableTypes = []*cel.Type{cel.IntType, cel.UintType, cel.DoubleType, cel.BoolType,
		cel.DurationType, cel.TimestampType, cel.StringType, cel.BytesType}
	summableTypes = map[*cel.Type]ref.Val{
		cel.IntType:      types.Int(0),
		cel.UintType:     types.Uint(0),
		cel.DoubleType:   types.Double(0),
		cel.DurationType: types.Duration{},
	}
	typeParamA = cel.TypeParamType("A")
)

func kubernetesLibraries() []cel.EnvOption {
	var isSorted, sum, minOf, maxOf []cel.FunctionOpt
	for _, t := range comparableTypes {
		n := t.String()
		isSorted = append(isSorted, cel.MemberOverload("kplane_list_"+n+"_is_sorted",
			[]*cel.Type{cel.ListType(t)}, cel.BoolType, cel.UnaryBinding(listIsSorted)))
		minOf = append(minOf, cel.MemberOverload("kplane_list_"+n+"_min",
			[]*cel.Type{cel.ListType(t)}, t, cel.UnaryBinding(listExtreme("min", types.IntNegOne))))
		maxOf = append(maxOf, cel.MemberOverload("kplane_list_"+n+"_max",
			[]*cel.Type{cel.ListType(t)}, t, cel.UnaryBinding(listExtreme("max", types.IntOne))))
	}
	for _, t := range []*cel.Type{cel.IntType, cel.UintType, cel.DoubleType, cel.DurationType} {
		zero := summableTypes[t]
		sum = append(sum, cel.MemberOverload("kplane_list_"+t.String()+"_sum",
			[]*cel.Type{cel.ListType(t)}, t, cel.UnaryBinding(func(v ref.Val) ref.Val { return listSum(v, zero) })))
	}
	opts := []cel.EnvOption{
		cel.Function("isSorted", isSorted...),
		cel.Function("sum", sum...),
		cel.Function("min", minOf...),
		cel.Function("max", maxOf...),
		cel.Function("indexOf", cel.MemberOverload("kplane_list_a_index_of",
			[]*cel.Type{cel.ListType(typeParamA), typeParamA}, cel.IntType, cel.BinaryBinding(listIndexOf(false)))),
		cel.Function("lastIndexOf", cel.MemberOverload("kplane_list_a_last_index_of",
			[]*cel.Type{cel.ListType(typeParamA), typeParamA}, cel.IntType, cel.BinaryBinding(listIndexOf(true)))),
		cel.Function("find", cel.MemberOverload("kplane_string_find",
			[]*cel.Type{cel.StringType, cel.StringType}, cel.StringType, cel.BinaryBinding(regexFind))),
		cel.Function("findAll",
			cel.MemberOverload("kplane_string_find_all",
				[]*cel.Type{cel.StringType, cel.StringType}, cel.ListType(cel.StringType),
				cel.BinaryBinding(func(s, re ref.Val) ref.Val { return regexFindAll(s, re, types.IntNegOne) })),
			cel.MemberOverload("kplane_string_find_all_n",
				[]*cel.Type{cel.StringType, cel.StringType, cel.IntType}, cel.ListType(cel.StringType),
				cel.FunctionBinding(func(args ...ref.Val) ref.Val { return regexFindAll(args[0], args[1], args[2]) }))),
	}
	// The other libraries of kube-apiserver's base environment, in the order
	// of the Kubernetes release that added them.
	opts = append(opts, urlLibrary()...)      // 1.24
	opts = append(opts, authzLibrary()...)    // 1.27 and 1.31, declarations only
	opts = append(opts, quantityLibrary()...) // 1.28
	opts = append(opts, ipLibrary()...)       // 1.30, with cidr
	opts = append(opts, formatLibrary()...)   // 1.31
	opts = append(opts, semverLibrary()...)   // 1.33, version 1 (normalize)
	return opts
}

func listIsSorted(v ref.Val) ref.Val {
	l, ok := v.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	var prev traits.Comparer
	for it := l.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		c, ok := e.(traits.Comparer)
		if !ok {
			return types.MaybeNoSuchOverloadErr(e)
		}
		if prev != nil {
			if r := prev.Compare(e); types.IsError(r) {
				return r
			} else if r == types.IntOne {
				return types.False
			}
		}
		prev = c
	}
	return types.True
}

func listSum(v ref.Val, zero ref.Val) ref.Val {
	l, ok := v.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	acc := zero
	for it := l.Iterator(); it.HasNext() == types.True; {
		a, ok := acc.(traits.Adder)
		if !ok {
			return types.MaybeNoSuchOverloadErr(acc)
		}
		acc = a.Add(it.Next())
		if types.IsError(acc) {
			return acc
		}
	}
	return acc
}

// listExtreme returns min (want -1) or max (want 1) of a list.
func listExtreme(name string, want types.Int) func(ref.Val) ref.Val {
	return func(v ref.Val) ref.Val {
		l, ok := v.(traits.Lister)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		if l.Size() == types.IntZero {
			return types.NewErr("%s called on empty list", name)
		}
		var best ref.Val
		for it := l.Iterator(); it.HasNext() == types.True; {
			e := it.Next()
			if best == nil {
				best = e
				continue
			}
			c, ok := e.(traits.Comparer)
			if !ok {
				return types.MaybeNoSuchOverloadErr(e)
			}
			r := c.Compare(best)
			if types.IsError(r) {
				return r
			}
			if r == want {
				best = e
			}
		}
		return best
	}
}

func listIndexOf(last bool) func(ref.Val, ref.Val) ref.Val {
	return func(v, x ref.Val) ref.Val {
		l, ok := v.(traits.Lister)
		if !ok {
			return types.MaybeNoSuchOverloadErr(v)
		}
		n := int64(l.Size().(types.Int))
		for i := int64(0); i < n; i++ {
			j := i
			if last {
				j = n - 1 - i
			}
			eq := l.Get(types.Int(j)).Equal(x)
			if types.IsError(eq) {
				return eq
			}
			if eq == types.True {
				return types.Int(j)
			}
		}
		return types.IntNegOne
	}
}

func regexFind(s, re ref.Val) ref.Val {
	str, ok1 := s.(types.String)
	pat, ok2 := re.(types.String)
	if !ok1 || !ok2 {
		return types.MaybeNoSuchOverloadErr(s)
	}
	r, err := regexp.Compile(string(pat))
	if err != nil {
		return types.NewErr("Illegal regex: %v", err.Error())
	}
	return types.String(r.FindString(string(str)))
}

func regexFindAll(s, re, limit ref.Val) ref.Val {
	str, ok1 := s.(types.String)
	pat, ok2 := re.(types.String)
	n, ok3 := limit.(types.Int)
	if !ok1 || !ok2 || !ok3 {
		return types.MaybeNoSuchOverloadErr(s)
	}
	r, err := regexp.Compile(string(pat))
	if err != nil {
		return types.NewErr("Illegal regex: %v", err.Error())
	}
	return types.NewStringList(types.DefaultTypeAdapter, r.FindAllString(string(str), int(n)))
}
