package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

var ctx = context.Background()

// Open returns the storage.Interface under test, in front of s. Keys in
// the suite are under "/configmaps/"; a watch cache under test must
// cover that prefix and keep at most 2 events of history, so that the
// suite can push a watch's resourceVersion out of it.
type Open func(t testing.TB, s *storage.Store) storage.Interface

// Run runs the suite over storage.Store itself; newKV returns a fresh kv
// store per subtest.
func Run(t *testing.T, newKV func(t testing.TB) kv.Store) {
	RunWith(t, newKV, func(_ testing.TB, s *storage.Store) storage.Interface { return s })
}

// RunWith runs the suite over what open puts in front of each store.
func RunWith(t *testing.T, newKV func(t testing.TB) kv.Store, open Open) {
	t.Run("create, get and the resourceVersion", func(t *testing.T) { testCreateGet(t, newKV(t), open) })
	t.Run("guaranteed update", func(t *testing.T) { testUpdate(t, newKV(t), open) })
	t.Run("delete", func(t *testing.T) { testDelete(t, newKV(t), open) })
	t.Run("paged lists are one snapshot", func(t *testing.T) { testList(t, newKV(t), open) })
	t.Run("watch", func(t *testing.T) { runWatch(t, newKV, open) })
}

func configMap(name string, data string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"data":     map[string]any{"k": data},
	}}
	if lbls != nil {
		u.SetLabels(lbls)
	}
	return u
}

func rv(t testing.TB, u *unstructured.Unstructured) int64 {
	t.Helper()
	v, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", u.GetResourceVersion(), err)
	}
	return v
}

func revision(t testing.TB, k kv.Store) int64 {
	t.Helper()
	r, err := k.Range(ctx, "/", kv.RangeOptions{CountOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return r.Revision
}

func wantCode(t testing.TB, what string, err error, c storage.Code) {
	t.Helper()
	if !storage.HasCode(err, c) {
		t.Fatalf("%s: error %v, want %s", what, err, c)
	}
}

func testCreateGet(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	base := revision(t, k)
	out, err := s.Create(ctx, "/configmaps/default/a", configMap("a", "1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if rv(t, out) != base+1 {
		t.Fatalf("created at resourceVersion %s, want the write's revision %d", out.GetResourceVersion(), base+1)
	}
	_, err = s.Create(ctx, "/configmaps/default/a", configMap("a", "2", nil))
	wantCode(t, "second create", err, storage.CodeExists)
	withRV := configMap("b", "1", nil)
	withRV.SetResourceVersion("5")
	_, err = s.Create(ctx, "/configmaps/default/b", withRV)
	wantCode(t, "create with a resourceVersion", err, storage.CodeInvalidObj)

	got, err := s.Get(ctx, "/configmaps/default/a", storage.GetOptions{})
	if err != nil || got.GetResourceVersion() != out.GetResourceVersion() {
		t.Fatalf("get = %v, %v", got, err)
	}
	if data, _, _ := unstructured.NestedString(got.Object, "data", "k"); data != "1" {
		t.Fatalf("get returned data %q", data)
	}
	raw, _ := k.Range(ctx, "/configmaps/default/a", kv.RangeOptions{})
	if u := (&unstructured.Unstructured{}); u.UnmarshalJSON(raw.KVs[0].Value) != nil || u.GetResourceVersion() != "" {
		t.Fatalf("the stored form carries a resourceVersion: %s", raw.KVs[0].Value)
	}
	_, err = s.Get(ctx, "/configmaps/default/missing", storage.GetOptions{})
	wantCode(t, "get of a missing key", err, storage.CodeNotFound)
	_, err = s.Get(ctx, "/configmaps/default/a", storage.GetOptions{ResourceVersion: strconv.FormatInt(base+100, 10)})
	wantCode(t, "get not older than a future revision", err, storage.CodeTooLargeResourceVersion)
	_, err = s.Get(ctx, "/configmaps/default/a", storage.GetOptions{ResourceVersion: "x"})
	wantCode(t, "get with a malformed resourceVersion", err, storage.CodeInvalidRequest)
}

func setData(v string) storage.UpdateFunc {
	return func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		unstructured.SetNestedField(cur.Object, v, "data", "k")
		return cur, nil
	}
}

func testUpdate(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	key := "/configmaps/default/u"
	created, err := s.Create(ctx, key, configMap("u", "0", nil))
	if err != nil {
		t.Fatal(err)
	}
	updated, err := s.GuaranteedUpdate(ctx, key, nil, setData("1"))
	if err != nil || rv(t, updated) != rv(t, created)+1 {
		t.Fatalf("update = %v, %v", updated, err)
	}
	t.Run("an update that changes nothing writes nothing", func(t *testing.T) {
		before := revision(t, k)
		same, err := s.GuaranteedUpdate(ctx, key, nil, setData("1"))
		if err != nil || same.GetResourceVersion() != updated.GetResourceVersion() || revision(t, k) != before {
			t.Fatalf("no-op update = %v, %v; revision %d -> %d", same.GetResourceVersion(), err, before, revision(t, k))
		}
	})
	t.Run("preconditions", func(t *testing.T) {
		stale := created.GetResourceVersion()
		_, err := s.GuaranteedUpdate(ctx, key, &storage.Preconditions{ResourceVersion: &stale}, setData("2"))
		wantCode(t, "stale resourceVersion precondition", err, storage.CodeConflict)
		uid := types.UID("other")
		_, err = s.GuaranteedUpdate(ctx, key, &storage.Preconditions{UID: &uid}, setData("2"))
		wantCode(t, "uid precondition", err, storage.CodeConflict)
		_, err = s.GuaranteedUpdate(ctx, "/configmaps/default/none", nil, setData("2"))
		wantCode(t, "update of a missing key", err, storage.CodeNotFound)
	})
	t.Run("concurrent updaters all land", func(t *testing.T) {
		const writers, each = 8, 15
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					_, err := s.GuaranteedUpdate(ctx, key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
						n, _, _ := unstructured.NestedInt64(cur.Object, "count")
						unstructured.SetNestedField(cur.Object, n+1, "count")
						return cur, nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		got, err := s.Get(ctx, key, storage.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n, _, _ := unstructured.NestedInt64(got.Object, "count"); n != writers*each {
			t.Fatalf("count = %d after %d increments: an update was lost", n, writers*each)
		}
	})
}

func testDelete(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	key := "/configmaps/default/d"
	created, err := s.Create(ctx, key, configMap("d", "x", nil))
	if err != nil {
		t.Fatal(err)
	}
	stale := "1"
	_, err = s.Delete(ctx, key, &storage.Preconditions{ResourceVersion: &stale}, nil)
	wantCode(t, "delete with a stale precondition", err, storage.CodeConflict)
	_, err = s.Delete(ctx, key, nil, func(*unstructured.Unstructured) error { return fmt.Errorf("refused") })
	if err == nil || err.Error() != "refused" {
		t.Fatalf("a refusing validation: %v", err)
	}
	// An update just before, as a finalizer's removal comes before the
	// delete: the delete returns that last state.
	updated, err := s.GuaranteedUpdate(ctx, key, nil, setData("last"))
	if err != nil {
		t.Fatal(err)
	}
	uid := created.GetUID()
	deleted, err := s.Delete(ctx, key, &storage.Preconditions{UID: &uid}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if data, _, _ := unstructured.NestedString(deleted.Object, "data", "k"); rv(t, deleted) != rv(t, updated)+1 || deleted.GetName() != "d" || data != "last" {
		t.Fatalf("delete returned %s at %s holding %q, want the last state (%q) at the delete's revision %d",
			deleted.GetName(), deleted.GetResourceVersion(), data, "last", rv(t, updated)+1)
	}
	_, err = s.Get(ctx, key, storage.GetOptions{})
	wantCode(t, "get after delete", err, storage.CodeNotFound)
	_, err = s.Delete(ctx, key, nil, nil)
	wantCode(t, "second delete", err, storage.CodeNotFound)
}

func testList(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	const prefix = "/configmaps/default/"
	for i := 0; i < 10; i++ {
		color := "red"
		if i%2 == 1 {
			color = "blue"
		}
		if _, err := s.Create(ctx, fmt.Sprintf("%s%02d", prefix, i), configMap(fmt.Sprintf("%02d", i), "v", map[string]string{"color": color})); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.List(ctx, prefix, storage.ListOptions{})
	if err != nil || len(all.Items) != 10 || rv(t, &unstructured.Unstructured{Object: all.Object}) != revision(t, k) {
		t.Fatalf("full list: %d items, rv %s, %v", len(all.Items), all.GetResourceVersion(), err)
	}
	listRV := all.GetResourceVersion()

	page, err := s.List(ctx, prefix, storage.ListOptions{Limit: 3})
	if err != nil || len(page.Items) != 3 || page.GetContinue() == "" || page.GetRemainingItemCount() == nil || *page.GetRemainingItemCount() != 7 {
		t.Fatalf("first page: %d items, continue %q, remaining %v, %v", len(page.Items), page.GetContinue(), page.GetRemainingItemCount(), err)
	}
	// Writes after the first page don't show in the next ones.
	if _, err := s.Delete(ctx, prefix+"05", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GuaranteedUpdate(ctx, prefix+"06", nil, setData("changed")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range page.Items {
		names = append(names, it.GetName())
	}
	for page.GetContinue() != "" {
		page, err = s.List(ctx, prefix, storage.ListOptions{Limit: 3, Continue: page.GetContinue()})
		if err != nil {
			t.Fatal(err)
		}
		if page.GetResourceVersion() != listRV {
			t.Fatalf("a page at resourceVersion %s, want the first page's %s", page.GetResourceVersion(), listRV)
		}
		for _, it := range page.Items {
			names = append(names, it.GetName())
			if it.GetName() == "06" {
				if v, _, _ := unstructured.NestedString(it.Object, "data", "k"); v != "v" {
					t.Fatalf("a later page shows a write made after the first page")
				}
			}
		}
	}
	if fmt.Sprint(names) != "[00 01 02 03 04 05 06 07 08 09]" {
		t.Fatalf("pages gave %v", names)
	}

	sel, _ := labels.Parse("color=blue")
	blue, err := s.List(ctx, prefix, storage.ListOptions{Limit: 2, Predicate: storage.Predicate{Label: sel}})
	if err != nil || len(blue.Items) != 2 || blue.Items[0].GetName() != "01" || blue.Items[1].GetName() != "03" || blue.GetContinue() == "" {
		t.Fatalf("selective page: %v, %v", blue.Items, err)
	}

	old, err := s.List(ctx, prefix, storage.ListOptions{ResourceVersion: listRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil || len(old.Items) != 10 || old.GetResourceVersion() != listRV {
		t.Fatalf("exact list at %s: %d items, %v", listRV, len(old.Items), err)
	}
	future := strconv.FormatInt(revision(t, k)+100, 10)
	_, err = s.List(ctx, prefix, storage.ListOptions{ResourceVersion: future, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	wantCode(t, "list not older than a future revision", err, storage.CodeTooLargeResourceVersion)
	// An exact list of a future revision says where the store is, as
	// kube-apiserver's.
	_, err = s.List(ctx, prefix, storage.ListOptions{ResourceVersion: future, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	wantCode(t, "exact list of a future revision", err, storage.CodeTooLargeResourceVersion)
	if want := fmt.Sprintf("Too large resource version: %s, current: %d", future, revision(t, k)); err.(*storage.Error).Msg != want {
		t.Fatalf("exact list of a future revision: %q, want %q", err.(*storage.Error).Msg, want)
	}
	_, err = s.List(ctx, prefix, storage.ListOptions{Continue: "garbage"})
	wantCode(t, "list with a malformed continue", err, storage.CodeInvalidRequest)

	first, err := s.List(ctx, prefix, storage.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GuaranteedUpdate(ctx, prefix+"07", nil, setData("again")); err != nil {
		t.Fatal(err)
	}
	if err := k.Compact(ctx, revision(t, k)); err != nil {
		t.Fatal(err)
	}
	_, err = s.List(ctx, prefix, storage.ListOptions{Limit: 2, Continue: first.GetContinue()})
	wantCode(t, "continue after compaction", err, storage.CodeExpired)
	// The 410 carries a token that resumes the list where its first page
	// ended, at the newest revision (kube-apiserver's inconsistent
	// continue): the later write shows.
	var expired *storage.Error
	if !errors.As(err, &expired) || expired.Continue == "" {
		t.Fatalf("continue after compaction: %v, without a token to resume", err)
	}
	rest, err := s.List(ctx, prefix, storage.ListOptions{Continue: expired.Continue})
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, it := range rest.Items {
		names = append(names, it.GetName())
		if v, _, _ := unstructured.NestedString(it.Object, "data", "k"); it.GetName() == "07" && v != "again" {
			t.Fatalf("the resumed list shows 07 with %q, not its newest state", v)
		}
	}
	if fmt.Sprint(names) != "[02 03 04 06 07 08 09]" || rest.GetResourceVersion() != strconv.FormatInt(revision(t, k), 10) {
		t.Fatalf("resumed at resourceVersion %s (newest %d): %v", rest.GetResourceVersion(), revision(t, k), names)
	}
	_, err = s.List(ctx, prefix, storage.ListOptions{Continue: expired.Continue, ResourceVersion: listRV})
	wantCode(t, "continue with a resourceVersion", err, storage.CodeInvalidRequest)
	_, err = s.List(ctx, prefix, storage.ListOptions{ResourceVersion: listRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	wantCode(t, "exact list of a compacted revision", err, storage.CodeExpired)
}
