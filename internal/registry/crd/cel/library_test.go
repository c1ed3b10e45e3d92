package cel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
)

// libSchema puts one rule on a string field of at most 64 characters, at
// spec.v.
func libSchema(rule string) string {
	return `
type: object
properties:
  spec:
    type: object
    properties:
      v:
        type: string
        maxLength: 64
        x-kubernetes-validations:
        - rule: "` + strings.ReplaceAll(rule, `"`, `\"`) + `"
`
}

// libraryCases are rules of the url, quantity, ip, cidr, format and semver
// libraries on one value each. Every expected answer was produced by
// kube-apiserver's own code on the same schema and object:
// apiextensions-apiserver v0.37.2 ValidateCustomResourceDefinition and
// schema/cel Compile (the rule's estimated cost, MaxCost) and
// cel.Validator.Validate (the field error, and the runtime cost taken from
// the budget), with k8s.io/apiserver v0.37.2's libraries.
var libraryCases = []struct {
	rule, value string
	want        string // the field error; "" if the value passes
	estimate    uint64 // the rule's estimated cost
	cost        uint64 // the runtime cost on value
}{
	{`url(self).getScheme() == 'https'`, `https://user:pass@example.com:80/path?query=val#fragment`, ``, 29, 9},
	{`url(self).getHost() == 'example.com:80' && url(self).getHostname() == 'example.com' && url(self).getPort() == '80'`, `https://user:pass@example.com:80/path?query=val#fragment`, ``, 89, 29},
	{`url(self).getEscapedPath() == '/path%20with%20spaces/'`, `https://example.com/path with spaces/`, ``, 31, 9},
	{`url(self).getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}`, `https://example.com/path?k1=a&k2=b&k2=c`, ``, 79, 7},
	{`url(self).getHost() == '[::1]:80' && url(self).getHostname() == '::1'`, `https://[::1]:80/`, ``, 58, 10},
	{`isURL(self)`, `../relative-path`, `spec.v: Invalid value: "../relative-path": failed rule: isURL(self)`, 2, 2},
	{`url(self).getHost() == ''`, `bad`, `spec.v: Invalid value: "string": URL parse error during conversion from string: parse "bad": invalid URI for request evaluating rule: url(self).getHost() == ''`, 28, 3},
	{`url(self) == url('https://example.com/')`, `https://example.com/`, ``, 31, 6},
	{`url(self).getScheme() == '' && url(self).getQuery() == {}`, `/absolute-path`, ``, 86, 8},
	{`quantity(self).isLessThan(quantity('1Gi'))`, `2Gi`, `spec.v: Invalid value: "2Gi": failed rule: quantity(self).isLessThan(quantity('1Gi'))`, 29, 4},
	{`quantity(self) == quantity('0.2G')`, `200M`, ``, 29, 4},
	{`quantity(self).compareTo(quantity('50M')) == 1`, `50Mi`, ``, 30, 5},
	{`quantity(self).add(quantity('20')) == quantity('50.02k')`, `50k`, ``, 31, 6},
	{`quantity(self).sub(20).asInteger() == 49980`, `50k`, ``, 30, 5},
	{`quantity('50.02k') == quantity(self).add(20)`, `50k`, `spec.v: Invalid value: "string": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: quantity('50.02k') == quantity(self).add(20)`, 30, 5},
	{`quantity(self).isInteger()`, `9999999999999999999999999999999999999G`, `spec.v: Invalid value: "9999999999999999999999999999999999999G": failed rule: quantity(self).isInteger()`, 28, 6},
	{`quantity(self).asInteger() > 0`, `9999999999999999999999999999999999999G`, `spec.v: Invalid value: "string": cannot convert value to integer evaluating rule: quantity(self).asInteger() > 0`, 29, 7},
	{`sign(quantity(self)) == -1`, `-1`, ``, 29, 4},
	{`quantity(self).asApproximateFloat() == 50703.0`, `50.703k`, ``, 29, 4},
	{`quantity(self).isGreaterThan(quantity('1'))`, `10Mo`, `spec.v: Invalid value: "string": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: quantity(self).isGreaterThan(quantity('1'))`, 29, 4},
	{`quantity(self).isGreaterThan(quantity('1'))`, `10Mm`, `spec.v: Invalid value: "string": unable to parse quantity's suffix evaluating rule: quantity(self).isGreaterThan(quantity('1'))`, 29, 4},
	{`isQuantity(self)`, `1,3G`, `spec.v: Invalid value: "1,3G": failed rule: isQuantity(self)`, 27, 2},
	{`isIP(self)`, `1.2.3.4`, ``, 27, 2},
	{`ip(self).family() == 6 && ip(self).isLoopback()`, `::1`, ``, 57, 7},
	{`ip(self).isGlobalUnicast() && !ip(self).isUnspecified()`, `192.168.0.1`, ``, 57, 9},
	{`ip(self) == ip('127.0.0.1')`, `127.0.0.1`, ``, 29, 4},
	{`ip.isCanonical(self)`, `2001:DB8::ABCD`, `spec.v: Invalid value: "2001:DB8::ABCD": failed rule: ip.isCanonical(self)`, 53, 4},
	{`ip(self).isUnspecified()`, `127.0.0.256`, `spec.v: Invalid value: "string": IP Address "127.0.0.256" parse error during conversion from string: ParseAddr("127.0.0.256"): IPv4 field has value >255 evaluating rule: ip(self).isUnspecified()`, 28, 4},
	{`isIP(self)`, `::ffff:1.2.3.4`, `spec.v: Invalid value: "::ffff:1.2.3.4": failed rule: isIP(self)`, 27, 3},
	{`ip(self).family() == 4`, `::ffff:1.2.3.4`, `spec.v: Invalid value: "string": IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed evaluating rule: ip(self).family() == 4`, 29, 5},
	{`ip(self).family() == 6`, `fe80::1%eth0`, `spec.v: Invalid value: "string": IP address "fe80::1%eth0" with zone value is not allowed evaluating rule: ip(self).family() == 6`, 29, 5},
	{`string(ip(self)) == '2001:db8::abcd'`, `2001:db8::0:0:0:abcd`, ``, 30, 6},
	{`ip(self).isLinkLocalMulticast()`, `ff02::1`, ``, 28, 3},
	{`ip(self).isLinkLocalUnicast()`, `169.254.169.254`, ``, 28, 4},
	{`cidr('10.0.0.0/8').containsIP(ip(self))`, `10.1.2.3`, ``, 32, 4},
	{`cidr('10.0.0.0/8').containsIP(self)`, `11.0.0.1`, `spec.v: Invalid value: "11.0.0.1": failed rule: cidr('10.0.0.0/8').containsIP(self)`, 32, 4},
	{`cidr('10.0.0.0/8').containsIP(self)`, `bad`, `spec.v: Invalid value: "string": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: cidr('10.0.0.0/8').containsIP(self)`, 32, 4},
	{`cidr(self).containsCIDR('10.1.0.0/16')`, `10.0.0.0/8`, ``, 36, 7},
	{`cidr(self).prefixLength() == 24 && cidr(self).ip() == ip('192.168.0.1') && cidr(self).masked() == cidr('192.168.0.0/24')`, `192.168.0.1/24`, ``, 91, 19},
	{`isCIDR(self)`, `192.168.0.0/`, `spec.v: Invalid value: "192.168.0.0/": failed rule: isCIDR(self)`, 27, 3},
	{`cidr(self).prefixLength() > 0`, `192.168.0.0/`, `spec.v: Invalid value: "string": network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("192.168.0.0/"): bad bits after slash: "" evaluating rule: cidr(self).prefixLength() > 0`, 29, 5},
	{`string(cidr(self)) == '2001:db8::/32'`, `2001:db8::/32`, ``, 30, 6},
	{`cidr(self).containsCIDR(cidr('10.0.0.0/8'))`, `10.0.0.0/16`, `spec.v: Invalid value: "10.0.0.0/16": failed rule: cidr(self).containsCIDR(cidr('10.0.0.0/8'))`, 35, 7},
	{`cidr(self).containsCIDR('bad')`, `10.0.0.0/16`, `spec.v: Invalid value: "string": network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("bad"): no '/' evaluating rule: cidr(self).containsCIDR('bad')`, 35, 7},
	{`cidr(self).prefixLength() > 0`, `::ffff:1.2.3.4/96`, `spec.v: Invalid value: "string": network address parse error during conversion from string: IPv4-mapped IPv6 address "::ffff:1.2.3.4/96" is not allowed evaluating rule: cidr(self).prefixLength() > 0`, 29, 5},
	{`!format.dns1123Label().validate(self).hasValue()`, `my-name`, ``, 836, 12},
	{`!format.dns1123Label().validate(self).hasValue()`, `My_Name`, `spec.v: Invalid value: "My_Name": failed rule: !format.dns1123Label().validate(self).hasValue()`, 836, 12},
	{`format.named('labelValue').hasValue() && !format.named('labelValue').value().validate(self).hasValue()`, `abc`, ``, 839, 17},
	{`!format.named('nope').hasValue()`, `x`, ``, 3, 3},
	{`!format.uuid().validate(self).hasValue()`, `123e4567-e89b-12d3-a456-426614174000`, ``, 836, 76},
	{`!format.date().validate(self).hasValue()`, `2021-13-01`, `spec.v: Invalid value: "2021-13-01": failed rule: !format.date().validate(self).hasValue()`, 836, 40},
	{`format.dns1123Label() == format.named('dns1123Label').value()`, `x`, ``, 10, 4},
	{`!format.uri().validate(self).hasValue()`, `bad`, `spec.v: Invalid value: "bad": failed rule: !format.uri().validate(self).hasValue()`, 836, 280},
	{`!format.byte().validate(self).hasValue()`, `aGVsbG8=`, ``, 836, 25},
	{`!format.datetime().validate(self).hasValue()`, `2021-01-01T00:00:00Z`, ``, 836, 58},
	{`!format.qualifiedName().validate(self).hasValue()`, `apiextensions.k8s.io/v1beta1`, ``, 836, 49},
	{`!format.dns1123SubdomainPrefix().validate(self).hasValue()`, `mysubdomain.prefix.-`, ``, 836, 49},
	{`semver(self).isGreaterThan(semver('1.2.3'))`, `1.10.0`, ``, 29, 4},
	{`semver(self).isLessThan(semver('1.0.0'))`, `1.0.0-alpha`, ``, 29, 5},
	{`semver(self) == semver('1.0.0+build')`, `1.0.0`, ``, 30, 5},
	{`semver(self).major() == 1 && semver(self).minor() == 2 && semver(self).patch() == 3`, `1.2.3`, ``, 87, 12},
	{`isSemver(self)`, `v1.0`, `spec.v: Invalid value: "v1.0": failed rule: isSemver(self)`, 27, 2},
	{`isSemver(self, true) && semver(self, true) == semver('1.0.0')`, `v1.0`, ``, 56, 6},
	{`semver(self, true).minor() == 1`, `01.01.01`, ``, 29, 4},
	{`semver(self).major() > 0`, `1.0`, `spec.v: Invalid value: "string": No Major.Minor.Patch elements found evaluating rule: semver(self).major() > 0`, 29, 4},
	{`semver(self, true).major() > 0`, `1.0-alpha`, `spec.v: Invalid value: "string": short version cannot contain PreRelease/Build meta data evaluating rule: semver(self, true).major() > 0`, 29, 4},
	{`semver(self).compareTo(semver('2.0.0')) == -1`, `1.2.3`, ``, 30, 5},
	{`semver(self).major() > 0`, `1.02.3`, `spec.v: Invalid value: "string": Minor number must not contain leading zeroes "02" evaluating rule: semver(self).major() > 0`, 29, 4},
	{`type(ip(self)) == net.IP`, `1.2.3.4`, ``, 55, 4},
	{`url(self) == url(self)`, `http://x`, ``, 80, 5},
	// The authorizer library's functions are declared (so that a CRD
	// rule calling them compiles as upstream's does) and priced, but no
	// value of its types exists in a CRD rule.
	{`dyn(self).check('get').allowed()`, `abc`, `spec.v: Invalid value: "string": 'no such overload: check(string, string)': call arguments did not match a supported operator, function or macro signature for rule: dyn(self).check('get').allowed()`, 350003, 350003},
	{`dyn(self).labelSelector(self).name('x') == dyn(self)`, `abc`, `spec.v: Invalid value: "string": 'no such overload: labelSelector(string, string)': call arguments did not match a supported operator, function or macro signature for rule: dyn(self).labelSelector(self).name('x') == dyn(self)`, 6468, 118},
	{`dyn(self).path('x') == dyn(self)`, `abc`, `spec.v: Invalid value: "string": 'no such overload: path(string, string)': call arguments did not match a supported operator, function or macro signature for rule: dyn(self).path('x') == dyn(self)`, 31, 6},
}

func TestLibraryRules(t *testing.T) {
	for _, c := range libraryCases {
		t.Run(c.rule+" on "+c.value, func(t *testing.T) {
			v := mustCompile(t, libSchema(c.rule))
			var want []string
			if c.want != "" {
				want = []string{c.want}
			}
			o := map[string]any{"spec": map[string]any{"v": c.value}}
			checkErrs(t, v.Validate(context.Background(), o, nil), want)

			est, cost := ruleCosts(t, c.rule, c.value)
			if est != c.estimate {
				t.Errorf("estimated cost %d, kube-apiserver estimates %d", est, c.estimate)
			}
			if cost != c.cost {
				t.Errorf("runtime cost %d, kube-apiserver charges %d", cost, c.cost)
			}
		})
	}
}

// ruleCosts compiles rule on a string of at most 64 characters as Compile
// does, and returns its estimated cost and its actual cost on value.
func ruleCosts(t *testing.T, rule, value string) (estimate, actual uint64) {
	t.Helper()
	base, err := baseEnv()
	if err != nil {
		t.Fatal(err)
	}
	s := mustSchema(t, `{type: string, maxLength: 64}`)
	dt := (&typeBuilder{objects: map[string]*declType{}}).build(s, "selfType", false)
	env, err := base.Extend(cel.Variable("self", dt.cel))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(rule)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	est := &estimator{root: dt}
	ce, err := env.EstimateCost(ast, est)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := env.Program(ast, programOptions(est)...)
	if err != nil {
		t.Fatal(err)
	}
	_, det, _ := prog.Eval(map[string]any{"self": value})
	if det == nil || det.ActualCost() == nil {
		t.Fatal("no runtime cost")
	}
	return ce.Max, *det.ActualCost()
}

func TestFormatErrorsInMessageExpression(t *testing.T) {
	v := mustCompile(t, `
type: object
properties:
  spec:
    type: object
    properties:
      v:
        type: string
        maxLength: 64
        x-kubernetes-validations:
        - rule: "!format.dns1123Label().validate(self).hasValue()"
          messageExpression: "'name ' + self + ': ' + format.dns1123Label().validate(self).value()[0]"
`)
	// apimachinery's NameIsDNSLabel message, as kube-apiserver v1.37 answers.
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"spec":{"v":"My_Name"}}`), nil), []string{
		`spec.v: Invalid value: "My_Name": name My_Name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
	})
	checkErrs(t, v.Validate(context.Background(), obj(t, `{"spec":{"v":"my-name"}}`), nil), nil)
}

// TestLibraryCompileErrors: rules kube-apiserver v1.37 refuses when the CRD
// is written, with its messages (the "compilation failed: " detail is
// cel-go's, on upstream's declarations).
func TestLibraryCompileErrors(t *testing.T) {
	const p = `spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[v].x-kubernetes-validations[0].rule: `
	rv := func(rule string) string {
		r, _ := json.Marshal(rule)
		return `Invalid value: {"Rule":` + string(r) + `,"Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: `
	}
	tests := []struct {
		name, rule string
		want       []string
	}{
		{
			// sign is declared as a global function, not a method.
			name: "sign is not a method", rule: "quantity(self).sign() == 1",
			want: []string{p + rv("quantity(self).sign() == 1") + `compilation failed: ERROR: <input>:1:20: found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'
 | quantity(self).sign() == 1
 | ...................^`},
		},
		{
			name: "library types are checked", rule: "isIP(cidr(self))",
			want: []string{p + rv("isIP(cidr(self))") + `compilation failed: ERROR: <input>:1:5: found no matching overload for 'isIP' applied to '(net.CIDR)'
 | isIP(cidr(self))
 | ....^`},
		},
		{
			// The jsonpatch library is only in mutating admission policies.
			name: "no jsonpatch library", rule: "jsonpatch.escapeKey(self) == self",
			want: []string{p + rv("jsonpatch.escapeKey(self) == self") + `compilation failed: ERROR: <input>:1:1: undeclared reference to 'jsonpatch' (in container '')
 | jsonpatch.escapeKey(self) == self
 | ^
ERROR: <input>:1:20: undeclared reference to 'escapeKey' (in container '')
 | jsonpatch.escapeKey(self) == self
 | ...................^`},
		},
		{
			// CRD rules have no authorizer variable.
			name: "no authorizer", rule: "authorizer.path('/healthz').check('get').allowed()",
			want: []string{p + rv("authorizer.path('/healthz').check('get').allowed()") + `compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')
 | authorizer.path('/healthz').check('get').allowed()
 | ^`},
		},
		{
			// includes (lists library version 1) arrives with the 1.37
			// environment, which new rules cannot use before 1.38.
			name: "no includes before the 1.37 compatibility version", rule: "self.includes('a')",
			want: []string{p + rv("self.includes('a')") + `compilation failed: ERROR: <input>:1:14: undeclared reference to 'includes' (in container '')
 | self.includes('a')
 | .............^`},
		},
		{
			// != of library types is not priced by upstream's estimator, so
			// cel-go takes both operands as of unbounded size.
			name: "inequality of quantities is too expensive", rule: "quantity(self) != quantity('1')",
			want: []string{
				p + costErr,
				p + `Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema`,
				`spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := compileErrs(t, libSchema(tc.rule))
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}
