package cel

import (
	"fmt"
	"net/netip"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// The Kubernetes IP and CIDR libraries (kube-apiserver since 1.30), written
// from their documentation (https://kubernetes.io/docs/reference/using-api/cel/#kubernetes-ip-address-library
// and #kubernetes-cidr-library):
//
//	ip(string) net.IP                       net/netip parsing: no leading zeros in IPv4
//	isIP(string) bool                       octets, no zones, no IPv4-mapped IPv6
//	ip.isCanonical(string) bool             the string is the address's canonical form
//	string(net.IP) string
//	<net.IP>.family() int                   4 or 6
//	<net.IP>.isUnspecified() / isLoopback() / isLinkLocalMulticast() /
//	         isLinkLocalUnicast() / isGlobalUnicast() bool
//	cidr(string) net.CIDR                   netip.ParsePrefix, no IPv4-mapped IPv6
//	isCIDR(string) bool
//	string(net.CIDR) string
//	<net.CIDR>.containsIP(net.IP|string) bool
//	<net.CIDR>.containsCIDR(net.CIDR|string) bool
//	<net.CIDR>.ip() net.IP                  the address as written, not masked
//	<net.CIDR>.masked() net.CIDR
//	<net.CIDR>.prefixLength() int
//
// The runtime errors are kube-apiserver's word for word, including the
// doubled "network address parse error during conversion from string: "
// of cidr(). containsIP with a string that is not an IP fails with "no
// such overload", as upstream's does.

// ipType and cidrType are opaque types, named as upstream names them.
var (
	ipType   = cel.OpaqueType("net.IP")
	cidrType = cel.OpaqueType("net.CIDR")
)

type ipVal struct{ addr netip.Addr }

func (v ipVal) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(v.addr).AssignableTo(t):
		return v.addr, nil
	case reflect.TypeOf("").AssignableTo(t):
		return v.addr.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'IP' to '%v'", t)
}

func (v ipVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case ipType:
		return v
	case types.TypeType:
		return ipType
	case types.StringType:
		return types.String(v.addr.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", ipType, t)
}

func (v ipVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(ipVal)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(v.addr == o.addr)
}

func (v ipVal) Type() ref.Type { return ipType }
func (v ipVal) Value() any     { return v.addr }

// Size is the address length in bytes (4 or 16); the cost of containsIP
// and containsCIDR is priced from it.
func (v ipVal) Size() ref.Val { return types.Int((v.addr.BitLen() + 7) / 8) }

type cidrVal struct{ prefix netip.Prefix }

func (v cidrVal) ConvertToNative(t reflect.Type) (any, error) {
	switch {
	case reflect.TypeOf(v.prefix).AssignableTo(t):
		return v.prefix, nil
	case reflect.TypeOf("").AssignableTo(t):
		return v.prefix.String(), nil
	}
	return nil, fmt.Errorf("type conversion error from 'CIDR' to '%v'", t)
}

func (v cidrVal) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case cidrType:
		return v
	case types.TypeType:
		return cidrType
	case types.StringType:
		return types.String(v.prefix.String())
	}
	return types.NewErr("type conversion error from '%s' to '%s'", cidrType, t)
}

func (v cidrVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(cidrVal)
	if !ok {
		return types.ValOrErr(other, "no such overload")
	}
	return types.Bool(v.prefix == o.prefix)
}

func (v cidrVal) Type() ref.Type { return cidrType }
func (v cidrVal) Value() any     { return v.prefix }

// Size is the prefix length in whole bytes, rounded up ("10.0.0.0/8" is 1),
// as upstream prices it.
func (v cidrVal) Size() ref.Val { return types.Int((v.prefix.Bits() + 7) / 8) }

// Overload ids the cost estimator tells apart.
const (
	overloadCIDRIP             = "kplane_cidr_ip"
	overloadCIDRContainsIPStr  = "kplane_cidr_contains_ip_string"
	overloadCIDRContainsCIDRSt = "kplane_cidr_contains_cidr_string"
)

func ipLibrary() []cel.EnvOption {
	ipPred := func(name, id string, f func(netip.Addr) bool) cel.EnvOption {
		return cel.Function(name, cel.MemberOverload(id, []*cel.Type{ipType}, cel.BoolType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				x, ok := v.(ipVal)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.Bool(f(x.addr))
			})))
	}
	str := func(f func(string) ref.Val) cel.OverloadOpt {
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			s, ok := v.Value().(string)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return f(s)
		})
	}
	cidrUnary := func(f func(netip.Prefix) ref.Val) cel.OverloadOpt {
		return cel.UnaryBinding(func(v ref.Val) ref.Val {
			x, ok := v.(cidrVal)
			if !ok {
				return types.MaybeNoSuchOverloadErr(v)
			}
			return f(x.prefix)
		})
	}
	return []cel.EnvOption{
		// The type names resolve in expressions, as upstream registers them.
		cel.Types(ipType, cidrType),
		cel.Function("ip",
			cel.Overload("kplane_string_to_ip", []*cel.Type{cel.StringType}, ipType, str(stringToIP)),
			cel.MemberOverload(overloadCIDRIP, []*cel.Type{cidrType}, ipType,
				cidrUnary(func(p netip.Prefix) ref.Val { return ipVal{p.Addr()} }))),
		cel.Function("isIP", cel.Overload("kplane_is_ip", []*cel.Type{cel.StringType}, cel.BoolType,
			str(func(s string) ref.Val { _, err := parseIP(s); return types.Bool(err == nil) }))),
		cel.Function("ip.isCanonical", cel.Overload("kplane_ip_is_canonical", []*cel.Type{cel.StringType}, cel.BoolType,
			str(func(s string) ref.Val {
				a, err := parseIP(s)
				if err != nil {
					return types.NewErr("%v", err)
				}
				return types.Bool(a.String() == s)
			}))),
		cel.Function("family", cel.MemberOverload("kplane_ip_family", []*cel.Type{ipType}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				x, ok := v.(ipVal)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				switch {
				case x.addr.Is4():
					return types.Int(4)
				case x.addr.Is6():
					return types.Int(6)
				}
				return types.NewErr("IP address %q is not an IPv4 or IPv6 address", x.addr.String())
			}))),
		ipPred("isUnspecified", "kplane_ip_is_unspecified", netip.Addr.IsUnspecified),
		ipPred("isLoopback", "kplane_ip_is_loopback", netip.Addr.IsLoopback),
		ipPred("isLinkLocalMulticast", "kplane_ip_is_link_local_multicast", netip.Addr.IsLinkLocalMulticast),
		ipPred("isLinkLocalUnicast", "kplane_ip_is_link_local_unicast", netip.Addr.IsLinkLocalUnicast),
		ipPred("isGlobalUnicast", "kplane_ip_is_global_unicast", netip.Addr.IsGlobalUnicast),

		cel.Function("cidr", cel.Overload("kplane_string_to_cidr", []*cel.Type{cel.StringType}, cidrType, str(stringToCIDR))),
		cel.Function("isCIDR", cel.Overload("kplane_is_cidr", []*cel.Type{cel.StringType}, cel.BoolType,
			str(func(s string) ref.Val { _, err := parseCIDR(s); return types.Bool(err == nil) }))),
		cel.Function("containsIP",
			cel.MemberOverload(overloadCIDRContainsIPStr, []*cel.Type{cidrType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(c, s ref.Val) ref.Val {
					str, ok := s.Value().(string)
					if !ok {
						return types.MaybeNoSuchOverloadErr(s)
					}
					return cidrContainsIP(c, stringToIP(str))
				})),
			cel.MemberOverload("kplane_cidr_contains_ip_ip", []*cel.Type{cidrType, ipType}, cel.BoolType,
				cel.BinaryBinding(cidrContainsIP))),
		cel.Function("containsCIDR",
			cel.MemberOverload(overloadCIDRContainsCIDRSt, []*cel.Type{cidrType, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(c, s ref.Val) ref.Val {
					str, ok := s.Value().(string)
					if !ok {
						return types.MaybeNoSuchOverloadErr(s)
					}
					return cidrContainsCIDR(c, stringToCIDR(str))
				})),
			cel.MemberOverload("kplane_cidr_contains_cidr", []*cel.Type{cidrType, cidrType}, cel.BoolType,
				cel.BinaryBinding(cidrContainsCIDR))),
		cel.Function("masked", cel.MemberOverload("kplane_cidr_masked", []*cel.Type{cidrType}, cidrType,
			cidrUnary(func(p netip.Prefix) ref.Val { return cidrVal{p.Masked()} }))),
		cel.Function("prefixLength", cel.MemberOverload("kplane_cidr_prefix_length", []*cel.Type{cidrType}, cel.IntType,
			cidrUnary(func(p netip.Prefix) ref.Val { return types.Int(p.Bits()) }))),

		cel.Function("string",
			cel.Overload("kplane_ip_to_string", []*cel.Type{ipType}, cel.StringType,
				cel.UnaryBinding(func(v ref.Val) ref.Val {
					x, ok := v.(ipVal)
					if !ok {
						return types.MaybeNoSuchOverloadErr(v)
					}
					return types.String(x.addr.String())
				})),
			cel.Overload("kplane_cidr_to_string", []*cel.Type{cidrType}, cel.StringType,
				cidrUnary(func(p netip.Prefix) ref.Val { return types.String(p.String()) }))),
	}
}

func stringToIP(s string) ref.Val {
	a, err := parseIP(s)
	if err != nil {
		return types.NewErr("%v", err)
	}
	return ipVal{a}
}

func stringToCIDR(s string) ref.Val {
	p, err := parseCIDR(s)
	if err != nil {
		// parseCIDR's error already has this prefix; upstream adds it again.
		return types.NewErr("network address parse error during conversion from string: %v", err)
	}
	return cidrVal{p}
}

// cidrContainsIP: a non-IP argument (a failed conversion from a string) is
// "no such overload", as upstream reports it.
func cidrContainsIP(c, i ref.Val) ref.Val {
	p, ok := c.(cidrVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(i)
	}
	a, ok := i.(ipVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(c)
	}
	return types.Bool(p.prefix.Contains(a.addr))
}

// cidrContainsCIDR: the other network lies inside this one when they
// overlap and it is at least as long.
func cidrContainsCIDR(c, o ref.Val) ref.Val {
	p, ok := c.(cidrVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(c)
	}
	q, ok := o.(cidrVal)
	if !ok {
		return types.MaybeNoSuchOverloadErr(o)
	}
	return types.Bool(p.prefix.Overlaps(q.prefix) && p.prefix.Bits() <= q.prefix.Bits())
}

// parseIP parses an address as net/netip does and refuses zones and
// IPv4-mapped IPv6 addresses, with kube-apiserver's messages.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("IP Address %q parse error during conversion from string: %v", s, err)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IP address %q with zone value is not allowed", s)
	}
	if a.Is4In6() {
		return netip.Addr{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", s)
	}
	return a, nil
}

func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network address parse error during conversion from string: %v", err)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 address %q is not allowed", s)
	}
	return p, nil
}
