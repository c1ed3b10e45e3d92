package app

import (
	"slices"
	"testing"
)

// The --requestheader-* flags are checked as kube-apiserver checks them,
// with its errors and warnings.
func TestRequestHeaderFlags(t *testing.T) {
	for _, c := range []struct {
		name     string
		flags    RequestHeaderFlags
		err      string
		warnings []string
	}{
		{"standard", RequestHeaderFlags{UsernameHeaders: []string{"X-Remote-User"}, UIDHeaders: []string{"X-Remote-Uid"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}}, "", nil},
		{"other names", RequestHeaderFlags{UsernameHeaders: []string{"X-User"}, GroupHeaders: []string{"X-Group"}, ExtraHeaderPrefixes: []string{"X-Extra-"}}, "", []string{
			"--requestheader-username-headers is set without specifying the standard X-Remote-User header - API aggregation will not work",
			"--requestheader-group-headers is set without specifying the standard X-Remote-Group header - API aggregation will not work",
			"--requestheader-extra-headers-prefix is set without specifying the standard X-Remote-Extra- header prefix - API aggregation will not work",
		}},
		{"an empty name", RequestHeaderFlags{UsernameHeaders: []string{"X-Remote-User", " "}}, `empty value in "requestheader-username-headers"`, nil},
		{"an empty allowed name", RequestHeaderFlags{AllowedNames: []string{""}}, `empty value in "requestheader-allowed-names"`, nil},
		{"uid headers", RequestHeaderFlags{UIDHeaders: []string{"X-Uid"}}, "--requestheader-uid-headers is set without specifying the standard X-Remote-Uid header - API aggregation will not work", nil},
		{"two errors", RequestHeaderFlags{GroupHeaders: []string{""}, UIDHeaders: []string{"X-Uid"}}, `[empty value in "requestheader-group-headers", --requestheader-uid-headers is set without specifying the standard X-Remote-Uid header - API aggregation will not work]`, nil},
	} {
		warnings, err := c.flags.validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err || (c.err == "" && !slices.Equal(warnings, c.warnings)) {
			t.Errorf("%s: %q %q\nwant %q %q", c.name, got, warnings, c.err, c.warnings)
		}
	}
}
