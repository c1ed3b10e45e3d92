package core

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// checkFieldRef checks that ref is a JSONPath kubectl's parser accepts
// (ref wrapped in braces, as upstream's validation of an expression
// warning's fieldRef parses it), with that parser's words for the
// common mistakes: an unclosed bracket, quote or action, a character it
// does not know, an array index that is not one. client-go's parser is
// not imported: the server does not depend on the client library.
// Filters ([?(...)]) are only checked for their end.
func checkFieldRef(ref string) error {
	s := ref
	for s != "" {
		switch {
		case strings.HasPrefix(s, "[?("):
			end := strings.Index(s, ")]")
			if end < 0 {
				return fmt.Errorf("unterminated filter")
			}
			s = s[end+2:]
			continue
		case strings.HasPrefix(s, ".."):
			s = s[2:]
			if strings.HasPrefix(s, "..") {
				return fmt.Errorf("invalid multiple recursive descent")
			}
			continue
		}
		r := []rune(s)[0]
		switch {
		case r == '\n' || r == '\r':
			return fmt.Errorf("unclosed action")
		case r == ' ' || r == '@' || r == '$':
			s = s[1:]
		case r == '}':
			// The action ends; text follows, up to the next action.
			next := strings.IndexByte(s, '{')
			if next < 0 {
				return nil
			}
			s = s[next+1:]
		case r == '[':
			end := strings.IndexAny(s, "]\n")
			if end < 0 || s[end] == '\n' {
				return fmt.Errorf("unterminated array")
			}
			if err := checkArrayIndex(s[1:end]); err != nil {
				return err
			}
			s = s[end+1:]
		case r == '"' || r == '\'':
			end := strings.IndexRune(s[1:], r)
			if end < 0 {
				return fmt.Errorf("unterminated quoted string")
			}
			s = s[end+2:]
		case r == '.' || r == '_' || r == '+' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r):
			s = skipField(s[1:])
		default:
			return fmt.Errorf("unrecognized character in action: %#U", r)
		}
	}
	return nil
}

// skipField skips a field's name or an identifier: up to a space, an
// end of line, or one of .,[]$@{} (a backslash escapes the next
// character).
func skipField(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ' ', '\t', '\n', '\r', '.', ',', '[', ']', '$', '@', '{', '}':
			return s[i:]
		}
	}
	return ""
}

var (
	fieldRefDictKey = regexp.MustCompile(`^'([^']*)'$`)
	fieldRefSlice   = regexp.MustCompile(`^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$`)
)

// checkArrayIndex checks what is between brackets: "*", a quoted key, a
// slice, or a union of those.
func checkArrayIndex(text string) error {
	if text == "*" {
		return nil
	}
	if parts := strings.Split(text, ","); len(parts) > 1 {
		for _, p := range parts {
			if err := checkArrayIndex(strings.Trim(p, " ")); err != nil {
				return err
			}
		}
		return nil
	}
	if fieldRefDictKey.MatchString(text) || fieldRefSlice.MatchString(text) {
		return nil
	}
	return fmt.Errorf("invalid array index %s", text)
}
