package kplane_test

// This test keeps the folder tree honest: imports point down the layers of
// DESIGN.md, cmd → app → apiserver → registry → watchcache → storage → kv,
// and only app (and tests) pick a concrete kv engine.

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/kplane-dev/kplane"

// layers, lowest first. A package belongs to the longest prefix that
// matches its path.
var layers = []string{
	"internal/kv",
	"internal/storage",
	"internal/storage/watchcache",
	"internal/registry",
	"internal/apiserver",
	"internal/app",
	"cmd",
	"examples",
}

// engines may be imported only by app, by tests, and from inside themselves.
var engines = []string{"internal/kv/mvcc", "internal/kv/etcdkv"}

// forbidden are modules no kplane code may import: they hold the machinery
// kplane exists to build.
var forbidden = []string{"k8s.io/apiserver", "k8s.io/kubernetes"}

// clientOnly are client libraries: tests, examples and the load generator
// (cmd/kplane-bench, a client by nature) use them; the kplane binary does
// not (it is the server they talk to).
var clientOnly = []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime"}

// checkExternal says why importer may not import the module-external path
// imported, or returns nil.
func checkExternal(importer, imported string, test bool) error {
	for _, f := range forbidden {
		if within(imported, f) {
			return fmt.Errorf("%s imports %s: kplane builds that machinery itself", importer, imported)
		}
	}
	for _, c := range clientOnly {
		if within(imported, c) && !test && !within(importer, "examples") && !within(importer, "test") && !within(importer, "cmd/kplane-bench") {
			return fmt.Errorf("%s imports the client library %s outside tests and examples", importer, imported)
		}
	}
	return nil
}

func TestCheckExternalRules(t *testing.T) {
	for _, c := range []struct {
		importer, imported string
		test, ok           bool
	}{
		{"internal/apiserver", "k8s.io/apimachinery/pkg/apis/meta/v1", false, true},
		{"internal/apiserver", "k8s.io/apiserver/pkg/endpoints", false, false},
		{"test/e2e", "k8s.io/kubernetes/pkg/api", true, false},
		{"internal/registry", "k8s.io/client-go/kubernetes", false, false},
		{"internal/registry", "k8s.io/client-go/kubernetes", true, true},
		{"examples/foo-operator/controller", "sigs.k8s.io/controller-runtime", false, true},
		{"test/e2e", "k8s.io/client-go/dynamic", false, true},
		{"cmd/kplane-bench", "k8s.io/client-go/kubernetes", false, true},
		{"cmd/kplane", "k8s.io/client-go/kubernetes", false, false},
	} {
		err := checkExternal(c.importer, c.imported, c.test)
		if (err == nil) != c.ok {
			t.Errorf("checkExternal(%s, %s, test=%v) = %v, want ok=%v", c.importer, c.imported, c.test, err, c.ok)
		}
	}
}

func rank(pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		if (pkg == l || strings.HasPrefix(pkg, l+"/")) && len(l) > bestLen {
			best, bestLen = i, len(l)
		}
	}
	return best
}

func within(pkg, root string) bool { return pkg == root || strings.HasPrefix(pkg, root+"/") }

// isTestSupport reports packages that exist for tests (kvtest, etcdtest,
// storagetest): only tests and other test-support packages may import them.
func isTestSupport(pkg string) bool { return strings.HasSuffix(filepath.Base(pkg), "test") }

// checkImport says why importer may not import imported (both paths relative
// to the module root), or returns nil. test is true for _test.go files.
func checkImport(importer, imported string, test bool) error {
	ri, rj := rank(importer), rank(imported)
	if ri < 0 || rj < 0 {
		return nil // outside the layered tree (e.g. the module root's tests)
	}
	if isTestSupport(imported) && !test && !isTestSupport(importer) {
		return fmt.Errorf("%s imports test-support package %s outside a test", importer, imported)
	}
	if test {
		return nil
	}
	if rj > ri {
		return fmt.Errorf("%s (layer %s) imports %s from the higher layer %s", importer, layers[ri], imported, layers[rj])
	}
	for _, e := range engines {
		if within(imported, e) && !within(importer, e) && !within(importer, "internal/app") && !isTestSupport(importer) {
			return fmt.Errorf("%s imports the engine %s: only internal/app picks engines", importer, imported)
		}
	}
	return nil
}

func TestCheckImportRules(t *testing.T) {
	for _, c := range []struct {
		importer, imported string
		test, ok           bool
	}{
		{"internal/storage", "internal/kv", false, true},
		{"internal/kv", "internal/storage", false, false},
		{"internal/storage/watchcache", "internal/storage", false, true},
		{"internal/storage", "internal/storage/watchcache", false, false},
		{"internal/registry", "internal/apiserver", false, false},
		{"internal/app", "internal/kv/mvcc", false, true},
		{"internal/storage", "internal/kv/mvcc", false, false},
		{"internal/kv", "internal/kv/etcdkv", false, false},
		{"internal/kv/mvcc", "internal/kv/mvcc/wal", false, true},
		{"internal/kv/etcdkv", "internal/kv/mvcc", false, false},
		{"internal/kv/mvcc", "internal/kv/kvtest", false, false},
		{"internal/kv/mvcc", "internal/kv/kvtest", true, true},
		{"internal/kv/kvtest", "internal/kv/mvcc", true, true},
		{"cmd/kplane", "internal/app", false, true},
		{"internal/app", "cmd/kplane", false, false},
	} {
		err := checkImport(c.importer, c.imported, c.test)
		if (err == nil) != c.ok {
			t.Errorf("checkImport(%s, %s, test=%v) = %v, want ok=%v", c.importer, c.imported, c.test, err, c.ok)
		}
	}
}

func TestImportsPointDown(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// tools/ holds separate modules; testdata and dot-dirs aren't code.
			if path != "." && (d.Name() == "tools" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		importer := filepath.ToSlash(filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module+"/") {
				if err := checkExternal(importer, p, strings.HasSuffix(path, "_test.go")); err != nil {
					t.Errorf("%s: %v", path, err)
				}
				continue
			}
			if err := checkImport(importer, strings.TrimPrefix(p, module+"/"), strings.HasSuffix(path, "_test.go")); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("found no Go files: is the test running at the module root?")
	}
	if _, err := os.Stat("internal/kv/doc.go"); err != nil {
		t.Fatalf("the kv layer is missing: %v", err)
	}
}
