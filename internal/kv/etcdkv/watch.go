package etcdkv

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kplane-dev/kplane/internal/kv"
)

type watcher struct {
	s      *Store
	cw     clientv3.Watcher // one per watch, so RequestProgress is per watch
	out    chan kv.WatchResponse
	ctx    context.Context
	cancel context.CancelFunc
	// next is the first revision not yet delivered; owned by run.
	next int64
	// requests carries progress requests to run; capacity 1.
	requests chan struct{}
}

// progressRetry is how often an unanswered progress request is repeated:
// etcd drops a request that arrives while the watch is catching up
// ("unsynced") or before its start revision exists, instead of answering it
// later.
const progressRetry = 100 * time.Millisecond

// Watch implements kv.Store.
func (s *Store) Watch(ctx context.Context, key string, opts kv.WatchOptions) (kv.Watcher, error) {
	if err := kv.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	start := opts.Revision
	if start <= 0 {
		// Never let etcd pick "now": its client would re-pick it on a
		// reconnect and skip whatever happened in between.
		rctx, cancel := s.withTimeout(ctx)
		r, err := s.c.Get(rctx, s.key(key), clientv3.WithCountOnly())
		cancel()
		if err != nil {
			return nil, mapErr(err)
		}
		start = r.Header.Revision + 1
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil, kv.ErrClosed
	}
	lost := s.mu.lost
	s.wg.Add(1)
	s.mu.Unlock()

	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{s: s, cw: clientv3.NewWatcher(s.c), out: make(chan kv.WatchResponse, 16), ctx: wctx, cancel: cancel,
		requests: make(chan struct{}, 1), next: start}
	ops := []clientv3.OpOption{clientv3.WithRev(start), clientv3.WithPrevKV(), clientv3.WithCreatedNotify()}
	if opts.End != "" {
		ops = append(ops, clientv3.WithRange(s.key(opts.End)))
	}
	if opts.ProgressNotify {
		ops = append(ops, clientv3.WithProgressNotify())
	}
	ch := w.cw.Watch(clientv3.WithRequireLeader(wctx), s.key(key), ops...)
	// Wait until etcd has created the watch: a progress request sent before
	// that would be answered to nobody and lost.
	var first *clientv3.WatchResponse
	select {
	case r, ok := <-ch:
		if ok && !r.Created {
			first = &r
		}
	case <-time.After(s.timeout):
		w.cancel()
		w.cw.Close()
		s.wg.Done()
		return nil, fmt.Errorf("%w: etcd did not create the watch within %v", kv.ErrUnavailable, s.timeout)
	}
	go w.run(ch, lost, first)
	return w, nil
}

func (w *watcher) Responses() <-chan kv.WatchResponse { return w.out }

// RequestProgress implements kv.Watcher. The watch's goroutine asks
// etcd, and asks again until etcd answers (see progressRetry).
func (w *watcher) RequestProgress(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case w.requests <- struct{}{}:
	default: // one is pending already and answers this request too
	}
	return nil
}

// askProgress asks etcd for a progress notification, or answers itself:
// etcd does not answer for a watch whose start revision is still in the
// future, so if the current revision C is below the watch's next revision,
// every event up to C has trivially been delivered and C is the answer,
// whatever is written after the read.
func (w *watcher) askProgress() (answer int64, err error) {
	ctx, cancel := w.s.withTimeout(w.ctx)
	defer cancel()
	r, err := w.s.c.Get(ctx, w.s.prefix+"/", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	if r.Header.Revision < w.next {
		return max(r.Header.Revision, w.next-1), nil
	}
	// The client finds the watch's stream by the context's metadata, so the
	// request must carry the same require-leader mark as the watch did.
	return 0, w.cw.RequestProgress(clientv3.WithRequireLeader(ctx))
}

func (w *watcher) Close() { w.cancel() }

// run translates etcd's responses; first, if set, was already read.
func (w *watcher) run(ch clientv3.WatchChan, lost <-chan struct{}, first *clientv3.WatchResponse) {
	defer w.s.wg.Done()
	defer close(w.out)
	defer w.cw.Close()
	defer w.cancel()
	retry := time.NewTicker(progressRetry)
	defer retry.Stop()
	pending := false
	for {
		var resp clientv3.WatchResponse
		var ok bool
		if first != nil {
			resp, ok, first = *first, true, nil
		} else {
			var ask bool
			select {
			case resp, ok = <-ch:
				if !ok && w.ctx.Err() != nil {
					return
				}
			case <-w.requests:
				pending, ask = true, true
			case <-retry.C:
				if !pending {
					continue
				}
				ask = true
			case <-lost:
				w.finish(kv.WatchResponse{Err: fmt.Errorf("%w: lost the connection to etcd", kv.ErrUnavailable)})
				return
			case <-w.s.stop:
				w.finish(kv.WatchResponse{Err: kv.ErrClosed})
				return
			case <-w.ctx.Done():
				return
			}
			if ask {
				answer, err := w.askProgress()
				switch {
				case err != nil && w.ctx.Err() == nil:
					w.s.log.Debug("progress request failed; retrying", "err", err)
					continue
				case answer == 0:
					continue // etcd will answer on the watch channel
				}
				resp, ok = clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{Revision: answer}}, true
			}
		}
		if !ok {
			if w.ctx.Err() == nil {
				w.finish(kv.WatchResponse{Err: fmt.Errorf("%w: etcd closed the watch", kv.ErrUnavailable)})
			}
			return
		}
		out, final := w.translate(resp)
		if final {
			w.finish(out)
			return
		}
		if out.Events == nil && !out.Progress {
			continue // the "created" notification
		}
		if out.Progress {
			pending = false
		}
		select {
		case w.out <- out:
		case <-lost:
			w.finish(kv.WatchResponse{Err: fmt.Errorf("%w: lost the connection to etcd", kv.ErrUnavailable)})
			return
		case <-w.s.stop:
			w.finish(kv.WatchResponse{Err: kv.ErrClosed})
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// translate turns one etcd response into the contract's, reporting final
// when it ends the watch.
func (w *watcher) translate(resp clientv3.WatchResponse) (kv.WatchResponse, bool) {
	if resp.CompactRevision != 0 {
		return kv.WatchResponse{
			Err:             fmt.Errorf("%w: watch compacted at %d", kv.ErrCompacted, resp.CompactRevision),
			CompactRevision: resp.CompactRevision,
		}, true
	}
	if err := resp.Err(); err != nil {
		return kv.WatchResponse{Err: mapErr(err)}, true
	}
	if resp.IsProgressNotify() {
		return kv.WatchResponse{Progress: true, Revision: resp.Header.Revision}, false
	}
	if len(resp.Events) == 0 {
		return kv.WatchResponse{}, false
	}
	out := kv.WatchResponse{Events: make([]kv.Event, 0, len(resp.Events))}
	for _, e := range resp.Events {
		ev := kv.Event{Type: kv.Put, KV: *w.s.strip(e.Kv), PrevKV: w.s.strip(e.PrevKv)}
		if e.Type == clientv3.EventTypeDelete {
			ev.Type = kv.Delete
		}
		if ev.PrevKV == nil && !ev.IsCreate() {
			// etcd could not read the previous value: it was compacted
			// under this watcher (seed 003). Delivering the event would hide
			// what changed; end the watch so the reader relists instead.
			return kv.WatchResponse{
				Err: fmt.Errorf("%w: event at revision %d arrived without its previous value",
					kv.ErrCompacted, e.Kv.ModRevision),
				CompactRevision: e.Kv.ModRevision,
			}, true
		}
		out.Events = append(out.Events, ev)
	}
	out.Revision = out.Events[len(out.Events)-1].KV.ModRevision
	w.next = out.Revision + 1
	return out, false
}

// finish sends the final response; see kv.FinishWatch.
func (w *watcher) finish(resp kv.WatchResponse) {
	kv.FinishWatch(w.out, resp, w.ctx.Done(), w.s.stop)
}
