package e2e

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// TestCRDSelectableFields: a CRD's selectableFields (GA in 1.32) can be
// used in field selectors of lists, watches and kubectl get, served from
// the watch cache; other fields are refused with upstream's 400, and the
// CRD's declaration is validated with upstream's 422.
func TestCRDSelectableFields(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installGearCRD(t, s, gearCRD)
		gears := dynamic.NewForConfigOrDie(s.config()).Resource(gearGVR).Namespace("default")
		for name, spec := range map[string]string{
			"red-3": "  color: red\n  size: 3\n", "blue-5": "  color: blue\n  size: 5\n", "red-5": "  color: red\n  size: 5\n", "plain": "  tags: [x]\n",
		} {
			if _, err := gears.Apply(ctx, name, gearApply(t, name, spec), metav1.ApplyOptions{FieldManager: "test"}); err != nil {
				t.Fatal(err)
			}
		}

		list := func(t *testing.T, selector string) string {
			t.Helper()
			l, err := gears.List(ctx, metav1.ListOptions{FieldSelector: selector})
			if err != nil {
				t.Fatalf("list with %q: %v", selector, err)
			}
			var names []string
			for _, o := range l.Items {
				names = append(names, o.GetName())
			}
			sort.Strings(names)
			return strings.Join(names, " ")
		}
		t.Run("lists", func(t *testing.T) {
			for _, c := range []struct{ selector, want string }{
				{"spec.color=red", "red-3 red-5"},
				{"spec.color=red,spec.size=5", "red-5"},
				{"spec.size!=5", "plain red-3"},
				{"spec.color=", "plain"}, // an absent field is ""
				{"metadata.name=blue-5", "blue-5"},
				{"metadata.namespace=default,spec.color=blue", "blue-5"},
			} {
				if got := list(t, c.selector); got != c.want {
					t.Errorf("fieldSelector %s: %q, want %q", c.selector, got, c.want)
				}
			}
			// From the watch cache at any resourceVersion, and page by page.
			l, err := gears.List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red", ResourceVersion: "0"})
			if err != nil || len(l.Items) != 2 {
				t.Errorf("cached list: %v, %d items", err, len(l.Items))
			}
			l, err = gears.List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red", Limit: 1})
			if err != nil || len(l.Items) != 1 || l.GetContinue() == "" {
				t.Fatalf("first page: %v, %d items, continue %q", err, len(l.Items), l.GetContinue())
			}
			l, err = gears.List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red", Limit: 1, Continue: l.GetContinue()})
			if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "red-5" {
				t.Errorf("second page: %v, %v", err, l)
			}
		})

		t.Run("an undeclared field is 400", func(t *testing.T) {
			for _, f := range []string{"spec.tags", "metadata.uid", "status.phase"} {
				code, _, body := s.call(t, "GET", "/apis/apply.kplane.dev/v1/namespaces/default/gears?fieldSelector="+url.QueryEscape(f+"=x"), "", nil)
				st := status(t, body)
				if code != http.StatusBadRequest || st.Reason != metav1.StatusReasonBadRequest || st.Message != "field label not supported: "+f {
					t.Errorf("fieldSelector %s=x: %d %s %q", f, code, st.Reason, st.Message)
				}
			}
		})

		t.Run("kubectl get --field-selector", func(t *testing.T) {
			out := s.mustKubectl(t, "get", "gears", "--field-selector", "spec.color=red", "-o", "name")
			if strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "gear.apply.kplane.dev/red-3 gear.apply.kplane.dev/red-5" {
				t.Errorf("kubectl get --field-selector spec.color=red:\n%s", out)
			}
			_, errOut, err := s.kubectl("get", "gears", "--field-selector", "spec.tags=x")
			if err == nil || !strings.Contains(errOut, "field label not supported: spec.tags") {
				t.Errorf("kubectl get with an undeclared field: %v\n%s", err, errOut)
			}
		})

		t.Run("watch", func(t *testing.T) {
			l, err := gears.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			w, err := gears.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.color=red", ResourceVersion: l.GetResourceVersion()})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			// blue-5 turns red (enters), red-3 turns blue (leaves), plain
			// changes without matching (not seen).
			for _, c := range []struct{ name, spec string }{
				{"blue-5", "  color: red\n  size: 5\n"}, {"plain", "  tags: [z]\n"}, {"red-3", "  color: blue\n  size: 3\n"},
			} {
				if _, err := gears.Apply(ctx, c.name, gearApply(t, c.name, c.spec), metav1.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			timeout := time.After(10 * time.Second)
			for len(got) < 2 {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("watch ended after %v", got)
					}
					obj := ev.Object.(*unstructured.Unstructured)
					color, _, _ := unstructured.NestedString(obj.Object, "spec", "color")
					got = append(got, string(ev.Type)+" "+obj.GetName()+" "+color)
				case <-timeout:
					t.Fatalf("watch events: %v, want two", got)
				}
			}
			// A DELETED event carries the object's last matching state.
			if want := []string{string(watch.Added) + " blue-5 red", string(watch.Deleted) + " red-3 red"}; strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("watch events = %v, want %v", got, want)
			}
		})

		t.Run("per version", func(t *testing.T) {
			// v2 declares only spec.color.
			twoVersions := strings.Replace(gearCRD, "  - name: v1\n    served: true\n    storage: true\n", "  - name: v2\n    served: true\n    storage: false\n    selectableFields:\n    - jsonPath: .spec.color\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-preserve-unknown-fields: true\n            properties:\n              color: {type: string}\n  - name: v1\n    served: true\n    storage: true\n", 1)
			installGearCRD(t, s, twoVersions)
			v2 := "/apis/apply.kplane.dev/v2/namespaces/default/gears?fieldSelector="
			code, _, body := s.call(t, "GET", v2+url.QueryEscape("spec.color=red"), "", nil)
			if code != http.StatusOK || !strings.Contains(string(body), `"name":"red-5"`) {
				t.Errorf("v2 spec.color=red: %d %s", code, body)
			}
			code, _, body = s.call(t, "GET", v2+url.QueryEscape("spec.size=5"), "", nil)
			if st := status(t, body); code != http.StatusBadRequest || st.Message != "field label not supported: spec.size" {
				t.Errorf("v2 spec.size=5: %d %s", code, body)
			}
		})

		t.Run("invalid selectableFields are 422", func(t *testing.T) {
			bad := strings.Replace(gearCRD, "    - jsonPath: .spec.size\n", "    - jsonPath: .spec.ports\n    - jsonPath: spec.size\n", 1)
			bad = strings.Replace(bad, "gears.apply.kplane.dev", "gears.bad.kplane.dev", 1)
			bad = strings.Replace(bad, "group: apply.kplane.dev", "group: bad.kplane.dev", 1)
			data, err := yaml.YAMLToJSON([]byte(bad))
			if err != nil {
				t.Fatal(err)
			}
			code, _, body := s.call(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json", data)
			st := status(t, body)
			const want = `CustomResourceDefinition.apiextensions.k8s.io "gears.bad.kplane.dev" is invalid: [` +
				`spec.versions[0].selectableFields[1].jsonPath: Invalid value: ".spec.ports": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed., ` +
				`spec.versions[0].selectableFields[2].jsonPath: Invalid value: "spec.size": is an invalid path: expected [ or . but got: spec]`
			if code != http.StatusUnprocessableEntity || st.Message != want {
				t.Errorf("CRD with bad selectableFields: %d\n got %s\nwant %s", code, st.Message, want)
			}
		})
	})
}
