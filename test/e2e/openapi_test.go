package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestExplain runs kubectl explain against the published OpenAPI: v3 per
// group version (kubectl's default) and v2 (--output plaintext-openapiv2,
// protobuf).
func TestExplain(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		for _, c := range []struct {
			name string
			args []string
			want []string // regexps
		}{
			{"configmap.data", []string{"explain", "configmap.data"},
				[]string{`(?m)^KIND:\s+ConfigMap$`, `(?m)^FIELD:\s+data <map\[string\]string>$`, `Data contains the configuration data`}},
			{"lease.spec.holderIdentity", []string{"explain", "lease.spec.holderIdentity"},
				[]string{`(?m)^GROUP:\s+coordination\.k8s\.io$`, `(?m)^FIELD:\s+holderIdentity <string>$`, `holderIdentity contains the identity`}},
			{"configmap.data from v2", []string{"explain", "configmap.data", "--output", "plaintext-openapiv2"},
				[]string{`(?m)^FIELD:\s+data <map\[string\]string>$`, `Data contains the configuration data`}},
		} {
			t.Run(c.name, func(t *testing.T) {
				out := s.mustKubectl(t, c.args...)
				for _, re := range c.want {
					if !regexp.MustCompile(re).MatchString(out) {
						t.Errorf("kubectl %s lacks %s:\n%s", strings.Join(c.args, " "), re, out)
					}
				}
			})
		}

		t.Run("foo.spec", func(t *testing.T) {
			installFooCRD(t, s)
			for _, args := range [][]string{{"explain", "foo.spec"}, {"explain", "foo.spec", "--output", "plaintext-openapiv2"}} {
				var out string
				eventually(t, 10*time.Second, "kubectl "+strings.Join(args, " "), func() (bool, string) {
					o, e, err := s.kubectl(args...)
					out = o
					return err == nil, o + e
				})
				for _, re := range []string{`(?m)^KIND:\s+Foo$`, `FooSpec is the desired state of a Foo`, `(?m)^\s+foo\s+<string>$`, `Foo is an arbitrary string`} {
					if !regexp.MustCompile(re).MatchString(out) {
						t.Errorf("kubectl %s lacks %s:\n%s", strings.Join(args, " "), re, out)
					}
				}
			}
		})
	})
}

// TestOpenAPIValidation: kubectl apply --validate=strict of an object with
// an unknown field. The server's OpenAPI advertises ?fieldValidation on
// every patch operation, so kubectl (1.27+) sends fieldValidation=Strict
// and lets the server refuse the object, as against kube-apiserver; it
// would only validate against /openapi/v2 itself if the server did not.
// The error is the decoder's, as apiserver's transformDecodeError words
// it.
func TestOpenAPIValidation(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		for _, c := range []struct {
			name, file, yaml, want string
		}{
			{"ConfigMap", "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\nbogus: 1\n",
				`Error from server (BadRequest): error when creating "%s": ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus"`},
			{"Foo", "foo.yaml", "apiVersion: webapp.my.domain/v1\nkind: Foo\nmetadata:\n  name: foo\nspec:\n  foo: x\n  bogus: 1\n",
				`Error from server (BadRequest): error when creating "%s": Foo in version "v1" cannot be handled as a Foo: strict decoding error: unknown field "spec.bogus"`},
		} {
			t.Run(c.name, func(t *testing.T) {
				path := writeFile(t, c.file, c.yaml)
				out, errOut, err := s.kubectl("apply", "--validate=strict", "-f", path)
				if err == nil {
					t.Fatalf("apply of an unknown field succeeded: %s", out)
				}
				if want := strings.Replace(c.want, "%s", path, 1); strings.TrimSpace(errOut) != want {
					t.Errorf("apply --validate=strict:\n got %s\nwant %s", strings.TrimSpace(errOut), want)
				}
			})
		}
	})
}
