package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/google/btree"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/kv/mvcc/wal"
)

// Store is the embedded engine. See the package documentation.
//
// Lock order: compactMu, then mu. Nothing sends on a channel or does I/O
// while holding mu.
type Store struct {
	cfg  Config
	log  *slog.Logger
	wal  *wal.Log // nil in memory mode
	lock *os.File // the data directory's lock; nil in memory mode

	// compactMu serialises compactions with each other and with snapshots,
	// which read the index in batches and must not see it trimmed midway.
	// A snapshot goroutine holds it for the snapshot's whole duration.
	compactMu sync.Mutex

	// recovery holds the keys and values recover copies, while it runs.
	recovery slab

	mu struct {
		sync.RWMutex
		// closed is set by Close. failed is set when a log write or fsync
		// failed, leaving memory ahead of disk: the store then refuses
		// everything, since it can no longer promise durability.
		closed bool
		failed error
		// index holds every retained version of every key.
		index *btree.BTreeG[*keyIndex]
		// history[i] is the key written at revision histBase+i, for every
		// revision from max(compactRev, 2) to lastRev: each revision is
		// exactly one write. Watchers read events from it.
		history  []*keyIndex
		histBase int64
		// lastRev is the newest revision assigned. Writes above committed
		// are applied in memory but not yet durable: compares see them,
		// reads and watchers do not.
		lastRev   int64
		committed int64
		// compactRev is the compaction point; 0 if never compacted.
		compactRev int64
		// oldBytes is the size of the values of the retained versions that
		// are no longer their key's newest: what compaction can free.
		// supersededBytes is the size of every value superseded (replaced
		// or deleted) since Open; it only grows.
		oldBytes        int64
		supersededBytes int64
		// pending holds encoded log records not yet handed to the flusher;
		// seq counts records ever queued and flushedSeq those made durable.
		pending    [][]byte
		seq        uint64
		flushedSeq uint64
		// changed is closed, and replaced, whenever committed, flushedSeq or
		// err changes: writers waiting for durability wait on it.
		changed chan struct{}
		// watchers are the open watches. A commit wakes only those it
		// concerns (publishLocked); anything else wakes them all.
		watchers map[*watcher]struct{}
	}

	flushReq chan struct{} // capacity 1: wakes the flusher
	stop     chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// Open opens or creates the store described by cfg, recovering its state
// from disk unless cfg.InMemory.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Store{
		cfg:      cfg,
		log:      cfg.Logger,
		flushReq: make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	s.mu.index = newTree()
	s.mu.lastRev = 1 // a fresh store is at revision 1, as etcd is
	s.mu.histBase = 2
	s.mu.changed = make(chan struct{})
	s.mu.watchers = map[*watcher]struct{}{}
	if !cfg.InMemory {
		lock, err := lockDir(cfg.Dir)
		if err != nil {
			return nil, err
		}
		s.lock = lock
		if err := s.recover(); err != nil {
			lock.Close()
			return nil, err
		}
		s.wg.Add(1)
		go s.flusher()
	}
	s.mu.committed = s.mu.lastRev
	return s, nil
}

// Range implements kv.Store.
func (s *Store) Range(ctx context.Context, key string, opts kv.RangeOptions) (kv.RangeResponse, error) {
	if err := kv.CheckKey(key); err != nil {
		return kv.RangeResponse{}, err
	}
	if err := ctx.Err(); err != nil {
		return kv.RangeResponse{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.errLocked(); err != nil {
		return kv.RangeResponse{}, err
	}
	rev := opts.Revision
	switch {
	case rev <= 0:
		rev = s.mu.committed
	case rev > s.mu.committed:
		return kv.RangeResponse{}, fmt.Errorf("%w: %d, current revision is %d", kv.ErrFutureRevision, rev, s.mu.committed)
	case rev < s.mu.compactRev:
		return kv.RangeResponse{}, fmt.Errorf("%w: %d, compacted at %d", kv.ErrCompacted, rev, s.mu.compactRev)
	}
	resp := kv.RangeResponse{Revision: rev}
	visit := func(ki *keyIndex) bool {
		e := ki.at(rev)
		if e == nil {
			return true
		}
		resp.Count++
		if opts.CountOnly {
			return true
		}
		if opts.Limit > 0 && int64(len(resp.KVs)) >= opts.Limit {
			resp.More = true
			return !opts.NoCount
		}
		resp.KVs = append(resp.KVs, *e)
		return true
	}
	if opts.End == "" {
		if ki, ok := s.mu.index.Get(&keyIndex{key: key}); ok {
			visit(ki)
		}
	} else {
		s.mu.index.AscendRange(&keyIndex{key: key}, &keyIndex{key: opts.End}, visit)
	}
	if opts.NoCount {
		resp.Count = 0
	}
	return resp, nil
}

// Create implements kv.Store.
func (s *Store) Create(ctx context.Context, key string, value []byte) (kv.WriteResponse, error) {
	return s.write(ctx, key, value, func(cur *kv.KeyValue) bool { return cur == nil }, false, nil)
}

// Update implements kv.Store.
func (s *Store) Update(ctx context.Context, key string, value []byte, modRevision int64) (kv.WriteResponse, error) {
	return s.write(ctx, key, value, func(cur *kv.KeyValue) bool {
		return cur != nil && cur.ModRevision == modRevision
	}, false, nil)
}

// UpdateOrdered implements kv.OrderedUpdater.
func (s *Store) UpdateOrdered(ctx context.Context, key string, value []byte, modRevision int64, ordered func(kv.WriteResponse)) (kv.WriteResponse, error) {
	return s.write(ctx, key, value, func(cur *kv.KeyValue) bool {
		return cur != nil && cur.ModRevision == modRevision
	}, false, ordered)
}

// Delete implements kv.Store.
func (s *Store) Delete(ctx context.Context, key string, modRevision int64) (kv.WriteResponse, error) {
	return s.write(ctx, key, nil, func(cur *kv.KeyValue) bool {
		return cur != nil && cur.ModRevision == modRevision
	}, true, nil)
}

// write applies one conditional write. compare gets the key's current live
// value (nil if absent) and reports whether the write may happen.
//
// The answer is returned only once everything it reflects is durable: a
// successful write waits for its own record, and a lost compare waits for
// the writes it saw, so no caller ever observes state that a crash could
// take back. A successful write is handed to ordered (if not nil) once
// it is applied, before it is durable.
func (s *Store) write(ctx context.Context, key string, value []byte, compare func(cur *kv.KeyValue) bool, del bool, ordered func(kv.WriteResponse)) (kv.WriteResponse, error) {
	if err := kv.CheckWrite(key, value, s.cfg.MaxValueSize); err != nil {
		return kv.WriteResponse{}, err
	}
	if err := ctx.Err(); err != nil {
		return kv.WriteResponse{}, err
	}
	var rec []byte
	if s.wal != nil {
		// Encode outside the lock; only the revision is filled in under it.
		rec = encodeWrite(key, value, del)
	}

	s.mu.Lock()
	if err := s.errLocked(); err != nil {
		s.mu.Unlock()
		return kv.WriteResponse{}, err
	}
	ki, _ := s.mu.index.Get(&keyIndex{key: key})
	var cur *kv.KeyValue
	if ki != nil {
		cur = ki.live()
	}
	var resp kv.WriteResponse
	if !compare(cur) {
		resp.Revision = s.mu.lastRev
		if cur != nil {
			c := *cur
			resp.Prev = &c
		}
		seq := s.mu.seq
		s.mu.Unlock()
		return resp, s.waitFlushed(seq)
	}
	rev := s.mu.lastRev + 1
	if ki == nil {
		ki = &keyIndex{key: key}
		s.mu.index.ReplaceOrInsert(ki)
	}
	next := newVersion(ki.key, cur, rev, value, del)
	s.applyLocked(ki, next)
	resp.Succeeded, resp.Revision = true, rev
	if cur != nil {
		c := *cur
		resp.Prev = &c
	}
	if !del {
		n := next
		resp.KV = &n
	}
	if s.wal == nil {
		s.publishLocked(rev, 0)
		s.mu.Unlock()
		if ordered != nil {
			ordered(resp)
		}
		return resp, nil
	}
	setRevision(rec, rev)
	seq := s.queueLocked(rec)
	s.mu.Unlock()
	s.kickFlusher()
	if ordered != nil {
		ordered(resp)
	}
	return resp, s.waitFlushed(seq)
}

// newVersion is the entry a write at rev makes, given the key's current live
// version cur (nil if absent): a tombstone for a delete; for a put, the next
// version of cur's generation, or version 1 of a new generation.
func newVersion(key string, cur *kv.KeyValue, rev int64, value []byte, del bool) kv.KeyValue {
	e := kv.KeyValue{Key: key, ModRevision: rev}
	if del {
		return e
	}
	e.Value, e.CreateRevision, e.Version = value, rev, 1
	if cur != nil {
		e.CreateRevision, e.Version = cur.CreateRevision, cur.Version+1
	}
	return e
}

// applyLocked appends a new version to ki and its slot to the history.
func (s *Store) applyLocked(ki *keyIndex, e kv.KeyValue) {
	if l := ki.last(); l != nil {
		// The newest version becomes an old one (a tombstone has no value).
		n := int64(len(l.Value))
		s.mu.oldBytes += n
		s.mu.supersededBytes += n
	}
	ki.entries = append(ki.entries, e)
	s.mu.history = append(s.mu.history, ki)
	s.mu.lastRev = e.ModRevision
}

// publishLocked makes revisions up to committed visible and records seq as
// flushed, then wakes the writers waiting for durability and the watchers
// the new revisions concern. seq 0 leaves flushedSeq.
func (s *Store) publishLocked(committed int64, seq uint64) {
	from := s.mu.committed
	s.mu.committed = committed
	if seq > s.mu.flushedSeq {
		s.mu.flushedSeq = seq
	}
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	s.notifyWatchersLocked(from, committed)
}

// notifyWatchersLocked tells the watchers about the revisions from+1 to
// to, just committed. A watcher waiting at the head of the history is
// woken only if one of them is a key in its range; otherwise its cursor
// moves past them here, so that it neither wakes for every commit (every
// resource's cache has a watch: most commits concern one of them) nor
// falls behind a later compaction it has nothing under. A watcher still
// reading older revisions gets a wake-up it may not need.
func (s *Store) notifyWatchersLocked(from, to int64) {
	if (to-from)*int64(len(s.mu.watchers)) > maxNotifyScan {
		// Comparing every key with every watcher would hold the write
		// lock too long: let them all look, under the read lock.
		for w := range s.mu.watchers {
			w.wake()
		}
		return
	}
	for w := range s.mu.watchers {
		if w.next <= from {
			w.wake()
			continue
		}
		concerned := false
		for rev := max(w.next, from+1); rev <= to; rev++ {
			i := rev - s.mu.histBase
			if i < 0 || i >= int64(len(s.mu.history)) || kv.InRange(s.mu.history[i].key, w.key, w.end) {
				concerned = true // (outside the history: let it look)
				break
			}
		}
		if concerned {
			w.wake()
		} else if to >= w.next {
			w.next = to + 1
		}
	}
}

// maxNotifyScan bounds the key comparisons a commit makes to pick the
// watchers it wakes (new revisions × watchers).
const maxNotifyScan = 1 << 16

// broadcastLocked wakes everyone waiting on a change: the durability
// waiters and every watcher.
func (s *Store) broadcastLocked() {
	close(s.mu.changed)
	s.mu.changed = make(chan struct{})
	for w := range s.mu.watchers {
		w.wake()
	}
}

// Compact implements kv.Store. It records the compaction point durably,
// then trims the index in batches of Config.CompactionBatch keys so that
// writers and watchers only ever wait for one batch. Reads and watches below
// the new point fail as soon as it is set; reads at or above it never see
// the trimming.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()

	s.mu.Lock()
	if err := s.errLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	if err := s.checkCompactLocked(rev); err != nil {
		s.mu.Unlock()
		return err
	}
	written := s.setCompactLocked(rev)
	var seq uint64
	if s.wal != nil {
		seq = s.queueLocked(encodeCompact(rev))
	}
	s.mu.Unlock()
	if s.wal != nil {
		s.kickFlusher()
		if err := s.waitFlushed(seq); err != nil {
			return err
		}
	}
	s.trimIndex(rev, written)
	return nil
}

func (s *Store) checkCompactLocked(rev int64) error {
	if rev <= s.mu.compactRev {
		return fmt.Errorf("%w: compaction to %d, already compacted at %d", kv.ErrCompacted, rev, s.mu.compactRev)
	}
	if rev > s.mu.committed {
		return fmt.Errorf("%w: compaction to %d, current revision is %d", kv.ErrFutureRevision, rev, s.mu.committed)
	}
	return nil
}

// setCompactLocked moves the compaction point to rev and drops the history
// below it. Watchers still reading below rev see ErrCompacted. It returns
// the history's slots from the old compaction point to rev: the keys
// written there are the only ones the compaction can trim (trimIndex).
func (s *Store) setCompactLocked(rev int64) (written []*keyIndex) {
	s.mu.compactRev = rev
	if rev <= s.mu.histBase {
		return nil
	}
	drop := rev - s.mu.histBase
	written = s.mu.history[:drop+1]
	rest := s.mu.history[drop:]
	if int64(cap(s.mu.history)) > 2*int64(len(rest))+1024 {
		// Reallocate so the dropped slots' backing memory can be freed.
		rest = append(make([]*keyIndex, 0, len(rest)+len(rest)/4), rest...)
	}
	s.mu.history = rest
	s.mu.histBase = rev
	// Wake watchers so that ones below rev find out now, not at the next write.
	s.broadcastLocked()
	return written
}

// trimIndex applies a compaction at rev to the keys written from the old
// compaction point c to rev, as setCompactLocked returned them, a batch at
// a time. No other key has anything to drop: after the compaction at c,
// a key not written since holds one version, written before c.
// (A key's versions from before c are its newest at or below c, and the
// one before that only if the newest is at c; keyIndex explains why.) So
// compaction costs what was written since the last one, not the size of
// the store.
func (s *Store) trimIndex(rev int64, written []*keyIndex) {
	batch := s.cfg.CompactionBatch
	for len(written) > 0 {
		n := min(batch, len(written))
		s.mu.Lock()
		for _, ki := range written[:n] {
			// A key written many times appears as often: the first call
			// trims it, the others find nothing to drop. A key emptied
			// here is never empty again (a later write makes a new
			// keyIndex), so it is deleted from the tree once.
			freed, empty := ki.compact(rev)
			s.mu.oldBytes -= freed
			if empty {
				s.mu.index.Delete(ki)
			}
		}
		s.mu.Unlock()
		written = written[n:]
		// Let the writers and the flusher woken by Unlock take the lock
		// before the next batch does: without this, re-locking at once
		// wins the race (sync.Mutex lets a running goroutine barge in) and
		// they wait until the mutex turns fair after a millisecond.
		runtime.Gosched()
	}
}

// Close implements kv.Store. Writes already accepted are flushed, watchers
// end with ErrClosed, and the log is closed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	s.broadcastLocked()
	s.mu.Unlock()

	close(s.stop)
	s.wg.Wait() // the flusher drains what was queued, then watchers and snapshots end
	s.mu.RLock()
	failed := s.mu.failed
	s.mu.RUnlock()
	if s.wal != nil {
		err := s.wal.Close()
		s.lock.Close()
		if err != nil && failed == nil {
			return fmt.Errorf("mvcc: closing log: %w", err)
		}
	}
	return failed
}

// errLocked returns why the store can't serve, or nil.
func (s *Store) errLocked() error {
	if s.mu.failed != nil {
		return s.mu.failed
	}
	if s.mu.closed {
		return kv.ErrClosed
	}
	return nil
}

// HistoryBytes reports the size of the values the store holds for old
// versions (those no longer their key's newest, kept for reads at past
// revisions and for watches until compaction drops them), and the size of
// every value superseded since Open, which only grows: the difference
// between two of its readings is what the writes between them superseded.
// Sizes count values only, not keys or the index's own memory.
func (s *Store) HistoryBytes() (held, superseded int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.oldBytes, s.mu.supersededBytes
}

// DiskBytes reports the bytes the store's files take on disk: its log
// segments (preallocated whole), snapshots and lock, as the file system
// allocated them. 0 in memory mode.
func (s *Store) DiskBytes(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.cfg.InMemory {
		return 0, nil
	}
	var n int64
	err := filepath.WalkDir(s.cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed under the walk: a snapshot or segment replaced
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512 // allocated, as etcd's database size counts its file
		} else {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// Revision returns the current (durable) revision and the compaction point.
func (s *Store) Revision() (current, compacted int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.committed, s.mu.compactRev
}
