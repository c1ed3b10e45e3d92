package openapi

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestMatchesSourceMarkers checks the definitions against the +markers
// upstream writes in the comments of the Go types (the input of
// kube-openapi's generator, which reflection cannot see): +listType,
// +listMapKey, +mapType, +structType, +optional, +required and +default,
// read from the source of the module versions this build uses. It is the
// check that the table in markers.go is complete and still true after a
// k8s.io/api upgrade.
func TestMatchesSourceMarkers(t *testing.T) {
	defs := servedDefinitions(t)
	pkgs := []string{
		"k8s.io/api/admissionregistration/v1",
		"k8s.io/api/authentication/v1",
		"k8s.io/api/authorization/v1",
		"k8s.io/api/certificates/v1",
		"k8s.io/api/core/v1",
		"k8s.io/api/coordination/v1",
		"k8s.io/api/events/v1",
		"k8s.io/api/flowcontrol/v1",
		"k8s.io/api/rbac/v1",
		"k8s.io/api/storagemigration/v1",
		"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1",
		"k8s.io/apimachinery/pkg/apis/meta/v1",
	}
	out, err := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}={{.Dir}}"}, pkgs...)...).Output()
	if err != nil {
		t.Skipf("cannot locate the k8s.io sources: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, "=")
		for _, st := range parseStructs(t, dir) {
			name := restFriendly(path) + "." + st.name
			def, ok := defs[name]
			if !ok {
				continue
			}
			checked++
			for _, d := range st.check(name, def) {
				t.Error(d)
			}
		}
	}
	if checked < 60 {
		t.Errorf("checked %d definitions against their source, want every struct one (60 or more)", checked)
	}
}

func restFriendly(path string) string {
	parts := strings.Split(path, "/")
	domain := strings.Split(parts[0], ".")
	slices.Reverse(domain)
	parts[0] = strings.Join(domain, ".")
	return strings.Join(parts, ".")
}

type sourceStruct struct {
	name    string
	markers map[string][]string // type-level markers
	fields  []sourceField
}

type sourceField struct {
	json     string
	goName   string
	omit     bool
	list     bool
	tag      reflect.StructTag
	markers  map[string][]string
	embedded bool
}

func parseStructs(t *testing.T, dir string) []sourceStruct {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sourceStruct
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.TYPE {
				continue
			}
			for _, spec := range gen.Specs {
				ts := spec.(*ast.TypeSpec)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				s := sourceStruct{name: ts.Name.Name, markers: markers(gen.Doc, ts.Doc)}
				for _, fld := range st.Fields.List {
					var tag reflect.StructTag
					if fld.Tag != nil {
						raw, _ := strconv.Unquote(fld.Tag.Value)
						tag = reflect.StructTag(raw)
					}
					name, opts, _ := strings.Cut(tag.Get("json"), ",")
					if name == "-" {
						continue
					}
					arr, isList := fld.Type.(*ast.ArrayType)
					if isList {
						if elt, ok := arr.Elt.(*ast.Ident); ok && elt.Name == "byte" {
							isList = false // []byte is a base64 string
						}
					}
					if ident, ok := fld.Type.(*ast.Ident); ok && ident.Name == "Verbs" {
						isList = true
					}
					goName := ""
					if len(fld.Names) > 0 {
						goName = fld.Names[0].Name
					}
					s.fields = append(s.fields, sourceField{
						json:     name,
						goName:   goName,
						omit:     hasOpt(opts, "omitempty"),
						list:     isList,
						tag:      tag,
						markers:  markers(fld.Doc),
						embedded: len(fld.Names) == 0 && name == "",
					})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// markers collects "+key=value" comment lines, as gengo's
// ExtractCommentTags reads them.
func markers(groups ...*ast.CommentGroup) map[string][]string {
	m := make(map[string][]string)
	for _, g := range groups {
		if g == nil {
			continue
		}
		for _, c := range g.List {
			line := strings.TrimSpace(strings.TrimPrefix(c.Text, "//"))
			if !strings.HasPrefix(line, "+") {
				continue
			}
			key, value, _ := strings.Cut(line[1:], "=")
			m[key] = append(m[key], value)
		}
	}
	return m
}

// check lists how def differs from what upstream's markers on s say.
func (s sourceStruct) check(name string, def any) []string {
	d := def.(interface{ MarshalJSON() ([]byte, error) })
	raw, _ := d.MarshalJSON()
	var schema struct {
		Required   []string                  `json:"required"`
		Properties map[string]map[string]any `json:"properties"`
		MapType    any                       `json:"x-kubernetes-map-type"`
		Unions     any                       `json:"x-kubernetes-unions"`
	}
	_ = json.Unmarshal(raw, &schema)
	var out []string
	add := func(format string, args ...any) { out = append(out, name+": "+fmt.Sprintf(format, args...)) }

	if want := first(s.markers["structType"]); want != "" && schema.MapType != want {
		add("x-kubernetes-map-type = %v, +structType=%s", schema.MapType, want)
	}
	var union any
	if s.markers["union"] != nil {
		members := map[string]any{}
		u := map[string]any{"fields-to-discriminateBy": members}
		for _, f := range s.fields {
			if f.markers["unionDiscriminator"] != nil {
				u["discriminator"] = f.json
			} else if f.json != "" {
				members[f.json] = f.goName
			}
		}
		union = []any{u}
	}
	if !reflect.DeepEqual(schema.Unions, union) {
		add("x-kubernetes-unions = %v, upstream %v", schema.Unions, union)
	}
	for _, f := range s.fields {
		if f.embedded || f.json == "" {
			continue
		}
		prop := schema.Properties[f.json]
		if prop == nil {
			add("no property %s", f.json)
			continue
		}
		required := f.markers["required"] != nil || (!f.omit && f.markers["optional"] == nil)
		if slices.Contains(schema.Required, f.json) != required {
			add("%s required = %v, upstream %v", f.json, !required, required)
		}
		if f.list {
			var want any
			keys := f.markers["listMapKey"]
			if lt := first(f.markers["listType"]); lt != "" {
				want = lt
			} else {
				strategy, key := f.tag.Get("patchStrategy"), f.tag.Get("patchMergeKey")
				switch {
				case hasOpt(strategy, "merge") && key != "":
					want, keys = "map", []string{key}
				case hasOpt(strategy, "merge"):
					want = "set"
				default:
					want = nil // unmarked, as upstream publishes it
				}
			}
			if prop[extListType] != want {
				add("%s list type = %v, upstream %s", f.json, prop[extListType], want)
			}
			var got []string
			if k, ok := prop[extListMapKeys].([]any); ok {
				for _, v := range k {
					got = append(got, v.(string))
				}
			}
			if want == "map" && !slices.Equal(got, keys) {
				add("%s list map keys = %v, upstream %v", f.json, got, keys)
			}
		}
		if want := first(f.markers["mapType"]); want != "" && prop[extMapType] != want {
			add("%s map type = %v, upstream %s", f.json, prop[extMapType], want)
		}
		if dv := f.markers["default"]; dv != nil {
			var want any
			if err := json.Unmarshal([]byte(dv[0]), &want); err != nil {
				want = dv[0]
			}
			if !reflect.DeepEqual(prop["default"], want) {
				add("%s default = %#v, upstream %#v", f.json, prop["default"], want)
			}
		}
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
