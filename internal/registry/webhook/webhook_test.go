package webhook_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
	"github.com/kplane-dev/kplane/internal/storage"
)

// server is a webhook server that records every review it gets and
// answers by path: /allow, /deny, /label-NAME (a patch adding the label
// NAME=yes), /fail (500).
type server struct {
	*httptest.Server
	mu      sync.Mutex
	reviews map[string][]admissionv1.AdmissionReview // by path
	queries []string
}

func newServer(t testing.TB) *server {
	s := &server{reviews: map[string][]admissionv1.AdmissionReview{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &rev); err != nil || rev.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reviews[r.URL.Path] = append(s.reviews[r.URL.Path], rev)
		s.queries = append(s.queries, r.URL.RawQuery)
		s.mu.Unlock()
		resp := &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}
		switch p := r.URL.Path; {
		case p == "/deny":
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: 403, Message: "no way", Reason: metav1.StatusReasonForbidden}
		case strings.HasPrefix(p, "/label-"):
			name := strings.TrimPrefix(p, "/label-")
			var obj unstructured.Unstructured
			if err := obj.UnmarshalJSON(rev.Request.Object.Raw); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if obj.GetLabels()[name] != "yes" {
				op := `{"op":"add","path":"/metadata/labels/` + name + `","value":"yes"}`
				if len(obj.GetLabels()) == 0 {
					op = `{"op":"add","path":"/metadata/labels","value":{"` + name + `":"yes"}}`
				}
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = []byte("["+op+"]"), &pt
			}
		case p == "/scale-to-5":
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(`[{"op":"replace","path":"/spec/replicas","value":5}]`), &pt
		case p == "/fail":
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		rev.Response, rev.Request = resp, nil
		json.NewEncoder(w).Encode(&rev)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes cut by Close
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *server) got(path string) []admissionv1.AdmissionReview {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]admissionv1.AdmissionReview(nil), s.reviews[path]...)
}

func (s *server) caBundle() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

type env struct {
	t   testing.TB
	ctx context.Context
	kvs *mvcc.Store
	reg *registry.Registry
	w   *webhook.Webhooks
	srv *server
}

func newEnv(t testing.TB, extra ...*registry.Kind) *env {
	t.Helper()
	return newEnvWith(t, nil, extra...)
}

// newEnvWith is newEnv whose webhooks setup configures (given the test
// server) before they first read the configurations: what it sets is
// not set again while they run, as in kplane.
func newEnvWith(t testing.TB, setup func(*webhook.Webhooks, *server), extra ...*registry.Kind) *env {
	t.Helper()
	srv := newServer(t)
	var w *webhook.Webhooks
	ctx, reg, kvs := newRegistry(t, func(reg *registry.Registry) []*registry.Kind {
		w = &webhook.Webhooks{Registry: reg}
		kinds := w.Install(append(append(core.Kinds(), scalerKind()), extra...))
		registry.SetTypeConverters(kinds...) // as the server does
		return kinds
	})
	if setup != nil {
		setup(w, srv)
	}
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := w.Load(ctx); err != nil {
		t.Fatal(err)
	}
	reg.SetAdmission(w)
	following, stop := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		w.Run(following)
	}()
	t.Cleanup(func() { stop(); <-followed })
	alice := registry.WithUser(ctx, registry.User{Name: "alice", Groups: []string{"devs", "system:authenticated"}})
	return &env{t: t, ctx: alice, kvs: kvs, reg: reg, w: w, srv: srv}
}

// newRegistry is a running registry over an in-memory store, serving the
// kinds that kinds returns for it, and converting by webhooks; its
// context ends with the test.
func newRegistry(t testing.TB, kinds func(*registry.Registry) []*registry.Kind) (context.Context, *registry.Registry, *mvcc.Store) {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	for _, k := range kinds(reg) {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	reg.SetConverter(&webhook.Conversions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ctx, reg, kvs
}

// elsewhere is another server's registry over the same store, as another
// kplane on the same etcd: its writes reach e's only through the store.
func (e *env) elsewhere() *registry.Registry {
	e.t.Helper()
	reg := registry.New(registry.Config{Store: storage.New(e.kvs)})
	for _, k := range core.Kinds() {
		if err := reg.Add(k); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Run(ctx)
	}()
	e.t.Cleanup(func() { cancel(); <-done })
	return reg
}

// scalerKind is a kind as a CRD with a scale subresource defines it.
func scalerKind() *registry.Kind {
	return &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Scaler", ListKind: "ScalerList",
		Resource: "scalers", Singular: "scaler", Namespaced: true, UnconditionalUpdate: true,
		Scale: &registry.ScalePaths{SpecReplicas: ".spec.replicas", StatusReplicas: ".status.replicas"}}
}

func (e *env) res(group, resource string) *registry.Resource {
	e.t.Helper()
	r, ok := e.reg.Get(schema.GroupResource{Group: group, Resource: resource})
	if !ok {
		e.t.Fatalf("%s.%s not served", resource, group)
	}
	return r
}

// configure stores a webhook configuration of kind ("Mutating" or
// "Validating") named name with the webhooks given, each a map of fields
// over these defaults: the test server at path, every operation on core
// configmaps, sideEffects None, v1 reviews.
func (e *env) configure(kind, name string, hooks ...map[string]any) {
	e.t.Helper()
	e.store(e.reg, e.configuration(kind, name, hooks...))
}

// configuration is the configuration configure stores.
func (e *env) configuration(kind, name string, hooks ...map[string]any) *unstructured.Unstructured {
	e.t.Helper()
	var list []any
	for _, h := range hooks {
		wh := map[string]any{
			"clientConfig":            map[string]any{"url": e.srv.URL + h["path"].(string), "caBundle": []byte(e.srv.caBundle())},
			"rules":                   []any{map[string]any{"operations": []any{"*"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps"}}},
			"sideEffects":             "None",
			"admissionReviewVersions": []any{"v1"},
		}
		for k, v := range h {
			if k != "path" {
				wh[k] = v
			}
		}
		list = append(list, wh)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind + "WebhookConfiguration",
		"metadata": map[string]any{"name": name}, "webhooks": list,
	}}
	// The object as JSON would give it: []byte caBundles become base64.
	data, err := json.Marshal(obj.Object)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := obj.UnmarshalJSON(data); err != nil {
		e.t.Fatal(err)
	}
	return obj
}

// store writes a configuration through reg.
func (e *env) store(reg *registry.Registry, obj *unstructured.Unstructured) {
	e.t.Helper()
	res, ok := reg.Get(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: strings.ToLower(obj.GetKind()) + "s"})
	if !ok {
		e.t.Fatalf("%s not served", obj.GetKind())
	}
	if _, err := res.Create(e.ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		e.t.Fatalf("storing %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

func configMap(name string, labels map[string]string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
	}}
	if strings.HasSuffix(name, "-") {
		obj.SetGenerateName(name)
	} else {
		obj.SetName(name)
	}
	obj.SetLabels(labels)
	return obj
}

func (e *env) createConfigMap(name string, labels map[string]string, opts registry.WriteOptions) (*unstructured.Unstructured, error) {
	opts.FieldManager = "test"
	return e.res("", "configmaps").Create(e.ctx, "v1", "default", configMap(name, labels), opts)
}

func decode(t *testing.T, raw []byte) *unstructured.Unstructured {
	t.Helper()
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var obj unstructured.Unstructured
	if err := obj.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return &obj
}

func TestValidatingWebhookSeesTheWriteAndMayRefuseIt(t *testing.T) {
	e := newEnv(t)
	e.configure("Validating", "checks",
		map[string]any{"name": "allow.example.com", "path": "/allow"},
		map[string]any{"name": "deny.example.com", "path": "/deny", "objectSelector": map[string]any{"matchLabels": map[string]any{"deny": "yes"}}},
	)
	out, err := e.createConfigMap("a", nil, registry.WriteOptions{SentFieldManager: "test", SentFieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	revs := e.srv.got("/allow")
	if len(revs) != 1 {
		t.Fatalf("/allow got %d reviews, want 1", len(revs))
	}
	if len(e.srv.got("/deny")) != 0 {
		t.Error("/deny was called for an object its objectSelector does not match")
	}
	req := revs[0].Request
	if revs[0].APIVersion != "admission.k8s.io/v1" || revs[0].Kind != "AdmissionReview" {
		t.Errorf("review is %s %s", revs[0].APIVersion, revs[0].Kind)
	}
	want := admissionv1.AdmissionRequest{
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Name:     "a", Namespace: "default", Operation: admissionv1.Create,
	}
	if req.Kind != want.Kind || req.Resource != want.Resource || *req.RequestKind != want.Kind || *req.RequestResource != want.Resource ||
		req.Name != want.Name || req.Namespace != want.Namespace || req.Operation != want.Operation {
		t.Errorf("request names %v %v %q/%q %s, want %v %v %q/%q %s", req.Kind, req.Resource, req.Namespace, req.Name, req.Operation,
			want.Kind, want.Resource, want.Namespace, want.Name, want.Operation)
	}
	if req.UserInfo.Username != "alice" || strings.Join(req.UserInfo.Groups, ",") != "devs,system:authenticated" {
		t.Errorf("userInfo %+v, want alice in devs", req.UserInfo)
	}
	if req.DryRun == nil || *req.DryRun {
		t.Errorf("dryRun %v, want false", req.DryRun)
	}
	var opts metav1.CreateOptions
	if err := json.Unmarshal(req.Options.Raw, &opts); err != nil || opts.Kind != "CreateOptions" || opts.FieldManager != "test" || opts.FieldValidation != "Strict" {
		t.Errorf("options %s (%v), want the CreateOptions sent", req.Options.Raw, err)
	}
	// Validating webhooks see the object as it is stored: with its uid.
	if obj := decode(t, req.Object.Raw); obj == nil || obj.GetUID() != out.GetUID() || obj.GetCreationTimestamp().Time.IsZero() {
		t.Errorf("object %s, want the one stored (uid %s)", req.Object.Raw, out.GetUID())
	}
	if decode(t, req.OldObject.Raw) != nil {
		t.Errorf("oldObject %s on a create", req.OldObject.Raw)
	}
	if q := e.srv.queries[0]; q != "timeout=10s" {
		t.Errorf("query %q, want timeout=10s", q)
	}

	_, err = e.createConfigMap("d", map[string]string{"deny": "yes"}, registry.WriteOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `admission webhook "deny.example.com" denied the request: no way` {
		t.Fatalf("create refused by the webhook: %v", err)
	}
	if _, err := e.res("", "configmaps").Get(e.ctx, "v1", "default", "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused object was stored: %v", err)
	}
	// A dry run is refused the same way and shows the webhook dryRun.
	_, err = e.createConfigMap("d", map[string]string{"deny": "yes"}, registry.WriteOptions{DryRun: true})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("dry run: %v", err)
	}
	if revs := e.srv.got("/deny"); len(revs) != 2 || !*revs[1].Request.DryRun {
		t.Errorf("the dry run's review: %d reviews", len(revs))
	}
}

func TestWebhooksSeeUpdatesAndDeletes(t *testing.T) {
	e := newEnv(t)
	if _, err := e.createConfigMap("a", nil, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.configure("Validating", "checks", map[string]any{"name": "allow.example.com", "path": "/allow"},
		map[string]any{"name": "labelled.example.com", "path": "/allow-labelled", "objectSelector": map[string]any{"matchLabels": map[string]any{"x": "y"}}})
	cm := e.res("", "configmaps")
	obj, err := cm.Get(e.ctx, "v1", "default", "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj.SetLabels(map[string]string{"x": "y"})
	if _, err := cm.Update(e.ctx, "v1", "default", "a", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cm.Delete(e.ctx, "v1", "default", "a", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	revs := e.srv.got("/allow")
	if len(revs) != 2 {
		t.Fatalf("%d reviews, want an update's and a delete's", len(revs))
	}
	up, del := revs[0].Request, revs[1].Request
	if up.Operation != admissionv1.Update || decode(t, up.Object.Raw).GetLabels()["x"] != "y" || decode(t, up.OldObject.Raw) == nil ||
		len(decode(t, up.OldObject.Raw).GetLabels()) != 0 {
		t.Errorf("update review: %s %s / %s", up.Operation, up.Object.Raw, up.OldObject.Raw)
	}
	if !strings.Contains(string(up.Options.Raw), `"kind":"UpdateOptions"`) {
		t.Errorf("update options %s", up.Options.Raw)
	}
	if del.Operation != admissionv1.Delete || decode(t, del.Object.Raw) != nil || decode(t, del.OldObject.Raw).GetLabels()["x"] != "y" {
		t.Errorf("delete review: %s %s / %s", del.Operation, del.Object.Raw, del.OldObject.Raw)
	}
	if !strings.Contains(string(del.Options.Raw), `"kind":"DeleteOptions"`) {
		t.Errorf("delete options %s", del.Options.Raw)
	}
	// The objectSelector matches the update's new object, and the
	// delete's old one.
	if revs := e.srv.got("/allow-labelled"); len(revs) != 2 || revs[1].Request.Operation != admissionv1.Delete {
		t.Errorf("/allow-labelled got %d reviews, want the update's and the delete's", len(revs))
	}
}

func TestMutatingWebhooksPatchInOrderAndAreReinvoked(t *testing.T) {
	e := newEnv(t)
	e.configure("Mutating", "b-second", map[string]any{"name": "second.example.com", "path": "/label-second"})
	e.configure("Mutating", "a-first", map[string]any{"name": "first.example.com", "path": "/label-first", "reinvocationPolicy": "IfNeeded"})
	out, err := e.createConfigMap("gen-", nil, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := out.GetLabels(); l["first"] != "yes" || l["second"] != "yes" {
		t.Errorf("labels %v, want both webhooks' patches", l)
	}
	first, second := e.srv.got("/label-first"), e.srv.got("/label-second")
	// Configurations by name: a-first, then b-second, which changed the
	// object after first, so first (IfNeeded) runs again.
	if len(first) != 2 || len(second) != 1 {
		t.Fatalf("first called %d times, second %d: want 2 and 1", len(first), len(second))
	}
	if decode(t, second[0].Request.Object.Raw).GetLabels()["first"] != "yes" {
		t.Error("the second webhook did not see the first's patch")
	}
	// Mutating webhooks see the object before its name is generated and
	// before it has a uid.
	obj := decode(t, first[0].Request.Object.Raw)
	if first[0].Request.Name != "" || obj.GetName() != "" || obj.GetUID() != "" || obj.GetGenerateName() != "gen-" {
		t.Errorf("mutating webhook saw name %q, object %s", first[0].Request.Name, first[0].Request.Object.Raw)
	}
}

func TestFailurePolicy(t *testing.T) {
	e := newEnv(t)
	e.configure("Validating", "broken",
		map[string]any{"name": "fail.example.com", "path": "/fail", "failurePolicy": "Fail",
			"objectSelector": map[string]any{"matchLabels": map[string]any{"policy": "fail"}}},
		map[string]any{"name": "ignore.example.com", "path": "/fail", "failurePolicy": "Ignore",
			"objectSelector": map[string]any{"matchLabels": map[string]any{"policy": "ignore"}}},
	)
	if _, err := e.createConfigMap("ignored", map[string]string{"policy": "ignore"}, registry.WriteOptions{}); err != nil {
		t.Errorf("failurePolicy Ignore: %v", err)
	}
	_, err := e.createConfigMap("failed", map[string]string{"policy": "fail"}, registry.WriteOptions{})
	if !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), `Internal error occurred: failed calling webhook "fail.example.com": failed to call webhook: `) {
		t.Errorf("failurePolicy Fail: %v", err)
	}
	if len(e.srv.got("/fail")) != 2 {
		t.Errorf("/fail got %d calls, want 2", len(e.srv.got("/fail")))
	}
}

// A webhook without rules, or with none, is never called, as upstream's
// (a policy's matchConstraints without rules match everything; a
// webhook's match nothing).
func TestWebhooksWithoutRulesAreNotCalled(t *testing.T) {
	e := newEnv(t)
	for _, kind := range []string{"Validating", "Mutating"} {
		e.configure(kind, "no-rules-"+strings.ToLower(kind),
			map[string]any{"name": "absent.example.com", "path": "/none", "failurePolicy": "Fail", "rules": nil},
			map[string]any{"name": "empty.example.com", "path": "/none", "failurePolicy": "Fail", "rules": []any{}},
			map[string]any{"name": "ruled.example.com", "path": "/seen-" + kind},
		)
	}
	if _, err := e.createConfigMap("c", nil, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(e.srv.got("/none")) != 0 || len(e.srv.got("/seen-Validating")) != 1 || len(e.srv.got("/seen-Mutating")) != 1 {
		t.Fatalf("without rules called %d times, with rules %d and %d; want 0, 1 and 1",
			len(e.srv.got("/none")), len(e.srv.got("/seen-Validating")), len(e.srv.got("/seen-Mutating")))
	}
}

func TestNamespaceSelectorAndExemptConfigurations(t *testing.T) {
	e := newEnv(t)
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName("watched")
	ns.SetLabels(map[string]string{"watch": "yes"})
	if _, err := e.res("", "namespaces").Create(e.ctx, "v1", "", ns, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	e.configure("Validating", "all", map[string]any{"name": "all.example.com", "path": "/deny",
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"watch": "yes"}},
		"rules":             []any{map[string]any{"operations": []any{"*"}, "apiGroups": []any{"*"}, "apiVersions": []any{"*"}, "resources": []any{"*"}}},
	})
	// Not in a watched namespace: allowed without a call.
	if _, err := e.createConfigMap("free", nil, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.res("", "configmaps").Create(e.ctx, "v1", "watched", configMap("held", nil), registry.WriteOptions{FieldManager: "test"})
	if !apierrors.IsForbidden(err) {
		t.Errorf("create in the watched namespace: %v", err)
	}
	// The webhook matches every resource, but not the configurations: it
	// can be changed and removed.
	e.configure("Validating", "more", map[string]any{"name": "more.example.com", "path": "/allow"})
	if _, _, err := e.res("admissionregistration.k8s.io", "validatingwebhookconfigurations").Delete(e.ctx, "v1", "", "all", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Errorf("deleting the configuration: %v", err)
	}
	if _, err := e.res("", "configmaps").Create(e.ctx, "v1", "watched", configMap("held", nil), registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Errorf("create once the configuration is gone: %v", err)
	}
	if n := len(e.srv.got("/deny")); n != 1 {
		t.Errorf("/deny called %d times, want 1", n)
	}
}

func TestEquivalentResources(t *testing.T) {
	e := newEnv(t)
	e.configure("Validating", "events", map[string]any{"name": "events.example.com", "path": "/allow",
		"rules": []any{map[string]any{"operations": []any{"CREATE"}, "apiGroups": []any{"events.k8s.io"}, "apiVersions": []any{"v1"}, "resources": []any{"events"}}},
	})
	ev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e1"},
		"involvedObject": map[string]any{"kind": "ConfigMap", "name": "a", "namespace": "default"},
		"reason":         "Test", "message": "hello", "type": "Normal",
	}}
	if _, err := e.res("", "events").Create(e.ctx, "v1", "default", ev.DeepCopy(), registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	revs := e.srv.got("/allow")
	if len(revs) != 1 {
		t.Fatalf("%d reviews, want 1 (a core Event is an events.k8s.io Event)", len(revs))
	}
	req := revs[0].Request
	if req.Kind.Group != "events.k8s.io" || req.Resource.Group != "events.k8s.io" || req.RequestKind.Group != "" {
		t.Errorf("kind %v resource %v requestKind %v", req.Kind, req.Resource, req.RequestKind)
	}
	if obj := decode(t, req.Object.Raw); obj.GetAPIVersion() != "events.k8s.io/v1" || obj.Object["note"] != "hello" {
		t.Errorf("object shown %s, want it as an events.k8s.io/v1 Event", req.Object.Raw)
	}
	// matchPolicy Exact does not match it.
	e.configure("Validating", "exact", map[string]any{"name": "exact.example.com", "path": "/deny", "matchPolicy": "Exact",
		"rules": []any{map[string]any{"operations": []any{"CREATE"}, "apiGroups": []any{"events.k8s.io"}, "apiVersions": []any{"v1"}, "resources": []any{"events"}}},
	})
	ev.SetName("e2")
	if _, err := e.res("", "events").Create(e.ctx, "v1", "default", ev, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Errorf("matchPolicy Exact matched an equivalent resource: %v", err)
	}
}

func TestMatchConditions(t *testing.T) {
	e := newEnv(t)
	e.configure("Validating", "conditions",
		map[string]any{"name": "cond.example.com", "path": "/deny", "matchConditions": []any{
			map[string]any{"name": "not-alice-exempt", "expression": "!(request.userInfo.username == 'alice' && has(object.metadata.labels) && 'exempt' in object.metadata.labels)"},
			map[string]any{"name": "creates", "expression": "request.operation == 'CREATE'"},
		}},
		map[string]any{"name": "broken.example.com", "path": "/allow", "failurePolicy": "Fail", "matchConditions": []any{
			map[string]any{"name": "missing-key", "expression": "object.data.nothere == 'x'"},
		}, "objectSelector": map[string]any{"matchLabels": map[string]any{"broken": "yes"}}},
	)
	// Both conditions true: the webhook is called and refuses.
	if _, err := e.createConfigMap("a", nil, registry.WriteOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "no way") {
		t.Errorf("create matching every condition: %v, want the webhook's refusal", err)
	}
	// One false: not called.
	if _, err := e.createConfigMap("b", map[string]string{"exempt": ""}, registry.WriteOptions{}); err != nil {
		t.Errorf("create with a false condition: %v", err)
	}
	if n := len(e.srv.got("/deny")); n != 1 {
		t.Errorf("/deny called %d times, want 1", n)
	}
	// A condition that fails to evaluate, under failurePolicy Fail: the
	// request is refused without a call.
	_, err := e.createConfigMap("c", map[string]string{"broken": "yes", "exempt": ""}, registry.WriteOptions{})
	want := `configmaps "c" is forbidden: expression 'object.data.nothere == 'x'' resulted in error: no such key: nothere`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("create with a failing condition: %v, want %q", err, want)
	}
	if n := len(e.srv.got("/allow")); n != 0 {
		t.Errorf("/allow called %d times, want none", n)
	}
}

// A configuration written through another server on the same store
// applies here too, once this one's watch has seen it (Run).
func TestConfigurationsWrittenElsewhere(t *testing.T) {
	e := newEnv(t)
	e.store(e.elsewhere(), e.configuration("Validating", "far", map[string]any{"name": "far.example.com", "path": "/deny"}))
	deadline := time.Now().Add(30 * time.Second) // a bound on a failure, not a timing assertion
	for i := 0; ; i++ {
		_, err := e.createConfigMap(fmt.Sprintf("c%d", i), nil, registry.WriteOptions{})
		if apierrors.IsForbidden(err) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("create %d: %v; the configuration written elsewhere never applied", i, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A write through /scale shows webhooks autoscaling/v1 Scales, and the
// replicas of a mutating webhook's Scale are what is stored.
func TestScaleWritesShowScales(t *testing.T) {
	e := newEnv(t)
	scalers := e.res("example.kplane.dev", "scalers")
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.kplane.dev/v1", "kind": "Scaler", "metadata": map[string]any{"name": "s"},
		"spec": map[string]any{"replicas": int64(1)},
	}}
	if _, err := scalers.Create(e.ctx, "v1", "default", obj, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	rules := []any{map[string]any{"operations": []any{"UPDATE"}, "apiGroups": []any{"example.kplane.dev"}, "apiVersions": []any{"v1"}, "resources": []any{"scalers/scale"}}}
	e.configure("Mutating", "m", map[string]any{"name": "to5.example.com", "path": "/scale-to-5", "rules": rules})
	e.configure("Validating", "v", map[string]any{"name": "sees.example.com", "path": "/allow", "rules": rules})
	out, err := scalers.UpdateScale(e.ctx, "v1", "default", "s", registry.WriteOptions{FieldManager: "test"}, func(cur *autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
		next := cur.DeepCopy()
		next.Spec.Replicas = 3
		return next, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Replicas != 5 {
		t.Errorf("replicas %d, want the mutating webhook's 5", out.Spec.Replicas)
	}
	revs := e.srv.got("/allow")
	if len(revs) != 1 {
		t.Fatalf("%d validating reviews, want 1", len(revs))
	}
	req := revs[0].Request
	want := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	if req.Kind != want || *req.RequestKind != want || req.SubResource != "scale" || req.Resource.Resource != "scalers" {
		t.Errorf("review of kind %v (request %v), %s/%s; want autoscaling/v1 Scale, scalers/scale", req.Kind, *req.RequestKind, req.Resource.Resource, req.SubResource)
	}
	newScale, oldScale := decode(t, req.Object.Raw), decode(t, req.OldObject.Raw)
	if newScale.GetKind() != "Scale" || newScale.Object["spec"].(map[string]any)["replicas"] != int64(5) ||
		oldScale.Object["spec"].(map[string]any)["replicas"] != int64(1) {
		t.Errorf("validating webhook saw %s, old %s; want Scales of 5 and 1 replicas", req.Object.Raw, req.OldObject.Raw)
	}
}

// Each call is counted as kube-apiserver v1.37.2 counted the same calls:
// by webhook, type and operation, with the code it came to, whether the
// request was refused, why, and the failures ignored.
func TestAdmissionMetrics(t *testing.T) {
	e := newEnv(t)
	selected := func(name, path, label string, extra map[string]any) map[string]any {
		h := map[string]any{"name": name, "path": path, "objectSelector": map[string]any{"matchLabels": map[string]any{label: "yes"}}}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	e.configure("Validating", "v",
		selected("allow.example.com", "/allow", "allow", nil),
		selected("deny.example.com", "/deny", "deny", nil),
		selected("ignore.example.com", "/fail", "ignore", map[string]any{"failurePolicy": "Ignore"}),
		selected("fail.example.com", "/fail", "fail", nil),
	)
	e.configure("Mutating", "m", selected("mallow.example.com", "/allow", "allow", nil))
	for _, l := range []string{"allow", "deny", "ignore", "fail"} {
		e.createConfigMap("c-"+l, map[string]string{l: "yes"}, registry.WriteOptions{})
	}
	durations, requests, rejections, failOpen := e.w.AdmissionMetrics()
	lines := func(ss []webhook.Series) (out []string) {
		for _, s := range ss {
			out = append(out, fmt.Sprint(s.Labels, s.Total()))
		}
		return out
	}
	for _, c := range []struct {
		what string
		got  []webhook.Series
		want []string
	}{
		{"durations", durations, []string{
			"[name allow.example.com operation CREATE rejected false type validating] 1",
			"[name deny.example.com operation CREATE rejected true type validating] 1",
			"[name fail.example.com operation CREATE rejected true type validating] 1",
			"[name ignore.example.com operation CREATE rejected false type validating] 1",
			"[name mallow.example.com operation CREATE rejected false type admit] 1",
		}},
		{"requests", requests, []string{
			"[code 200 name allow.example.com operation CREATE rejected false type validating] 1",
			"[code 200 name mallow.example.com operation CREATE rejected false type admit] 1",
			"[code 403 name deny.example.com operation CREATE rejected true type validating] 1",
			"[code 500 name fail.example.com operation CREATE rejected true type validating] 1",
			"[code 500 name ignore.example.com operation CREATE rejected false type validating] 1",
		}},
		{"rejections", rejections, []string{
			"[error_type calling_webhook_error name fail.example.com operation CREATE rejection_code 500 type validating] 1",
			"[error_type no_error name deny.example.com operation CREATE rejection_code 403 type validating] 1",
		}},
		{"failOpen", failOpen, []string{"[name ignore.example.com type validating] 1"}},
	} {
		if got := lines(c.got); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s:\n%v\nwant\n%v", c.what, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}

// A request to a Namespace names it as its namespace, as upstream's
// request info and create handler do, but for a create by generateName,
// whose request named nothing (kube-apiserver v1.37.2's reviews, read
// off a recording webhook).
func TestNamespaceRequestsNameTheirNamespace(t *testing.T) {
	e := newEnv(t)
	e.configure("Validating", "ns", map[string]any{"name": "ns.example.com", "path": "/allow",
		"rules": []any{map[string]any{"operations": []any{"*"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"namespaces"}}}})
	namespaces := e.res("", "namespaces")
	for _, name := range []string{"named", "gen-"} {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
		if strings.HasSuffix(name, "-") {
			ns.SetGenerateName(name)
		} else {
			ns.SetName(name)
		}
		if _, err := namespaces.Create(e.ctx, "v1", "", ns, registry.WriteOptions{FieldManager: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := namespaces.Patch(e.ctx, "v1", "", "named", []byte(`{"metadata":{"labels":{"a":"b"}}}`),
		registry.PatchOptions{Type: types.MergePatchType, WriteOptions: registry.WriteOptions{FieldManager: "test"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rev := range e.srv.got("/allow") {
		r := rev.Request
		name := r.Name
		if strings.HasPrefix(name, "gen-") && len(name) == len("gen-")+5 {
			name = "gen-"
		}
		got = append(got, fmt.Sprintf("%s name=%q namespace=%q", r.Operation, name, r.Namespace))
	}
	want := []string{`CREATE name="named" namespace="named"`, `CREATE name="gen-" namespace=""`, `UPDATE name="named" namespace="named"`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// kplane's controllers' writes name the user the same controller is
// upstream: a namespace's contents are deleted, and the namespace
// finalized, by kube-controller-manager's namespace controller; its
// default ServiceAccount is made by the service account controller.
func TestControllersWritesNameTheirUsers(t *testing.T) {
	e := newEnv(t)
	ctx, stop := context.WithCancel(context.Background())
	var done sync.WaitGroup
	done.Go(func() { (&core.NamespaceController{Registry: e.reg}).Run(ctx) })
	done.Go(func() { (&core.NamespaceDefaults{Registry: e.reg}).Run(ctx) })
	t.Cleanup(func() { stop(); done.Wait() })
	e.configure("Validating", "watch", map[string]any{"name": "watch.example.com", "path": "/allow",
		"rules": []any{map[string]any{"operations": []any{"*"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps", "serviceaccounts", "namespaces/finalize"}}},
	})
	e.namespace("doomed", nil)
	if _, err := e.res("", "configmaps").Create(e.ctx, "v1", "doomed", configMap("c", nil), registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := e.res("", "serviceaccounts").Get(e.ctx, "v1", "doomed", "default", metav1.GetOptions{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no default ServiceAccount: %v", err)
		}
	}
	if _, _, err := e.res("", "namespaces").Delete(e.ctx, "v1", "", "doomed", metav1.DeleteOptions{}, registry.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CREATE serviceaccounts default":    "system:serviceaccount:kube-system:service-account-controller",
		"CREATE configmaps c":               "alice",
		"DELETE configmaps c":               "system:serviceaccount:kube-system:namespace-controller",
		"DELETE serviceaccounts default":    "system:serviceaccount:kube-system:namespace-controller",
		"UPDATE namespaces/finalize doomed": "system:serviceaccount:kube-system:namespace-controller",
	}
	got := map[string]string{}
	for deadline := time.Now().Add(10 * time.Second); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, rev := range e.srv.got("/allow") {
			r := rev.Request
			if r.Namespace != "doomed" && r.Name != "doomed" {
				continue
			}
			res := r.Resource.Resource
			if r.SubResource != "" {
				res += "/" + r.SubResource
			}
			got[string(r.Operation)+" "+res+" "+r.Name] = r.UserInfo.Username
			if strings.HasPrefix(r.UserInfo.Username, "system:serviceaccount:") && !slices.Contains(r.UserInfo.Groups, "system:serviceaccounts:kube-system") {
				t.Errorf("%s %s: groups %v", r.Operation, res, r.UserInfo.Groups)
			}
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("users by write:\n%v\nwant\n%v", got, want)
	}
}
