package watchcache_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
	"github.com/kplane-dev/kplane/internal/storage"
	"github.com/kplane-dev/kplane/internal/storage/storagetest"
	"github.com/kplane-dev/kplane/internal/storage/watchcache"
)

var ctx = context.Background()

const prefix = "/configmaps/"

// start runs a cache over a fresh in-memory store.
func start(t *testing.T, cfg watchcache.Config) (*storage.Store, *watchcache.Cache) {
	t.Helper()
	k, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	s := storage.New(k)
	cfg.Store, cfg.Prefix = s, prefix
	c := watchcache.New(cfg)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); c.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done; k.Close() })
	// A consistent list returns once the cache has listed the store, so
	// that every test's writes land in the cache's history.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func cm(name, color string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName(name)
	u.SetNamespace("default")
	u.SetLabels(map[string]string{"color": color})
	return u
}

func create(t *testing.T, s *storage.Store, name, color string) *unstructured.Unstructured {
	t.Helper()
	out, err := s.Create(ctx, prefix+"default/"+name, cm(name, color))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// read renders the next n events as "TYPE name rv".
func read(t *testing.T, w watch.Interface, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			switch o := ev.Object.(type) {
			case *metav1.Status:
				out = append(out, fmt.Sprintf("%s %d", ev.Type, o.Code))
			case metav1.Object:
				s := fmt.Sprintf("%s %s %s", ev.Type, o.GetName(), o.GetResourceVersion())
				if o.GetAnnotations()[watchcache.InitialEventsEndAnnotation] == "true" {
					s += " initial-events-end"
				}
				out = append(out, s)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event within 10s after %v", out)
		}
	}
	return out
}

func TestConsistentListSeesTheLatestWrite(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	for i := 0; i < 20; i++ {
		a := create(t, s, fmt.Sprint("a", i), "red")
		list, err := c.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != i+1 || list.GetResourceVersion() != a.GetResourceVersion() {
			t.Fatalf("consistent list after write %d: %d items at %s, want %d at %s", i, len(list.Items), list.GetResourceVersion(), i+1, a.GetResourceVersion())
		}
	}
	sel, _ := labels.Parse("color=blue")
	create(t, s, "b", "blue")
	list, err := c.List(ctx, prefix, storage.ListOptions{Predicate: storage.Predicate{Label: sel}})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "b" {
		t.Fatalf("selective list: %v, %v", list, err)
	}
}

// A consistent GetRecord reads the store, and answers with the cache's
// record when that is still the object's (what callers keep with it
// serves again), with the store's own when the object has moved on since
// the cache last saw it, and never with a stale one.
func TestConsistentGetRecordIsTheCachesWhenCurrent(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	key := prefix + "default/a"
	a := create(t, s, "a", "red")
	cached := func() *storage.Record {
		// A list at a's revision: the cache has caught up with it.
		if _, err := c.List(ctx, prefix, storage.ListOptions{ResourceVersion: a.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
			t.Fatal(err)
		}
		r, err := c.GetRecord(ctx, key, storage.GetOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := cached()
	got, err := c.GetRecord(ctx, key, storage.GetOptions{})
	if err != nil || got != want {
		t.Fatalf("consistent GetRecord: %p, %v; want the cache's record %p", got, err, want)
	}

	// Written past the cache's record: the store's record, at the new
	// revision.
	updated, err := s.GuaranteedUpdate(ctx, key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"color": "blue"})
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.GetRecordOr(ctx, key, storage.GetOptions{}, want)
	if err != nil || fresh == want || strconv.FormatInt(fresh.Rev, 10) != updated.GetResourceVersion() {
		t.Fatalf("after an update: %v, the old record %v, rev %d; want %s", err, fresh == want, fresh.Rev, updated.GetResourceVersion())
	}
	var se *storage.Error
	if _, err := s.GetRecordOr(ctx, prefix+"default/other", storage.GetOptions{}, want); !errors.As(err, &se) || se.Code != storage.CodeNotFound {
		t.Fatalf("another key, given a's record: %v", err)
	}
	other := create(t, s, "other", "red")
	rev, _ := strconv.ParseInt(other.GetResourceVersion(), 10, 64)
	elsewhere, err := storage.NewRecord(prefix+"default/elsewhere", []byte(`{"metadata":{"name":"elsewhere"}}`), rev)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.GetRecordOr(ctx, prefix+"default/other", storage.GetOptions{}, elsewhere); err != nil || r == elsewhere || r.Key != prefix+"default/other" {
		t.Fatalf("another key's record at the same revision: %v %v", r == elsewhere, err)
	}
}

// A record the cache replaces or deletes lets go of what was kept with
// it (storage.Record.DropAlt), while it stays in the history; the
// records still current keep theirs.
func TestSupersededRecordsDropWhatWasKept(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	for _, name := range []string{"a", "b", "c"} {
		create(t, s, name, "red")
	}
	// The cache's record: a consistent list waits for the cache to catch
	// up, and a get at "0" reads it.
	current := func(name string) *storage.Record {
		t.Helper()
		if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := c.GetRecord(ctx, prefix+"default/"+name, storage.GetOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	released := map[string]int{}
	recs := map[string]*storage.Record{}
	for _, name := range []string{"a", "b", "c"} {
		recs[name] = current(name)
		if !recs[name].KeepAlt([]byte("pb-"+name), func() { released[name]++ }) {
			t.Fatalf("%s: not kept", name)
		}
	}
	if _, err := s.GuaranteedUpdate(ctx, prefix+"default/a", nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"color": "blue"})
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, prefix+"default/b", nil, nil); err != nil {
		t.Fatal(err)
	}
	// A consistent list returns once the cache has the delete.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"a": 1, "b": 1, "c": 0} {
		if released[name] != want {
			t.Errorf("%s: released %d times, want %d", name, released[name], want)
		}
		if kept := recs[name].Alt() != nil; kept != (want == 0) {
			t.Errorf("%s: kept %v", name, kept)
		}
	}
	if a := current("a"); a == recs["a"] || !a.KeepAlt([]byte("pb-a2"), nil) {
		t.Error("a's new record is the old one, or keeps nothing")
	}
	// The old record is still the history's: a watch from before the
	// update replays it.
	w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: strconv.FormatInt(recs["a"].Rev-1, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := read(t, w, 1)[0]; got != fmt.Sprintf("ADDED a %d", recs["a"].Rev) {
		t.Errorf("replayed %q, want a's first version", got)
	}
}

func TestNotOlderThanAFutureRevisionFails(t *testing.T) {
	_, c := start(t, watchcache.Config{WaitTimeout: 50 * time.Millisecond})
	_, err := c.List(ctx, prefix, storage.ListOptions{ResourceVersion: "1000", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if !storage.HasCode(err, storage.CodeTooLargeResourceVersion) {
		t.Fatalf("list not older than 1000: %v", err)
	}
}

func TestWatchFromHistoryNowAndInitialEvents(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	a := create(t, s, "a", "red")
	b := create(t, s, "b", "blue")
	sel, _ := labels.Parse("color=red")
	w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: a.GetResourceVersion(), Predicate: storage.Predicate{Label: sel}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	upd, err := s.GuaranteedUpdate(ctx, prefix+"default/b", nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"color": "red"})
		return cur, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	del, err := s.Delete(ctx, prefix+"default/a", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED b " + upd.GetResourceVersion(), "DELETED a " + del.GetResourceVersion()}
	if got := read(t, w, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("watch from history: %v, want %v", got, want)
	}

	now, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, AllowBookmarks: true, SendInitialEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer now.Stop()
	want = []string{"ADDED b " + upd.GetResourceVersion(), "BOOKMARK  " + del.GetResourceVersion() + " initial-events-end"}
	if got := read(t, now, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sendInitialEvents watch: %v, want %v", got, want)
	}
	_ = b
}

// relabel updates default/name n times, a new label each time, and
// returns the resourceVersion of each update.
func relabel(t *testing.T, s storage.Interface, name string, n int) []string {
	t.Helper()
	var revs []string
	for i := range n {
		u, err := s.GuaranteedUpdate(ctx, prefix+"default/"+name, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			cur.SetLabels(map[string]string{"n": fmt.Sprint(i)})
			return cur, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, u.GetResourceVersion())
	}
	return revs
}

// Old versions beyond MaxBytes leave the history though Capacity would
// keep them: a watch from before them is gone, one from after them
// replays every later event.
func TestHistoryBoundsTheBytesOfOldVersions(t *testing.T) {
	for _, maxBytes := range []int64{1, 0} { // 0: the default, 64 MiB
		s, c := start(t, watchcache.Config{FreshFor: time.Nanosecond, MaxBytes: maxBytes})
		first := create(t, s, "a", "red")
		revs := relabel(t, s, "a", 10)
		if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		watch := func(rv string) []string {
			w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			return read(t, w, 1)
		}
		got := watch(first.GetResourceVersion())
		if gone := got[0] == fmt.Sprintf("ERROR %d", http.StatusGone); gone != (maxBytes == 1) {
			t.Fatalf("MaxBytes %d: watch from the create: %v", maxBytes, got)
		}
		// The newest update was fresh when the cache last trimmed, so it
		// stays past any bound, and a watch from the one before gets it.
		if got := watch(revs[8]); got[0] != "MODIFIED a "+revs[9] {
			t.Fatalf("MaxBytes %d: watch from the last but one update: %v", maxBytes, got)
		}
	}
}

// Past MaxFreshBytes even fresh events leave the history.
func TestHistoryBoundsTheBytesOfFreshVersions(t *testing.T) {
	for _, maxFresh := range []int64{1, 0} { // 0: the default, 256 MiB
		s, c := start(t, watchcache.Config{FreshFor: time.Hour, MaxBytes: 1, MaxFreshBytes: maxFresh})
		create(t, s, "a", "red")
		revs := relabel(t, s, "a", 3)
		if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: revs[1]})
		if err != nil {
			t.Fatal(err)
		}
		got := read(t, w, 1)
		w.Stop()
		if want := "MODIFIED a " + revs[2]; maxFresh == 0 && got[0] != want {
			t.Fatalf("MaxFreshBytes default: watch from the last but one update: %v, want %s", got, want)
		}
		if want := fmt.Sprintf("ERROR %d", http.StatusGone); maxFresh == 1 && got[0] != want {
			t.Fatalf("MaxFreshBytes 1: watch from the last but one update: %v, want %s", got, want)
		}
	}
}

func TestWatchBeyondTheHistoryIsGone(t *testing.T) {
	s, c := start(t, watchcache.Config{Capacity: 5, MaxCapacity: 5})
	first := create(t, s, "first", "red")
	for i := 0; i < 10; i++ {
		create(t, s, fmt.Sprint("n", i), "red")
	}
	// Let the cache see every write before watching.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: first.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := read(t, w, 1); got[0] != fmt.Sprintf("ERROR %d", http.StatusGone) {
		t.Fatalf("watch from before the history: %v, want 410", got)
	}
}

// Beyond Capacity, the history keeps the events of the last FreshFor (up
// to MaxCapacity), so that a resource written fast still lets a watch
// resume from a while ago; once they are stale, the next write or the
// bookmark tick lets them go.
func TestHistoryKeepsFreshEventsBeyondCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := start(t, watchcache.Config{Capacity: 5, MaxCapacity: 50, FreshFor: time.Minute})
		first := create(t, s, "first", "red")
		for i := range 20 {
			create(t, s, fmt.Sprint("n", i), "red")
		}
		watchFrom := func(rv string) string {
			t.Helper()
			// Let the cache see every write before watching.
			if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			return read(t, w, 1)[0]
		}
		if got := watchFrom(first.GetResourceVersion()); !strings.HasPrefix(got, "ADDED n0 ") {
			t.Fatalf("watch from 20 fresh events back: %q, want the events after it", got)
		}
		// Thirty seconds on, a write: the events are still fresh.
		time.Sleep(30 * time.Second)
		create(t, s, "later", "red")
		if got := watchFrom(first.GetResourceVersion()); !strings.HasPrefix(got, "ADDED n0 ") {
			t.Fatalf("watch from 21 events back, 30 s later: %q, want the events after it", got)
		}
		// Two minutes on, with no write: the bookmark tick (every minute)
		// has let the stale ones go, and kept Capacity.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := watchFrom(first.GetResourceVersion()); got != fmt.Sprintf("ERROR %d", http.StatusGone) {
			t.Fatalf("watch from stale events: %q, want 410", got)
		}
		list, err := c.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rv, _ := strconv.ParseInt(list.GetResourceVersion(), 10, 64)
		if got := watchFrom(strconv.FormatInt(rv-5, 10)); !strings.HasPrefix(got, "ADDED n16 ") {
			t.Fatalf("watch from Capacity events back: %q, want the events after it", got)
		}
	})
}

func TestSlowWatcherIsEndedAndOthersGetEverything(t *testing.T) {
	s, c := start(t, watchcache.Config{Buffer: 5})
	base, _ := c.List(ctx, prefix, storage.ListOptions{})
	slow, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: base.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: base.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	// The reading watcher is read in lockstep with the writes, so it never
	// lags; the other is not read at all until the end.
	var got []string
	for i := 0; i < 30; i++ {
		rv := create(t, s, fmt.Sprint("o", i), "red").GetResourceVersion()
		ev := read(t, fast, 1)[0]
		if ev != fmt.Sprintf("ADDED o%d %s", i, rv) {
			t.Fatalf("the reading watcher got %s for write %d at %s", ev, i, rv)
		}
		got = append(got, ev)
	}
	// The cache counts the writes it took in and the watcher it ended
	// (for /metrics).
	last := got[len(got)-1]
	if st := c.Stats(); !st.Ready || st.Objects != 30 || st.EventsReceived != 30 || st.WatchersTerminated != 1 ||
		fmt.Sprint(st.Revision) != last[strings.LastIndex(last, " ")+1:] {
		t.Errorf("Stats after 30 creates, one watcher too slow: %+v; the last event %s", st, last)
	}
	// The slow one gets an unbroken run of events, then 410.
	var events []string
	for ev := range slow.ResultChan() {
		if ev.Type == watch.Error {
			if st := ev.Object.(*metav1.Status); st.Code != http.StatusGone {
				t.Fatalf("slow watcher ended with %d", st.Code)
			}
			for i, e := range events {
				if e != got[i] {
					t.Fatalf("slow watcher event %d = %s, want %s", i, e, got[i])
				}
			}
			if len(events) == 30 {
				t.Fatal("the slow watcher was never ended")
			}
			return
		}
		u := ev.Object.(metav1.Object)
		events = append(events, fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), u.GetResourceVersion()))
	}
	t.Fatal("slow watcher closed without an error")
}

func TestBookmarks(t *testing.T) {
	s, c := start(t, watchcache.Config{BookmarkInterval: 20 * time.Millisecond})
	a := create(t, s, "a", "red")
	w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: a.GetResourceVersion(), AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := read(t, w, 1)
	if rv, _ := strconv.Atoi(a.GetResourceVersion()); got[0] != fmt.Sprintf("BOOKMARK  %d", rv) {
		t.Fatalf("first event %v, want a bookmark at %d", got, rv)
	}
}

// The storage conformance suite, run through a watch cache.
func TestConformance(t *testing.T) {
	storagetest.RunWith(t, func(t testing.TB) kv.Store {
		k, err := mvcc.Open(mvcc.Config{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { k.Close() })
		return k
	}, func(t testing.TB, s *storage.Store) storage.Interface {
		c := watchcache.New(watchcache.Config{Store: s, Prefix: "/configmaps/", Capacity: 2, MaxCapacity: 2})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return c
	})
}

// The same, with the cache in front of a real etcd.
func TestConformanceOverEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	storagetest.RunWith(t, srv.NewStore, func(t testing.TB, s *storage.Store) storage.Interface {
		c := watchcache.New(watchcache.Config{Store: s, Prefix: "/configmaps/", Capacity: 2, MaxCapacity: 2})
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.Run(rctx) }()
		t.Cleanup(func() { cancel(); <-done })
		return c
	})
}

// A metadata-only watcher and a whole-object watcher of the same events
// see the same changes; the first gets only apiVersion, kind and metadata,
// the second the object, each decoded once for its kind of watcher. A
// metadata-only list is the same list without the rest.
func TestMetadataOnlyWatchAndList(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	obj := cm("a", "red")
	obj.Object["data"] = map[string]any{"k": "v"}
	created, err := s.Create(ctx, prefix+"default/a", obj)
	if err != nil {
		t.Fatal(err)
	}
	rv := created.GetResourceVersion()
	whole, err := c.Watch(ctx, prefix, storage.WatchOptions{ResourceVersion: "0", Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Stop()
	meta, err := c.Watch(ctx, prefix, storage.WatchOptions{ResourceVersion: "0", Recursive: true, MetadataOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Stop()
	if _, err := s.Delete(ctx, prefix+"default/a", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, step := range []watch.EventType{watch.Added, watch.Deleted} {
		ew, em := <-whole.ResultChan(), <-meta.ResultChan()
		ow := ew.Object.(*storage.Shared)
		om, ok := em.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("%s: the metadata-only event carries a %T", step, em.Object)
		}
		created, wholeCreated := om.GetCreationTimestamp(), ow.GetCreationTimestamp()
		if ew.Type != step || em.Type != step || ow.GetResourceVersion() != om.GetResourceVersion() || om.GetName() != "a" ||
			om.GetUID() != ow.GetUID() || om.GetLabels()["color"] != "red" || om.Kind != "ConfigMap" || om.APIVersion != "v1" ||
			!created.Equal(&wholeCreated) || om.GetManagedFields() != nil {
			t.Fatalf("%s: whole %s %v, metadata %s %+v", step, ew.Type, ow.Object, em.Type, om)
		}
		if _, ok := ow.Object["data"]; !ok {
			t.Fatalf("%s: the whole object lacks data: %v", step, ow.Object)
		}
	}
	l, err := c.List(ctx, prefix, storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: "Exact", MetadataOnly: true})
	if err != nil || len(l.Items) != 1 || len(l.Items[0].Object) != 3 || l.Items[0].GetName() != "a" {
		t.Fatalf("metadata-only list at %s: %v %v", rv, err, l)
	}
}

// A consumer can read a watcher's queue with Next instead of ResultChan:
// events come in order, in batches; an ended watch gives its queued events
// and its ERROR, then false; a done context and Stop end Next too.
func TestNextReadsTheQueue(t *testing.T) {
	s, c := start(t, watchcache.Config{Buffer: 4})
	// Next's own context, so that a Next that never returns fails the test.
	nctx, cancelN := context.WithTimeout(ctx, 30*time.Second)
	defer cancelN()
	base, _ := c.List(ctx, prefix, storage.ListOptions{})
	watchFrom := func(ctx context.Context) (watch.Interface, storage.EventQueue) {
		w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: base.GetResourceVersion()})
		if err != nil {
			t.Fatal(err)
		}
		q, ok := w.(storage.EventQueue)
		if !ok {
			t.Fatalf("%T is not a storage.EventQueue", w)
		}
		return w, q
	}
	render := func(batch []watch.Event) (out []string) {
		for _, ev := range batch {
			switch o := ev.Object.(type) {
			case *metav1.Status:
				out = append(out, fmt.Sprintf("%s %d", ev.Type, o.Code))
			case metav1.Object:
				out = append(out, fmt.Sprintf("%s %s", ev.Type, o.GetName()))
			}
		}
		return out
	}

	w, q := watchFrom(ctx)
	defer w.Stop()
	var want []string
	for i := range 3 {
		create(t, s, fmt.Sprint("a", i), "red")
		want = append(want, fmt.Sprint("ADDED a", i))
	}
	var got []string
	var batch []watch.Event
	for len(got) < 3 {
		var ok bool
		if batch, ok = q.Next(nctx, batch); !ok {
			t.Fatalf("Next ended after %v", got)
		}
		got = append(got, render(batch)...)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Nobody reads while 10 more are written: the watch ends with 410
	// after the events it had queued.
	for i := range 10 {
		create(t, s, fmt.Sprint("b", i), "red")
	}
	// A consistent list returns once the cache has applied every write.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	got = nil
	for {
		var ok bool
		if batch, ok = q.Next(nctx, batch); !ok {
			break
		}
		got = append(got, render(batch)...)
	}
	if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("ERROR %d", http.StatusGone) || got[0] != "ADDED b0" {
		t.Fatalf("an overflowing watch gave %v, want ADDED b0… then ERROR 410", got)
	}

	cctx, cancel := context.WithCancel(ctx)
	w2, q2 := watchFrom(cctx)
	defer w2.Stop()
	cancel()
	for {
		b, ok := q2.Next(nctx, nil)
		if !ok {
			break
		}
		if len(b) == 0 {
			t.Fatal("Next returned an empty batch")
		}
	}
	w3, q3 := watchFrom(ctx)
	w3.Stop()
	for {
		if _, ok := q3.Next(nctx, nil); !ok {
			break
		}
	}
}

// Next while events keep arriving, in bursts, to a consumer that waits
// on an empty queue between them and holds each batch a while: every
// event, in order, and a held batch never changes (the queue and the
// batch handed out never share an array).
func TestNextUnderConcurrentWrites(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	base, _ := c.List(ctx, prefix, storage.ListOptions{})
	w, err := c.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, ResourceVersion: base.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	q := w.(storage.EventQueue)
	nctx, cancelN := context.WithTimeout(ctx, 30*time.Second)
	defer cancelN()
	const n = 300
	go func() {
		for i := range n {
			if _, err := s.Create(ctx, prefix+"default/"+fmt.Sprint("c", i), cm(fmt.Sprint("c", i), "red")); err != nil {
				t.Error(err)
				return
			}
			if i%10 == 9 {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}()
	var batch []watch.Event
	for i := 0; i < n; {
		var ok bool
		if batch, ok = q.Next(nctx, batch); !ok {
			t.Fatalf("Next ended after %d events", i)
		}
		var names []string
		for _, ev := range batch {
			o, isObj := ev.Object.(metav1.Object)
			if !isObj || ev.Type != watch.Added || o.GetName() != fmt.Sprint("c", i) {
				t.Fatalf("event %d: %s %v, want ADDED c%d", i, ev.Type, ev.Object, i)
			}
			names = append(names, o.GetName())
			i++
		}
		time.Sleep(300 * time.Microsecond) // writes land while the batch is held
		for j, ev := range batch {
			if o, isObj := ev.Object.(metav1.Object); !isObj || o.GetName() != names[j] {
				t.Fatalf("a held batch changed: event %d is now %v, was %s", j, ev.Object, names[j])
			}
		}
		clear(batch)
	}
}

// An EncodedOnly watcher gets every event a whole one gets, each object
// its stored JSON undecoded (a *storage.RecordJSON) and byte for byte the
// whole object's JSON: initial events, history replayed, live events, and
// an object leaving a selector (DELETED, its last state at the event's
// revision). Initial events are the watcher's alone; the others are
// shared with every watcher of the event.
func TestEncodedOnlyWatch(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	first := create(t, s, "a", "red")
	create(t, s, "b", "red")
	// Once the cache has both, a watch from "0" starts with them.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	red, _ := labels.Parse("color=red")
	starts := []storage.WatchOptions{
		{ResourceVersion: "0"},
		{ResourceVersion: first.GetResourceVersion()},
		{ResourceVersion: first.GetResourceVersion(), SendInitialEvents: true, AllowBookmarks: true},
		{ResourceVersion: "0", Predicate: storage.Predicate{Label: red}},
	}
	type pair struct{ whole, encoded watch.Interface }
	var pairs []pair
	for _, opts := range starts {
		opts.Recursive = true
		whole, err := c.Watch(ctx, prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.EncodedOnly = true
		encoded, err := c.Watch(ctx, prefix, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer whole.Stop()
		defer encoded.Stop()
		pairs = append(pairs, pair{whole, encoded})
	}
	if _, err := s.GuaranteedUpdate(ctx, prefix+"default/a", nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"color": "blue"})
		cur.Object["data"] = map[string]any{"k": "v"}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, prefix+"default/b", nil, nil); err != nil {
		t.Fatal(err)
	}
	create(t, s, "c", "red")
	for i, p := range pairs {
		n, seen := 0, 0
		for n < 3 { // until c's ADDED, the last write
			ew, ee := next(t, p.whole), next(t, p.encoded)
			if ew.Type != ee.Type {
				t.Fatalf("start %d: whole %s, encoded %s", i, ew.Type, ee.Type)
			}
			if ew.Type == watch.Bookmark {
				continue
			}
			sh, ok := ew.Object.(*storage.Shared)
			rj, isJSON := ee.Object.(*storage.RecordJSON)
			if !ok || !isJSON {
				t.Fatalf("start %d, %s: objects %T and %T", i, ew.Type, ew.Object, ee.Object)
			}
			// Every start but the second begins with a and b as they are.
			if initial := i != 1 && seen < 2; rj.Alone() != initial {
				t.Fatalf("start %d, event %d (%s): alone %v, an initial event %v", i, seen, ew.Type, rj.Alone(), initial)
			}
			seen++
			want, _ := sh.MarshalJSON()
			got, err := rj.JSON()
			if err != nil || string(got)+"\n" != string(want) {
				t.Fatalf("start %d, %s: encoded %s (%v), want %s", i, ew.Type, got, err, want)
			}
			if sh.GetName() == "c" {
				n = 3
			}
		}
	}
}

// next returns w's next event.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	return storagetest.Next(t, w, 10*time.Second)
}

// A watch that starts with the current state makes its events a batch at
// a time as they are taken (Next hands out at most 256), in key order,
// then the initial-events-end bookmark, then what was written after the
// watch began, whether read with Next or ResultChan. The live events may
// wait while the initial ones drain: a small Buffer does not end it.
func TestInitialEventsInBatches(t *testing.T) {
	s, c := start(t, watchcache.Config{Buffer: 4})
	var want []string
	for i := range 600 {
		name := fmt.Sprintf("o%03d", i)
		create(t, s, name, "red")
		want = append(want, "ADDED "+name)
	}
	want = append(want, "BOOKMARK initial-events-end")
	// A consistent list returns once the cache has applied every write.
	if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := storage.WatchOptions{Recursive: true, ResourceVersion: "0", SendInitialEvents: true, AllowBookmarks: true}
	byNext, err := c.Watch(ctx, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer byNext.Stop()
	byChan, err := c.Watch(ctx, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer byChan.Stop()
	for i := range 3 {
		name := fmt.Sprint("late", i)
		create(t, s, name, "red")
		want = append(want, "ADDED "+name)
	}
	render := func(ev watch.Event) string {
		o := ev.Object.(metav1.Object)
		if o.GetAnnotations()[watchcache.InitialEventsEndAnnotation] == "true" {
			return string(ev.Type) + " initial-events-end"
		}
		return string(ev.Type) + " " + o.GetName()
	}
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []string
	var batch []watch.Event
	for first := true; len(got) < len(want); first = false {
		var ok bool
		if batch, ok = byNext.(storage.EventQueue).Next(nctx, batch); !ok {
			t.Fatalf("Next ended after %d events", len(got))
		}
		if len(batch) > 256 || first && len(batch) != 256 {
			t.Fatalf("a batch of %d events (first: %v)", len(batch), first)
		}
		for _, ev := range batch {
			got = append(got, render(ev))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Next: got %v,\nwant %v", got, want)
	}
	got = got[:0]
	for len(got) < len(want) {
		got = append(got, render(next(t, byChan)))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ResultChan: got %v,\nwant %v", got, want)
	}
}

// Stats counts the bytes of the objects held, as stored: what priority
// and fairness estimates a list's work by. Creates, updates and deletes
// each move it.
func TestStatsCountBytes(t *testing.T) {
	s, c := start(t, watchcache.Config{})
	stored := func() int64 {
		l, err := s.ListRecords(ctx, prefix, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, r := range l.Items {
			n += int64(len(r.Value))
		}
		return n
	}
	check := func(what string, objects int) {
		t.Helper()
		if _, err := c.List(ctx, prefix, storage.ListOptions{}); err != nil { // caught up
			t.Fatal(err)
		}
		if st, want := c.Stats(), stored(); st.Objects != objects || st.Bytes != want || want == 0 && objects > 0 {
			t.Errorf("after %s: %d objects of %d bytes, want %d of %d", what, st.Objects, st.Bytes, objects, want)
		}
	}
	for i := range 5 {
		create(t, s, fmt.Sprint("o", i), "red")
	}
	check("5 creates", 5)
	relabel(t, s, "o1", 3)
	check("updates", 5)
	if _, err := s.Delete(ctx, prefix+"default/o2", nil, nil); err != nil {
		t.Fatal(err)
	}
	check("a delete", 4)
}
