package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
)

// TestPatchClientsControllerRuntime drives PATCH through controller-runtime's
// client the way operators do (seed 001's advice: Patch, not Update).
func TestPatchClientsControllerRuntime(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		c, err := client.New(s.config(), client.Options{Scheme: scheme(t)})
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(s.config())

		t.Run("merge-from on a ConfigMap changes only the diff, even from a stale base", func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "merge-from", Namespace: "default"},
				Data: map[string]string{"a": "1", "b": "2"}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			base := cm.DeepCopy()
			// Another writer changes the object after base was read.
			other := cm.DeepCopy()
			other.Data["other"] = "x"
			if err := c.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
			// From the stale base: delete a, change b, add c.
			delete(cm.Data, "a")
			cm.Data["b"], cm.Data["c"] = "3", "4"
			if err := c.Patch(ctx, cm, client.MergeFrom(base)); err != nil {
				t.Fatalf("merge patch from a stale base (no resourceVersion in it): %v", err)
			}
			want := map[string]string{"b": "3", "c": "4", "other": "x"}
			if fmt.Sprint(cm.Data) != fmt.Sprint(want) {
				t.Fatalf("object written back by Patch: data %v, want %v", cm.Data, want)
			}
			got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Data) != fmt.Sprint(want) || got.ResourceVersion != cm.ResourceVersion || got.ResourceVersion == other.ResourceVersion {
				t.Fatalf("stored: data %v at %s; want %v at the patch's %s (after %s)", got.Data, got.ResourceVersion, want, cm.ResourceVersion, other.ResourceVersion)
			}
		})

		t.Run("merge-from on a Foo custom resource", func(t *testing.T) {
			foo := &webappv1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "merge-from", Namespace: "default"}, Spec: webappv1.FooSpec{Foo: "bar"}}
			if err := c.Create(ctx, foo); err != nil {
				t.Fatal(err)
			}
			created := foo.ResourceVersion
			base := foo.DeepCopy()
			foo.Spec.Foo = "Hello"
			foo.Labels = map[string]string{"patched": "yes"}
			if err := c.Patch(ctx, foo, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			got := &webappv1.Foo{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(foo), got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Foo != "Hello" || got.Labels["patched"] != "yes" || got.ResourceVersion == created || got.ResourceVersion != foo.ResourceVersion {
				t.Fatalf("stored spec.foo %q labels %v at %s (created at %s, patch answered %s)", got.Spec.Foo, got.Labels, got.ResourceVersion, created, foo.ResourceVersion)
			}
			// Patching to what is stored writes nothing.
			same := got.DeepCopy()
			if err := c.Patch(ctx, same, client.MergeFrom(got)); err != nil {
				t.Fatal(err)
			}
			if same.ResourceVersion != got.ResourceVersion {
				t.Fatalf("an empty merge patch moved resourceVersion %s -> %s", got.ResourceVersion, same.ResourceVersion)
			}
		})

		t.Run("merge-from with optimistic lock conflicts when stale", func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "locked", Namespace: "default"}, Data: map[string]string{"v": "1"}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			stale := cm.DeepCopy()
			cm.Data["v"] = "2"
			if err := c.Update(ctx, cm); err != nil {
				t.Fatal(err)
			}
			patched := stale.DeepCopy()
			patched.Data["v"] = "stale"
			err := c.Patch(ctx, patched, client.MergeFromWithOptions(stale, client.MergeFromWithOptimisticLock{}))
			if !apierrors.IsConflict(err) {
				t.Fatalf("stale optimistic-lock patch: %v, want 409 Conflict", err)
			}
			const msg = `Operation cannot be fulfilled on configmaps "locked": the object has been modified; please apply your changes to the latest version and try again`
			if err.Error() != msg {
				t.Fatalf("conflict message:\n got %s\nwant %s", err, msg)
			}
			if got := getCM(t, s, "locked"); got.Data["v"] != "2" || got.ResourceVersion != cm.ResourceVersion {
				t.Fatalf("a refused patch changed the object: %v at %s", got.Data, got.ResourceVersion)
			}

			fresh := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), fresh); err != nil {
				t.Fatal(err)
			}
			base := fresh.DeepCopy()
			fresh.Data["v"] = "3"
			if err := c.Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				t.Fatalf("fresh optimistic-lock patch: %v", err)
			}
			if got := getCM(t, s, "locked"); got.Data["v"] != "3" || got.ResourceVersion == base.ResourceVersion {
				t.Fatalf("after the fresh patch: %v at %s (base %s)", got.Data, got.ResourceVersion, base.ResourceVersion)
			}
		})

		t.Run("apply on a ConfigMap tracks owners and conflicts between them", func(t *testing.T) {
			apply := func(owner, value string, opts ...client.ApplyOption) error {
				ac := corev1ac.ConfigMap("applied", "default").WithData(map[string]string{"x": value})
				return c.Apply(ctx, ac, append(opts, client.FieldOwner(owner))...)
			}
			get := func() (string, []metav1.ManagedFieldsEntry) {
				cm := getCM(t, s, "applied")
				if cm == nil {
					t.Fatal("the applied ConfigMap does not exist")
				}
				return cm.Data["x"], cm.ManagedFields
			}
			checkApplyOwnership(t, apply, get, "data", "x")
		})

		t.Run("apply on a Foo tracks owners and conflicts between them", func(t *testing.T) {
			apply := func(owner, value string, opts ...client.ApplyOption) error {
				u := newFoo("applied", value)
				u.SetNamespace("default")
				return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), append(opts, client.FieldOwner(owner))...)
			}
			get := func() (string, []metav1.ManagedFieldsEntry) {
				foo := &webappv1.Foo{}
				if err := c.Get(ctx, types.NamespacedName{Namespace: "default", Name: "applied"}, foo); err != nil {
					t.Fatal(err)
				}
				return foo.Spec.Foo, foo.ManagedFields
			}
			checkApplyOwnership(t, apply, get, "spec", "foo")
		})

		t.Run("deprecated client.Apply patch with an unstructured Foo", func(t *testing.T) {
			u := newFoo("apply-patch", "one")
			u.SetNamespace("default")
			//lint:ignore SA1019 the older API, still widely used
			if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("patcher"), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
			got := getFoo(t, s, "apply-patch")
			if v, _, _ := unstructured.NestedString(got.Object, "spec", "foo"); v != "one" || u.GetResourceVersion() != got.GetResourceVersion() {
				t.Fatalf("applied Foo: spec.foo %q at %s, Patch answered %s", v, got.GetResourceVersion(), u.GetResourceVersion())
			}
			if !ownsApplied(t, got.GetManagedFields(), "patcher", "spec", "foo") {
				t.Fatalf("managedFields without patcher's Apply of .spec.foo: %+v", got.GetManagedFields())
			}
		})
	})
}

// checkApplyOwnership: the first apply creates the object and records its
// owner; a second owner setting the same field to another value gets 409
// with the field named, and nothing changes; the same apply with
// ForceOwnership wins and moves ownership of the field.
func checkApplyOwnership(t *testing.T, apply func(owner, value string, opts ...client.ApplyOption) error,
	get func() (string, []metav1.ManagedFieldsEntry), path ...string) {
	t.Helper()
	field := "." + strings.Join(path, ".")
	if err := apply("owner-a", "a"); err != nil {
		t.Fatalf("apply by owner-a (creates): %v", err)
	}
	v, mf := get()
	if v != "a" || !ownsApplied(t, mf, "owner-a", path...) {
		t.Fatalf("after owner-a's apply: %s=%q, managedFields %+v", field, v, mf)
	}
	// Reapplying the same configuration is not a conflict.
	if err := apply("owner-a", "a"); err != nil {
		t.Fatalf("owner-a reapplying: %v", err)
	}

	err := apply("owner-b", "b")
	if !apierrors.IsConflict(err) {
		t.Fatalf("owner-b applying %s over owner-a: %v, want 409 Conflict", field, err)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict || st.Status().Details.Causes[0].Field != field {
		t.Fatalf("conflict without the cause naming %s: %#v", field, err)
	}
	if msg := err.Error(); !strings.Contains(msg, `conflict with "owner-a"`) || !strings.Contains(msg, field) {
		t.Fatalf("conflict message %q does not name owner-a and %s", msg, field)
	}
	if v, _ := get(); v != "a" {
		t.Fatalf("a refused apply changed %s to %q", field, v)
	}

	if err := apply("owner-b", "b", client.ForceOwnership); err != nil {
		t.Fatalf("owner-b applying with force: %v", err)
	}
	v, mf = get()
	if v != "b" || !ownsApplied(t, mf, "owner-b", path...) || ownsApplied(t, mf, "owner-a", path...) {
		t.Fatalf("after the forced apply: %s=%q, managedFields %+v", field, v, mf)
	}
}

// ownsApplied reports whether manager has an Apply entry in mf owning path.
func ownsApplied(t *testing.T, mf []metav1.ManagedFieldsEntry, manager string, path ...string) bool {
	t.Helper()
	return ownsField(t, mf, manager, metav1.ManagedFieldsOperationApply, path...)
}

// ownsField reports whether manager has an entry for op in mf owning path.
func ownsField(t *testing.T, mf []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType, path ...string) bool {
	t.Helper()
	parts := make([]any, len(path))
	for i, p := range path {
		parts[i] = p
	}
	for _, e := range mf {
		if e.Manager != manager || e.Operation != op || e.FieldsV1 == nil {
			continue
		}
		if e.FieldsType != "FieldsV1" || e.Time == nil {
			t.Errorf("managedFields entry of %s: fieldsType %q, time %v", manager, e.FieldsType, e.Time)
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.GetRawBytes())); err != nil {
			t.Fatalf("managedFields of %s: %v", manager, err)
		}
		if set.Has(fieldpath.MakePathOrDie(parts...)) {
			return true
		}
	}
	return false
}

// TestPatchClientsConcurrentMergePatchers: merge patches carry no
// resourceVersion, so writers of different keys never conflict, and none of
// their writes is lost.
func TestPatchClientsConcurrentMergePatchers(t *testing.T) {
	const writers, rounds = 8, 10
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		cms := cs.CoreV1().ConfigMaps("default")
		// Created with a field, so the create is tracked in managedFields:
		// as upstream, an object whose managedFields are empty is only
		// tracked again after an apply (apimachinery's
		// skipNonAppliedManager), and ownership below would be empty.
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "patchers"}, Data: map[string]string{"seed": "x"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, FieldSelector: "metadata.name=patchers"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		var conflicts atomic.Int64
		errs := make(chan error, writers*rounds)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("k%d", i)
				for r := range rounds {
					patch := fmt.Sprintf(`{"data":{%q:"%d"}}`, key, r)
					out, err := cms.Patch(ctx, "patchers", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "patcher-" + key})
					switch {
					case apierrors.IsConflict(err):
						conflicts.Add(1)
						errs <- err
					case err != nil:
						errs <- err
					case out.Data[key] != strconv.Itoa(r):
						errs <- fmt.Errorf("patch %s answered %s=%q", patch, key, out.Data[key])
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := conflicts.Load(); n != 0 {
			t.Fatalf("%d merge patches got 409 Conflict", n)
		}

		final, err := cms.Get(ctx, "patchers", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Every key holds its writer's last value, and its writer's
		// managedFields entry owns it: a patch retried on a newer version
		// is tracked against that version, not the one it first read.
		for i := range writers {
			k := fmt.Sprintf("k%d", i)
			if final.Data[k] != strconv.Itoa(rounds-1) {
				t.Errorf("%s = %q, want %d (its last patch)", k, final.Data[k], rounds-1)
			}
			if !ownsField(t, final.ManagedFields, "patcher-"+k, metav1.ManagedFieldsOperationUpdate, "data", k) {
				t.Errorf("patcher-%s does not own .data.%s: %+v", k, k, final.ManagedFields)
			}
		}

		// The watch sees one MODIFIED per patch, in order: each state
		// differs from the one before in exactly one key, moved on by
		// one round. A patch that overwrote another's key with an old
		// value (a lost update) would break this.
		prev := cm.Data
		rvs := map[string]bool{}
		var last *corev1.ConfigMap
		for n := 0; n < writers*rounds; n++ {
			var ev watch.Event
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("watch closed after %d of %d events", n, writers*rounds)
				}
				ev = e
			case <-time.After(30 * time.Second):
				t.Fatalf("only %d of %d MODIFIED events after 30s", n, writers*rounds)
			}
			obj, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Modified || !ok {
				t.Fatalf("event %d: %s %T, want MODIFIED ConfigMap", n, ev.Type, ev.Object)
			}
			if rvs[obj.ResourceVersion] {
				t.Fatalf("event %d repeats resourceVersion %s", n, obj.ResourceVersion)
			}
			rvs[obj.ResourceVersion] = true
			if err := oneKeyStep(prev, obj.Data); err != nil {
				t.Fatalf("event %d at %s: %v (before: %v, after: %v)", n, obj.ResourceVersion, err, prev, obj.Data)
			}
			prev, last = obj.Data, obj
		}
		if last.ResourceVersion != final.ResourceVersion {
			t.Fatalf("the last event is at %s, the object at %s", last.ResourceVersion, final.ResourceVersion)
		}
	})
}

// oneKeyStep checks that after differs from before in exactly one key,
// whose value went from r-1 (or absent) to r.
func oneKeyStep(before, after map[string]string) error {
	var changed []string
	for k, v := range after {
		if before[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			return fmt.Errorf("key %s disappeared", k)
		}
	}
	if len(changed) != 1 {
		return fmt.Errorf("keys changed: %v, want exactly one", changed)
	}
	k := changed[0]
	want := "0"
	if old, ok := before[k]; ok {
		n, err := strconv.Atoi(old)
		if err != nil {
			return err
		}
		want = strconv.Itoa(n + 1)
	}
	if after[k] != want {
		return fmt.Errorf("%s went %q -> %q, want %q", k, before[k], after[k], want)
	}
	return nil
}

// TestPatchClientsConcurrentUpdaters is seed 000's fix under contention:
// updaters that start from the same read conflict (409), and
// retry.RetryOnConflict with a fresh read makes every increment land
// exactly once.
func TestPatchClientsConcurrentUpdaters(t *testing.T) {
	const updaters, rounds = 8, 5
	// Enough attempts for the last of 8 contenders; the waits only spread
	// the retries out.
	backoff := wait.Backoff{Steps: 50, Duration: time.Millisecond, Factor: 1.5, Jitter: 1, Cap: 50 * time.Millisecond}
	forEachEngine(t, func(t *testing.T, s *server) {
		cms := kubernetes.NewForConfigOrDie(s.config()).CoreV1().ConfigMaps("default")
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		increment := func(cm *corev1.ConfigMap) error {
			n, err := strconv.Atoi(cm.Data["n"])
			if err != nil {
				return err
			}
			cm.Data["n"] = strconv.Itoa(n + 1)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}

		// Each round, every updater reads the counter, waits until all
		// have read it (so all hold the same resourceVersion), then
		// increments from that read and retries from fresh reads. At
		// most one first attempt per round can win.
		read := make([]sync.WaitGroup, rounds)
		done := make([]sync.WaitGroup, rounds)
		for r := range rounds {
			read[r].Add(updaters)
			done[r].Add(updaters)
		}
		var conflicts, updates atomic.Int64
		errs := make(chan error, updaters*rounds)
		var wg sync.WaitGroup
		for range updaters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range rounds {
					stale, err := cms.Get(ctx, "counter", metav1.GetOptions{})
					read[r].Done()
					read[r].Wait()
					if err == nil {
						first := true
						err = retry.RetryOnConflict(backoff, func() error {
							cm := stale
							if !first {
								var err error
								if cm, err = cms.Get(ctx, "counter", metav1.GetOptions{}); err != nil {
									return err
								}
							}
							first = false
							err := increment(cm)
							if apierrors.IsConflict(err) {
								conflicts.Add(1)
							} else if err == nil {
								updates.Add(1)
							}
							return err
						})
					}
					if err != nil {
						errs <- fmt.Errorf("round %d: %w", r, err)
					}
					done[r].Done()
					done[r].Wait()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		final, err := cms.Get(ctx, "counter", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		total := updaters * rounds
		if final.Data["n"] != strconv.Itoa(total) || updates.Load() != int64(total) {
			t.Fatalf("counter %s after %d successful updates, want %d", final.Data["n"], updates.Load(), total)
		}
		if atLeast := int64((updaters - 1) * rounds); conflicts.Load() < atLeast {
			t.Fatalf("%d conflicts; %d updaters sharing one read must give at least %d", conflicts.Load(), updaters, atLeast)
		}
		t.Logf("%d increments, %d conflicts retried", total, conflicts.Load())
	})
}
