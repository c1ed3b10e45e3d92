package storagetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

func runWatch(t *testing.T, newKV func(t testing.TB) kv.Store, open Open) {
	t.Run("selector transitions and deletes", func(t *testing.T) { testWatchTransitions(t, newKV(t), open) })
	t.Run("initial events then live ones", func(t *testing.T) { testWatchInitial(t, newKV(t), open) })
	t.Run("sendInitialEvents sends the initial state, then a bookmark if allowed", func(t *testing.T) { testWatchSendInitial(t, newKV(t), open) })
	t.Run("a compacted resourceVersion ends with 410 Gone", func(t *testing.T) { testWatchExpired(t, newKV(t), open) })
	t.Run("a progress request is answered with a bookmark after the events", func(t *testing.T) { testWatchProgress(t, newKV(t), open) })
	t.Run("a watch from a revision not reached waits for the changes after it", func(t *testing.T) { testWatchAhead(t, newKV(t), open) })
}

// testWatchAhead: a watch from a revision the store has not reached
// sends nothing (no error, no bookmark) until the changes after that
// revision, as etcd and kube-apiserver's watch cache do for a watch
// without initial events.
func testWatchAhead(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	const prefix = "/configmaps/default/"
	ahead := revision(t, k) + 3
	w, err := s.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, AllowBookmarks: true,
		ResourceVersion: strconv.FormatInt(ahead, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var want []string
	for i := range 5 {
		cm, err := s.Create(ctx, fmt.Sprintf("%sc%d", prefix, i), configMap(fmt.Sprintf("c%d", i), "1", nil))
		if err != nil {
			t.Fatal(err)
		}
		if rv(t, cm) > ahead {
			want = append(want, "ADDED "+cm.GetName()+" "+cm.GetResourceVersion())
		}
	}
	var g []string
	for len(g) < len(want) {
		e := got(t, w, 1)[0]
		if strings.HasPrefix(e, "BOOKMARK") {
			if b, _ := strconv.ParseInt(strings.Fields(e)[1], 10, 64); b < ahead {
				t.Fatalf("a bookmark at %d, before the watch's revision %d", b, ahead)
			}
			continue
		}
		g = append(g, e)
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", g, want)
	}
}

// Next returns w's next event, failing t if the watch closes or none
// comes within timeout.
func Next(t testing.TB, w watch.Interface, timeout time.Duration) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no watch event within %v", timeout)
	}
	return watch.Event{}
}

// got renders the next n events as "TYPE name rv".
func got(t testing.TB, w watch.Interface, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			if st, isStatus := ev.Object.(*metav1.Status); isStatus {
				out = append(out, fmt.Sprintf("%s %d %s", ev.Type, st.Code, st.Reason))
				continue
			}
			u := ev.Object.(metav1.Object)
			line := fmt.Sprintf("%s %s %s", ev.Type, u.GetName(), u.GetResourceVersion())
			if u.GetAnnotations()[storage.InitialEventsEndAnnotation] == "true" {
				line += " initial-events-end"
			}
			out = append(out, line)
		case <-time.After(10 * time.Second):
			t.Fatalf("no event within 10s after %v", out)
		}
	}
	return out
}

func setLabel(v string) storage.UpdateFunc {
	return func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cur.SetLabels(map[string]string{"color": v})
		return cur, nil
	}
}

func testWatchTransitions(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	const prefix = "/configmaps/default/"
	a, err := s.Create(ctx, prefix+"a", configMap("a", "1", map[string]string{"color": "red"}))
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := labels.Parse("color=red")
	w, err := s.Watch(ctx, prefix, storage.WatchOptions{ResourceVersion: a.GetResourceVersion(), Recursive: true,
		Predicate: storage.Predicate{Label: sel}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	base := rv(t, a)
	s.GuaranteedUpdate(ctx, prefix+"a", nil, setData("2"))                             // +1 MODIFIED
	s.GuaranteedUpdate(ctx, prefix+"a", nil, setLabel("blue"))                         // +2 leaves: DELETED
	s.Create(ctx, prefix+"b", configMap("b", "1", map[string]string{"color": "blue"})) // +3 not seen
	s.GuaranteedUpdate(ctx, prefix+"a", nil, setLabel("red"))                          // +4 enters: ADDED
	s.Delete(ctx, prefix+"a", nil, nil)                                                // +5 DELETED
	s.Create(ctx, prefix+"c", configMap("c", "1", map[string]string{"color": "red"}))  // +6 ADDED
	want := []string{
		fmt.Sprintf("MODIFIED a %d", base+1),
		fmt.Sprintf("DELETED a %d", base+2),
		fmt.Sprintf("ADDED a %d", base+4),
		fmt.Sprintf("DELETED a %d", base+5),
		fmt.Sprintf("ADDED c %d", base+6),
	}
	if g := got(t, w, len(want)); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", g, want)
	}
}

func testWatchInitial(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	const prefix = "/configmaps/default/"
	x, _ := s.Create(ctx, prefix+"x", configMap("x", "1", nil))
	y, _ := s.Create(ctx, prefix+"y", configMap("y", "1", nil))
	w, err := s.Watch(ctx, prefix, storage.WatchOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	z, _ := s.Create(ctx, prefix+"z", configMap("z", "1", nil))
	want := []string{
		"ADDED x " + x.GetResourceVersion(),
		"ADDED y " + y.GetResourceVersion(),
		"ADDED z " + z.GetResourceVersion(),
	}
	if g := got(t, w, 3); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", g, want)
	}
}

func testWatchExpired(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	key := "/configmaps/default/e"
	first, _ := s.Create(ctx, key, configMap("e", "1", nil))
	for i := 2; i < 5; i++ {
		s.GuaranteedUpdate(ctx, key, nil, setData(strconv.Itoa(i)))
	}
	if err := k.Compact(ctx, revision(t, k)); err != nil {
		t.Fatal(err)
	}
	// A consistent list: a cache has now seen every write.
	if _, err := s.List(ctx, "/configmaps/", storage.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, key, storage.WatchOptions{ResourceVersion: first.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	want := fmt.Sprintf("ERROR %d %s", http.StatusGone, metav1.StatusReasonExpired)
	if g := got(t, w, 1); g[0] != want {
		t.Fatalf("event %v, want %s", g, want)
	}
}

func testWatchProgress(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	w, err := s.Watch(ctx, "/configmaps/", storage.WatchOptions{ResourceVersion: strconv.FormatInt(revision(t, k), 10), Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	c, _ := s.Create(ctx, "/configmaps/default/p", configMap("p", "1", nil))
	if err := w.(storage.ProgressRequester).RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"ADDED p " + c.GetResourceVersion(), "BOOKMARK  " + c.GetResourceVersion()}
	if g := got(t, w, 2); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", g, want)
	}
}

func testWatchSendInitial(t *testing.T, k kv.Store, open Open) {
	s := open(t, storage.New(k))
	const prefix = "/configmaps/default/"
	x, _ := s.Create(ctx, prefix+"x", configMap("x", "1", nil))
	// Without bookmarks, the state comes with no bookmark after it, as
	// kube-apiserver's.
	plain, err := s.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, SendInitialEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Stop()
	w, err := s.Watch(ctx, prefix, storage.WatchOptions{Recursive: true, SendInitialEvents: true, AllowBookmarks: true,
		ResourceVersion: x.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	y, _ := s.Create(ctx, prefix+"y", configMap("y", "1", nil))
	want := []string{
		"ADDED x " + x.GetResourceVersion(),
		"BOOKMARK  " + x.GetResourceVersion() + " initial-events-end",
		"ADDED y " + y.GetResourceVersion(),
	}
	// Bookmarks may also arrive at any time; the first three non-periodic
	// events must be these.
	var g []string
	for len(g) < 3 {
		e := got(t, w, 1)[0]
		if strings.HasPrefix(e, "BOOKMARK") && !strings.HasSuffix(e, "initial-events-end") {
			continue
		}
		g = append(g, e)
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", g, want)
	}
	want = []string{"ADDED x " + x.GetResourceVersion(), "ADDED y " + y.GetResourceVersion()}
	if g := got(t, plain, 2); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("without bookmarks: events %v, want %v", g, want)
	}
}
