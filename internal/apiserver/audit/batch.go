package audit

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// batcher queues encoded events for a goroutine that hands them, in
// batches, to flush: a batch is flushed once it holds MaxBatchSize
// events, once MaxBatchWait has passed since its first (0: what is
// queued then), or when the queue is closed; with ThrottleEnable, at most
// ThrottleQPS batches a second (ThrottleBurst at once). With async, each
// batch is flushed on a goroutine of its own (a webhook's slow answer
// does not hold the next batch), as upstream's AsyncDelegate.
type batcher struct {
	opts    BatchOptions
	queue   chan []byte
	done    chan struct{}
	flush   func(lines [][]byte)
	async   bool
	flushes sync.WaitGroup
	dropped *atomic.Uint64
}

func newBatcher(opts BatchOptions, async bool, dropped *atomic.Uint64, flush func(lines [][]byte)) *batcher {
	b := &batcher{opts: opts, queue: make(chan []byte, opts.BufferSize), done: make(chan struct{}), flush: flush, async: async, dropped: dropped}
	go b.run()
	return b
}

// ErrQueueFull is the error for an event a full queue lost (batch mode),
// in upstream's words.
var ErrQueueFull = errors.New("audit buffer queue blocked")

// enqueue queues line, or loses it if the queue is full (or closed: an
// event after close).
func (b *batcher) enqueue(line []byte) (err error) {
	defer func() {
		if recover() != nil {
			b.dropped.Add(1)
			err = errors.New("audit backend shut down")
		}
	}()
	select {
	case b.queue <- line:
		return nil
	default:
		b.dropped.Add(1)
		return ErrQueueFull
	}
}

// close flushes what is queued and waits for every flush to end.
func (b *batcher) close() {
	close(b.queue)
	<-b.done
	b.flushes.Wait()
}

func (b *batcher) run() {
	defer close(b.done)
	o := b.opts
	tokens, last := float64(o.ThrottleBurst), time.Now()
	for {
		line, ok := <-b.queue
		if !ok {
			return
		}
		batch := [][]byte{line}
		closed := false
		var wait <-chan time.Time
		var timer *time.Timer
		if o.MaxBatchWait > 0 {
			timer = time.NewTimer(o.MaxBatchWait)
			wait = timer.C
		}
		for len(batch) < o.MaxBatchSize && !closed {
			if wait == nil {
				// No wait: what is queued now joins the batch.
				select {
				case line, ok := <-b.queue:
					if closed = !ok; ok {
						batch = append(batch, line)
					}
					continue
				default:
				}
				break
			}
			select {
			case line, ok := <-b.queue:
				if closed = !ok; ok {
					batch = append(batch, line)
				}
				continue
			case <-wait:
			}
			break
		}
		if timer != nil {
			timer.Stop()
		}
		if o.ThrottleEnable {
			now := time.Now()
			tokens = min(float64(o.ThrottleBurst), tokens+now.Sub(last).Seconds()*o.ThrottleQPS)
			last = now
			if tokens < 1 {
				time.Sleep(time.Duration((1 - tokens) / o.ThrottleQPS * float64(time.Second)))
				tokens, last = 1, time.Now()
			}
			tokens--
		}
		if b.async {
			b.flushes.Add(1)
			go func() {
				defer b.flushes.Done()
				b.flush(batch)
			}()
		} else {
			b.flush(batch)
		}
		if closed {
			return
		}
	}
}
