package schema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// TestAcceptorAgreesWithOpenAPI is the acceptor's differential test: on
// random schemas and values (built to be valid about half the time), a
// value the acceptor accepts must be one kube-openapi finds valid. With
// only the keywords the acceptor models (and no integral float64 under an
// integer type, which it leaves to kube-openapi), the two must agree
// exactly, so the fast path is also taken whenever it could be.
func TestAcceptorAgreesWithOpenAPI(t *testing.T) {
	for _, exact := range []bool{true, false} {
		g := &schemaGen{r: rand.New(rand.NewPCG(7, uint64(map[bool]int{true: 1}[exact]))), exact: exact}
		var n tally
		for range 10000 {
			n.add(checkAcceptor(t, g))
		}
		t.Logf("exact %v: %d cases, %d valid, %d accepted", exact, n.cases, n.valid, n.accepted)
		if n.valid < n.cases/5 || n.cases-n.valid < n.cases/5 {
			t.Errorf("exact %v: %d of %d valid: the generator should make both kinds", exact, n.valid, n.cases)
		}
	}
}

// FuzzAcceptor runs the same check from fuzzed generator seeds:
//
//	go test ./internal/registry/crd/schema -run XXX -fuzz FuzzAcceptor -fuzztime 60s
func FuzzAcceptor(f *testing.F) {
	f.Add(uint64(1), uint64(2), true)
	f.Add(uint64(3), uint64(4), false)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, exact bool) {
		checkAcceptor(t, &schemaGen{r: rand.New(rand.NewPCG(s1, s2)), exact: exact})
	})
}

type tally struct{ cases, valid, accepted int }

func (t *tally) add(o tally) {
	t.cases += o.cases
	t.valid += o.valid
	t.accepted += o.accepted
}

// checkAcceptor makes one schema and eight values and compares the
// acceptor with kube-openapi on each.
func checkAcceptor(t *testing.T, g *schemaGen) (n tally) {
	t.Helper()
	props := g.schema(0)
	s, err := New(props)
	if err != nil {
		return n // an unparsable default or the like: New refuses it
	}
	for range 8 {
		x := g.value(props, 0)
		n.cases++
		ok := s.accept.accept(x)
		res := validate.NewSchemaValidator(s.openapi, nil, "", strfmt.Default).Validate(x)
		if ok {
			n.accepted++
		}
		if res.IsValid() {
			n.valid++
		}
		if ok && !res.IsValid() || g.exact && !ok && res.IsValid() {
			sj, _ := json.Marshal(props)
			xj, _ := json.Marshal(x)
			t.Fatalf("exact %v: acceptor says %v, kube-openapi %v %v\nschema %s\nvalue  %s (%#v)",
				g.exact, ok, res.IsValid(), res.Errors, sj, xj, x)
		}
	}
	return n
}

// schemaGen makes random schemas and values for them. With exact set it
// keeps to what the acceptor models.
type schemaGen struct {
	r     *rand.Rand
	exact bool
}

func (g *schemaGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *schemaGen) chance(p float64) bool    { return g.r.Float64() < p }

func (g *schemaGen) i64p(lo, hi int64) *int64 {
	v := lo + g.r.Int64N(hi-lo+1)
	return &v
}

func (g *schemaGen) f64p(xs ...float64) *float64 {
	v := xs[g.r.IntN(len(xs))]
	return &v
}

func rawJSON(x any) apiextensionsv1.JSON {
	b, _ := json.Marshal(x)
	return apiextensionsv1.JSON{Raw: b}
}

var fieldNames = []string{"a", "b", "c", "d", "e"}

func (g *schemaGen) schema(depth int) *apiextensionsv1.JSONSchemaProps {
	s := &apiextensionsv1.JSONSchemaProps{}
	types := []string{"object", "array", "string", "integer", "number", "boolean", ""}
	if depth >= 3 {
		types = types[2:]
	}
	s.Type = types[g.r.IntN(len(types))]
	s.Nullable = g.chance(0.2)
	switch s.Type {
	case "string", "":
		if g.chance(0.3) {
			s.MaxLength = g.i64p(0, 6)
		}
		if g.chance(0.3) {
			s.MinLength = g.i64p(0, 4)
		}
		if g.chance(0.3) {
			s.Pattern = g.pick("^[a-z]+$", "^a", "[0-9]", "^$", "é")
			if !g.exact && g.chance(0.2) {
				s.Pattern = "(" // kube-openapi fails every string
			}
		}
		if g.chance(0.4) {
			s.Format = g.pick("date-time", "email", "duration", "uuid", "byte", "hostname", "k8s-short-name",
				"int32", "date", "ipv4", "not-a-format", "datetime")
		}
	case "integer", "number":
		if g.chance(0.4) {
			s.Format = g.pick("int32", "int32", "int64", "float", "float", "double", "uint8")
		}
		if g.chance(0.4) {
			s.Maximum = g.f64p(0, 5, 100, 2.5, 3e9, -3e9, 1e39)
			s.ExclusiveMaximum = g.chance(0.3)
		}
		if g.chance(0.4) {
			s.Minimum = g.f64p(0, -5, 1, 2.5, -3e9, 3e9, -1e39)
			s.ExclusiveMinimum = g.chance(0.3)
		}
		if g.chance(0.3) {
			s.MultipleOf = g.f64p(1, 2, 5, 0.5, 3e9, 5e38)
		}
	case "array":
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: g.schema(depth + 1)}
		if g.chance(0.3) {
			s.MaxItems = g.i64p(0, 3)
		}
		if g.chance(0.3) {
			s.MinItems = g.i64p(0, 2)
		}
		if !g.exact && g.chance(0.1) {
			s.UniqueItems = true
		}
	case "object":
		switch g.r.IntN(4) {
		case 0, 1:
			s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			for _, k := range fieldNames[:1+g.r.IntN(4)] {
				s.Properties[k] = *g.schema(depth + 1)
			}
			for k := range s.Properties {
				if g.chance(0.3) {
					s.Required = append(s.Required, k)
				}
			}
			if g.chance(0.2) {
				s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: false}
			}
		case 2:
			s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: g.schema(depth + 1)}
		}
		if g.chance(0.2) {
			s.MaxProperties = g.i64p(0, 3)
		}
		if g.chance(0.2) {
			s.MinProperties = g.i64p(0, 2)
		}
		if !g.exact && g.chance(0.1) {
			s.PatternProperties = map[string]apiextensionsv1.JSONSchemaProps{"^a": {Type: "string"}}
		}
	}
	if s.Type != "object" && s.Type != "array" && g.chance(0.2) {
		// Enum values of mixed types: kube-openapi converts the value to
		// each one's type (an int64 65 matches "A").
		for range 1 + g.r.IntN(3) {
			s.Enum = append(s.Enum, rawJSON(g.scalar("")))
		}
		if g.chance(0.2) {
			s.Enum = append(s.Enum, rawJSON(65), rawJSON("A"), rawJSON(nil))
		}
	}
	if s.Type == "" && g.chance(0.3) {
		// int-or-string, as controller-gen writes it.
		s.XIntOrString = true
		s.AnyOf = []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
	} else if g.chance(0.15) && depth < 3 {
		for range 1 + g.r.IntN(2) {
			s.AllOf = append(s.AllOf, *g.constraint())
		}
	} else if g.chance(0.15) && depth < 3 {
		for range 1 + g.r.IntN(2) {
			s.AnyOf = append(s.AnyOf, *g.constraint())
		}
	}
	if !g.exact && g.chance(0.05) {
		s.OneOf = []apiextensionsv1.JSONSchemaProps{*g.constraint(), *g.constraint()}
	}
	if !g.exact && g.chance(0.05) {
		s.Not = g.constraint()
	}
	return s
}

// constraint is a value validation without a type, as allOf and anyOf
// carry in a structural schema (and some with one, as they may not).
func (g *schemaGen) constraint() *apiextensionsv1.JSONSchemaProps {
	c := &apiextensionsv1.JSONSchemaProps{}
	switch g.r.IntN(5) {
	case 0:
		c.MaxLength = g.i64p(0, 5)
	case 1:
		c.Maximum = g.f64p(3, 10)
	case 2:
		c.Required = []string{g.pick(fieldNames...)}
	case 3:
		c.MaxItems = g.i64p(0, 2)
	case 4:
		c.Type = g.pick("string", "integer", "object")
	}
	return c
}

// scalar is a value of type typ (or of any scalar type).
func (g *schemaGen) scalar(typ string) any {
	if typ == "" {
		typ = g.pick("string", "integer", "number", "boolean")
	}
	switch typ {
	case "string":
		return g.pick("", "a", "abc", "abcdefgh", "A", "x9", "2024-01-02T03:04:05Z", "1h30m", "3 days",
			"ops@example.com", "not an email", "6a2f41a3-c54c-fce8-32d2-0324e1c32e22", "aGVsbG8=", "é", "Bad_Name", "10.0.0.1")
	case "integer":
		return []int64{0, 1, 2, 3, 5, 7, 10, 65, 100, -1, -7, 3000000000, -3000000000, 1 << 40}[g.r.IntN(14)]
	case "number":
		xs := []float64{0.5, 2.5, -1.5, 3.25, 1e20, 4e38, -4e38, 1.5e-50}
		if !g.exact {
			xs = append(xs, 2, 10, 0, 3e9)
		}
		return xs[g.r.IntN(len(xs))]
	default:
		return g.chance(0.5)
	}
}

// value makes a value for s: mostly of its shape, sometimes not.
func (g *schemaGen) value(s *apiextensionsv1.JSONSchemaProps, depth int) any {
	if g.chance(0.06) {
		return nil
	}
	if g.chance(0.08) || depth > 4 {
		return g.anyValue(depth)
	}
	if len(s.Enum) > 0 && g.chance(0.5) {
		var x any
		_ = json.Unmarshal(s.Enum[g.r.IntN(len(s.Enum))].Raw, &x)
		if f, ok := x.(float64); ok && f == float64(int64(f)) {
			x = int64(f)
		}
		return x
	}
	switch s.Type {
	case "object":
		m := map[string]any{}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			for _, k := range fieldNames[:g.r.IntN(4)] {
				m[k] = g.value(s.AdditionalProperties.Schema, depth+1)
			}
		}
		for k, p := range s.Properties {
			if g.chance(0.7) {
				m[k] = g.value(&p, depth+1)
			}
		}
		if g.chance(0.1) {
			m["zz"] = g.scalar("")
		}
		return m
	case "array":
		l := make([]any, g.r.IntN(4))
		for i := range l {
			l[i] = g.value(s.Items.Schema, depth+1)
		}
		return l
	case "":
		if s.XIntOrString {
			return g.scalar(g.pick("integer", "string"))
		}
		return g.scalar("")
	}
	return g.scalar(s.Type)
}

func (g *schemaGen) anyValue(depth int) any {
	switch g.r.IntN(6) {
	case 0:
		if depth < 4 {
			return []any{g.scalar(""), g.anyValue(depth + 1)}
		}
	case 1:
		if depth < 4 {
			return map[string]any{g.pick(fieldNames...): g.anyValue(depth + 1)}
		}
	}
	return g.scalar("")
}

// TestAcceptorRefusesOddGoTypes: a value of a Go type the registry never
// hands over goes to kube-openapi.
func TestAcceptorRefusesOddGoTypes(t *testing.T) {
	s, err := New(&apiextensionsv1.JSONSchemaProps{Type: "integer"})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []any{int(1), int32(1), uint64(1), float32(1), json.Number("1"), []string{"a"}, map[string]string{}} {
		if s.accept.accept(x) {
			t.Errorf("%T accepted", x)
		}
	}
	if !s.accept.accept(int64(1)) {
		t.Error("int64 refused")
	}
	if got := fmt.Sprint(s.accept.accept(nil)); got != "false" {
		t.Errorf("null for a non-nullable integer: accepted")
	}
}
