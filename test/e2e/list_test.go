package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// JSON lists are written from the stored JSON as it is (storage.Record);
// YAML lists go through decoded objects. The two must be the same list,
// for every shape of list: whole, selected, paged (from the cache's
// history while writes land between pages), at an exact resourceVersion,
// and for a custom resource read at a version other than its stored one
// (whose items must be presented, not served as stored).
func TestListFromStoredJSON(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		s.mustKubectl(t, "create", "namespace", "lists")
		for i := range 30 {
			s.mustKubectl(t, "create", "configmap", fmt.Sprintf("cm-%02d", i), "-n", "lists",
				"--from-literal=k=<v>&\u00e9"+fmt.Sprint(i))
			if i%3 == 0 {
				s.mustKubectl(t, "label", "configmap", fmt.Sprintf("cm-%02d", i), "-n", "lists", "tier=a")
			}
		}
		get := func(path, accept string) map[string]any {
			t.Helper()
			code, h, body := s.call(t, "GET", path, "", nil, "Accept", accept)
			if code != 200 {
				t.Fatalf("GET %s (%s): %d %s", path, accept, code, body)
			}
			out := map[string]any{}
			var err error
			if accept == "application/yaml" {
				err = yaml.Unmarshal(body, &out)
			} else {
				if h.Get("Content-Type") != "application/json" {
					t.Fatalf("GET %s: Content-Type %q", path, h.Get("Content-Type"))
				}
				err = json.Unmarshal(body, &out)
			}
			if err != nil {
				t.Fatalf("GET %s (%s): %v\n%s", path, accept, err, body)
			}
			return out
		}
		same := func(path string) map[string]any {
			t.Helper()
			j, y := get(path, "application/json"), get(path, "application/yaml")
			if !equality.Semantic.DeepEqual(j, y) {
				t.Fatalf("GET %s: the JSON list differs from the decoded one:\n json %v\n yaml %v", path, j, y)
			}
			return j
		}
		base := "/api/v1/namespaces/lists/configmaps"
		all := same(base)
		if n := len(all["items"].([]any)); n != 30 {
			t.Fatalf("%d items, want 30", n)
		}
		rv := all["metadata"].(map[string]any)["resourceVersion"].(string)
		if n := len(same(base + "?labelSelector=tier%3Da")["items"].([]any)); n != 10 {
			t.Fatalf("tier=a: %d items, want 10", n)
		}
		same(base + "?fieldSelector=metadata.name%3Dcm-07")
		same("/api/v1/configmaps?limit=7")

		// Pages: JSON and YAML walk the same pages, with writes between.
		total := 0
		for cont := ""; ; {
			path := base + "?limit=4"
			if cont != "" {
				path += "&continue=" + url.QueryEscape(cont)
			}
			page := same(path)
			total += len(page["items"].([]any))
			s.mustKubectl(t, "label", "configmap", "cm-29", "-n", "lists", "--overwrite", fmt.Sprintf("page=%d", total))
			c, _ := page["metadata"].(map[string]any)["continue"].(string)
			if c == "" {
				break
			}
			cont = c
		}
		if total != 30 {
			t.Fatalf("pages held %d items, want 30", total)
		}
		old := same(base + "?resourceVersion=" + rv + "&resourceVersionMatch=Exact")
		if !equality.Semantic.DeepEqual(old["items"], all["items"]) {
			t.Fatal("the Exact list at the first list's resourceVersion differs from it")
		}

		// Custom resources: Foo (no defaults: served as stored) and Widget
		// (two versions, defaults on read: presented per item).
		installFooCRD(t, s)
		s.mustKubectl(t, "apply", "-f", writeFile(t, "foo.yaml", fooYAML))
		if n := len(same("/apis/webapp.my.domain/v1/namespaces/default/foos")["items"].([]any)); n != 1 {
			t.Fatalf("%d foos, want 1", n)
		}
		installWidgetCRD(t, s)
		createWidget(t, s, `{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"image":"nginx"}}`)
		for _, v := range []string{"v1", "v1alpha1"} {
			items := same("/apis/example.kplane.dev/" + v + "/namespaces/default/widgets")["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["apiVersion"] != "example.kplane.dev/"+v {
				t.Fatalf("widgets in %s: %v", v, items)
			}
		}
	})
}
