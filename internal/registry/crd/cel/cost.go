package cel

import (
	"math"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Cost limits, as kube-apiserver sets them. Changing any of them changes
// which CRDs are accepted or which objects are refused.
const (
	// staticEstimatedCostLimit is the largest estimated cost of one rule,
	// times the number of times it can run in one object
	// (StaticEstimatedCostLimit in apiextensions-apiserver's validation).
	staticEstimatedCostLimit = 10000000
	// staticEstimatedCRDCostLimit is the largest estimated cost of all the
	// rules of a CRD version together (StaticEstimatedCRDCostLimit).
	staticEstimatedCRDCostLimit = 100000000
	// perCallLimit is the runtime cost limit of one rule evaluation, about
	// 0.1s (PerCallLimit in k8s.io/apiserver/pkg/apis/cel).
	perCallLimit = 1000000
	// runtimeCostBudget is the runtime cost budget of all the rules for one
	// object, about 1s (RuntimeCELCostBudget).
	runtimeCostBudget = 10000000
	// checkFrequency is how many comprehension iterations run between checks
	// for cancellation (CheckFrequency).
	checkFrequency = 100
	// maxMessageExpressionSize is the longest message a messageExpression may
	// produce (MaxEvaluatedMessageExpressionSizeBytes).
	maxMessageExpressionSize = 5 * 1024
)

// estimator sizes values for the checker's cost estimate from the schema,
// and prices the library functions cel-go does not price itself. It is
// rooted at the declType of the node whose rules are being compiled.
//
// The prices follow kube-apiserver's library.CostEstimator, since they decide
// which rules are accepted: list functions cost one traversal of the list
// (plus the strings in it), string functions one traversal of the string at
// common.StringTraversalCostFactor, regex functions the product of the string
// and pattern traversals. Parsing a URL, quantity, semver, IP or CIDR costs
// a traversal of the string; their accessors and comparisons cost 1;
// containsIP and containsCIDR a few traversals of the address bytes;
// validate a regex match against a pattern of maxNameFormatRegexSize.
// Functions priced nowhere (isURL, isQuantity, the format.<name>()
// constructors) cost cel-go's default of 1, as upstream.
//
// Equality of the library types is priced too (1, or a traversal for
// formats and URLs); inequality is not, as upstream: cel-go's default then
// treats the operands as of unknown size, so `quantity(a) != quantity(b)`
// is refused as too expensive where `!(quantity(a) == quantity(b))` is not.
type estimator struct {
	root *declType
}

// EstimateSize implements checker.CostEstimator. The path's first element is
// the variable (self or oldSelf); the rest are field names, "@items",
// "@keys" or "@values".
func (e *estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 || e.root == nil {
		return nil
	}
	t := e.root
	for _, p := range path[1:] {
		switch p {
		case "@items", "@values":
			t = t.elem
		case "@keys":
			if t.kind != kindMap {
				return nil
			}
			// kube-apiserver types map keys with its plain string DeclType,
			// whose maxElements is 0, so keys are estimated as empty. Kept
			// as is: a larger estimate would refuse CRDs upstream accepts.
			return &checker.SizeEstimate{Min: 0, Max: 0}
		default:
			f, ok := t.fields[p]
			if !ok {
				return nil
			}
			t = f.typ
		}
		if t == nil {
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(t.maxElements)}
}

func (e *estimator) size(n checker.AstNode) checker.SizeEstimate {
	if s := n.ComputedSize(); s != nil {
		return *s
	}
	if s := e.EstimateSize(n); s != nil {
		return *s
	}
	return checker.SizeEstimate{Min: 0, Max: math.MaxUint64}
}

// EstimateCallCost implements checker.CostEstimator.
func (e *estimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if est := e.estimateLibraryCall(function, overloadID, args); est != nil {
		return est
	}
	traverse := func(s checker.SizeEstimate, factor float64) checker.CostEstimate {
		return s.MultiplyByCostFactor(factor)
	}
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf":
		if target == nil {
			return nil
		}
		per := checker.CostEstimate{Min: 1, Max: 1}
		if el := e.itemNode(*target); el != nil {
			if k := el.Type().Kind(); k == types.StringKind || k == types.BytesKind {
				per = per.Add(traverse(e.size(el), common.StringTraversalCostFactor))
			}
			return &checker.CallEstimate{CostEstimate: e.size(*target).MultiplyByCost(per)}
		}
		// indexOf and lastIndexOf on a string (ext strings).
		return &checker.CallEstimate{CostEstimate: traverse(e.size(*target), common.StringTraversalCostFactor)}
	case "lowerAscii", "upperAscii", "substring", "trim":
		if target == nil {
			return nil
		}
		sz := e.size(*target)
		return &checker.CallEstimate{CostEstimate: traverse(sz, common.StringTraversalCostFactor), ResultSize: &sz}
	case "replace":
		if target == nil || len(args) < 2 {
			return nil
		}
		sz, from, to := e.size(*target), e.size(args[0]), e.size(args[1])
		var count, kept checker.SizeEstimate
		switch {
		case from.Min == 0: // "" matches around every character
			count.Max, kept.Max = addOne(sz.Max), sz.Max
		case to.Max <= from.Min:
			count.Max, kept.Max = 0, sz.Max
		default:
			count.Max = uint64(math.Ceil(float64(sz.Max) / float64(from.Min)))
		}
		switch {
		case from.Max == 0:
			count.Min, kept.Min = addOne(sz.Min), sz.Min
		case from.Max <= to.Min:
			count.Min, kept.Min = 0, sz.Min
		default:
			count.Min = uint64(math.Ceil(float64(sz.Min) / float64(from.Max)))
		}
		res := count.Multiply(to).Add(kept)
		return &checker.CallEstimate{CostEstimate: traverse(sz, 2*common.StringTraversalCostFactor), ResultSize: &res}
	case "split":
		if target == nil {
			return nil
		}
		sz := e.size(*target)
		most := sz.Max
		if len(args) > 1 {
			if lit := args[1].Expr().AsLiteral(); lit != nil {
				if i, ok := lit.Value().(int64); ok {
					most = uint64(i)
				}
			}
		}
		return &checker.CallEstimate{CostEstimate: traverse(sz, 2*common.StringTraversalCostFactor), ResultSize: &checker.SizeEstimate{Min: 0, Max: most}}
	case "join":
		if target == nil {
			return nil
		}
		n := e.size(*target)
		var sz checker.SizeEstimate
		if el := e.itemNode(*target); el != nil {
			sz = n.Multiply(e.size(el))
		}
		if len(args) > 0 {
			seps := checker.SizeEstimate{Min: subOne(n.Min), Max: subOne(n.Max)}
			sz = sz.Add(e.size(args[0]).Multiply(seps))
		}
		return &checker.CallEstimate{CostEstimate: traverse(sz, common.StringTraversalCostFactor), ResultSize: &sz}
	case "find", "findAll":
		if target == nil || len(args) < 1 {
			return nil
		}
		sz := e.size(*target)
		str := sz.Add(checker.SizeEstimate{Min: 1, Max: 1}).MultiplyByCostFactor(common.StringTraversalCostFactor)
		re := e.size(args[0]).MultiplyByCostFactor(common.RegexStringLengthCostFactor)
		return &checker.CallEstimate{CostEstimate: str.Multiply(re), ResultSize: &checker.SizeEstimate{Min: 0, Max: sz.Max}}
	}
	return nil
}

// itemNode is the element of a list node, with its path extended by @items so
// that the element's maxLength is found.
func (e *estimator) itemNode(list checker.AstNode) checker.AstNode {
	params := list.Type().Parameters()
	if len(params) == 0 {
		return nil
	}
	var path []string
	if p := list.Path(); p != nil {
		path = append(append(path, p...), "@items")
	}
	return itemNode{path: path, t: params[0]}
}

type itemNode struct {
	path []string
	t    *types.Type
}

func (n itemNode) Path() []string                      { return n.path }
func (n itemNode) Type() *types.Type                   { return n.t }
func (n itemNode) Expr() ast.Expr                      { return nil }
func (n itemNode) ComputedSize() *checker.SizeEstimate { return nil }

var _ checker.AstNode = itemNode{}

// addOne and subOne saturate instead of wrapping.
func addOne(v uint64) uint64 { return min(v, math.MaxUint64-1) + 1 }
func subOne(v uint64) uint64 { return v - min(v, 1) }

// CallCost implements interpreter.ActualCostEstimator: the runtime price of
// the same functions, from the actual sizes.
func (e *estimator) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if c := libraryCallCost(function, overloadID, args); c != nil {
		return c
	}
	c := func(v float64) *uint64 { u := uint64(math.Ceil(v)); return &u }
	switch function {
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf":
		if len(args) > 0 {
			u := traversalCost(args[0])
			return &u
		}
	case "lowerAscii", "upperAscii", "substring", "trim":
		if len(args) > 0 {
			return c(float64(actualSize(args[0])) * common.StringTraversalCostFactor)
		}
	case "replace", "split":
		if len(args) > 0 {
			return c(float64(actualSize(args[0])) * 2 * common.StringTraversalCostFactor)
		}
	case "join":
		if len(args) > 0 {
			return c(float64(actualSize(result)) * 2 * common.StringTraversalCostFactor)
		}
	case "find", "findAll":
		if len(args) >= 2 {
			str := uint64(math.Ceil((1 + float64(actualSize(args[0]))) * common.StringTraversalCostFactor))
			re := uint64(math.Ceil(float64(actualSize(args[1])) * common.RegexStringLengthCostFactor))
			u := str * re
			return &u
		}
	}
	return nil
}

func actualSize(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok {
			return uint64(n)
		}
	}
	return 1
}

// traversalCost is the cost of visiting every node of a value: strings by
// length, everything else 1.
func traversalCost(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return uint64(float64(len(x)) * common.StringTraversalCostFactor)
	case types.Bytes:
		return uint64(float64(len(x)) * common.StringTraversalCostFactor)
	case traits.Lister:
		var sum uint64
		for it := x.Iterator(); it.HasNext() == types.True; {
			sum += traversalCost(it.Next())
		}
		return sum
	case traits.Mapper:
		var sum uint64
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			sum += traversalCost(k) + traversalCost(x.Get(k))
		}
		return sum
	}
	return 1
}

// authzCheckCost is the fixed price of an authorization check: two fit in
// one evaluation's limit.
const authzCheckCost = 350000

// selectorCost prices parsing a field or label selector of the given
// length: a list, a traversal of the string, and a list and a struct per
// requirement, of which there is at most one per two characters ("k,").
func selectorCost(length checker.SizeEstimate) checker.CostEstimate {
	base := checker.CostEstimate{Min: common.ListCreateBaseCost, Max: common.ListCreateBaseCost}
	parse := length.MultiplyByCostFactor(common.StringTraversalCostFactor)
	requirements := length.MultiplyByCostFactor(0.5).MultiplyByCostFactor(common.ListCreateBaseCost + common.StructCreateBaseCost)
	return base.Add(parse).Add(requirements)
}

// fixed is a constant cost estimate.
func fixed(n uint64) *checker.CallEstimate {
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: n, Max: n}}
}

// addressBytes is the size of the two byte slices containsIP and
// containsCIDR compare: 4 bytes for IPv4, 16 for IPv6.
var addressBytes = checker.SizeEstimate{Min: 4, Max: 16}

// unitCost are the library functions that cost 1, estimated and actual.
var unitCost = map[string]bool{
	"format.named": true, "masked": true, "prefixLength": true, "family": true, "isUnspecified": true,
	"isLoopback": true, "isLinkLocalMulticast": true, "isLinkLocalUnicast": true, "isGlobalUnicast": true,
	"sign": true, "asInteger": true, "isInteger": true, "asApproximateFloat": true, "isGreaterThan": true,
	"isLessThan": true, "compareTo": true, "add": true, "sub": true, "major": true, "minor": true, "patch": true,
	"getScheme": true, "getHostname": true, "getHost": true, "getPort": true, "getEscapedPath": true, "getQuery": true,
}

// estimateLibraryCall prices the functions of the url, quantity, ip, cidr,
// format and semver libraries, and equality of their types, as
// kube-apiserver's library.CostEstimator does. args are the call's
// arguments without the receiver.
func (e *estimator) estimateLibraryCall(function, overloadID string, args []checker.AstNode) *checker.CallEstimate {
	traversal := func(n checker.AstNode, factor float64) checker.CostEstimate {
		return e.size(n).MultiplyByCostFactor(factor)
	}
	if unitCost[function] {
		return fixed(1)
	}
	switch function {
	case "check":
		return fixed(authzCheckCost)
	case "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason", "error", "errored":
		return fixed(1)
	case "fieldSelector", "labelSelector":
		if len(args) == 1 {
			c := selectorCost(e.size(args[0]))
			return &checker.CallEstimate{CostEstimate: c}
		}
	case "url", "jsonpatch.escapeKey":
		if len(args) == 1 {
			sz := e.size(args[0])
			return &checker.CallEstimate{CostEstimate: sz.MultiplyByCostFactor(common.StringTraversalCostFactor), ResultSize: &sz}
		}
	case "ip":
		if overloadID == overloadCIDRIP {
			return fixed(1)
		}
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: traversal(args[0], common.StringTraversalCostFactor)}
		}
	case "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver":
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: traversal(args[0], common.StringTraversalCostFactor)}
		}
	case "ip.isCanonical":
		// A parse, then a comparison with the canonical form.
		if len(args) >= 1 {
			return &checker.CallEstimate{CostEstimate: traversal(args[0], 2*common.StringTraversalCostFactor)}
		}
	case "containsIP", "containsCIDR":
		if len(args) >= 1 {
			c := addressBytes.Add(addressBytes).MultiplyByCostFactor(common.StringTraversalCostFactor)
			if function == "containsCIDR" {
				// Masking and comparing the prefix bits: one more pass.
				c = c.Add(addressBytes.MultiplyByCostFactor(common.StringTraversalCostFactor)).Add(checker.CostEstimate{Min: 1, Max: 1})
			}
			if overloadID == overloadCIDRContainsIPStr || overloadID == overloadCIDRContainsCIDRSt {
				c = c.Add(traversal(args[0], common.StringTraversalCostFactor))
			}
			return &checker.CallEstimate{CostEstimate: c}
		}
	case "validate":
		if len(args) >= 1 {
			c := traversal(args[0], common.StringTraversalCostFactor).MultiplyByCostFactor(maxNameFormatRegexSize * common.RegexStringLengthCostFactor)
			return &checker.CallEstimate{CostEstimate: c}
		}
	case "_==_":
		if len(args) != 2 || args[0].Type().Equal(args[1].Type()) != types.True {
			return nil
		}
		switch t := args[0].Type(); {
		case t.Kind() == types.OpaqueKind && (t.TypeName() == ipType.TypeName() || t.TypeName() == cidrType.TypeName()):
			return fixed(1)
		case t.Kind() != types.StructKind:
		case t.TypeName() == quantityType.TypeName() || t.TypeName() == semverType.TypeName():
			return fixed(1)
		case t.TypeName() == formatType.TypeName():
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: maxFormatSize}.MultiplyByCostFactor(common.StringTraversalCostFactor)}
		case t.TypeName() == urlType.TypeName():
			// Upstream sizes a URL comparison by the right operand alone
			// (when the parser's result size is known), so this does too.
			sz := checker.SizeEstimate{Min: 1, Max: 1}
			if r := args[1].ComputedSize(); r != nil {
				sz = *r
			}
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: sz.Max}.MultiplyByCostFactor(common.StringTraversalCostFactor)}
		}
	}
	return nil
}

// libraryCallCost is the runtime price of the same functions. args include
// the receiver first.
func libraryCallCost(function, overloadID string, args []ref.Val) *uint64 {
	n := func(v uint64) *uint64 { return &v }
	traversal := func(v ref.Val, factor float64) uint64 {
		return uint64(math.Ceil(float64(actualSize(v)) * factor))
	}
	if unitCost[function] {
		return n(1)
	}
	switch function {
	case "check":
		return n(authzCheckCost)
	case "serviceAccount", "path", "group", "resource", "subresource", "namespace", "name", "allowed", "reason", "error", "errored":
		return n(1)
	case "fieldSelector", "labelSelector":
		if len(args) >= 2 {
			sz := actualSize(args[1])
			return n(selectorCost(checker.SizeEstimate{Min: sz, Max: sz}).Max)
		}
	case "url", "cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver", "jsonpatch.escapeKey":
		if len(args) >= 1 {
			return n(traversal(args[0], common.StringTraversalCostFactor))
		}
	case "ip":
		if overloadID == overloadCIDRIP {
			return n(1)
		}
		if len(args) >= 1 {
			return n(traversal(args[0], common.StringTraversalCostFactor))
		}
	case "ip.isCanonical":
		if len(args) >= 1 {
			return n(traversal(args[0], 2*common.StringTraversalCostFactor))
		}
	case "containsIP", "containsCIDR":
		if len(args) >= 2 {
			// Only the CIDR's prefix bytes are compared.
			prefix := actualSize(args[0])
			c := uint64(math.Ceil(float64(2*prefix) * common.StringTraversalCostFactor))
			if function == "containsCIDR" {
				c += uint64(math.Ceil(float64(prefix)*common.StringTraversalCostFactor)) + 1
			}
			if overloadID == overloadCIDRContainsIPStr || overloadID == overloadCIDRContainsCIDRSt {
				c += traversal(args[1], common.StringTraversalCostFactor)
			}
			return n(c)
		}
	case "validate":
		if len(args) >= 2 {
			if f, ok := args[0].Value().(formatVal); ok {
				str := uint64(math.Ceil((1 + float64(actualSize(args[1]))) * common.StringTraversalCostFactor))
				re := uint64(math.Ceil(float64(f.maxRegexSize) * common.RegexStringLengthCostFactor))
				return n(str * re)
			}
		}
	case "_==_":
		if len(args) == 2 {
			switch args[0].(type) {
			case quantityVal, *quantityVal, ipVal, cidrVal, formatVal, urlVal, semverVal:
				return n(1)
			}
		}
	}
	return nil
}
