package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
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

// TestOpenAPIRefsResolve: every $ref in /openapi/v2 and in each
// /openapi/v3 group version document names a definition the document
// carries, with built-in kinds, CRDs with status, /scale and selectable
// fields served: what the operations read and write (DeleteOptions,
// Patch, Status, WatchEvent, autoscaling/v1 Scale) included, as upstream
// publishes them. Clients that resolve $refs (kubectl explain, openapi
// generators, kubectl's client-side validation) then find each one.
func TestOpenAPIRefsResolve(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installWidgetCRD(t, s)
		installGearCRD(t, s, gearCRD)

		code, _, body := s.call(t, "GET", "/openapi/v2", "", nil, "Accept", "application/json")
		if code != http.StatusOK {
			t.Fatalf("GET /openapi/v2: %d", code)
		}
		var v2 struct {
			Paths       map[string]map[string]any
			Definitions map[string]map[string]any
		}
		if err := json.Unmarshal(body, &v2); err != nil {
			t.Fatal(err)
		}
		checkRefs(t, "/openapi/v2", body, "#/definitions/", func(name string) bool { return v2.Definitions[name] != nil })
		for _, name := range []string{
			"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
			"io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
			"io.k8s.api.autoscaling.v1.Scale",
		} {
			if v2.Definitions[name] == nil {
				t.Errorf("/openapi/v2 lacks %s", name)
			}
		}
		// The operations that refer to them.
		for path, ops := range map[string][]string{
			"/apis/example.kplane.dev/v1/namespaces/{namespace}/widgets/{name}/scale": {"get", "put", "patch"},
			"/api/v1/watch/namespaces/{namespace}/configmaps":                         {"get"},
			"/api/v1/watch/namespaces/{namespace}/configmaps/{name}":                  {"get"},
			"/api/v1/watch/configmaps":                                                {"get"},
			"/api/v1/namespaces/{name}/finalize":                                      {"put"},
		} {
			for _, op := range ops {
				if v2.Paths[path][op] == nil {
					t.Errorf("/openapi/v2 lacks %s %s", op, path)
				}
			}
		}
		gear := v2.Definitions["dev.kplane.apply.v1.Gear"]
		if sf, _ := json.Marshal(gear["x-kubernetes-selectable-fields"]); string(sf) != `[{"fieldPath":"spec.color"},{"fieldPath":"spec.size"}]` {
			t.Errorf("Gear's x-kubernetes-selectable-fields = %s", sf)
		}

		code, _, body = s.call(t, "GET", "/openapi/v3", "", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /openapi/v3: %d", code)
		}
		var root struct {
			Paths map[string]struct{ ServerRelativeURL string }
		}
		if err := json.Unmarshal(body, &root); err != nil {
			t.Fatal(err)
		}
		for _, gv := range []string{"api/v1", "apis/example.kplane.dev/v1", "apis/apply.kplane.dev/v1"} {
			if _, ok := root.Paths[gv]; !ok {
				t.Errorf("/openapi/v3 does not list %s", gv)
			}
		}
		for gv, p := range root.Paths {
			code, _, body := s.call(t, "GET", p.ServerRelativeURL, "", nil)
			if code != http.StatusOK {
				t.Errorf("GET %s: %d", p.ServerRelativeURL, code)
				continue
			}
			var doc struct {
				Components struct{ Schemas map[string]any }
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			checkRefs(t, gv, body, "#/components/schemas/", func(name string) bool { return doc.Components.Schemas[name] != nil })
			want := []string{"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", "io.k8s.apimachinery.pkg.apis.meta.v1.Status"}
			switch gv {
			case "apis/example.kplane.dev/v1":
				want = append(want, "io.k8s.api.autoscaling.v1.Scale", "io.k8s.api.autoscaling.v1.ScaleSpec")
			case "api/v1":
				want = append(want, "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent")
			case "apis/authorization.k8s.io/v1", "apis/authentication.k8s.io/v1":
				want = nil // reviews are only created: no deletes, patches or Status, as upstream's documents
			}
			for _, name := range want {
				if doc.Components.Schemas[name] == nil {
					t.Errorf("%s lacks %s", gv, name)
				}
			}
		}
	})
}

// checkRefs fails on each $ref in the JSON document data that does not
// start with prefix or names no definition of the document.
func checkRefs(t *testing.T, doc string, data []byte, prefix string, defined func(string) bool) {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	dangling := map[string]bool{}
	n := 0
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if ref, ok := e.(string); ok && k == "$ref" {
					n++
					if !strings.HasPrefix(ref, prefix) || !defined(strings.TrimPrefix(ref, prefix)) {
						dangling[ref] = true
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	if n == 0 {
		t.Errorf("%s: no $ref at all", doc)
	}
	var list []string
	for ref := range dangling {
		list = append(list, ref)
	}
	sort.Strings(list)
	for _, ref := range list {
		t.Errorf("%s: $ref %q resolves to nothing", doc, ref)
	}
}
