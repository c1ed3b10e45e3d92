package cel

import (
	"context"
	"testing"
)

// TestFormattedStrings: a string with format duration or date-time is a CEL
// duration or timestamp, parsed as upstream parses it (apiserver
// cel/common/valuesunstructured.go: kube-openapi's strfmt.ParseDuration and
// ParseDateTime), so it accepts what the OpenAPI format check accepts:
// "1d" and "2w" durations, date-times without an offset.
func TestFormattedStrings(t *testing.T) {
	v := mustCompile(t, `
type: object
properties:
  spec:
    type: object
    properties:
      ttl:
        type: string
        format: duration
        maxLength: 20
        x-kubernetes-validations:
        - rule: "self <= duration('168h')"
          message: ttl must be at most a week
      at:
        type: string
        format: date-time
        maxLength: 40
        x-kubernetes-validations:
        - rule: "self > timestamp('2020-01-01T00:00:00Z')"
          message: at must be after 2020
`)
	for _, c := range []struct {
		obj  string
		want []string
	}{
		{`{"spec":{"ttl":"1h30m"}}`, nil},
		{`{"spec":{"ttl":"1d"}}`, nil},
		{`{"spec":{"ttl":"1w"}}`, nil},
		{`{"spec":{"ttl":"3 days"}}`, nil},
		{`{"spec":{"ttl":"2w"}}`, []string{`spec.ttl: Invalid value: "2w": ttl must be at most a week`}},
		{`{"spec":{"at":"2030-01-02T03:04:05Z"}}`, nil},
		{`{"spec":{"at":"2030-01-02T03:04:05"}}`, nil}, // ISO 8601 local time, which strfmt also parses
		{`{"spec":{"at":"2019-01-02T03:04:05Z"}}`, []string{`spec.at: Invalid value: "2019-01-02T03:04:05Z": at must be after 2020`}},
	} {
		t.Run(c.obj, func(t *testing.T) {
			checkErrs(t, v.Validate(context.Background(), obj(t, c.obj), nil), c.want)
		})
	}
}
