package registry_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// newApplyTarget serves ConfigMaps and Widgets (no schema) on a store of
// its own.
func newApplyTarget(t *testing.T) (context.Context, map[string]*registry.Resource) {
	t.Helper()
	kvs, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kvs.Close() })
	reg := registry.New(registry.Config{Store: storage.New(kvs)})
	widgets := &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Namespaced: true, Generation: true, Status: true}
	kinds := append(core.Kinds(), widgets)
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	out := map[string]*registry.Resource{}
	for _, k := range []*registry.Kind{kinds[0], widgets} {
		if k.Kind != "ConfigMap" && k.Kind != "Widget" {
			continue
		}
		res, _ := reg.Get(k.GroupResource())
		out[k.Kind] = res
	}
	if out["ConfigMap"] == nil {
		for _, k := range kinds {
			if k.Kind == "ConfigMap" {
				out["ConfigMap"], _ = reg.Get(k.GroupResource())
			}
		}
	}
	return ctx, out
}

// varying are the parts of an answer that differ between two servers
// fed the same requests: uids and times.
var varying = regexp.MustCompile(`"(uid|creationTimestamp|time|deletionTimestamp)":"[^"]*"`)

// An apply answered from the memo of applies that changed nothing gives
// what running it gives: random histories of applies (repeated, by two
// managers, forced or not, dry runs, with unknown fields under Warn),
// merge patches, status writes, deletes and re-creates, against two
// servers, one with the memo and one without, with every answer
// compared (resourceVersions included).
func TestApplyMemoChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	type step struct {
		kind, name, op, manager, body string
		force, dry, warn              bool
	}
	configs := map[string][]string{
		"ConfigMap": {
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"default"},"data":{"a":"1"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"default","labels":{"l":"x"}},"data":{"a":"1","b":"2"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"default"},"data":{"a":"2"},"bogus":1}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s","namespace":"default"},"data":{"a":"1","a":"1"}}`,
		},
		"Widget": {
			`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"%s","namespace":"default"},"spec":{"size":1}}`,
			`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":{"name":"%s","namespace":"default"},"spec":{"size":1,"color":"red"}}`,
		},
	}
	var steps []step
	var last *step // the last apply
	for range 600 {
		if last != nil && rng.IntN(3) == 0 {
			steps = append(steps, *last) // as a GitOps loop repeats itself
			continue
		}
		kind := pick("ConfigMap", "Widget")
		s := step{kind: kind, name: pick("one", "two"), manager: pick("flux", "argo")}
		switch r := rng.IntN(20); {
		case r < 12:
			s.op = "apply"
			s.body = configs[kind][rng.IntN(len(configs[kind]))]
			s.force, s.dry, s.warn = rng.IntN(3) > 0, rng.IntN(15) == 0, rng.IntN(4) == 0
		case r < 15:
			s.op, s.manager = "merge", "editor"
			if kind == "ConfigMap" {
				s.body = fmt.Sprintf(`{"data":{"%s":"%d"}}`, pick("a", "c"), rng.IntN(3))
			} else {
				s.body = fmt.Sprintf(`{"spec":{"size":%d}}`, rng.IntN(3))
			}
		case r < 17 && kind == "Widget":
			s.op, s.manager = "status", "controller"
			s.body = fmt.Sprintf(`{"status":{"ready":%d}}`, rng.IntN(2))
		case r < 18:
			s.op = "delete"
		default:
			s.op = "apply"
			s.body = configs[kind][0]
		}
		steps = append(steps, s)
		if s.op == "apply" {
			l := s
			last = &l
		}
	}
	run := func(on bool) (answers []string, hits int64) {
		registry.NoopApplies(on)
		defer registry.NoopApplies(true)
		ctx, res := newApplyTarget(t)
		for i, s := range steps {
			r := res[s.kind]
			var warnings []string
			opts := registry.PatchOptions{WriteOptions: registry.WriteOptions{FieldManager: s.manager, DryRun: s.dry}, Force: s.force}
			if s.warn {
				opts.Warn = func(msg string) { warnings = append(warnings, msg) }
			} else {
				opts.Strict = s.kind == "ConfigMap" && i%2 == 0
			}
			var out *unstructured.Unstructured
			var created bool
			var err error
			switch s.op {
			case "apply":
				opts.Type = types.ApplyYAMLPatchType
				out, created, err = r.Patch(ctx, "v1", "default", s.name, []byte(fmt.Sprintf(s.body, s.name)), opts)
			case "merge":
				opts.Type = types.MergePatchType
				out, created, err = r.Patch(ctx, "v1", "default", s.name, []byte(s.body), opts)
			case "status":
				opts.Type, opts.Subresource = types.MergePatchType, "status"
				out, created, err = r.Patch(ctx, "v1", "default", s.name, []byte(s.body), opts)
			case "delete":
				var obj runtime.Object
				if obj, _, err = r.Delete(ctx, "v1", "default", s.name, metav1.DeleteOptions{}, registry.WriteOptions{}); err == nil {
					out, _ = obj.(*unstructured.Unstructured)
					if out == nil {
						out = &unstructured.Unstructured{Object: map[string]any{"status": fmt.Sprintf("%T", obj)}}
					}
				}
			}
			answer := fmt.Sprintf("%d %s %s: created %v, warnings %q, ", i, s.op, s.kind, created, warnings)
			if err != nil {
				answer += fmt.Sprintf("error %s %s", apierrors.ReasonForError(err), err)
			} else {
				data, _ := json.Marshal(out.Object)
				answer += varying.ReplaceAllString(string(data), `"$1":"*"`)
			}
			answers = append(answers, answer)
		}
		for _, r := range res {
			hits += registry.NoopApplyHits(r)
		}
		return answers, hits
	}
	with, hits := run(true)
	without, none := run(false)
	for i := range with {
		if with[i] != without[i] {
			t.Fatalf("with the memo:\n%s\nwithout:\n%s", with[i], without[i])
		}
	}
	t.Logf("%d steps, %d applies answered from the memo", len(steps), hits)
	if none != 0 || hits < 50 {
		t.Errorf("answered from the memo: %d with it, %d without; the histories should repeat applies", hits, none)
	}
}
