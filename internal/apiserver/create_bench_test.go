package apiserver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
	"github.com/kplane-dev/kplane/internal/registry/flowcontrol"
	"github.com/kplane-dev/kplane/internal/registry/quota"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
	"github.com/kplane-dev/kplane/internal/storage"
)

// BenchmarkCreate is the server's part of a create, without the network:
// a ConfigMap of 1 KiB as client-go sends it, through the handler, the
// registry (decode, field manager, validation, admission), the store (in
// memory) and the answer, with the watch caches following. It is the
// write path kplane-bench's create scenario loads, less HTTP/2 and TLS.
func BenchmarkCreate(b *testing.B) { benchCreate(b, newInProcess(b)) }

// BenchmarkCreateAudited is BenchmarkCreate with the audit log on, every
// request at the level given, written to a file: blocking, and in
// batch mode (--audit-log-mode=batch with upstream's log defaults).
func BenchmarkCreateAudited(b *testing.B) {
	for _, run := range []struct {
		level string
		batch bool
	}{{"Metadata", false}, {"RequestResponse", false}, {"Metadata", true}, {"RequestResponse", true}} {
		level, name := run.level, run.level
		if run.batch {
			name += "-batch"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			policyFile := filepath.Join(dir, "policy.yaml")
			if err := os.WriteFile(policyFile, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: "+level+"}]\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			policy, err := audit.ReadPolicy(policyFile)
			if err != nil {
				b.Fatal(err)
			}
			w, err := audit.NewWriter(filepath.Join(dir, "audit.log"), 0, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			if run.batch {
				w.Batch(audit.BatchOptions{BufferSize: 10000, MaxBatchSize: 1})
			}
			defer w.Close()
			benchCreate(b, newInProcess(b, func(c *apiserver.Config) { c.AuditPolicy, c.AuditLog = policy, w }))
		})
	}
}

func benchCreate(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		createConfigMap(b, h, fmt.Sprint("bench-", i))
	}
}

// kibPayload is the 1 KiB of a ConfigMap the create benchmarks send.
var kibPayload = strings.Repeat("x", 1024)

// createConfigMap creates a ConfigMap of 1 KiB in default, as client-go
// sends it in JSON.
func createConfigMap(b *testing.B, h http.Handler, name string) {
	body := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"creationTimestamp":null,"labels":{"app":"kplane-bench"}},"data":{"payload":%q}}`, name, kibPayload)
	r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", bytes.NewBufferString(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json")
	r.Header.Set("User-Agent", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		b.Fatalf("create: %d %s", w.Code, w.Body)
	}
}

// BenchmarkCreateUnderQuota is BenchmarkCreate in a namespace whose
// ResourceQuota counts ConfigMaps, so that every create is charged (its
// quota's status written) before it is stored: one client at a time, and
// 16 at once, whose charges are written together.
func BenchmarkCreateUnderQuota(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprint("clients=", clients), func(b *testing.B) {
			h := newInProcess(b)
			r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/resourcequotas",
				strings.NewReader(`{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q"},"spec":{"hard":{"count/configmaps":"100M"}}}`))
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				b.Fatalf("quota: %d %s", w.Code, w.Body)
			}
			for i := 0; ; i++ { // until the controller has counted
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/resourcequotas/q", nil))
				if strings.Contains(w.Body.String(), `"used":{"count/configmaps":"0"}`) {
					break
				}
				if i == 10000 {
					b.Fatalf("quota not counted: %s", w.Body)
				}
				time.Sleep(time.Millisecond)
			}
			b.ReportAllocs()
			b.ResetTimer()
			if clients == 1 {
				for i := range b.N {
					createConfigMap(b, h, fmt.Sprint("bench-", i))
				}
				return
			}
			b.SetParallelism((clients + goruntime.GOMAXPROCS(0) - 1) / goruntime.GOMAXPROCS(0))
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					createConfigMap(b, h, fmt.Sprint("bench-", n.Add(1)))
				}
			})
		})
	}
}

// BenchmarkCreateProtobuf is BenchmarkCreate as client-go's typed
// clients send it when left as they come: the ConfigMap in protobuf, and
// protobuf then JSON accepted (so answered in protobuf).
func BenchmarkCreateProtobuf(b *testing.B) { benchCreateProtobuf(b, strings.Repeat("x", 1024)) }

// BenchmarkCreateProtobufText is BenchmarkCreateProtobuf with 1 KiB of
// configuration text, a newline (escaped in the stored JSON) every line.
func BenchmarkCreateProtobufText(b *testing.B) { benchCreateProtobuf(b, benchPayloads[1].value) }

func benchCreateProtobuf(b *testing.B, payload string) {
	h := newInProcess(b)
	scheme := runtime.NewScheme()
	corev1.AddToScheme(scheme)
	enc := protobuf.NewSerializer(scheme, scheme)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Labels: map[string]string{"app": "kplane-bench"}},
			Data:       map[string]string{"payload": payload}}
		var body bytes.Buffer
		if err := enc.Encode(cm, &body); err != nil {
			b.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", &body)
		r.Header.Set("Content-Type", "application/vnd.kubernetes.protobuf")
		r.Header.Set("Accept", "application/vnd.kubernetes.protobuf,application/json")
		r.Header.Set("User-Agent", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || w.Header().Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
			b.Fatalf("create: %d %s %s", w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	}
}

// newInProcess is an API server over an in-memory store with the core
// kinds, for requests without the network. Every request is authorized.
func newInProcess(tb testing.TB, opts ...func(*apiserver.Config)) http.Handler {
	return newInProcessAuthorizing(tb, false, opts...)
}

// newInProcessAuthorizing is newInProcess, authorizing by RBAC (as
// --authorization-mode=RBAC) if rbac is set.
func newInProcessAuthorizing(tb testing.TB, rbac bool, opts ...func(*apiserver.Config)) http.Handler {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	tokens := newTokens(tb, reg)
	kinds := append(tokens.Install(core.Kinds()), crd.Kind())
	var authz *core.RBAC
	if rbac {
		authz = &core.RBAC{Registry: reg}
		kinds = authz.Install(kinds)
	}
	webhooks := &webhook.Webhooks{Registry: reg}
	kinds = webhooks.Install(kinds)
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			tb.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	if err := core.Bootstrap(ctx, reg); err != nil {
		tb.Fatal(err)
	}
	// Admission as kplane serve has it (no webhook configured).
	if err := webhooks.Load(ctx); err != nil {
		tb.Fatal(err)
	}
	reg.SetAdmission(webhooks)
	quotas, err := quota.New(quota.Config{Registry: reg})
	if err != nil {
		tb.Fatal(err)
	}
	reg.SetQuota(quotas)
	go reg.Run(ctx)
	go quotas.Run(ctx)
	// Priority and fairness, as kplane serve runs it by default.
	flow := flowcontrol.New(flowcontrol.Config{Registry: reg, Seats: 600})
	go flow.Run(ctx)
	<-flow.Synced() // its writes done, as kplane serve's before it is ready
	cfg := apiserver.Config{Registry: reg, Anonymous: true, Tokens: tokens, FlowControl: flow}
	if authz != nil {
		go authz.Run(ctx)
		cfg.Authorizer = authz.Chain()
	}
	for _, o := range opts {
		o(&cfg)
	}
	return apiserver.New(cfg)
}

// The answers to a create, a patch and an update, spliced from the stored
// bytes, are the object's JSON: what a GET of it answers, byte for byte.
func TestCreateAnswerIsTheStoredObject(t *testing.T) {
	h := newInProcess(t)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i, body := range []string{
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","creationTimestamp":null,"labels":{"app":"x"}},"data":{"k":"v"}}`,
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","annotations":{"z":"<&>"},"finalizers":["x.io/f"]}}`,
		`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"generateName":"g-"},"data":{"k":"v"}}`,
	} {
		created := do(http.MethodPost, "/api/v1/namespaces/default/configmaps", body)
		if created.Code != http.StatusCreated {
			t.Fatalf("create %d: %d %s", i, created.Code, created.Body)
		}
		var meta struct {
			Metadata struct{ Name, ResourceVersion string }
		}
		if err := json.Unmarshal(created.Body.Bytes(), &meta); err != nil || meta.Metadata.ResourceVersion == "" {
			t.Fatalf("create %d: %s: %v", i, created.Body, err)
		}
		got := do(http.MethodGet, "/api/v1/namespaces/default/configmaps/"+meta.Metadata.Name, "")
		if got.Code != http.StatusOK || got.Body.String() != created.Body.String() {
			t.Errorf("create %d answered\n%s\nGET answers\n%s", i, created.Body, got.Body)
		}
		if ct := created.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("create %d: Content-Type %q", i, ct)
		}
		// The answers to a merge patch, a patch that changes nothing and
		// an update are the object's JSON too.
		path := "/api/v1/namespaces/default/configmaps/" + meta.Metadata.Name
		for j, req := range []struct{ method, ctype, body string }{
			{http.MethodPatch, "application/merge-patch+json", `{"metadata":{"labels":{"patched":"yes"}},"data":{"k2":"v2"}}`},
			{http.MethodPatch, "application/merge-patch+json", `{"data":{"k2":"v2"}}`},
			{http.MethodPatch, "application/json-patch+json", `[{"op":"add","path":"/data/k3","value":"v3"}]`},
		} {
			r := httptest.NewRequest(req.method, path, strings.NewReader(req.body))
			r.Header.Set("Content-Type", req.ctype)
			r.Header.Set("Accept", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("object %d, write %d: %d %s", i, j, w.Code, w.Body)
			}
			if got := do(http.MethodGet, path, ""); got.Body.String() != w.Body.String() {
				t.Errorf("object %d, write %d answered\n%s\nGET answers\n%s", i, j, w.Body, got.Body)
			}
		}
		cur := do(http.MethodGet, path, "")
		updated := do(http.MethodPut, path, strings.Replace(cur.Body.String(), `"data":{`, `"data":{"k4":"v4",`, 1))
		if updated.Code != http.StatusOK {
			t.Fatalf("object %d, update: %d %s", i, updated.Code, updated.Body)
		}
		if again := do(http.MethodGet, path, ""); again.Body.String() != updated.Body.String() {
			t.Errorf("object %d: update answered\n%s\nGET answers\n%s", i, updated.Body, again.Body)
		}
	}
}

// BenchmarkCreateCustomResource is BenchmarkCreate for a custom resource
// with a structural schema, as an operator creates one.
func BenchmarkCreateCustomResource(b *testing.B) {
	do := newCustomResources(b, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.bench.kplane.dev"},
"spec":{"group":"bench.kplane.dev","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"replicas":{"type":"integer"},"image":{"type":"string"},"payload":{"type":"string"}}},
"status":{"type":"object","properties":{"ready":{"type":"integer"}}}}}}}]}}`)
	payload := strings.Repeat("x", 1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		body := fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Widget","metadata":{"name":"w-%d","labels":{"app":"kplane-bench"}},"spec":{"replicas":3,"image":"nginx:1.27","payload":%q}}`, i, payload)
		if w := do(http.MethodPost, "/apis/bench.kplane.dev/v1/namespaces/default/widgets", body); w.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkUpdateCustomResourceStatus is the server's part of a
// controller's status update (PUT /status with the resourceVersion of the
// last answer) of a custom resource whose schema has controller-gen's
// usual validations (an enum, a pattern, a list-type map, a date-time, a
// CEL rule): decode, pruning, the field manager, validation with
// ratcheting, the store and the answer. "small" has a spec of six fields;
// "template" adds a pod template of four containers of twenty
// environment variables each, as operators of workloads embed one.
func BenchmarkUpdateCustomResourceStatus(b *testing.B) {
	benchmarkGizmoUpdates(b, "/status", func(name, rv, spec string, i int) string {
		return fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Gizmo","metadata":{"name":%q,"namespace":"default","resourceVersion":%q},`+
			`"spec":%s,"status":{"readyReplicas":%d,"phase":"Running",`+
			`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Reconciled","message":"round %d"}]}}`,
			name, rv, spec, i%4, i)
	})
}

// BenchmarkUpdateCustomResourceStatusUnchanged is a status update that
// changes nothing, as an operator ends every reconcile with an
// unconditional status update of what it read.
func BenchmarkUpdateCustomResourceStatusUnchanged(b *testing.B) {
	benchmarkGizmoUpdates(b, "/status", func(name, rv, spec string, _ int) string {
		return fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Gizmo","metadata":{"name":%q,"namespace":"default","resourceVersion":%q},`+
			`"spec":%s,"status":{"readyReplicas":3,"phase":"Running",`+
			`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Reconciled","message":"ready"}]}}`,
			name, rv, spec)
	})
}

// BenchmarkUpdateCustomResource is a controller's update of the main
// resource (PUT with the resourceVersion of the last answer) that changes
// one annotation, as a controller records a hash or a timestamp, of the
// Gizmos of BenchmarkUpdateCustomResourceStatus with their status set.
func BenchmarkUpdateCustomResource(b *testing.B) {
	benchmarkGizmoUpdates(b, "", func(name, rv, spec string, i int) string {
		return fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Gizmo","metadata":{"name":%q,"namespace":"default","resourceVersion":%q,`+
			`"labels":{"app":"gizmo","tier":"backend"},"annotations":{"bench.kplane.dev/round":"%d"}},`+
			`"spec":%s,"status":{"readyReplicas":3,"phase":"Running",`+
			`"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:04:05Z","reason":"Reconciled","message":"ready"}]}}`,
			name, rv, i, spec)
	})
}

// benchmarkGizmoUpdates creates a "small" Gizmo, with a spec of six
// fields, and a "template" one, which adds a pod template of four
// containers of twenty environment variables each, as operators of
// workloads embed one; then it PUTs body(name, resourceVersion, spec, i)
// to each through subresource ("" or "/status"), once per iteration.
func benchmarkGizmoUpdates(b *testing.B, subresource string, body func(name, rv, spec string, i int) string) {
	do := newCustomResources(b, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gizmos.bench.kplane.dev"},
"spec":{"group":"bench.kplane.dev","scope":"Namespaced","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo","listKind":"GizmoList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","x-kubernetes-validations":[{"rule":"self.min <= self.replicas"}],"properties":{
  "replicas":{"type":"integer","minimum":0,"default":1},"min":{"type":"integer","default":0},"image":{"type":"string","pattern":"^[a-z0-9./:-]+$"},
  "tier":{"type":"string","enum":["frontend","backend"],"default":"backend"},"config":{"type":"string"},
  "template":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}},
"status":{"type":"object","properties":{"readyReplicas":{"type":"integer"},"phase":{"type":"string","enum":["Pending","Running"]},
  "conditions":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["type"],"items":{"type":"object","required":["type","status"],"properties":{
    "type":{"type":"string"},"status":{"type":"string","enum":["True","False","Unknown"]},"lastTransitionTime":{"type":"string","format":"date-time"},
    "reason":{"type":"string"},"message":{"type":"string","maxLength":1024}}}}}}}}}}]}}`)
	const path = "/apis/bench.kplane.dev/v1/namespaces/default/gizmos"
	config := strings.Repeat("x", 600)
	var tmpl strings.Builder
	tmpl.WriteString(`,"template":{"containers":[`)
	for c := range 4 {
		if c > 0 {
			tmpl.WriteString(",")
		}
		fmt.Fprintf(&tmpl, `{"name":"c%d","image":"nginx","env":[`, c)
		for e := range 20 {
			if e > 0 {
				tmpl.WriteString(",")
			}
			fmt.Fprintf(&tmpl, `{"name":"E%d","value":"v%d"}`, e, e)
		}
		tmpl.WriteString(`],"ports":[{"containerPort":80},{"containerPort":443}],"resources":{"limits":{"cpu":"1","memory":"1Gi"}}}`)
	}
	tmpl.WriteString(`]}`)
	for _, c := range []struct{ name, extra string }{{"small", ""}, {"template", tmpl.String()}} {
		w := do(http.MethodPost, path, fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Gizmo","metadata":{"name":%q},"spec":{"replicas":3,"image":"nginx:1.27","config":%q%s}}`, c.name, config, c.extra))
		if w.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
		rv := resourceVersionIn(b, w.Body.Bytes()) // kept across the runs of b.Run
		spec := fmt.Sprintf(`{"replicas":3,"min":0,"image":"nginx:1.27","tier":"backend","config":%q%s}`, config, c.extra)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w := do(http.MethodPut, path+"/"+c.name+subresource, body(c.name, rv, spec, i))
				if w.Code != http.StatusOK {
					b.Fatalf("update: %d %s", w.Code, w.Body)
				}
				rv = resourceVersionIn(b, w.Body.Bytes())
			}
		})
	}
}

// resourceVersionIn is the metadata.resourceVersion of an answer.
func resourceVersionIn(b *testing.B, body []byte) string {
	const key = `"resourceVersion":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		b.Fatalf("no resourceVersion in %s", body)
	}
	rest := body[i+len(key):]
	return string(rest[:bytes.IndexByte(rest, '"')])
}

// newTokens returns the service account tokens of reg, signed with a new
// key.
func newTokens(tb testing.TB, reg *registry.Registry) *core.Tokens {
	tb.Helper()
	tokens := &core.Tokens{Registry: reg}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	if err := tokens.SetKey(key); err != nil {
		tb.Fatal(err)
	}
	return tokens
}

// newCustomResources serves the built-in kinds and CRDs in process, with
// crdBody's CRD created, and returns a function that sends a request as
// client-go does (JSON both ways).
func newCustomResources(b testing.TB, crdBody string) func(method, path, body string) *httptest.ResponseRecorder {
	do, _ := newCustomResourcesHandler(b, crdBody)
	return do
}

// newCustomResourcesHandler is newCustomResources that also returns the
// handler, which serves service account tokens too.
func newCustomResourcesHandler(b testing.TB, crdBody string) (func(method, path, body string) *httptest.ResponseRecorder, http.Handler) {
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	crds := &crd.Controller{Registry: reg}
	crdKind := crd.Kind()
	crdKind.Written = crds.Written
	tokens := newTokens(b, reg)
	kinds := append(tokens.Install(core.Kinds()), crdKind)
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			b.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := core.Bootstrap(ctx, reg); err != nil {
		b.Fatal(err)
	}
	reg.SetConverter(&webhook.Conversions{})
	go reg.Run(ctx)
	go crds.Run(ctx)
	h := apiserver.New(apiserver.Config{Registry: reg, Anonymous: true, Tokens: tokens})
	do := func(method, path, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json")
		r.Header.Set("User-Agent", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do(http.MethodPost, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crdBody); w.Code != http.StatusCreated {
		b.Fatalf("CRD: %d %s", w.Code, w.Body)
	}
	return do, h
}

// BenchmarkGet is the server's part of a GET of a 1 KiB ConfigMap as
// client-go asks for it (JSON, a consistent read), without the network.
func BenchmarkGet(b *testing.B) { benchGet(b, "application/json, */*") }

// BenchmarkGetProtobuf is BenchmarkGet as client-go's typed clients ask,
// answered in protobuf (from the message kept with each record after its
// second read).
func BenchmarkGetProtobuf(b *testing.B) {
	benchGet(b, "application/vnd.kubernetes.protobuf,application/json")
}

// benchGet GETs 100 ConfigMaps of 1 KiB in turn, with Accept accept.
func benchGet(b *testing.B, accept string) {
	h := newInProcess(b)
	payload := strings.Repeat("x", 1024)
	const objects = 100
	for i := range objects {
		postConfigMap(b, h, fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"bench-%d","labels":{"app":"kplane-bench"}},"data":{"payload":%q}}`, i, payload))
	}
	paths := make([]string, objects)
	for i := range paths {
		paths[i] = fmt.Sprintf("/api/v1/namespaces/default/configmaps/bench-%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := httptest.NewRequest(http.MethodGet, paths[i%objects], nil)
		r.Header.Set("Accept", accept)
		r.Header.Set("User-Agent", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("get: %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkApply is the server's part of a server-side apply of a 1 KiB
// ConfigMap by one manager, as client-go sends it (JSON), changing one
// key each time: the decode, the field manager's merge, validation, the
// store and the answer.
func BenchmarkApply(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			benchApply(b, func(i int) string {
				return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"applied","labels":{"app":"kplane-bench"}},"data":{"payload":%q,"n":"%d"}}`, p.value, i)
			})
		})
	}
}

// benchPayloads are 1 KiB values as kplane-bench's --payload makes them:
// one letter, and lines of configuration text.
var benchPayloads = []struct{ name, value string }{
	{"letters", strings.Repeat("x", 1024)},
	{"text", strings.Repeat("server.timeout = 30s\nlisten = 10.0.12.7:8443\n", 24)[:1024]},
}

// BenchmarkApplyUnchanged is a server-side apply of the configuration the
// ConfigMap already matches, as a GitOps controller re-applies its
// manifests on every sync: after the first, nothing changes.
func BenchmarkApplyUnchanged(b *testing.B) {
	body := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"applied","labels":{"app":"kplane-bench"}},"data":{"payload":%q}}`, strings.Repeat("x", 1024))
	benchApply(b, func(int) string { return body })
}

// benchApply times server-side applies of config(i) to one ConfigMap by
// one manager, forced.
func benchApply(b *testing.B, config func(i int) string) {
	h := newInProcess(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/configmaps/applied?fieldManager=bench&force=true", strings.NewReader(config(i)))
		r.Header.Set("Content-Type", "application/apply-patch+yaml")
		r.Header.Set("Accept", "application/json, */*")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK && w.Code != http.StatusCreated {
			b.Fatalf("apply: %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkMergePatch is the server's part of a merge patch of one key of
// a 1 KiB ConfigMap, as kplane-bench's merge-patch scenario sends it:
// the patch, the field manager, validation, the store and the answer.
func BenchmarkMergePatch(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			benchPatch(b, p.value, "application/merge-patch+json", "kplane-bench/v0.0.0 (linux/amd64) kubernetes/$Format",
				func(i int) string { return fmt.Sprintf(`{"data":{"n":"%d"}}`, i) })
		})
	}
}

// BenchmarkStrategicMergePatch is the server's part of a strategic merge
// patch of a label, as kubectl sends one (kubectl patch, label, annotate),
// on a 1 KiB ConfigMap.
func BenchmarkStrategicMergePatch(b *testing.B) {
	benchPatch(b, benchPayloads[0].value, "application/strategic-merge-patch+json", "kubectl/v1.34.0 (linux/amd64) kubernetes/abc",
		func(i int) string { return fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, i) })
}

// benchPatch creates a ConfigMap holding payload, then times patches of
// type ctype from userAgent, the i-th one patch(i).
func benchPatch(b *testing.B, payload, ctype, userAgent string, patch func(i int) string) {
	h := newInProcess(b)
	postConfigMap(b, h, fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"target"},"data":{"payload":%q}}`, payload))
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := httptest.NewRequest(http.MethodPatch, "/api/v1/namespaces/default/configmaps/target", strings.NewReader(patch(i)))
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Accept", "application/json, */*")
		r.Header.Set("User-Agent", userAgent)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("patch: %d %s", w.Code, w.Body)
		}
	}
}

// BenchmarkListCustomResources is the server's part of a LIST (JSON) of
// 1,000 custom resources whose schema has defaults, written through the
// API (so they have them all), as an informer's list or kubectl get
// asks for it.
func BenchmarkListCustomResources(b *testing.B) {
	do := newCustomResources(b, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"gadgets.bench.kplane.dev"},
"spec":{"group":"bench.kplane.dev","scope":"Namespaced","names":{"plural":"gadgets","singular":"gadget","kind":"Gadget","listKind":"GadgetList"},
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"status":{}},"schema":{"openAPIV3Schema":{"type":"object","properties":{
"spec":{"type":"object","properties":{"replicas":{"type":"integer","default":1},"tier":{"type":"string","default":"backend"},"payload":{"type":"string"},
  "ports":{"type":"array","items":{"type":"object","properties":{"port":{"type":"integer"},"protocol":{"type":"string","default":"TCP"}}}}}},
"status":{"type":"object","properties":{"ready":{"type":"integer"}}}}}}}]}}`)
	const path = "/apis/bench.kplane.dev/v1/namespaces/default/gadgets"
	payload := strings.Repeat("x", 512)
	for i := range 1000 {
		body := fmt.Sprintf(`{"apiVersion":"bench.kplane.dev/v1","kind":"Gadget","metadata":{"name":"g-%d"},"spec":{"payload":%q,"ports":[{"port":80},{"port":443}]}}`, i, payload)
		if w := do(http.MethodPost, path, body); w.Code != http.StatusCreated {
			b.Fatalf("create: %d %s", w.Code, w.Body)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if w := do(http.MethodGet, path, ""); w.Code != http.StatusOK || w.Body.Len() < 1000*512 {
			b.Fatalf("list: %d, %d bytes", w.Code, w.Body.Len())
		}
	}
}

// Creates of one shape share the field sets of the managedFields the
// registry remembered for that shape (registry/createmanaged.go), which
// must stay as written whatever becomes of each object after: answered
// in every form, dry runs, sent in protobuf. Every object then holds
// the same field set.
func TestCreatesOfOneShapeKeepTheirFieldSets(t *testing.T) {
	h := newInProcess(t)
	scheme := runtime.NewScheme()
	corev1.AddToScheme(scheme)
	enc := protobuf.NewSerializer(scheme, scheme)
	accepts := []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
		"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"}
	// Four clients at once, so that the race detector (go test -race)
	// sees any write to a shared field set.
	create := func(i int) error {
		name := fmt.Sprintf("shape-%d", i)
		var body bytes.Buffer
		ctype := "application/json"
		if i%2 == 0 {
			ctype = "application/vnd.kubernetes.protobuf"
			cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "x"}}, Data: map[string]string{"k": "v"}}
			if err := enc.Encode(cm, &body); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(&body, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"labels":{"app":"y"}},"data":{"k":"w"}}`, name)
		}
		path := "/api/v1/namespaces/default/configmaps"
		if i%5 == 4 {
			path += "?dryRun=All"
		}
		r := httptest.NewRequest(http.MethodPost, path, &body)
		r.Header.Set("Content-Type", ctype)
		r.Header.Set("Accept", accepts[i%len(accepts)])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			return fmt.Errorf("create %d: %d %s", i, w.Code, w.Body)
		}
		return nil
	}
	const creates, clients = 80, 4
	errs := make(chan error, creates)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < creates; i += clients {
				errs <- create(i)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for i := range creates {
		if i%5 != 4 {
			names = append(names, fmt.Sprintf("shape-%d", i))
		}
	}
	const want = `[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"unknown","operation":"Update"}]`
	for _, name := range names {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps/"+name, nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var cm struct {
			Metadata struct{ ManagedFields []map[string]any }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &cm); err != nil || len(cm.Metadata.ManagedFields) != 1 {
			t.Fatalf("%s: %v %s", name, err, w.Body)
		}
		delete(cm.Metadata.ManagedFields[0], "time")
		if got, _ := json.Marshal(cm.Metadata.ManagedFields); string(got) != want {
			t.Errorf("%s: managedFields %s, want %s", name, got, want)
		}
	}
}

// BenchmarkDelete is the server's part of deleting a ConfigMap of 1 KiB
// (the create before each is not timed), as a namespace's deletion or a
// garbage collector deletes each object: the read, the preconditions and
// finalizers, the store and the answer.
func BenchmarkDelete(b *testing.B) {
	h := newInProcess(b)
	body := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"gone","labels":{"app":"kplane-bench"}},"data":{"payload":%q}}`, benchPayloads[1].value)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		postConfigMap(b, h, body)
		b.StartTimer()
		r := httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/default/configmaps/gone", nil)
		r.Header.Set("Accept", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("delete: %d %s", w.Code, w.Body)
		}
	}
}
