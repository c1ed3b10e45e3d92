package cel

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func compileErrs(t *testing.T, y string) []string {
	t.Helper()
	v, errs := Compile(mustSchema(t, y), schemaPath)
	if len(errs) > 0 && v != nil {
		t.Fatalf("Compile returned a Validator with errors")
	}
	return errStrings(errs)
}

func TestCompileErrors(t *testing.T) {
	got := compileErrs(t, `
type: object
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
    x-kubernetes-validations:
    - rule: "self.nope == 1"
    - rule: "self.x"
    - rule: "self.x > 0"
      messageExpression: "self.x"
`)
	// Path: <schema>.properties[spec].x-kubernetes-validations[i].rule, as
	// ValidateCustomResourceDefinitionOpenAPISchema builds it. The value is
	// the internal ValidationRule as JSON (its fields have no JSON names), the
	// detail "compilation failed: " + cel-go's issues (compileRule in
	// apiextensions-apiserver pkg/apiserver/schema/cel/compilation.go).
	want := []string{
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.nope == 1","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: compilation failed: ERROR: <input>:1:5: undefined field 'nope'
 | self.nope == 1
 | ....^`,
		// "cel expression must evaluate to a bool" (compileRule upstream).
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].rule: Invalid value: {"Rule":"self.x","Message":"","MessageExpression":"","Reason":null,"FieldPath":"","OptionalOldSelf":null}: cel expression must evaluate to a bool`,
		// "messageExpression must evaluate to a string" (compileRule upstream).
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].messageExpression: Invalid value: {"Rule":"self.x \u003e 0","Message":"","MessageExpression":"self.x","Reason":null,"FieldPath":"","OptionalOldSelf":null}: messageExpression must evaluate to a string`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got  %q\n want %q", got, want)
	}
}

func TestCompileRuleShape(t *testing.T) {
	got := compileErrs(t, `
type: object
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
    x-kubernetes-validations:
    - rule: " "
    - rule: "true"
      reason: Bogus
    - rule: "true"
      fieldPath: ".y"
    - rule: "self.x > 0"
      optionalOldSelf: true
`)
	// Messages from ValidateCustomResourceDefinitionOpenAPISchema upstream.
	want := []string{
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified`,
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[1].reason: Unsupported value: "Bogus": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"`,
		`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].fieldPath: Invalid value: ".y": must be a valid path`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got  %q\n want %q", got, want)
	}

	got = compileErrs(t, `
type: object
properties:
  spec:
    type: object
    properties:
      x: {type: integer}
    x-kubernetes-validations:
    - rule: "self.x > 0"
      optionalOldSelf: true
`)
	want = []string{`spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got  %q\n want %q", got, want)
	}
}

func TestOldSelfRefusedWhereUncorrelatable(t *testing.T) {
	got := compileErrs(t, `
type: object
properties:
  l:
    type: array
    maxItems: 10
    items:
      type: string
      maxLength: 10
      x-kubernetes-validations:
      - rule: "self == oldSelf"
`)
	// Items of lists that are not x-kubernetes-list-type=map cannot be
	// paired with their old values (forbidOldSelfValidations upstream).
	want := []string{`spec.versions[0].schema.openAPIV3Schema.properties[l].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.versions[0].schema.openAPIV3Schema.properties[l]`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n got  %q\n want %q", got, want)
	}
}

// costErr is the per-rule refusal: getCostErrorMessage("estimated rule cost",
// ...) as a Forbidden error (apiextensions-apiserver
// pkg/apis/apiextensions/validation/validation.go).
const costErr = `Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`

func TestEstimatedCost(t *testing.T) {
	const rule = `self.all(x, self.all(y, x == y || x.startsWith(y)))`
	t.Run("unbounded lists of strings are refused", func(t *testing.T) {
		got := compileErrs(t, `
type: object
properties:
  names:
    type: array
    items: {type: string}
    x-kubernetes-validations:
    - rule: "`+rule+`"
`)
		p := `spec.versions[0].schema.openAPIV3Schema`
		want := []string{
			p + `.properties[names].x-kubernetes-validations[0].rule: ` + costErr,
			// The CRD total is over too; its most expensive rules are named
			// (TotalCost upstream).
			p + `.properties[names].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema`,
			p + `: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("errors:\n got  %q\n want %q", got, want)
		}
	})
	t.Run("bounded lists of strings are accepted", func(t *testing.T) {
		v := mustCompile(t, `
type: object
properties:
  names:
    type: array
    maxItems: 10
    items: {type: string, maxLength: 10}
    x-kubernetes-validations:
    - rule: "`+rule+`"
`)
		checkErrs(t, v.Validate(context.Background(), obj(t, `{"names":["a","a"]}`), nil), nil)
	})
	t.Run("the CRD total is limited", func(t *testing.T) {
		// Each rule is within the per-rule limit; together they are over
		// the limit for the CRD (StaticEstimatedCRDCostLimit).
		var b strings.Builder
		b.WriteString("type: object\nproperties:\n")
		for i := range 30 {
			fmt.Fprintf(&b, `  l%02d:
    type: array
    maxItems: 1000
    items: {type: integer}
    x-kubernetes-validations:
    - rule: "self.all(x, self.all(y, x == y || x != y))"
`, i)
		}
		got := compileErrs(t, b.String())
		if len(got) != 5 {
			t.Fatalf("want 4 contributing rules and the total, got %q", got)
		}
		for _, g := range got[:4] {
			if !strings.HasSuffix(g, ".rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema") {
				t.Errorf("got %q", g)
			}
		}
		if !strings.HasPrefix(got[4], "spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of ") {
			t.Errorf("got %q", got[4])
		}
	})
}

func TestRuntimeCostLimit(t *testing.T) {
	// Estimated at about 4M (1000x1000 comparisons): under the 10M limit
	// for a rule, so the CRD is accepted. A full list costs more than the
	// 1M allowed for one evaluation (PerCallLimit), so it fails closed.
	v := mustCompile(t, `
type: object
properties:
  names:
    type: array
    maxItems: 1000
    items: {type: integer}
    x-kubernetes-validations:
    - rule: "self.all(x, self.all(y, x == y || x != y))"
  other:
    type: string
    x-kubernetes-validations:
    - rule: "self == 'never checked'"
`)
	l := make([]any, 1000)
	for i := range l {
		l[i] = int64(i)
	}
	got := v.Validate(context.Background(), map[string]any{"names": l, "other": "x"}, nil)
	// The message is validateExpressions' for a cancelled evaluation; no
	// other rule runs after it.
	checkErrs(t, got, []string{`names: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x == y || x != y))`})

	// A short list is fine.
	checkErrs(t, v.Validate(context.Background(), map[string]any{"names": l[:10]}, nil), nil)
}

func TestRuntimeBudgetPerObject(t *testing.T) {
	// Each evaluation stays under the per-call limit, but together they are
	// over the budget for one object (RuntimeCELCostBudget).
	var b strings.Builder
	b.WriteString("type: object\nproperties:\n")
	for i := range 30 {
		fmt.Fprintf(&b, `  l%02d:
    type: array
    maxItems: 300
    items: {type: integer}
    x-kubernetes-validations:
    - rule: "self.all(x, self.all(y, x == y || x != y))"
`, i)
	}
	v := mustCompile(t, b.String())
	l := make([]any, 300)
	for i := range l {
		l[i] = int64(i)
	}
	o := map[string]any{}
	for i := range 30 {
		o[fmt.Sprintf("l%02d", i)] = l
	}
	got := errStrings(v.Validate(context.Background(), o, nil))
	// validateExpressions upstream, when a rule's actual cost is over what
	// is left of the budget.
	want := `: Invalid value: "array": validation failed due to running out of cost budget, no further validation rules will be run`
	if len(got) != 1 || !strings.HasSuffix(got[0], want) {
		t.Fatalf("got %q, want one error ending in %q", got, want)
	}
}
