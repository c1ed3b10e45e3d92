package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

const cmPath = "/api/v1/namespaces/default/configmaps"

// object decodes an object answer.
func object(t testing.TB, data []byte) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("not an object (%v): %s", err, data)
	}
	return u
}

// TestKubectlPatchAndApply drives kubectl's client-side apply, server-side
// apply and every patch type against a real server.
func TestKubectlPatchAndApply(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		// Client-side apply: create, then change through its three-way
		// strategic merge patch, which keeps the last-applied annotation.
		cm := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: \"1\"\n  b: \"2\"\n")
		if out := s.mustKubectl(t, "apply", "-f", cm); !strings.Contains(out, "configmap/app created") {
			t.Fatalf("apply: %s", out)
		}
		cm2 := writeFile(t, "cm2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: \"10\"\n")
		if out := s.mustKubectl(t, "apply", "-f", cm2); !strings.Contains(out, "configmap/app configured") {
			t.Fatalf("second apply: %s", out)
		}
		got := s.mustKubectl(t, "get", "cm", "app", "-o", "jsonpath={.data}|{.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}")
		if !strings.HasPrefix(got, `{"a":"10"}|`) || !strings.Contains(got, `"a":"10"`) {
			t.Fatalf("after the second apply (b must be pruned, the annotation kept): %s", got)
		}
		if out := s.mustKubectl(t, "apply", "-f", cm2); !strings.Contains(out, "configmap/app unchanged") {
			t.Fatalf("unchanged apply: %s", out)
		}

		// kubectl patch, each type.
		s.mustKubectl(t, "patch", "cm", "app", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
		s.mustKubectl(t, "patch", "cm", "app", "--type=strategic", "-p", `{"data":{"s":"strategic"}}`)
		s.mustKubectl(t, "patch", "cm", "app", "--type=json", "-p", `[{"op":"test","path":"/data/a","value":"10"},{"op":"add","path":"/data/j","value":"json"}]`)
		_, stderr, err := s.kubectl("patch", "cm", "app", "--type=json", "-p", `[{"op":"test","path":"/data/a","value":"nope"},{"op":"add","path":"/data/x","value":"no"}]`)
		if err == nil || !strings.Contains(stderr, "The request is invalid") {
			t.Fatalf("a failed test op must fail the patch: %v %s", err, stderr)
		}
		got = s.mustKubectl(t, "get", "cm", "app", "-o", "jsonpath={.data}")
		if got != `{"a":"10","j":"json","m":"merge","s":"strategic"}` {
			t.Fatalf("after the patches: %s", got)
		}

		// Server-side apply: a second manager setting a field another
		// one owns with a different value conflicts; --force-conflicts
		// takes it.
		ssa := writeFile(t, "ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  owner: alice\n  alice: \"yes\"\n")
		if out := s.mustKubectl(t, "apply", "--server-side", "--field-manager=alice", "-f", ssa); !strings.Contains(out, "serverside-applied") {
			t.Fatalf("server-side apply (create): %s", out)
		}
		bob := writeFile(t, "bob.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  owner: bob\n")
		_, stderr, err = s.kubectl("apply", "--server-side", "--field-manager=bob", "-f", bob)
		if err == nil || !strings.Contains(stderr, `Apply failed with 1 conflict: conflict with "alice": .data.owner`) {
			t.Fatalf("conflicting apply: %v\n%s", err, stderr)
		}
		s.mustKubectl(t, "apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", bob)
		var obj struct {
			Data     map[string]string
			Metadata metav1.ObjectMeta
		}
		if err := json.Unmarshal([]byte(s.mustKubectl(t, "get", "cm", "shared", "-o", "json", "--show-managed-fields")), &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Data["owner"] != "bob" || obj.Data["alice"] != "yes" {
			t.Fatalf("after the forced apply: %v", obj.Data)
		}
		owners := map[string]string{}
		for _, mf := range obj.Metadata.ManagedFields {
			owners[mf.Manager] = mf.FieldsV1.GetRawString()
		}
		if !strings.Contains(owners["bob"], `"f:owner"`) || strings.Contains(owners["alice"], `"f:owner"`) || !strings.Contains(owners["alice"], `"f:alice"`) {
			t.Fatalf("managedFields after the forced apply: %v", owners)
		}

		// A configuration file with lines, quotes, backslashes, a tab,
		// accents, CJK and an emoji comes back as written, and applying it
		// again writes nothing.
		const conf = "[server]\ngreeting = \"grüß dich, ça va\" # 挨拶 😀\npath = C:\\temp\\x\ntab\there\n"
		confYAML := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  app.conf: |\n    " +
			strings.ReplaceAll(strings.TrimSuffix(conf, "\n"), "\n", "\n    ") + "\n"
		confFile := writeFile(t, "conf.yaml", confYAML)
		s.mustKubectl(t, "apply", "--server-side", "--field-manager=ops", "-f", confFile)
		if got := s.mustKubectl(t, "get", "cm", "conf", "-o", `jsonpath={.data.app\.conf}`); got != conf {
			t.Fatalf("applied configuration file:\n got %q\nwant %q", got, conf)
		}
		rv := s.mustKubectl(t, "get", "cm", "conf", "-o", "jsonpath={.metadata.resourceVersion}")
		s.mustKubectl(t, "apply", "--server-side", "--field-manager=ops", "-f", confFile)
		if again := s.mustKubectl(t, "get", "cm", "conf", "-o", "jsonpath={.metadata.resourceVersion}"); again != rv {
			t.Fatalf("applying the same file again wrote it: resourceVersion %s, was %s", again, rv)
		}

		// Strategic merge patch is refused for custom resources (415), as
		// upstream; merge patch works.
		installFooCRD(t, s)
		s.mustKubectl(t, "apply", "-f", writeFile(t, "foo.yaml", fooYAML))
		_, stderr, err = s.kubectl("patch", "foo", "foo-sample", "--type=strategic", "-p", `{"spec":{"foo":"x"}}`)
		if err == nil || !strings.Contains(stderr, "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml") {
			t.Fatalf("strategic patch of a custom resource: %v %s", err, stderr)
		}
		s.mustKubectl(t, "patch", "foo", "foo-sample", "--type=merge", "-p", `{"spec":{"foo":"patched"}}`)
		if got := s.mustKubectl(t, "get", "foo", "foo-sample", "-o", "jsonpath={.spec.foo}"); got != "patched" {
			t.Fatalf("merge patch of a custom resource: %q", got)
		}
		// kubectl apply of a changed custom resource (client-side: a
		// merge patch, since no strategic schema exists).
		s.mustKubectl(t, "apply", "-f", writeFile(t, "foo2.yaml", strings.Replace(fooYAML, "foo: bar", "foo: applied", 1)))
		if got := s.mustKubectl(t, "get", "foo", "foo-sample", "-o", "jsonpath={.spec.foo}"); got != "applied" {
			t.Fatalf("kubectl apply of a custom resource: %q", got)
		}
	})
}

// TestPatchSemantics checks the patch contract over raw HTTP.
func TestPatchSemantics(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		const merge, jsonp, smp, apply = "application/merge-patch+json", "application/json-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"
		code, _, body := s.call(t, "POST", cmPath, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p"},"data":{"a":"1"}}`))
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		rv := object(t, body).GetResourceVersion()

		// A patch that changes nothing writes nothing.
		code, _, body = s.call(t, "PATCH", cmPath+"/p", merge, []byte(`{"data":{"a":"1"}}`))
		if code != 200 || object(t, body).GetResourceVersion() != rv {
			t.Fatalf("no-op patch: %d, resourceVersion %s, want %s", code, object(t, body).GetResourceVersion(), rv)
		}
		// A patch carrying a stale resourceVersion is 409; the current one works.
		code, _, body = s.call(t, "PATCH", cmPath+"/p", merge, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"a":"2"}}`))
		if st := status(t, body); code != 409 || st.Reason != metav1.StatusReasonConflict ||
			st.Message != `Operation cannot be fulfilled on configmaps "p": the object has been modified; please apply your changes to the latest version and try again` {
			t.Fatalf("stale patch: %d %s", code, body)
		}
		code, _, body = s.call(t, "PATCH", cmPath+"/p", merge, []byte(`{"metadata":{"resourceVersion":"`+rv+`"},"data":{"a":"2"}}`))
		if code != 200 {
			t.Fatalf("patch at the current resourceVersion: %d %s", code, body)
		}
		rv = object(t, body).GetResourceVersion()

		// dryRun answers with the patched object and stores nothing.
		code, _, body = s.call(t, "PATCH", cmPath+"/p?dryRun=All", merge, []byte(`{"data":{"dry":"run"}}`))
		if code != 200 || object(t, body).Object["data"].(map[string]any)["dry"] != "run" {
			t.Fatalf("dry-run patch: %d %s", code, body)
		}
		_, _, body = s.call(t, "GET", cmPath+"/p", "", nil)
		if got := object(t, body); got.GetResourceVersion() != rv || got.Object["data"].(map[string]any)["dry"] != nil {
			t.Fatalf("the dry-run patch was stored: %s", body)
		}

		// Errors, each with nothing stored.
		for _, c := range []struct {
			name, ct, query, body string
			code                  int
			reason                metav1.StatusReason
			msg                   string
		}{
			// A built-in kind's patch routes take four types; kube-apiserver's router refuses any other.
			{"unknown patch type", "application/xml", "", `{}`, 415, metav1.StatusReasonUnsupportedMediaType, "415: Unsupported Media Type"},
			{"malformed merge patch", merge, "", `{"data":`, 400, metav1.StatusReasonBadRequest, "invalid JSON patch"}, // upstream's words
			{"malformed json patch", jsonp, "", `{"op":"add"}`, 400, metav1.StatusReasonBadRequest, ""},
			{"json patch on a missing path", jsonp, "", `[{"op":"replace","path":"/nope/x","value":1}]`, 422, metav1.StatusReasonInvalid, ""},
			{"wrong type", merge, "", `{"data":{"a":1}}`, 422, metav1.StatusReasonInvalid, "cannot unmarshal number"},
			{"strict unknown field", merge, "?fieldValidation=Strict", `{"nope":1}`, 422, metav1.StatusReasonInvalid, `strict decoding error: unknown field "nope"`},
			{"apply without a fieldManager", apply, "", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n", 422, metav1.StatusReasonInvalid, "fieldManager: Required value: is required for apply patch"},
			{"force on a merge patch", merge, "?force=true", `{}`, 422, metav1.StatusReasonInvalid, "force: Forbidden: may not be specified for non-apply patch"},
			{"apply of another kind", apply, "?fieldManager=m", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: p\n", 400, metav1.StatusReasonBadRequest, "invalid object type: /v1, Kind=Secret"},
			{"invalid result", smp, "", `{"metadata":{"labels":{"bad key!":"x"}}}`, 422, metav1.StatusReasonInvalid, "metadata.labels"},
			{"too large", merge, "", `{"data":{"big":"` + strings.Repeat("x", 4<<20) + `"}}`, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		} {
			code, _, body := s.call(t, "PATCH", cmPath+"/p"+c.query, c.ct, []byte(c.body))
			st := status(t, body)
			if code != c.code || st.Reason != c.reason || !strings.Contains(st.Message, c.msg) {
				t.Errorf("%s: %d %s %q, want %d %s containing %q", c.name, code, st.Reason, st.Message, c.code, c.reason, c.msg)
			}
		}
		_, _, body = s.call(t, "GET", cmPath+"/p", "", nil)
		if got := object(t, body).GetResourceVersion(); got != rv {
			t.Fatalf("a refused patch changed the object: resourceVersion %s, want %s", got, rv)
		}

		// Warn: the unknown field is dropped and reported in a Warning header.
		code, hdr, body := s.call(t, "PATCH", cmPath+"/p?fieldValidation=Warn", merge, []byte(`{"nope":1,"data":{"w":"1"}}`))
		if code != 200 || !strings.Contains(strings.Join(hdr.Values("Warning"), "\n"), `unknown field \"nope\"`) || object(t, body).Object["nope"] != nil {
			t.Fatalf("Warn patch: %d %v %s", code, hdr.Values("Warning"), body[:min(len(body), 300)])
		}

		// Apply creates an absent object (201), then updates it (200).
		code, _, body = s.call(t, "PATCH", cmPath+"/applied?fieldManager=m", apply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n"))
		if code != http.StatusCreated || object(t, body).GetUID() == "" || len(object(t, body).GetManagedFields()) != 1 {
			t.Fatalf("apply-create: %d %s", code, body)
		}
		code, _, body = s.call(t, "PATCH", cmPath+"/applied?fieldManager=m", apply, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v2\n"))
		if code != http.StatusOK || object(t, body).Object["data"].(map[string]any)["k"] != "v2" {
			t.Fatalf("apply-update: %d %s", code, body)
		}
		// PATCH of a missing object with the other types is 404.
		if code, _, _ := s.call(t, "PATCH", cmPath+"/missing", merge, []byte(`{}`)); code != 404 {
			t.Fatalf("merge patch of a missing object: %d", code)
		}

		// Bad delete options are 422 with causes, and delete nothing.
		code, _, body = s.call(t, "DELETE", cmPath+"/applied?propagationPolicy=Sideways", "", nil)
		if st := status(t, body); code != 422 || st.Details == nil || len(st.Details.Causes) == 0 || !strings.Contains(st.Message, "DeleteOptions.meta.k8s.io") {
			t.Fatalf("unknown propagationPolicy: %d %s", code, body)
		}
		code, _, body = s.call(t, "DELETE", cmPath+"/applied", "application/json", []byte(`{"orphanDependents":true,"propagationPolicy":"Background"}`))
		if code != 422 {
			t.Fatalf("orphanDependents with propagationPolicy: %d %s", code, body)
		}
		if code, _, _ := s.call(t, "GET", cmPath+"/applied", "", nil); code != 200 {
			t.Fatalf("a refused delete deleted: %d", code)
		}
	})
}

// TestStatusAndGeneration checks the status subresource and generation
// through patches of a custom resource.
func TestStatusAndGeneration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installGadgetCRD(t, s)
		const foos = "/apis/e2e.kplane.dev/v1/namespaces/default/gadgets"
		const merge = "application/merge-patch+json"
		code, _, body := s.call(t, "POST", foos, "application/json", []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"foo":"a"},"status":{"happy":true}}`))
		if o := object(t, body); code != 201 || o.GetGeneration() != 1 || o.Object["status"] != nil {
			t.Fatalf("create (generation 1, status dropped): %d %s", code, body)
		}
		// The main resource ignores status; a spec change bumps generation.
		_, _, body = s.call(t, "PATCH", foos+"/g", merge, []byte(`{"spec":{"foo":"b"},"status":{"happy":true}}`))
		if o := object(t, body); o.GetGeneration() != 2 || o.Object["status"] != nil {
			t.Fatalf("main patch: %s", body)
		}
		// A metadata change leaves generation alone.
		_, _, body = s.call(t, "PATCH", foos+"/g", merge, []byte(`{"metadata":{"labels":{"x":"y"}}}`))
		if o := object(t, body); o.GetGeneration() != 2 {
			t.Fatalf("label patch changed generation: %s", body)
		}
		// /status changes status only, and not generation.
		_, _, body = s.call(t, "PATCH", foos+"/g/status", merge, []byte(`{"spec":{"foo":"ignored"},"status":{"happy":true}}`))
		o := object(t, body)
		if spec, _, _ := unstructured.NestedString(o.Object, "spec", "foo"); spec != "b" || o.GetGeneration() != 2 {
			t.Fatalf("status patch: %s", body)
		}
		if happy, _, _ := unstructured.NestedBool(o.Object, "status", "happy"); !happy {
			t.Fatalf("status patch did not set the status: %s", body)
		}

		// A patch that grows the object past the storage limit is 413
		// (ConfigMaps stop at 1 MiB of data; a custom resource reaches it).
		big := `{"spec":{"b1":"` + strings.Repeat("x", 1<<20) + `"}}`
		if code, _, body := s.call(t, "PATCH", foos+"/g", merge, []byte(big)); code != 200 {
			t.Fatalf("1 MiB patch: %d %s", code, body[:min(len(body), 300)])
		}
		big = `{"spec":{"b2":"` + strings.Repeat("y", 1<<20) + `"}}`
		if code, _, body := s.call(t, "PATCH", foos+"/g", merge, []byte(big)); code != 413 {
			t.Fatalf("patch past the storage limit: %d %s", code, body[:min(len(body), 300)])
		}

		// Finalizers: DELETE marks the object, which stays; no new
		// finalizers once deletion started; removing the last one deletes.
		s.call(t, "PATCH", foos+"/g", merge, []byte(`{"metadata":{"finalizers":["example.com/a"]}}`))
		code, _, body = s.call(t, "DELETE", foos+"/g", "", nil)
		if o := object(t, body); code != 200 || o.GetDeletionTimestamp() == nil || o.GetDeletionGracePeriodSeconds() == nil {
			t.Fatalf("delete with a finalizer: %d %s", code, body)
		}
		code, _, body = s.call(t, "PATCH", foos+"/g", merge, []byte(`{"metadata":{"finalizers":["example.com/a","example.com/b"]}}`))
		if st := status(t, body); code != 422 || !strings.Contains(st.Message, "no new finalizers can be added if the object is being deleted") {
			t.Fatalf("adding a finalizer during deletion: %d %s", code, body)
		}
		code, _, body = s.call(t, "PATCH", foos+"/g", "application/json-patch+json", []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
		if code != 200 {
			t.Fatalf("removing the finalizer: %d %s", code, body)
		}
		if code, _, _ := s.call(t, "GET", foos+"/g", "", nil); code != 404 {
			t.Fatalf("the object outlived its last finalizer: %d", code)
		}
	})
}

// TestDryRunAndDeletionEvents: dry-run writes of every verb store nothing
// and send no event; deleting an object with a finalizer is MODIFIED,
// then DELETED once the finalizer goes.
func TestDryRunAndDeletionEvents(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		ctx := t.Context()
		code, _, body := s.call(t, "POST", cmPath, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"a":"1"}}`))
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		rv := object(t, body).GetResourceVersion()
		w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		for _, c := range []struct{ method, path, ct, body string }{
			{"POST", cmPath + "?dryRun=All", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}`},
			{"PUT", cmPath + "/d?dryRun=All", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d"},"data":{"a":"put"}}`},
			{"PATCH", cmPath + "/d?dryRun=All", "application/merge-patch+json", `{"data":{"a":"patch"}}`},
			{"PATCH", cmPath + "/d?dryRun=All&fieldManager=m&force=true", "application/apply-patch+yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\ndata:\n  a: apply\n"},
			{"DELETE", cmPath + "/d?dryRun=All", "", ""},
		} {
			code, _, body := s.call(t, c.method, c.path, c.ct, []byte(c.body))
			if code != 200 && code != 201 {
				t.Fatalf("dry-run %s %s: %d %s", c.method, c.path, code, body)
			}
		}
		if code, _, _ := s.call(t, "GET", cmPath+"/dry", "", nil); code != 404 {
			t.Fatalf("a dry-run create was stored: %d", code)
		}
		_, _, body = s.call(t, "GET", cmPath+"/d", "", nil)
		if got := object(t, body); got.GetResourceVersion() != rv {
			t.Fatalf("a dry-run write changed the object: %s", body)
		}

		// A real write: it must be the first event the watch sees.
		s.call(t, "PATCH", cmPath+"/d", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":["example.com/keep"]}}`))
		s.call(t, "DELETE", cmPath+"/d", "", nil)
		s.call(t, "PATCH", cmPath+"/d", "application/json-patch+json", []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`))
		var got []string
		for len(got) < 3 {
			select {
			case ev := <-w.ResultChan():
				cm := ev.Object.(*corev1.ConfigMap)
				got = append(got, fmt.Sprintf("%s %s deleting=%v", ev.Type, cm.Name, cm.DeletionTimestamp != nil))
			case <-time.After(10 * time.Second):
				t.Fatalf("events so far: %v", got)
			}
		}
		want := []string{"MODIFIED d deleting=false", "MODIFIED d deleting=true", "DELETED d deleting=true"}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("events:\n got %v\nwant %v", got, want)
		}
	})
}

// gadgetCRD is a test kind whose schema leaves spec open and gives status
// two fields, so tests can write arbitrary spec fields (pruning keeps
// them) and a real status.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.e2e.kplane.dev
spec:
  group: e2e.kplane.dev
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              happy: {type: boolean}
              note: {type: string}
`

var gadgetGVR = schema.GroupVersionResource{Group: "e2e.kplane.dev", Version: "v1", Resource: "gadgets"}

// installGadgetCRD creates the Gadget CRD and waits until it is served.
func installGadgetCRD(t *testing.T, s *server) {
	t.Helper()
	s.mustKubectl(t, "apply", "-f", writeFile(t, "gadget-crd.yaml", gadgetCRD))
	s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/gadgets.e2e.kplane.dev")
}

// TestDefaultsOnRead: a default added to a CRD's schema shows on objects
// stored before it, on get, list and watch, as upstream applies defaults
// when it reads from storage; the stored bytes are not rewritten.
func TestDefaultsOnRead(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installGadgetCRD(t, s)
		const gadgets = "/apis/e2e.kplane.dev/v1/namespaces/default/gadgets"
		code, _, body := s.call(t, "POST", gadgets, "application/json", []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Gadget","metadata":{"name":"old"},"spec":{"a":1}}`))
		if code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		rv := object(t, body).GetResourceVersion()
		withDefault := strings.Replace(gadgetCRD, "              note: {type: string}", "              note: {type: string}\n            default: {note: defaulted}", 1)
		s.mustKubectl(t, "apply", "-f", writeFile(t, "gadget-crd2.yaml", withDefault))
		eventually(t, 10*time.Second, "the default shows on get", func() (bool, string) {
			_, _, body := s.call(t, "GET", gadgets+"/old", "", nil)
			note, _, _ := unstructured.NestedString(object(t, body).Object, "status", "note")
			return note == "defaulted", string(body)
		})
		_, _, body = s.call(t, "GET", gadgets, "", nil)
		if !strings.Contains(string(body), `"note":"defaulted"`) {
			t.Fatalf("list without the default: %s", body)
		}
		_, _, body = s.call(t, "GET", gadgets+"?watch=true&timeoutSeconds=1", "", nil)
		if !strings.Contains(string(body), `"note":"defaulted"`) {
			t.Fatalf("watch without the default: %s", body)
		}
		_, _, body = s.call(t, "GET", gadgets+"/old", "", nil)
		if got := object(t, body).GetResourceVersion(); got != rv {
			t.Fatalf("reading with defaults rewrote the object: resourceVersion %s, want %s", got, rv)
		}

		// A write keeps what it read: a /status write carries over the
		// spec with its read-time defaults, and stores them, so they
		// outlive the schema's default (upstream's old object is read
		// back from storage with the defaults, and persisted with the
		// write).
		withSpecDefault := strings.Replace(withDefault, "            x-kubernetes-preserve-unknown-fields: true",
			"            x-kubernetes-preserve-unknown-fields: true\n            properties:\n              color: {type: string, default: blue}", 1)
		s.mustKubectl(t, "apply", "-f", writeFile(t, "gadget-crd3.yaml", withSpecDefault))
		eventually(t, 10*time.Second, "the spec default shows on get", func() (bool, string) {
			_, _, body = s.call(t, "GET", gadgets+"/old", "", nil)
			color, _, _ := unstructured.NestedString(object(t, body).Object, "spec", "color")
			return color == "blue", string(body)
		})
		g := object(t, body)
		g.Object["status"] = map[string]any{"happy": true}
		g.Object["spec"] = map[string]any{"a": int64(2)} // ignored by /status
		put, _ := g.MarshalJSON()
		code, _, body = s.call(t, "PUT", gadgets+"/old/status", "application/json", put)
		if code != 200 {
			t.Fatalf("PUT /status: %d %s", code, body)
		}
		if color, _, _ := unstructured.NestedString(object(t, body).Object, "spec", "color"); color != "blue" {
			t.Errorf("PUT /status answered without the spec's default: %s", body)
		}
		s.mustKubectl(t, "apply", "-f", writeFile(t, "gadget-crd4.yaml", gadgetCRD))
		eventually(t, 10*time.Second, "the status default gone from a newly created gadget", func() (bool, string) {
			name := fmt.Sprintf("probe-%d", time.Now().UnixNano())
			code, _, body := s.call(t, "POST", gadgets, "application/json", []byte(`{"apiVersion":"e2e.kplane.dev/v1","kind":"Gadget","metadata":{"name":"`+name+`"},"spec":{}}`))
			return code == 201 && !strings.Contains(string(body), "defaulted"), string(body)
		})
		_, _, body = s.call(t, "GET", gadgets+"/old", "", nil)
		spec, _, _ := unstructured.NestedMap(object(t, body).Object, "spec")
		if !reflect.DeepEqual(spec, map[string]any{"a": int64(1), "color": "blue"}) {
			t.Errorf("after the default left the schema, spec = %v, want the stored default kept and the request's spec ignored: %s", spec, body)
		}
	})
}

// TestStatusWritesRecordTheirOwner: a write through /status records its
// manager in managedFields with subresource "status" (upstream's status
// strategies keep the field manager's managedFields while resetting the
// rest of the metadata), so server-side apply on status works as for
// controllers upstream: an applier that stops applying a status field
// removes it. Checked on a custom resource and a built-in kind.
func TestStatusWritesRecordTheirOwner(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	installGadgetCRD(t, s)
	ctx := t.Context()
	dc := dynamic.NewForConfigOrDie(s.config())
	gadgets := dc.Resource(gadgetGVR).Namespace("default")
	entry := func(t *testing.T, u *unstructured.Unstructured, manager string) *metav1.ManagedFieldsEntry {
		t.Helper()
		for _, e := range u.GetManagedFields() {
			if e.Manager == manager {
				return &e
			}
		}
		t.Fatalf("no managedFields entry of %s in %v", manager, u.GetManagedFields())
		return nil
	}
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "e2e.kplane.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "owned"}, "spec": map[string]any{"a": "1"}}}
	g, err := gadgets.Create(ctx, g, metav1.CreateOptions{FieldManager: "creator"})
	if err != nil {
		t.Fatal(err)
	}

	// UpdateStatus (PUT /status).
	g.Object["status"] = map[string]any{"happy": true}
	g, err = gadgets.UpdateStatus(ctx, g, metav1.UpdateOptions{FieldManager: "updater"})
	if err != nil {
		t.Fatal(err)
	}
	if e := entry(t, g, "updater"); e.Subresource != "status" || e.Operation != metav1.ManagedFieldsOperationUpdate ||
		e.FieldsV1.GetRawString() != `{"f:status":{".":{},"f:happy":{}}}` {
		t.Fatalf("PUT /status entry: %+v %s", e, e.FieldsV1.GetRawBytes())
	}
	if e := entry(t, g, "creator"); e.Subresource != "" || e.FieldsV1.GetRawString() != `{"f:spec":{".":{},"f:a":{}}}` {
		t.Fatalf("the creator's entry changed: %+v %s", e, e.FieldsV1.GetRawBytes())
	}

	// Server-side apply on /status: the applier owns what it applies; a
	// field it stops applying goes (the updater's happy stays).
	apply := func(status map[string]any) *unstructured.Unstructured {
		t.Helper()
		a := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "e2e.kplane.dev/v1", "kind": "Gadget",
			"metadata": map[string]any{"name": "owned"}, "status": status}}
		got, err := gadgets.ApplyStatus(ctx, "owned", a, metav1.ApplyOptions{FieldManager: "controller", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := apply(map[string]any{"note": "reconciled"})
	if e := entry(t, got, "controller"); e.Subresource != "status" || e.Operation != metav1.ManagedFieldsOperationApply ||
		e.FieldsV1.GetRawString() != `{"f:status":{"f:note":{}}}` {
		t.Fatalf("apply /status entry: %+v %s", e, e.FieldsV1.GetRawBytes())
	}
	got = apply(map[string]any{})
	if _, found, _ := unstructured.NestedString(got.Object, "status", "note"); found {
		t.Fatalf("a status field the applier no longer applies stayed: %v", got.Object["status"])
	}
	if happy, _, _ := unstructured.NestedBool(got.Object, "status", "happy"); !happy {
		t.Fatalf("the updater's field went: %v", got.Object["status"])
	}

	// A built-in kind: a Namespace's status through a merge patch.
	cs := kubernetes.NewForConfigOrDie(s.config())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owned"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patched, err := cs.CoreV1().Namespaces().Patch(ctx, "owned", types.MergePatchType,
		[]byte(`{"status":{"conditions":[{"type":"Checked","status":"True"}]}}`), metav1.PatchOptions{FieldManager: "ns-controller"}, "status")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range patched.ManagedFields {
		if e.Manager == "ns-controller" {
			found = e.Subresource == "status" && strings.Contains(e.FieldsV1.GetRawString(), `"k:{\"type\":\"Checked\"}"`)
			if !found {
				t.Fatalf("Namespace status entry: %+v %s", e, e.FieldsV1.GetRawBytes())
			}
		}
	}
	if !found {
		t.Fatalf("no entry of ns-controller: %+v", patched.ManagedFields)
	}
}
