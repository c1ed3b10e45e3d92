package registry_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
)

// newApplyTarget serves ConfigMaps and Widgets (no schema) on a store of
// its own, by kind.
func newApplyTarget(t *testing.T) (context.Context, map[string]*registry.Resource) {
	t.Helper()
	widgets := &registry.Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", ListKind: "WidgetList",
		Resource: "widgets", Singular: "widget", Namespaced: true, Generation: true, Status: true}
	kinds := append(core.Kinds(), widgets)
	registry.SetTypeConverters(kinds...)
	ctx, reg := runRegistry(t, kinds...)
	if err := core.Bootstrap(ctx, reg); err != nil {
		t.Fatal(err)
	}
	out := map[string]*registry.Resource{}
	for _, k := range kinds {
		if k.Kind == "ConfigMap" || k.Kind == "Widget" {
			out[k.Kind], _ = reg.Get(k.GroupResource())
		}
	}
	return ctx, out
}

// varying are the parts of an answer that differ between two servers
// fed the same requests: uids and times.
var varying = regexp.MustCompile(`"(uid|creationTimestamp|time|deletionTimestamp)":"[^"]*"`)

// normalized is obj's JSON without what varies between two servers fed
// the same requests: uids, times, and the order of the managedFields
// entries, which the field manager sorts by the second they were written
// in.
func normalized(obj *unstructured.Unstructured) string {
	obj = obj.DeepCopy()
	if entries, ok, _ := unstructured.NestedSlice(obj.Object, "metadata", "managedFields"); ok {
		key := func(e any) string {
			m, _ := e.(map[string]any)
			return fmt.Sprint(m["manager"], "|", m["operation"], "|", m["subresource"])
		}
		slices.SortStableFunc(entries, func(a, b any) int { return strings.Compare(key(a), key(b)) })
		unstructured.SetNestedSlice(obj.Object, entries, "metadata", "managedFields")
	}
	data, _ := json.Marshal(obj.Object)
	return varying.ReplaceAllString(string(data), `"$1":"*"`)
}

// A write answered from the memo of writes that changed nothing gives
// what running it gives: random histories of applies (by two managers,
// forced or not, dry runs, duplicate fields under Warn and Strict), merge
// patches, status patches, updates of the main resource and of /status,
// deletes and re-creates, each repeated now and then as a sync loop
// repeats itself, against two servers, one with the memo and one
// without, with every answer compared (resourceVersions included).
func TestNoopWritesMemo(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	type step struct {
		kind, name, op, manager, body string
		force, dry, warn, repeat      bool
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
	var last *step // the last write
	for range 800 {
		if last != nil && rng.IntN(3) == 0 {
			repeat := *last
			repeat.repeat = true
			if repeat.kind == "Widget" && (repeat.op == "update" || repeat.op == "update-status") && rng.IntN(2) == 0 {
				// The same body through the other endpoint: the main
				// resource ignores the status it sets, /status takes it.
				repeat.op = map[string]string{"update": "update-status", "update-status": "update"}[repeat.op]
			}
			steps = append(steps, repeat) // as a sync loop repeats itself
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
		case r < 19:
			s.op, s.manager = "update", "operator"
			if kind == "Widget" && rng.IntN(2) == 0 {
				s.op = "update-status"
			}
			s.body = pick("1", "2")
		default:
			s.op = "apply"
			s.body = configs[kind][0]
		}
		steps = append(steps, s)
		if s.op != "delete" {
			l := s
			last = &l
		}
	}
	run := func(on bool) (answers []string, hits int64) {
		registry.NoopWrites(on)
		defer registry.NoopWrites(true)
		ctx, res := newApplyTarget(t)
		var lastUpdate []byte // the body of the last update, which a repeat sends again
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
			case "update", "update-status":
				body := lastUpdate
				if !s.repeat || body == nil {
					// The object as read, with one field set, as an
					// operator writes back what it read.
					cur, gerr := r.Get(ctx, "v1", "default", s.name, metav1.GetOptions{})
					if gerr != nil {
						err = gerr
						break
					}
					if s.kind == "ConfigMap" {
						unstructured.SetNestedField(cur.Object, s.body, "data", "u")
					} else {
						unstructured.SetNestedField(cur.Object, s.body, "status", "phase")
					}
					body, _ = json.Marshal(cur.Object)
					lastUpdate = body
				}
				obj := &unstructured.Unstructured{}
				if err = obj.UnmarshalJSON(body); err != nil {
					break
				}
				sum := sha256.Sum256(body)
				wo := opts.WriteOptions
				wo.BodySum = &sum
				if s.op == "update-status" {
					wo.Subresource = "status"
				}
				out, err = r.Update(ctx, "v1", "default", s.name, obj, wo)
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
				answer += normalized(out)
			}
			answers = append(answers, answer)
		}
		return answers, registry.NoopWriteHits(res["ConfigMap"]) // the registry's, for both kinds
	}
	with, hits := run(true)
	without, none := run(false)
	for i := range with {
		if with[i] != without[i] {
			t.Fatalf("with the memo:\n%s\nwithout:\n%s", with[i], without[i])
		}
	}
	t.Logf("%d steps, %d writes answered from the memo", len(steps), hits)
	if none != 0 || hits < 80 {
		t.Errorf("answered from the memo: %d with it, %d without; the histories should repeat writes", hits, none)
	}
}
