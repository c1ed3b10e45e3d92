package kvtest_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
	"github.com/kplane-dev/kplane/internal/kv/kvtest"
	"github.com/kplane-dev/kplane/internal/kv/mvcc"
)

func embedded(t testing.TB) kv.Store {
	s, err := mvcc.Open(mvcc.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestEmbeddedMatchesEtcd runs random operation sequences against the
// embedded engine and a real etcd and compares every answer and event.
func TestEmbeddedMatchesEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	steps := 1000
	if testing.Short() {
		steps = 100
	}
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			kvtest.Differential(t, embedded, srv.NewStore, seed, steps)
		})
	}
}

// TestDifferentialDetectsDifferences makes sure the checker can fail: a
// store whose history has one extra write must be reported.
func TestDifferentialDetectsDifferences(t *testing.T) {
	skewed := func(t testing.TB) kv.Store {
		s := embedded(t)
		if _, err := s.Create(t.Context(), "/d/a/0", []byte("already here")); err != nil {
			t.Fatal(err)
		}
		return s
	}
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kvtest.Differential(rec, embedded, skewed, 1, 200)
	}()
	<-done
	if rec.failure == "" {
		t.Fatal("the differential checker found no difference between skewed stores")
	}
	t.Logf("reported as expected: %.200s", rec.failure)
}

// recorder is a testing.TB whose Fatal records the failure and ends the
// goroutine instead of failing the test.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.failure = fmt.Sprint(args...)
	runtime.Goexit()
}
