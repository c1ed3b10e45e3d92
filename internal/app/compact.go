package app

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/etcdkv"
)

// historySizer is implemented by the engines that keep the old versions
// in memory (the embedded and memory ones, mvcc.Store): see
// mvcc.Store.HistoryBytes.
type historySizer interface {
	HistoryBytes() (held, superseded int64)
}

// turnTaker is implemented by the engines on a cluster other servers may
// share (etcd, etcdkv.Store.CompactInTurn): the servers take turns
// compacting it.
type turnTaker interface {
	CompactInTurn(ctx context.Context, turn, rev int64) (etcdkv.CompactTurn, error)
}

// compactor runs the store's compactions.
//
// Every interval it compacts to the revision it saw on the tick before,
// as kube-apiserver does, so a client always has at least one interval to
// finish paging or resume a watch. On etcd the servers sharing the cluster
// take turns, as kube-apiserver's do (and with them): a tick compacts only
// if no other server has since the tick before, so the cluster is compacted
// about once an interval however many servers run.
//
// Over an engine that keeps the old versions in memory it also looks, every
// check, at how many bytes they hold. Past maxHistory it compacts early, to
// the oldest revision it saw at an earlier check after which the writes
// superseded at most half of maxHistory: the history kept is then the
// newest that fits in half the bound, and never less than one check's
// worth. A loop rewriting large objects so cannot run the server out of
// memory between two interval compactions.
//
// Early compactions are logged at Info at most once a minute, and
// counted, with the bytes held, for /metrics (metrics).
type compactor struct {
	kvs        kv.Store
	sizer      historySizer // nil: an engine that does not say (etcd)
	turns      turnTaker    // nil: an engine no other server shares
	maxHistory int64        // 0: the history's size is not bounded
	log        *slog.Logger
	now        func() time.Time

	last    int64       // the revision seen at the previous interval tick
	turn    int64       // the turns taken by every server, at the previous tick (turns)
	samples []revSample // one per check, oldest first, all above the compaction point

	// Counted for /metrics, which reads them from another goroutine.
	intervalCompactions, earlyCompactions atomic.Int64
	// The early compactions are logged at Info at most once a minute.
	earlyLoggedAt time.Time
	earlyLogged   int64 // earlyCompactions when last logged at Info
}

// revSample is what a check saw: the store's revision and how many bytes
// of values the writes had superseded until then.
type revSample struct{ rev, superseded int64 }

// maxRevSamples bounds the samples kept when no interval compaction prunes
// them: an hour of checks a second apart.
const maxRevSamples = 3600

// earlyLogEvery is how often, at most, early compactions are logged at
// Info; the others go to Debug. Under sustained churn past the bound they
// come every few seconds.
const earlyLogEvery = time.Minute

func newCompactor(kvs kv.Store, maxHistory int64, log *slog.Logger) *compactor {
	c := &compactor{kvs: kvs, log: log, now: time.Now}
	if s, ok := kvs.(historySizer); ok {
		c.sizer = s
		c.maxHistory = max(maxHistory, 0)
	}
	c.turns, _ = kvs.(turnTaker)
	return c
}

// bounded reports whether the compactor checks the history's size.
func (c *compactor) bounded() bool { return c.sizer != nil && c.maxHistory > 0 }

// run compacts every interval (none if 0) and checks the history's size
// every checkEvery, until ctx ends.
func (c *compactor) run(ctx context.Context, interval, checkEvery time.Duration) error {
	var tick, check <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	if c.bounded() {
		t := time.NewTicker(checkEvery)
		defer t.Stop()
		check = t.C
	}
	if tick == nil && check == nil {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			c.tick(ctx)
		case <-check:
			c.check(ctx)
		}
	}
}

// tick is the interval compaction: to the revision seen at the tick before.
func (c *compactor) tick(ctx context.Context) {
	if c.turns != nil {
		c.tickInTurn(ctx)
		return
	}
	rev, err := c.revision(ctx)
	if err != nil {
		return
	}
	if c.last > 0 && c.compact(ctx, c.last) {
		c.intervalCompactions.Add(1)
		c.log.Info("compacted", "revision", c.last)
	}
	c.last = rev
}

// tickInTurn is tick on a shared cluster: it compacts only if no server
// has taken a turn since the tick before.
func (c *compactor) tickInTurn(ctx context.Context) {
	t, err := c.turns.CompactInTurn(ctx, c.turn, c.last)
	if err != nil {
		c.log.Warn("compaction failed", "revision", c.last, "err", err)
	}
	c.turn, c.last = t.Turn, t.Revision
	if t.Compacted > 0 {
		c.intervalCompactions.Add(1)
		c.log.Info("compacted", "revision", t.Compacted)
	} else if err == nil && t.Latest > 0 {
		c.log.Debug("another server compacted the cluster", "revision", t.Latest)
	}
}

// check samples the revision and the bytes superseded, and compacts early
// if the old versions held pass maxHistory.
func (c *compactor) check(ctx context.Context) {
	rev, err := c.revision(ctx)
	if err != nil {
		return
	}
	held, superseded := c.sizer.HistoryBytes()
	if len(c.samples) == maxRevSamples {
		c.samples = append(c.samples[:0], c.samples[1:]...)
	}
	c.samples = append(c.samples, revSample{rev: rev, superseded: superseded})
	earlier := c.samples[:len(c.samples)-1]
	if held <= c.maxHistory || len(earlier) == 0 {
		return
	}
	to := earlier[len(earlier)-1]
	for _, s := range earlier {
		if superseded-s.superseded <= c.maxHistory/2 {
			to = s
			break
		}
	}
	if !c.compact(ctx, to.rev) {
		return
	}
	n := c.earlyCompactions.Add(1)
	after, _ := c.sizer.HistoryBytes()
	level, now := slog.LevelDebug, c.now()
	if c.earlyLogged == 0 || now.Sub(c.earlyLoggedAt) >= earlyLogEvery {
		level = slog.LevelInfo
	}
	c.log.Log(ctx, level, "compacted early: the old versions held in memory passed --compaction-max-history",
		"revision", to.rev, "heldBytes", held, "heldAfter", after, "maxHistory", c.maxHistory,
		"earlySinceLastInfo", n-c.earlyLogged)
	if level == slog.LevelInfo {
		c.earlyLoggedAt, c.earlyLogged = now, n
	}
}

// compact compacts to rev and drops the samples it makes useless. It
// reports whether it compacted; one already at or past rev is not an
// error.
func (c *compactor) compact(ctx context.Context, rev int64) bool {
	err := c.kvs.Compact(ctx, rev)
	if err != nil && !errors.Is(err, kv.ErrCompacted) {
		c.log.Warn("compaction failed", "revision", rev, "err", err)
		return false
	}
	n := 0
	for n < len(c.samples) && c.samples[n].rev <= rev {
		n++
	}
	c.samples = append(c.samples[:0], c.samples[n:]...)
	return err == nil
}

func (c *compactor) revision(ctx context.Context) (int64, error) {
	r, err := c.kvs.Range(ctx, "/", kv.RangeOptions{CountOnly: true})
	if err != nil {
		c.log.Warn("compaction: reading the revision", "err", err)
		return 0, err
	}
	return r.Revision, nil
}

// metrics are the compactor's figures for /metrics: the bytes of old
// versions held (engines that say), the bound, and the compactions done.
// kplane's own names: kube-apiserver leaves compaction to etcd's metrics.
func (c *compactor) metrics() []apiserver.Metric {
	ms := []apiserver.Metric{{
		Name: "kplane_storage_compactions_total",
		Type: "counter",
		Help: "Compactions of the store done by this server, by reason: every --compaction-interval (on etcd, in the turns it took), or early, when the old versions held passed --compaction-max-history.",
		Read: func() []apiserver.Sample {
			return []apiserver.Sample{
				{Labels: []string{"reason", "interval"}, Value: float64(c.intervalCompactions.Load())},
				{Labels: []string{"reason", "history"}, Value: float64(c.earlyCompactions.Load())},
			}
		},
	}}
	if c.sizer == nil {
		return ms
	}
	return append(ms, apiserver.Metric{
		Name: "kplane_storage_history_bytes",
		Type: "gauge",
		Help: "Bytes of values that are no longer their key's newest, which the store holds in memory until a compaction drops them.",
		Read: func() []apiserver.Sample {
			held, _ := c.sizer.HistoryBytes()
			return []apiserver.Sample{{Value: float64(held)}}
		},
	}, apiserver.Metric{
		Name: "kplane_storage_history_max_bytes",
		Type: "gauge",
		Help: "--compaction-max-history: the bytes of old versions past which the store is compacted early; 0 leaves them to the interval.",
		Read: func() []apiserver.Sample { return []apiserver.Sample{{Value: float64(c.maxHistory)}} },
	})
}
