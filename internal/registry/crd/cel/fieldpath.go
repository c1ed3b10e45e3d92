package cel

import (
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validFieldPath parses a rule's fieldPath, a JSON path of field and map
// accessors relative to the rule's node (".spec.replicas",
// ".labels['app.kubernetes.io/name']"), checks it against the schema, and
// returns it as a field.Path. Properties are children (".name"); keys of
// additionalProperties maps are keys ("[name]"), as kube-apiserver's
// ValidFieldPath gives them.
func validFieldPath(jsonPath string, s *apiextensionsv1.JSONSchemaProps) (*field.Path, error) {
	var p *field.Path
	step := func(name string) error {
		switch {
		case s.Properties != nil:
			prop, ok := s.Properties[name]
			if !ok {
				return errors.New("does not refer to a valid field")
			}
			p, s = p.Child(name), &prop
		case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
			p, s = p.Key(name), s.AdditionalProperties.Schema
		default:
			return errors.New("does not refer to a valid field")
		}
		return nil
	}
	rest := jsonPath
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			end := strings.IndexAny(rest, ".[]")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, errors.New("unexpected end of JSON path")
			}
			if err := step(rest[:end]); err != nil {
				return nil, err
			}
			rest = rest[end:]
		case '[':
			rest = rest[1:]
			if rest == "" || rest[0] != '\'' {
				return nil, fmt.Errorf("expected single quoted string but got %s", rest)
			}
			name, n, err := unquote(rest)
			if err != nil {
				return nil, err
			}
			rest = rest[n:]
			if rest == "" || rest[0] != ']' {
				return nil, errors.New("expected ]")
			}
			rest = rest[1:]
			if err := step(name); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("expected [ or . but got: %s", rest)
		}
	}
	return p, nil
}

// unquote reads a single-quoted string with backslash escapes from the start
// of s, returning it and the number of bytes read.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			return b.String(), i + 1, nil
		case '\\':
			i++
			if i == len(s) {
				return "", 0, errors.New("unexpected end of JSON path")
			}
			r, ok := map[byte]string{'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v", '\'': "'", '\\': "\\"}[s[i]]
			if !ok {
				return "", 0, fmt.Errorf("invalid string literal: invalid escape char \\%c", s[i])
			}
			b.WriteString(r)
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, errors.New("unexpected end of JSON path")
}
