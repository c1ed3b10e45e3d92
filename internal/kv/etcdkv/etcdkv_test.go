package etcdkv_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
)

func TestPrefixesIsolateStores(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	a, b := srv.NewStore(t), srv.NewStore(t)
	if _, err := a.Create(ctx, "/k", []byte("a")); err != nil {
		t.Fatal(err)
	}
	r, err := b.Range(ctx, "/", kv.RangeOptions{End: kv.PrefixEnd("/")})
	if err != nil || r.Count != 0 {
		t.Fatalf("store b sees store a's keys: %+v, %v", r, err)
	}
	r, err = a.Range(ctx, "/", kv.RangeOptions{End: kv.PrefixEnd("/")})
	if err != nil || r.Count != 1 || r.KVs[0].Key != "/k" {
		t.Fatalf("store a's range = %+v, %v; want its key without the prefix", r, err)
	}
	// The key is stored under the prefix in etcd itself.
	c := srv.Client(t)
	defer c.Close()
	raw, err := c.Get(ctx, "/kplane-test/", clientv3.WithPrefix())
	if err != nil || raw.Count != 1 {
		t.Fatalf("raw etcd read: %v, %v", raw, err)
	}
}

func TestLostConnectionEndsWatchesAndFailsRequests(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s, err := etcdkv.New(etcdkv.Config{Endpoints: srv.Endpoints(), Prefix: "/loss", RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.Watch(ctx, "/k", kv.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first, err := s.Create(ctx, "/k", []byte("before"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w.Responses():
		if len(r.Events) != 1 {
			t.Fatalf("first response %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event before the loss")
	}

	srv.Kill()
	select {
	case r, ok := <-w.Responses():
		if !ok || !errors.Is(r.Err, kv.ErrUnavailable) {
			t.Fatalf("after losing etcd the watch gave %+v (open %v), want ErrUnavailable", r, ok)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not end within 30s of losing etcd")
	}
	if _, err := s.Range(ctx, "/k", kv.RangeOptions{}); !errors.Is(err, kv.ErrUnavailable) {
		t.Fatalf("Range without etcd: %v, want ErrUnavailable", err)
	}

	srv.Restart()
	deadline := time.Now().Add(30 * time.Second)
	var cur kv.RangeResponse
	for {
		cur, err = s.Range(ctx, "/k", kv.RangeOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover after etcd came back: %v", err)
		}
	}
	if len(cur.KVs) != 1 || cur.KVs[0].ModRevision != first.Revision {
		t.Fatalf("after restart the key is %+v", cur)
	}
	// A watch resumed from the last revision seen misses nothing.
	upd, err := s.Update(ctx, "/k", []byte("after"), first.Revision)
	if err != nil || !upd.Succeeded {
		t.Fatalf("update after restart: %+v, %v", upd, err)
	}
	w2, err := s.Watch(ctx, "/k", kv.WatchOptions{Revision: first.Revision + 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	select {
	case r := <-w2.Responses():
		if r.Err != nil || len(r.Events) != 1 || r.Events[0].KV.ModRevision != upd.Revision || r.Events[0].PrevKV == nil {
			t.Fatalf("resumed watch gave %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resumed watch delivered nothing")
	}
}

// The test etcd sends progress notifications every second
// (tools/etcd --progress-notify-interval).
func TestIdleWatchGetsPeriodicProgress(t *testing.T) {
	srv := etcdtest.Start(t)
	s := srv.NewStore(t)
	ctx := context.Background()
	w, err := s.Watch(ctx, "/idle", kv.WatchOptions{ProgressNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := s.Create(ctx, "/elsewhere", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case resp := <-w.Responses():
			if resp.Err != nil || len(resp.Events) > 0 {
				t.Fatalf("unexpected response %+v", resp)
			}
			if resp.Progress && resp.Revision >= r.Revision {
				return
			}
		case <-timeout:
			t.Fatal("no periodic progress notification reached the last write's revision")
		}
	}
}

// DiskBytes is etcd's database size, as its Status reports it. etcd
// commits writes to its database in batches (every 100 ms by default), so
// the size moves on its own schedule: DiskBytes must lie between two
// Status readings taken around it.
func TestDiskBytesIsTheDatabaseSize(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	s := srv.NewStore(t).(*etcdkv.Store)
	c := srv.Client(t)
	defer c.Close()
	status := func() int64 {
		t.Helper()
		st, err := c.Status(ctx, srv.Endpoints()[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.DbSize
	}
	value := make([]byte, 512<<10)
	for i := range 16 { // 8 MiB
		value[0] = byte(i)
		if _, err := s.Create(ctx, fmt.Sprintf("/big/%d", i), value); err != nil {
			t.Fatal(err)
		}
		lo := status()
		n, err := s.DiskBytes(ctx)
		hi := status()
		if err != nil || n < lo || n > hi || n <= 0 {
			t.Fatalf("after write %d: DiskBytes %d, %v; etcd's Status said %d before it and %d after", i, n, err, lo, hi)
		}
	}
	s.Close()
	if _, err := s.DiskBytes(ctx); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("DiskBytes of a closed store: %v, want ErrClosed", err)
	}
}

// compactedTo reports whether the cluster is compacted to exactly rev: a
// read at rev works, one below it does not.
func compactedTo(t *testing.T, s kv.Store, rev int64) bool {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Range(ctx, "/", kv.RangeOptions{Revision: rev, CountOnly: true}); err != nil {
		return false
	}
	_, err := s.Range(ctx, "/", kv.RangeOptions{Revision: rev - 1, CountOnly: true})
	return errors.Is(err, kv.ErrCompacted)
}

func TestCompactInTurn(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	// Two servers, each with its own prefix: a compaction is the cluster's.
	a, b := srv.NewStore(t).(*etcdkv.Store), srv.NewStore(t).(*etcdkv.Store)
	raw := srv.Client(t)
	defer raw.Close()
	key := func() (value string, version int64) {
		t.Helper()
		r, err := raw.Get(ctx, "compact_rev_key")
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("reading compact_rev_key: %v, %v", r, err)
		}
		return string(r.Kvs[0].Value), r.Kvs[0].Version
	}
	write := func(s kv.Store) {
		t.Helper()
		if _, err := s.Create(ctx, fmt.Sprintf("/k%d", time.Now().UnixNano()), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	turn := func(s *etcdkv.Store, prev etcdkv.CompactTurn) etcdkv.CompactTurn {
		t.Helper()
		next, err := s.CompactInTurn(ctx, prev.Turn, prev.Revision)
		if err != nil {
			t.Fatal(err)
		}
		return next
	}

	// A's first tick takes the first turn and compacts nothing; B's finds
	// it taken. kube-apiserver writes "0" there on its first tick.
	ta := turn(a, etcdkv.CompactTurn{})
	if ta.Turn != 1 || ta.Compacted != 0 || ta.Revision == 0 {
		t.Fatalf("first turn = %+v", ta)
	}
	if v, n := key(); v != "0" || n != 1 {
		t.Fatalf("compact_rev_key after the first turn = %q version %d, want \"0\" version 1", v, n)
	}
	write(a)
	tb := turn(b, etcdkv.CompactTurn{})
	if tb.Turn != 1 || tb.Compacted != 0 || tb.Revision <= ta.Revision {
		t.Fatalf("B's first tick = %+v, want turn 1 seen, nothing compacted", tb)
	}

	// A's next tick compacts to what it saw at its last; B's sees that and
	// does not compact; A keeps the turn.
	for range 3 {
		write(b)
		prev := ta
		ta = turn(a, ta)
		if ta.Compacted != prev.Revision || ta.Turn != prev.Turn+1 {
			t.Fatalf("A's tick after %+v = %+v, want a compaction to %d", prev, ta, prev.Revision)
		}
		if !compactedTo(t, b, prev.Revision) {
			t.Fatalf("the cluster is not compacted to %d", prev.Revision)
		}
		if v, n := key(); v != strconv.FormatInt(prev.Revision, 10) || n != ta.Turn {
			t.Fatalf("compact_rev_key = %q version %d, want %d version %d", v, n, prev.Revision, ta.Turn)
		}
		write(a)
		tb = turn(b, tb)
		if tb.Compacted != 0 || tb.Turn != ta.Turn || tb.Latest != prev.Revision {
			t.Fatalf("B's tick after A compacted = %+v, want no compaction, turn %d, latest %d", tb, ta.Turn, prev.Revision)
		}
	}

	// A stops: B's next tick takes over, to what B saw at its last.
	write(b)
	prev := tb
	tb = turn(b, tb)
	if tb.Compacted != prev.Revision {
		t.Fatalf("B's tick with A gone = %+v, want a compaction to %d", tb, prev.Revision)
	}
	if !compactedTo(t, a, prev.Revision) {
		t.Fatalf("the cluster is not compacted to %d", prev.Revision)
	}

	// A turn past a compaction someone did by hand is not an error.
	write(b)
	cur, err := raw.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Compact(ctx, cur.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if got, err := b.CompactInTurn(ctx, tb.Turn, tb.Revision); err != nil || got.Compacted != 0 || got.Turn != tb.Turn+1 {
		t.Fatalf("a turn behind a manual compaction = %+v, %v; want the turn taken, no error", got, err)
	}

	// The key deleted by hand: the count starts again.
	if _, err := raw.Delete(ctx, "compact_rev_key"); err != nil {
		t.Fatal(err)
	}
	got, err := a.CompactInTurn(ctx, ta.Turn, ta.Revision)
	if err != nil || got.Turn != 0 || got.Compacted != 0 {
		t.Fatalf("a turn with the key gone = %+v, %v; want turn 0, nothing compacted", got, err)
	}
	if got, err = a.CompactInTurn(ctx, got.Turn, got.Revision); err != nil || got.Compacted == 0 || got.Turn != 1 {
		t.Fatalf("the next turn = %+v, %v; want a compaction, turn 1", got, err)
	}
}
