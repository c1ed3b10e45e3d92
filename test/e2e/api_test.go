package e2e

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kplane-dev/kplane/internal/storage/storagetest"
)

// call makes a raw request as the admin and returns the status and body.
func (s *server) call(t testing.TB, method, path, contentType string, body []byte, header ...string) (int, http.Header, []byte) {
	t.Helper()
	hc, err := rest.HTTPClientFor(s.config())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, s.config().Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// status decodes a metav1.Status answer.
func status(t testing.TB, data []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("not a Status (%v): %s", err, data)
	}
	return st
}

// The health endpoints check the store, as kube-apiserver's check etcd:
// over etcd with kube-apiserver's check, on the embedded engine with one
// of kplane's own.
func TestHealthChecksTheStore(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		check, other := "embedded-store", "etcd"
		if strings.HasSuffix(t.Name(), "/etcd") {
			check, other = other, check
		}
		code, _, body := s.call(t, "GET", "/readyz?verbose", "", nil)
		want := "[+]ping ok\n[+]" + check + " ok\n[+]poststarthook/crd-informer-synced ok\n[+]shutdown ok\nreadyz check passed\n"
		if code != http.StatusOK || string(body) != want {
			t.Errorf("/readyz?verbose: %d %q, want %q", code, body, want)
		}
		if code, _, body = s.call(t, "GET", "/livez/"+check, "", nil); code != http.StatusOK || string(body) != "ok" {
			t.Errorf("/livez/%s: %d %q", check, code, body)
		}
		if code, _, _ = s.call(t, "GET", "/livez/"+other, "", nil); code != http.StatusNotFound {
			t.Errorf("/livez/%s: %d", other, code)
		}
	})
}

func TestHealthAndVersion(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: mustTLS(t, s)}}
	anonymous := func(p string) (*http.Response, []byte) {
		resp, err := hc.Get(s.config().Host + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for _, p := range []string{"/livez", "/readyz", "/healthz"} {
		if resp, b := anonymous(p); resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("%s: %d %q", p, resp.StatusCode, b)
		}
	}
	// Without a client certificate, only the public endpoints answer: not
	// a single health check, which says why it fails.
	for _, p := range []string{"/api/v1/namespaces", "/readyz/ping", "/livez/"} {
		resp, b := anonymous(p)
		if resp.StatusCode != http.StatusUnauthorized || status(t, b).Reason != metav1.StatusReasonUnauthorized {
			t.Fatalf("anonymous GET %s: %d %s", p, resp.StatusCode, b)
		}
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(s.config())
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.Major != "1" || v.Minor != "37" || !strings.HasPrefix(v.GitVersion, "v1.37.0+kplane.") {
		t.Fatalf("version %+v", v)
	}
}

func mustTLS(t testing.TB, s *server) *tls.Config {
	t.Helper()
	cfg := s.config()
	tc, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func TestDiscovery(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	installFooCRD(t, s)
	code, h, body := s.call(t, "GET", "/apis", "", nil, "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if code != 200 || h.Get("Content-Type") != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" {
		t.Fatalf("aggregated discovery: %d %s", code, h.Get("Content-Type"))
	}
	for _, want := range []string{`"name":"webapp.my.domain"`, `"resource":"foos"`, `"subresource":"status"`, `"name":"coordination.k8s.io"`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Fatalf("aggregated discovery lacks %s:\n%s", want, body)
		}
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(s.config())
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]metav1.APIResource{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			found[l.GroupVersion+"/"+r.Name] = r
		}
	}
	for _, want := range []string{"v1/configmaps", "v1/namespaces", "v1/namespaces/status", "v1/secrets", "v1/events", "v1/serviceaccounts",
		"coordination.k8s.io/v1/leases", "apiextensions.k8s.io/v1/customresourcedefinitions", "webapp.my.domain/v1/foos", "webapp.my.domain/v1/foos/status",
		"rbac.authorization.k8s.io/v1/clusterroles"} {
		if _, ok := found[want]; !ok {
			t.Fatalf("discovery lacks %s", want)
		}
	}
	if r := found["v1/configmaps"]; !r.Namespaced || r.Kind != "ConfigMap" || r.ShortNames[0] != "cm" {
		t.Fatalf("configmaps: %+v", r)
	}
}

func TestBadInput(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	installFooCRD(t, s)
	const cms = "/api/v1/namespaces/default/configmaps"
	cases := []struct {
		name, path, ctype, body string
		code                    int
		reason                  metav1.StatusReason
		msg                     string
	}{
		{"malformed JSON", cms, "application/json", `{"metadata":`, 400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({"metadata":)`},
		{"malformed after apiVersion and kind", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":tru}}`, 400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '}' in literal true (expecting 'e') ({"apiVersion":"v1","kind":"Con ...)`},
		{"apiVersion in another case", cms, "application/json", `{"APIVERSION":"v2","kind":"ConfigMap","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "the API version in the data (v2) does not match the expected API version (v1)"},
		{"kind of another type", cms, "application/json", `{"apiVersion":"v1","kind":5,"metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string ({"apiVersion":"v1","kind":5,"m ...)`},
		{"malformed YAML", cms, "application/yaml", "a: [", 400, metav1.StatusReasonBadRequest, "the object provided is unrecognized (must be of type ConfigMap): yaml: line 1: did not find expected node content (613a205b)"},
		{"kind does not match the URL", cms, "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest,
			`Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion`},
		{"apiVersion does not match the URL", cms, "application/json", `{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "does not match the expected API version"},
		{"wrong field type", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":1}}`, 400, metav1.StatusReasonBadRequest, "cannot be handled as a ConfigMap"},
		{"invalid name", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_OK"}}`, 422, metav1.StatusReasonInvalid, `ConfigMap "Not_OK" is invalid: metadata.name: Invalid value: "Not_OK"`},
		{"invalid data key", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a b":"1"}}`, 422, metav1.StatusReasonInvalid, "data[a b]"},
		{"unknown field, Strict", cms + "?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"dta":{}}`, 400, metav1.StatusReasonBadRequest, `strict decoding error: unknown field "dta"`},
		{"duplicate field, Strict", cms + "?fieldValidation=Strict", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{},"data":{}}`, 400, metav1.StatusReasonBadRequest, `duplicate field "data"`},
		{"body over 3 MiB", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"` + strings.Repeat("x", 3<<20) + `"}}`, 413, metav1.StatusReasonRequestEntityTooLarge, ""},
		{"object over the storage limit", "/apis/webapp.my.domain/v1/namespaces/default/foos", "application/json", `{"apiVersion":"webapp.my.domain/v1","kind":"Foo","metadata":{"name":"big"},"spec":{"foo":"` + strings.Repeat("x", 2<<20) + `"}}`, 413, metav1.StatusReasonRequestEntityTooLarge, "too large to store"},
		{"unsupported media type", cms, "application/xml", `<x/>`, 415, metav1.StatusReasonUnsupportedMediaType, ""},
		{"missing namespace", "/api/v1/namespaces/nope/configmaps", "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound, `namespaces "nope" not found`},
		{"resourceVersion on create", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"5"}}`, 400, metav1.StatusReasonBadRequest, "resourceVersion should not be set on objects to be created"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := s.call(t, "POST", c.path, c.ctype, []byte(c.body))
			st := status(t, body)
			if code != c.code || int(st.Code) != c.code || st.Reason != c.reason || !strings.Contains(st.Message, c.msg) {
				t.Fatalf("got %d %s %q, want %d %s containing %q", code, st.Reason, st.Message, c.code, c.reason, c.msg)
			}
		})
	}
	// Nothing was stored by any of them (kube-system holds kplane's own).
	cs := kubernetes.NewForConfigOrDie(s.config())
	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace!=kube-system"})
	if err != nil || len(list.Items) != 0 {
		t.Fatalf("configmaps after bad input: %v %d", err, len(list.Items))
	}
	// Unknown fields under Warn (the default) are dropped with a warning.
	code, h, _ := s.call(t, "POST", cms, "application/json", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"},"dta":{}}`))
	if code != 201 || !strings.Contains(h.Get("Warning"), `unknown field \"dta\"`) {
		t.Fatalf("Warn: %d, Warning %q", code, h.Get("Warning"))
	}
}

// TestWatchSemantics: resume from a resourceVersion, bookmarks,
// sendInitialEvents with its end bookmark, and 410 for a resourceVersion
// the history no longer reaches.
func TestWatchSemantics(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		cms := cs.CoreV1().ConfigMaps("default")
		a, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
		// Resume after a: b's creation is replayed.
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		ev := next(t, w)
		if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).ResourceVersion != b.ResourceVersion {
			t.Fatalf("resumed watch: %s %+v", ev.Type, ev.Object)
		}
		w.Stop()

		// sendInitialEvents: the state, then the end bookmark.
		w, err = cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: ptrTo(true), AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for {
			ev := next(t, w)
			if ev.Type == watch.Bookmark {
				m := ev.Object.(*corev1.ConfigMap)
				if m.Annotations["k8s.io/initial-events-end"] != "true" || m.ResourceVersion < b.ResourceVersion {
					t.Fatalf("end bookmark %+v", m.ObjectMeta)
				}
				break
			}
			names = append(names, ev.Object.(*corev1.ConfigMap).Name)
		}
		if fmt.Sprint(names) != "[a b]" {
			t.Fatalf("initial events %v", names)
		}
		w.Stop()

		// A resourceVersion older than the history: 410 Gone.
		w, err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: "1"})
		if err != nil {
			t.Fatal(err)
		}
		ev = next(t, w)
		if ev.Type != watch.Error || !apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) {
			t.Fatalf("watch from resourceVersion 1: %s %+v", ev.Type, ev.Object)
		}
		w.Stop()
	})
}

func ptrTo[T any](v T) *T { return &v }

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	return storagetest.Next(t, w, 20*time.Second)
}

// TestCompaction: with --compaction-interval, history goes; an expired
// continue token and a compacted Exact list get 410 Gone.
func TestCompaction(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		cms := cs.CoreV1().ConfigMaps("default")
		for i := 0; i < 4; i++ {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
		if err != nil || page.Continue == "" {
			t.Fatalf("first page: %v %q", err, page.Continue)
		}
		// Writes after the page; compaction passes its revision within
		// two intervals.
		eventually(t, 60*time.Second, "the list's revision compacted", func() (bool, string) {
			cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "tick-"}}, metav1.CreateOptions{})
			_, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: page.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
			return apierrors.IsResourceExpired(err), fmt.Sprint(err)
		})
		_, err = cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue})
		if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "The provided continue parameter is too old") {
			t.Fatalf("expired continue: %v", err)
		}
		// The 410 carries a token that resumes the list after its first
		// page, at the newest revision, as kube-apiserver's.
		var status apierrors.APIStatus
		if !errors.As(err, &status) || status.Status().Continue == "" {
			t.Fatalf("expired continue: %v, without a token to resume", err)
		}
		rest, err := cms.List(ctx, metav1.ListOptions{Limit: 2, Continue: status.Status().Continue})
		if err != nil || len(rest.Items) != 2 || rest.Items[0].Name != "c2" || rest.Items[1].Name != "c3" {
			t.Fatalf("resumed list: %v %v", err, rest)
		}
	}, "--compaction-interval", "300ms")
}

// TestCompactionBoundsTheHistory: with the interval off, rewriting a
// large ConfigMap past --compaction-max-history compacts the store early:
// an Exact list from before the writes gets 410 Gone, the server logs why,
// and the newest history stays readable.
func TestCompactionBoundsTheHistory(t *testing.T) {
	s := startServer(t, "--compaction-interval", "0", "--compaction-max-history", "1Mi")
	cms := kubernetes.NewForConfigOrDie(s.config()).CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.Repeat("b", 64<<10)
	var last string
	eventually(t, 60*time.Second, "the create's revision compacted", func() (bool, string) {
		for i := range 8 {
			p := fmt.Sprintf(`{"data":{"blob":%q,"i":"%d"}}`, blob, i)
			u, err := cms.Patch(ctx, "big", types.MergePatchType, []byte(p), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last = u.ResourceVersion
		}
		_, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		return apierrors.IsResourceExpired(err), fmt.Sprint(err)
	})
	// The line comes once the compaction is done; the 410 as soon as it
	// began.
	eventually(t, 30*time.Second, "the early compaction logged", func() (bool, string) {
		return strings.Contains(s.log.String(), "compacted early"), s.log.String()
	})
	if l, err := cms.List(ctx, metav1.ListOptions{ResourceVersion: last, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil || len(l.Items) != 1 {
		t.Fatalf("Exact list at the newest revision %s: %v", last, err)
	}
	// /metrics counts the early compactions and shows the bound, and the
	// log on disk holds every patch.
	got := map[string]float64{}
	for name, f := range scrapeMetrics(t, s) {
		if !strings.HasPrefix(name, "kplane_storage_") && name != "apiserver_storage_size_bytes" {
			continue
		}
		for _, m := range f.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if got["kplane_storage_compactions_total reason=history"] < 1 || got["kplane_storage_compactions_total reason=interval"] != 0 ||
		got["kplane_storage_history_max_bytes"] != 1<<20 || got["kplane_storage_history_bytes"] <= 0 ||
		got["apiserver_storage_size_bytes storage_cluster_id=embedded"] < 1<<20 {
		t.Errorf("kplane_storage_ metrics after early compactions: %v", got)
	}
}

// TestLifecycle: namespaces delete their content, deleting a CRD removes
// its resource, deletecollection, and a restart keeps every object, its
// resourceVersion and the credentials.
func TestLifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		cs := kubernetes.NewForConfigOrDie(s.config())
		dc := dynamic.NewForConfigOrDie(s.config())
		s.mustKubectl(t, "create", "namespace", "doomed")
		s.mustKubectl(t, "-n", "doomed", "create", "configmap", "c1")
		s.mustKubectl(t, "-n", "doomed", "create", "secret", "generic", "s1", "--from-literal=a=b")
		if _, err := dc.Resource(fooGVR).Namespace("doomed").Create(ctx, newFoo("f1", "x"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// kubectl waits until the namespace is gone.
		s.mustKubectl(t, "delete", "namespace", "doomed", "--timeout=60s")
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("namespace after delete: %v", err)
		}
		if l, _ := cs.CoreV1().ConfigMaps("doomed").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
			t.Fatalf("configmaps left in a deleted namespace: %d", len(l.Items))
		}
		// The namespace controller finishes a namespace once: the events
		// of its own writes to it (the conditions) bring no second pass.
		// It takes events in order, so once a namespace deleted later is
		// done, any second pass over doomed would have been logged.
		s.mustKubectl(t, "create", "namespace", "doomed-later")
		s.mustKubectl(t, "delete", "namespace", "doomed-later", "--timeout=60s")
		eventually(t, 30*time.Second, "the later namespace's deletion in the log", func() (bool, string) {
			return strings.Contains(s.log.String(), `msg="namespace deleted" namespace=doomed-later`), ""
		})
		if n := strings.Count(s.log.String(), `msg="namespace deleted" namespace=doomed`+"\n"); n != 1 {
			t.Errorf("doomed's deletion was logged %d times, want once", n)
		}

		// deletecollection with a selector.
		for i := 0; i < 3; i++ {
			cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("dc", i),
				Labels: map[string]string{"batch": fmt.Sprint(i < 2)}}}, metav1.CreateOptions{})
		}
		if err := cs.CoreV1().ConfigMaps("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=true"}); err != nil {
			t.Fatal(err)
		}
		if l, _ := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "batch"}); len(l.Items) != 1 || l.Items[0].Name != "dc2" {
			t.Fatalf("after deletecollection: %+v", l.Items)
		}

		// A restart keeps objects, resourceVersions and credentials.
		foo, err := dc.Resource(fooGVR).Namespace("default").Create(ctx, newFoo("kept", "x"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kubeconfig, _ := os.ReadFile(s.kubeconfig)
		s.restart()
		again, err := dc.Resource(fooGVR).Namespace("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil || again.GetResourceVersion() != foo.GetResourceVersion() || again.GetUID() != foo.GetUID() {
			t.Fatalf("after restart: %v, rv %s→%s", err, foo.GetResourceVersion(), again.GetResourceVersion())
		}
		if now, _ := os.ReadFile(s.kubeconfig); !bytes.Equal(now, kubeconfig) {
			t.Fatal("the kubeconfig (and so the credentials) changed across a restart")
		}

		// Deleting the CRD deletes its objects and stops serving it.
		s.mustKubectl(t, "delete", "crd", "foos.webapp.my.domain", "--timeout=60s")
		eventually(t, 30*time.Second, "foos no longer served", func() (bool, string) {
			_, err := dc.Resource(fooGVR).Namespace("default").List(ctx, metav1.ListOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		installFooCRD(t, s)
		l, err := dc.Resource(fooGVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) != 0 {
			t.Fatalf("foos after the CRD was deleted and created again: %v %d", err, len(l.Items))
		}
	})
}

var _ = schema.GroupResource{}
var _ = bufio.NewReader
