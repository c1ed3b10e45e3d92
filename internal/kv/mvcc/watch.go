package mvcc

import (
	"context"
	"fmt"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Watchers pull from the history.
//
// Every watcher has its own goroutine and cursor (the next revision it will
// look at). It reads events from the shared history under the read lock, a
// bounded batch at a time, and sends them on its channel. When it has caught
// up with the committed revision it waits for the next commit.
//
// A commit wakes the watchers whose range it touches; the others, waiting
// at the head of the history, have their cursor moved past it by the
// committer (Store.notifyWatchersLocked), which costs a key comparison
// per watcher instead of a goroutine switch.
//
// So a slow watcher costs writers nothing: nobody pushes to it, and when its
// channel is full it simply stops reading ahead. When its reader drains the
// channel it resumes from its cursor, which is a revision in the history:
// it is caught up from history, never skipped forward. If compaction has
// meanwhile dropped the history under its cursor, the watch ends with
// ErrCompacted; it never delivers a gap (etcd#17529 is the bug this rules
// out).

// maxScan bounds the revisions one read of the history looks at, so a
// watcher interested in few keys doesn't hold the read lock for long.
const maxScan = 16 << 10

type watcher struct {
	s        *Store
	key, end string
	// next is the next revision to look at: moved by run under the read
	// lock, and by committers under the write lock while run waits.
	next       int64
	progress   bool // periodic progress notifications
	out        chan kv.WatchResponse
	requests   chan struct{} // progress requests; capacity 1
	wakeup     chan struct{} // capacity 1: something may be there to read
	ctx        context.Context
	cancel     context.CancelFunc
	lastActive time.Time
}

// Watch implements kv.Store.
func (s *Store) Watch(ctx context.Context, key string, opts kv.WatchOptions) (kv.Watcher, error) {
	if err := kv.CheckKey(key); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		s:        s,
		key:      key,
		end:      opts.End,
		progress: opts.ProgressNotify,
		out:      make(chan kv.WatchResponse, s.cfg.WatchBuffer),
		requests: make(chan struct{}, 1),
		wakeup:   make(chan struct{}, 1),
		ctx:      wctx,
		cancel:   cancel,
	}
	s.mu.Lock()
	if err := s.errLocked(); err != nil {
		s.mu.Unlock()
		cancel()
		return nil, err
	}
	w.next = opts.Revision
	if w.next <= 0 {
		w.next = s.mu.committed + 1
	}
	// Added under mu, before Close can set closed, so Close's Wait sees it.
	s.wg.Add(1)
	s.mu.watchers[w] = struct{}{}
	s.mu.Unlock()
	go w.run()
	return w, nil
}

func (w *watcher) Responses() <-chan kv.WatchResponse { return w.out }

func (w *watcher) RequestProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case w.requests <- struct{}{}:
	default: // one is already pending; it will answer this one too
	}
	return nil
}

func (w *watcher) Close() { w.cancel() }

func (w *watcher) run() {
	defer w.s.wg.Done()
	defer close(w.out)
	defer w.cancel()
	defer func() {
		w.s.mu.Lock()
		delete(w.s.mu.watchers, w)
		w.s.mu.Unlock()
	}()

	var tick <-chan time.Time
	if w.progress {
		t := time.NewTicker(w.s.cfg.ProgressNotifyInterval)
		defer t.Stop()
		tick = t.C
	}
	w.lastActive = time.Now()
	wantProgress := false
	for {
		r := w.read()
		if r.final != nil {
			w.finish(*r.final)
			return
		}
		if len(r.events) > 0 {
			resp := kv.WatchResponse{Events: r.events, Revision: r.events[len(r.events)-1].KV.ModRevision}
			if !w.send(resp) {
				return
			}
			w.lastActive = time.Now()
			continue
		}
		if !r.caughtUp {
			continue
		}
		// Caught up with r.committed: every event up to it is delivered,
		// so a progress response may report it.
		if wantProgress {
			if !w.send(kv.WatchResponse{Progress: true, Revision: r.committed}) {
				return
			}
			wantProgress = false
			continue
		}
		select {
		case <-w.wakeup:
		case <-w.requests:
			wantProgress = true
		case now := <-tick:
			if now.Sub(w.lastActive) >= w.s.cfg.ProgressNotifyInterval {
				wantProgress = true
				w.lastActive = now
			}
		case <-w.ctx.Done():
			return
		}
	}
}

type readResult struct {
	events    []kv.Event
	caughtUp  bool // the cursor passed the committed revision
	committed int64
	final     *kv.WatchResponse
}

// wake tells the watcher to read again; it never blocks.
func (w *watcher) wake() {
	select {
	case w.wakeup <- struct{}{}:
	default: // one is pending already
	}
}

// read collects the next batch of events from the history.
func (w *watcher) read() readResult {
	s := w.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.errLocked(); err != nil {
		return readResult{final: &kv.WatchResponse{Err: err}}
	}
	if w.next < s.mu.compactRev {
		return readResult{final: &kv.WatchResponse{
			Err:             fmt.Errorf("%w: watch at revision %d, compacted at %d", kv.ErrCompacted, w.next, s.mu.compactRev),
			CompactRevision: s.mu.compactRev,
		}}
	}
	rev := max(w.next, s.mu.histBase)
	end := min(s.mu.committed, rev+maxScan-1)
	var events []kv.Event
	for ; rev <= end && len(events) < s.cfg.WatchBatch; rev++ {
		ki := s.mu.history[rev-s.mu.histBase]
		if kv.InRange(ki.key, w.key, w.end) {
			events = append(events, ki.event(rev))
		}
	}
	if rev > w.next {
		w.next = rev
	}
	return readResult{
		events:    events,
		caughtUp:  w.next > s.mu.committed,
		committed: s.mu.committed,
	}
}

// send delivers resp, waiting for room in the channel. It reports false if
// the watch ended meanwhile, after sending the final response if the store
// closed.
func (w *watcher) send(resp kv.WatchResponse) bool {
	select {
	case w.out <- resp:
		return true
	case <-w.ctx.Done():
		return false
	case <-w.s.stop:
		w.finish(kv.WatchResponse{Err: kv.ErrClosed})
		return false
	}
}

// finish sends the final response; see kv.FinishWatch.
func (w *watcher) finish(resp kv.WatchResponse) {
	kv.FinishWatch(w.out, resp, w.ctx.Done(), w.s.stop)
}
