package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// watchersPerConn is how many watches share one client connection.
const watchersPerConn = 100

// watchGrace bounds the wait for events after the last write returned.
const watchGrace = 30 * time.Second

// receipt is one event as a watcher saw it.
type receipt struct {
	seq  int
	rv   string
	sent time.Time // the send time the writer put in the object
	at   time.Time
}

// watch: Watchers watches on one ConfigMap, then WatchUpdates sequential
// updates of it. Each update carries its sequence number and send time.
// Latency is from the update's return to the event's receipt, for every
// (watcher, update); an event that arrives before its write returned
// counts as 0 (extra.early). Every watcher must see every update exactly
// once, in order, with the resourceVersion the update returned.
func (r *runner) watch(ctx context.Context) ([]Result, error) {
	const name = "watch-target"
	W, K := r.sizes.Watchers, r.sizes.WatchUpdates
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	obj, err := r.createTarget(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"seq": "-1"}})
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var client kubernetes.Interface
	watches := make([]watch.Interface, 0, W)
	defer func() {
		for _, w := range watches {
			w.Stop()
		}
	}()
	timeout := int64(r.timeout / time.Second)
	for i := range W {
		if i%watchersPerConn == 0 {
			if client, err = r.freshClient(); err != nil {
				return nil, err
			}
		}
		w, err := client.CoreV1().ConfigMaps(r.ns).Watch(wctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + name,
			ResourceVersion: obj.ResourceVersion,
			TimeoutSeconds:  &timeout,
		})
		if err != nil {
			return nil, fmt.Errorf("starting watcher %d: %w", i, err)
		}
		watches = append(watches, w)
	}

	got := make([][]receipt, W)
	errs := make([]error, W)
	var wg sync.WaitGroup
	for i, w := range watches {
		wg.Go(func() {
			for len(got[i]) < K {
				ev, ok := <-w.ResultChan()
				at := time.Now()
				if !ok {
					errs[i] = fmt.Errorf("watcher %d: the watch closed after %d events", i, len(got[i]))
					return
				}
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Modified || !isCM {
					errs[i] = fmt.Errorf("watcher %d: unexpected %s event %T", i, ev.Type, ev.Object)
					return
				}
				seq, _ := strconv.Atoi(cm.Data["seq"])
				sent, _ := strconv.ParseInt(cm.Data["sent"], 10, 64)
				got[i] = append(got[i], receipt{seq: seq, rv: cm.ResourceVersion, sent: time.Unix(0, sent), at: at})
			}
		})
	}

	rvs := make([]string, K)
	returned := make([]time.Time, K)
	s := r.begin()
	for i := range K {
		obj.Data["seq"] = strconv.Itoa(i)
		obj.Data["sent"] = strconv.FormatInt(time.Now().UnixNano(), 10)
		obj, err = cms.Update(ctx, obj, metav1.UpdateOptions{})
		returned[i] = time.Now()
		if err != nil {
			cancel()
			wg.Wait()
			return nil, fmt.Errorf("update %d: %w", i, err)
		}
		rvs[i] = obj.ResourceVersion
	}
	writeSecs := time.Since(s.start).Seconds()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		cancel()
		<-done
	case <-time.After(watchGrace):
		cancel() // the watchers still waiting report what they lack
		<-done
	}
	delivered := 0
	for _, g := range got {
		delivered += len(g)
	}
	lat, fromSend, early, problems := checkWatch(got, errs, rvs, returned)
	res := s.end("watch", delivered, lat)
	slices.Sort(fromSend)
	res.addExtra(map[string]any{"p50_from_send_ms": ms(percentile(fromSend, 50)), "p99_from_send_ms": ms(percentile(fromSend, 99)), "watchers": W, "updates": K, "updates_per_s": float64(K) / writeSecs,
		"early": early, "lost": problems.lost, "duplicated": problems.duplicated, "out_of_order": problems.outOfOrder})
	if problems.err != nil {
		res.Error = problems.err.Error()
	}
	return []Result{res}, nil
}

type watchProblems struct {
	lost, duplicated, outOfOrder int
	err                          error // the first problem, described
}

// checkWatch checks each watcher's receipts against the updates
// (rvs[seq], returned[seq]) and returns the delivery latencies. A
// receipt is matched to its update by resourceVersion; the sequence
// number in the object must agree. fromSend are the latencies from the
// send time in the object instead.
func checkWatch(got [][]receipt, errs []error, rvs []string, returned []time.Time) (lat, fromSend []time.Duration, early int, p watchProblems) {
	seqOf := make(map[string]int, len(rvs))
	for i, rv := range rvs {
		seqOf[rv] = i
	}
	note := func(err error) {
		if p.err == nil {
			p.err = err
		}
	}
	for w, g := range got {
		if errs[w] != nil {
			note(errs[w])
		}
		seen := make(map[string]bool, len(g))
		prev := -1
		for _, rc := range g {
			seq, ok := seqOf[rc.rv]
			if !ok || seq != rc.seq {
				note(fmt.Errorf("watcher %d: event at resourceVersion %s (seq %d) matches no update", w, rc.rv, rc.seq))
				continue
			}
			if seen[rc.rv] {
				p.duplicated++
				note(fmt.Errorf("watcher %d: resourceVersion %s delivered twice", w, rc.rv))
				continue
			}
			seen[rc.rv] = true
			if seq < prev {
				p.outOfOrder++
				note(fmt.Errorf("watcher %d: update %d after update %d", w, seq, prev))
			}
			prev = seq
			d := rc.at.Sub(returned[seq])
			if d < 0 {
				early++
				d = 0
			}
			lat = append(lat, d)
			fromSend = append(fromSend, rc.at.Sub(rc.sent))
		}
		if missing := len(rvs) - len(seen); missing > 0 {
			p.lost += missing
			note(fmt.Errorf("watcher %d: %d of %d updates lost", w, missing, len(rvs)))
		}
	}
	return lat, fromSend, early, p
}
