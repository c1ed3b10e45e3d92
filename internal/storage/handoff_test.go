package storage

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

// gatedKV is an engine that orders writes and makes them durable when the
// test says so: UpdateOrdered returns only once gate lets it. It counts
// the reads.
type gatedKV struct {
	*mvcc.Store
	applied chan int64    // if not nil: told the revision of each write applied ...
	proceed chan struct{} // ... which then waits for proceed before it is ordered
	gate    chan struct{} // if not nil: an ordered write waits for it to be durable
	ranges  atomic.Int64
}

func (g *gatedKV) Range(ctx context.Context, key string, opts kv.RangeOptions) (kv.RangeResponse, error) {
	g.ranges.Add(1)
	return g.Store.Range(ctx, key, opts)
}

func (g *gatedKV) UpdateOrdered(ctx context.Context, key string, value []byte, modRevision int64, ordered func(kv.WriteResponse)) (kv.WriteResponse, error) {
	return g.Store.UpdateOrdered(ctx, key, value, modRevision, func(w kv.WriteResponse) {
		if g.applied != nil {
			g.applied <- w.Revision
			<-g.proceed
		}
		ordered(w)
		if g.gate != nil {
			<-g.gate
		}
	})
}

func bg() context.Context { return context.Background() }

// The writer after an ordered write starts from the value written, with
// no read, and whatever it answers waits until that write is durable.
func TestUpdateStartsFromTheOrderedWriteAndWaitsForIt(t *testing.T) {
	m, err := mvcc.Open(mvcc.Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g := &gatedKV{Store: m, applied: make(chan int64), proceed: make(chan struct{}), gate: make(chan struct{})}
	s := New(g)
	key := "/configmaps/default/hot"
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "hot", "namespace": "default"}, "data": map[string]any{"k": "0"}}}
	if _, err := s.Create(bg(), key, obj); err != nil {
		t.Fatal(err)
	}

	first := make(chan error, 1)
	go func() {
		_, err := s.GuaranteedUpdate(bg(), key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			unstructured.SetNestedField(cur.Object, "1", "data", "k")
			return cur, nil
		})
		first <- err
	}()
	rev := <-g.applied // the first write is applied; its turn still held
	reads := g.ranges.Load()

	errRefused := errors.New("refused")
	seen := make(chan string, 1)
	second := make(chan error, 1)
	go func() {
		_, err := s.GuaranteedUpdate(bg(), key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			v, _, _ := unstructured.NestedString(cur.Object, "data", "k")
			seen <- v + "@" + cur.GetResourceVersion()
			return nil, errRefused
		})
		second <- err
	}()
	waitRefs(t, &s.turns, key, 2) // the second writer waits for its turn
	close(g.proceed)              // the first write is ordered: its turn ends
	if got, want := <-seen, "1@"+strconv.FormatInt(rev, 10); got != want {
		t.Fatalf("the second writer started from %s, want %s", got, want)
	}
	if n := g.ranges.Load(); n != reads {
		t.Fatalf("the second writer read the store (%d reads)", n-reads)
	}
	select {
	case err := <-second:
		t.Fatalf("the second writer answered (%v) before the write it started from was durable", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, errRefused) {
		t.Fatalf("second writer: %v, want its own error", err)
	}
}

// Writers of a hot key on the embedded engine, with its log: every
// increment lands, and most writers start from the value handed over
// rather than a read.
func TestHotKeyWritersShareTheirTurns(t *testing.T) {
	m, err := mvcc.Open(mvcc.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g := &gatedKV{Store: m}
	s := New(g)
	key := "/configmaps/default/hot"
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "hot", "namespace": "default"}}}
	if _, err := s.Create(bg(), key, obj); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	before := g.ranges.Load()
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := s.GuaranteedUpdate(bg(), key, nil, func(cur *unstructured.Unstructured) (*unstructured.Unstructured, error) {
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
	got, err := s.Get(bg(), key, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(got.Object, "count"); n != writers*each {
		t.Fatalf("count = %d after %d increments: an update was lost", n, writers*each)
	}
	reads := g.ranges.Load() - before
	t.Logf("%d reads for %d updates", reads, writers*each)
	if reads > writers*each*3/4 {
		t.Errorf("%d reads for %d updates: the writers do not hand over", reads, writers*each)
	}
}
