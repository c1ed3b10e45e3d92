package crd

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// jsonPath is a printer column's JSONPath, in the syntax kubectl and
// upstream's custom resource tables read (client-go's jsonpath): fields
// (.a, and .a\.b for a key with dots), indexes and slices ([0], [-1],
// [1:3]), wildcards (.* and [*]), recursive descent (..a) and filters
// ([?(@.type=="Ready")], with == != < > <= >= against a string, number or
// boolean, or [?(@.a)] for presence). A column shows the first value
// found. A quoted key in brackets (['a.b']) finds nothing there, nor here.
type jsonPath []step

type stepKind int

const (
	stepField stepKind = iota
	stepWildcard
	stepIndex // [n] or a slice [from:to:step]
	stepFilter
	stepRecursive // descend everywhere, then apply the next step
)

type step struct {
	kind             stepKind
	name             string // stepField
	from, to, stride int    // stepIndex
	slice            bool   // stepIndex: [from:to:stride], else [from]
	hasFrom, hasTo   bool
	filter           *filter // stepFilter
}

type filter struct {
	left  jsonPath
	op    string // "exists", "==", "!=", "<", ">", "<=", ">="
	right any    // a literal (string, int64, float64, bool) or a jsonPath
}

var errNoPath = errors.New("not a JSONPath kplane reads")

// parseJSONPath parses a column's path, with or without the braces and
// the leading $ kubectl allows.
func parseJSONPath(p string) (jsonPath, error) {
	p = strings.TrimSpace(p)
	if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
		p = strings.TrimSpace(p[1 : len(p)-1])
	}
	p = strings.TrimPrefix(p, "$")
	path, rest, err := parseSteps(p)
	if err != nil {
		return nil, err
	}
	if rest != "" || len(path) == 0 {
		return nil, errNoPath
	}
	return path, nil
}

// parseSteps parses steps from the start of p up to what cannot be a step
// (the end, or an operator of a filter), and returns the rest.
func parseSteps(p string) (jsonPath, string, error) {
	var path jsonPath
	for p != "" {
		switch {
		case strings.HasPrefix(p, ".."):
			path = append(path, step{kind: stepRecursive})
			p = p[1:] // the next step starts at the second dot
		case p[0] == '.':
			p = p[1:]
			if strings.HasPrefix(p, "*") {
				path = append(path, step{kind: stepWildcard})
				p = p[1:]
				continue
			}
			name, rest := fieldName(p)
			if name == "" {
				return nil, "", errNoPath
			}
			path = append(path, step{kind: stepField, name: name})
			p = rest
		case p[0] == '[':
			end := closing(p)
			if end < 0 {
				return nil, "", errNoPath
			}
			s, err := parseBracket(strings.TrimSpace(p[1:end]))
			if err != nil {
				return nil, "", err
			}
			path = append(path, s)
			p = p[end+1:]
		default:
			return path, p, nil
		}
	}
	return path, "", nil
}

// fieldName reads a field name up to the next unescaped '.' or '[' (or a
// filter's operator, space or parenthesis); "\." is a dot in the name.
func fieldName(p string) (string, string) {
	var b strings.Builder
	i := 0
	for i < len(p) {
		c := p[i]
		if c == '\\' && i+1 < len(p) {
			b.WriteByte(p[i+1])
			i += 2
			continue
		}
		if strings.IndexByte(".[]()=!<> ", c) >= 0 {
			break
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), p[i:]
}

// closing is the index of the ']' that closes the '[' p starts with,
// skipping quoted strings and parentheses; -1 if there is none.
func closing(p string) int {
	depth := 0
	var quote byte
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ']' && depth == 0:
			return i
		}
	}
	return -1
}

func parseBracket(in string) (step, error) {
	switch {
	case in == "*":
		return step{kind: stepWildcard}, nil
	case strings.HasPrefix(in, "?(") && strings.HasSuffix(in, ")"):
		f, err := parseFilter(strings.TrimSpace(in[2 : len(in)-1]))
		return step{kind: stepFilter, filter: f}, err
	case strings.Contains(in, ":"):
		parts := strings.Split(in, ":")
		if len(parts) > 3 {
			return step{}, errNoPath
		}
		s := step{kind: stepIndex, slice: true, stride: 1}
		for i, part := range parts {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			n, err := strconv.Atoi(part)
			if err != nil {
				return step{}, errNoPath
			}
			switch i {
			case 0:
				s.from, s.hasFrom = n, true
			case 1:
				s.to, s.hasTo = n, true
			default:
				if n <= 0 {
					return step{}, errNoPath
				}
				s.stride = n
			}
		}
		return s, nil
	}
	n, err := strconv.Atoi(in)
	if err != nil {
		return step{}, errNoPath // unions ([0,1], ['a','b']) are not read
	}
	return step{kind: stepIndex, from: n, hasFrom: true}, nil
}

func parseFilter(in string) (*filter, error) {
	left, rest, err := parseOperand(in)
	if err != nil {
		return nil, err
	}
	lp, ok := left.(jsonPath)
	if !ok {
		return nil, errNoPath
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return &filter{left: lp, op: "exists"}, nil
	}
	var op string
	for _, o := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(rest, o) {
			op = o
			break
		}
	}
	if op == "" {
		return nil, errNoPath
	}
	right, rest, err := parseOperand(strings.TrimSpace(rest[len(op):]))
	if err != nil || strings.TrimSpace(rest) != "" {
		return nil, errNoPath
	}
	return &filter{left: lp, op: op, right: right}, nil
}

// parseOperand reads a filter's operand: a path from @, a quoted string,
// a number, true or false.
func parseOperand(in string) (any, string, error) {
	switch {
	case strings.HasPrefix(in, "@"):
		path, rest, err := parseSteps(in[1:])
		return path, rest, err
	case in != "" && (in[0] == '\'' || in[0] == '"'):
		end := strings.IndexByte(in[1:], in[0])
		if end < 0 {
			return nil, "", errNoPath
		}
		return in[1 : end+1], in[end+2:], nil
	}
	end := strings.IndexAny(in, " =!<>")
	if end < 0 {
		end = len(in)
	}
	lit := in[:end]
	switch lit {
	case "true", "false":
		return lit == "true", in[end:], nil
	}
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, in[end:], nil
	}
	if f, err := strconv.ParseFloat(lit, 64); err == nil {
		return f, in[end:], nil
	}
	return nil, "", errNoPath
}

// member is the top-level member of the object the path starts in ("" if
// it may read any).
func (p jsonPath) member() string {
	if len(p) > 0 && p[0].kind == stepField {
		return p[0].name
	}
	return ""
}

// first is the first value the path finds in obj. A path that fails on
// the object (an index out of range, a filter over what is not a list, a
// comparison of different types) finds nothing, as a column upstream
// then shows nothing.
func (p jsonPath) first(obj map[string]any) (any, bool) {
	if len(p) == 0 {
		return nil, false
	}
	vs, err := p.eval([]any{obj})
	if err != nil || len(vs) == 0 {
		return nil, false
	}
	return vs[0], true
}

func (p jsonPath) eval(in []any) ([]any, error) {
	cur := in
	for i := 0; i < len(p); i++ {
		s := p[i]
		var out []any
		switch s.kind {
		case stepField:
			for _, v := range cur {
				if m, ok := v.(map[string]any); ok {
					if x, ok := m[s.name]; ok {
						out = append(out, x)
					}
				}
			}
		case stepWildcard:
			for _, v := range cur {
				out = append(out, children(v)...)
			}
		case stepIndex:
			for _, v := range cur {
				list, ok := v.([]any)
				if !ok {
					return nil, errNoPath
				}
				picked, err := s.pick(list)
				if err != nil {
					return nil, err
				}
				out = append(out, picked...)
			}
		case stepFilter:
			for _, v := range cur {
				list, ok := v.([]any)
				if !ok {
					return nil, errNoPath
				}
				for _, item := range list {
					pass, err := s.filter.match(item)
					if err != nil {
						return nil, err
					}
					if pass {
						out = append(out, item)
					}
				}
			}
		case stepRecursive:
			for _, v := range cur {
				out = descend(v, out)
			}
		}
		cur = out
	}
	return cur, nil
}

// pick applies an index or slice to a list, as client-go's evalArray:
// negative indexes count from the end, and an index out of range fails.
func (s step) pick(list []any) ([]any, error) {
	n := len(list)
	from := 0
	if s.hasFrom {
		from = s.from
	}
	if from < 0 {
		from += n
	}
	if !s.slice {
		if from < 0 || from >= n {
			return nil, fmt.Errorf("array index out of bounds: index %d, length %d", from, n)
		}
		return list[from : from+1], nil
	}
	to := n
	if s.hasTo {
		to = s.to
		if to < 0 {
			to += n
		}
	}
	if to == from {
		return nil, nil
	}
	if from < 0 || from >= n || to < 0 || to > n || from > to {
		return nil, errNoPath
	}
	var out []any
	for i := from; i < to; i += s.stride {
		out = append(out, list[i])
	}
	return out, nil
}

// children are an object's values (by key, sorted) or a list's elements.
func children(v any) []any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = x[k]
		}
		return out
	case []any:
		return x
	}
	return nil
}

// descend appends v and, depth first, everything under it.
func descend(v any, out []any) []any {
	out = append(out, v)
	for _, c := range children(v) {
		out = descend(c, out)
	}
	return out
}

func (f *filter) match(item any) (bool, error) {
	lefts, err := f.left.eval([]any{item})
	if f.op == "exists" {
		return err == nil && len(lefts) > 0, nil
	}
	if err != nil {
		return false, err
	}
	if len(lefts) == 0 {
		return false, nil
	}
	if len(lefts) > 1 {
		return false, errNoPath
	}
	right := f.right
	if rp, ok := right.(jsonPath); ok {
		rights, err := rp.eval([]any{item})
		if err != nil {
			return false, err
		}
		if len(rights) != 1 {
			return false, nil
		}
		right = rights[0]
	}
	c, err := compare(lefts[0], right)
	if err != nil {
		return false, err
	}
	switch f.op {
	case "==":
		return c == 0, nil
	case "!=":
		return c != 0, nil
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	default: // ">="
		return c >= 0, nil
	}
}

// compare orders two values of the same kind (strings, integers, floats,
// booleans for equality only); values of different kinds do not compare.
func compare(a, b any) (int, error) {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y), nil
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y), nil
		}
	case bool:
		if y, ok := b.(bool); ok {
			if x == y {
				return 0, nil
			}
			return 1, nil
		}
	}
	return 0, errNoPath
}
