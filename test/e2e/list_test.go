package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// JSON lists and GETs are written from the stored JSON as it is
// (storage.Record); YAML goes through decoded objects. The two must be the
// same, for every shape of list: whole, selected, paged (from the cache's
// history while writes land between pages), at an exact resourceVersion,
// and for a custom resource read at a version other than its stored one
// (whose items must be presented, not served as stored); and for GETs,
// consistent and from the cache, of built-in kinds and custom resources.
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
		// A built-in kind's items go without apiVersion and kind, as
		// kube-apiserver writes them; kubectl and client-go's dynamic
		// client give them back from the list's.
		for _, it := range all["items"].([]any) {
			if m := it.(map[string]any); m["apiVersion"] != nil || m["kind"] != nil {
				t.Fatalf("a ConfigMap list item with apiVersion %v, kind %v", m["apiVersion"], m["kind"])
			}
		}
		var printed struct{ Items []metav1.TypeMeta }
		if err := json.Unmarshal([]byte(s.mustKubectl(t, "get", "configmaps", "-n", "lists", "-o", "json")), &printed); err != nil {
			t.Fatal(err)
		}
		if len(printed.Items) != 30 || printed.Items[0] != (metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}) {
			t.Fatalf("kubectl get -o json: %d items, the first %+v", len(printed.Items), printed.Items[0])
		}
		dyn, err := dynamic.NewForConfigOrDie(s.config()).Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("lists").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(dyn.Items) != 30 || dyn.Items[0].GetKind() != "ConfigMap" || dyn.Items[0].GetAPIVersion() != "v1" {
			t.Fatalf("dynamic list: %v, %d items", err, len(dyn.Items))
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

		// GETs: consistent and at resourceVersion 0, built-in and custom.
		for _, rv := range []string{"", "?resourceVersion=0"} {
			cm := same(base + "/cm-07" + rv)
			if cm["kind"] != "ConfigMap" || cm["apiVersion"] != "v1" || cm["metadata"].(map[string]any)["name"] != "cm-07" {
				t.Fatalf("GET cm-07%s: %v", rv, cm)
			}
			same("/apis/webapp.my.domain/v1/namespaces/default/foos/foo-sample" + rv)
			for _, v := range []string{"v1", "v1alpha1"} {
				if w := same("/apis/example.kplane.dev/" + v + "/namespaces/default/widgets/w" + rv); w["apiVersion"] != "example.kplane.dev/"+v {
					t.Fatalf("widget in %s: %v", v, w)
				}
			}
		}
		if code, _, body := s.call(t, "GET", base+"/absent", "", nil, "Accept", "application/json"); code != 404 || !strings.Contains(string(body), `configmaps \"absent\" not found`) {
			t.Fatalf("GET absent: %d %s", code, body)
		}
	})
}

// Built-in kinds are answered in protobuf when the client prefers it, by
// q-value or, among equals, by order (client-go's typed clients send
// "protobuf,json" and bodies in protobuf: the client here is client-go
// as it comes); custom resources answer JSON when the client also takes
// JSON, and 406 when it takes only protobuf, as kube-apiserver does. The
// protobuf list holds the same objects as the JSON list.
func TestProtobufResponses(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	cs := kubernetes.NewForConfigOrDie(s.config())
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps("default")
	for i := range 12 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%02d", i),
			Labels: map[string]string{"i": fmt.Sprint(i % 3)}}, Data: map[string]string{"k": "v\u00e9"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got, err := cms.Get(ctx, "p-03", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v\u00e9" || got.ResourceVersion == "" {
		t.Fatalf("get: %v %+v", err, got)
	}
	got.Data["k"] = "w"
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	opts := metav1.ListOptions{Limit: 5, LabelSelector: "i!=2"}
	for {
		l, err := cms.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		if l.Continue == "" {
			break
		}
		if l.RemainingItemCount != nil {
			t.Fatalf("a selective list has remainingItemCount %d", *l.RemainingItemCount)
		}
		opts.Continue = l.Continue
	}
	if len(names) != 8 {
		t.Fatalf("the pages held %v, want the 8 with i!=2", names)
	}

	// The wire: protobuf for a built-in list, with the JSON list's objects.
	code, h, body := s.call(t, "GET", "/api/v1/namespaces/default/configmaps", "", nil, "Accept", "application/vnd.kubernetes.protobuf")
	if code != 200 || h.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
		t.Fatalf("protobuf list: %d %q %s", code, h.Get("Content-Type"), body)
	}
	// Equal q-values: the first sent wins, as with kube-apiserver.
	for accept, want := range map[string]string{
		"application/vnd.kubernetes.protobuf,application/json":       "application/vnd.kubernetes.protobuf", // client-go's typed clients
		"application/vnd.kubernetes.protobuf, */*":                   "application/vnd.kubernetes.protobuf", // controller-runtime's
		"application/json,application/vnd.kubernetes.protobuf":       "application/json",
		"application/vnd.kubernetes.protobuf;q=0.8,application/json": "application/json",
	} {
		code, h, _ = s.call(t, "GET", "/api/v1/namespaces/default/configmaps/p-00", "", nil, "Accept", accept)
		if code != 200 || h.Get("Content-Type") != want {
			t.Fatalf("Accept %q: %d %q, want %q", accept, code, h.Get("Content-Type"), want)
		}
	}
	scheme := runtime.NewScheme()
	corev1.AddToScheme(scheme)
	pl := &corev1.ConfigMapList{}
	if _, _, err := protobuf.NewSerializer(scheme, scheme).Decode(body, nil, pl); err != nil {
		t.Fatal(err)
	}
	jl, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.ConfigMapList{}
	if err := json.Unmarshal(jl, want); err != nil {
		t.Fatal(err)
	}
	pl.TypeMeta, want.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	for i := range want.Items {
		want.Items[i].TypeMeta = metav1.TypeMeta{} // protobuf items carry none
	}
	// Compared as JSON: protobuf decodes an absent map as empty, JSON as nil.
	pj, _ := json.Marshal(pl)
	wj, _ := json.Marshal(want)
	if len(pl.Items) != 12 || string(pj) != string(wj) {
		t.Fatalf("the protobuf list differs from the JSON list:\n%s\n%s", pj, wj)
	}

	// Watches: protobuf to a client that prefers it, as kube-apiserver
	// streams them (length-prefixed WatchEvents); JSON otherwise.
	for accept, want := range map[string]string{
		"application/vnd.kubernetes.protobuf,application/json": "application/vnd.kubernetes.protobuf;stream=watch",
		"application/json": "application/json",
	} {
		code, h, body := s.call(t, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1", "", nil, "Accept", accept)
		if code != 200 || h.Get("Content-Type") != want || len(body) == 0 {
			t.Fatalf("watch, Accept %q: %d %q, %d bytes", accept, code, h.Get("Content-Type"), len(body))
		}
	}

	// The watch saw the 12 creates, the update and a delete (in protobuf:
	// client-go as it comes), each object whole; the deleted one as it
	// was, with the delete's resourceVersion.
	before, err := cms.Get(ctx, "p-00", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "p-00", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < 14 {
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || cm.Name == "" || cm.ResourceVersion == "" || cm.UID == "" {
				t.Fatalf("watch event %s %T %+v", ev.Type, ev.Object, ev.Object)
			}
			if seen++; seen == 14 && (ev.Type != watch.Deleted || cm.Name != "p-00" || cm.UID != before.UID ||
				rvOf(t, cm.ResourceVersion) <= rvOf(t, before.ResourceVersion) || cm.Data["k"] != before.Data["k"]) {
				t.Fatalf("last event %s %+v, want p-00 deleted", ev.Type, cm)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the watch delivered %d of 14 events", seen)
		}
	}

	// Custom resources: JSON when JSON is acceptable too, else 406.
	installFooCRD(t, s)
	code, h, _ = s.call(t, "GET", "/apis/webapp.my.domain/v1/namespaces/default/foos", "", nil,
		"Accept", "application/vnd.kubernetes.protobuf, application/json")
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("custom resources, protobuf or JSON: %d %q", code, h.Get("Content-Type"))
	}
	code, _, body = s.call(t, "GET", "/apis/webapp.my.domain/v1/namespaces/default/foos", "", nil,
		"Accept", "application/vnd.kubernetes.protobuf")
	if code != http.StatusNotAcceptable {
		t.Fatalf("custom resources, protobuf only: %d %s", code, body)
	}
}

// rvOf is a resourceVersion as the number kplane makes it.
func rvOf(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}
