package watchcache

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial
// events of a sendInitialEvents watch.
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// List serves a list from the cache where the API allows it, and from the
// store otherwise (Exact, continued pages, and paged consistent lists).
// A resourceVersion "0" list ignores Limit, as kube-apiserver's cache does.
func (c *Cache) List(ctx context.Context, opts storage.ListOptions) (*unstructured.UnstructuredList, error) {
	rv, err := storage.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	fromCache := opts.ResourceVersion == "0" ||
		(opts.Continue == "" && opts.Limit == 0 && opts.ResourceVersionMatch != metav1.ResourceVersionMatchExact)
	if !fromCache {
		return c.cfg.Store.List(ctx, c.cfg.Prefix, opts)
	}
	switch {
	case opts.ResourceVersion == "":
		// A consistent read: the cache must reflect the store's revision now.
		cur, err := c.cfg.Store.Revision(ctx)
		if err != nil {
			return nil, err
		}
		if !c.waitFor(ctx, cur) {
			return c.cfg.Store.List(ctx, c.cfg.Prefix, opts)
		}
	case rv > 0:
		if !c.waitFor(ctx, rv) {
			return nil, &storage.Error{Code: storage.CodeTooLargeResourceVersion, Key: c.cfg.Prefix, ResourceVersion: rv,
				Msg: fmt.Sprintf("Too large resource version: %d, current: %d", rv, c.Revision())}
		}
	default:
		if !c.waitFor(ctx, 0) {
			return c.cfg.Store.List(ctx, c.cfg.Prefix, opts)
		}
	}
	list := &unstructured.UnstructuredList{Object: map[string]any{}}
	c.mu.RLock()
	c.mu.objects.Ascend(func(it item) bool {
		if opts.Predicate.Matches(it.obj) {
			list.Items = append(list.Items, *it.obj)
		}
		return true
	})
	list.SetResourceVersion(strconv.FormatInt(c.mu.rev, 10))
	c.mu.RUnlock()
	return list, nil
}

// WatchOptions qualify Watch.
type WatchOptions struct {
	ResourceVersion string
	Predicate       storage.Predicate
	// AllowBookmarks asks for periodic BOOKMARK events.
	AllowBookmarks bool
	// SendInitialEvents starts with the current state as ADDED events,
	// then a BOOKMARK annotated InitialEventsEndAnnotation (it requires
	// AllowBookmarks, as the API does).
	SendInitialEvents bool
}

// Watch starts a watch served from the cache. Errors the API reports in
// the stream (410 Gone, too large a resourceVersion) come as an ERROR event.
func (c *Cache) Watch(ctx context.Context, opts WatchOptions) (watch.Interface, error) {
	rv, err := storage.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if opts.SendInitialEvents && !opts.AllowBookmarks {
		return nil, &storage.Error{Code: storage.CodeInvalidRequest, Key: c.cfg.Prefix,
			Msg: "sendInitialEvents requires allowWatchBookmarks"}
	}
	if !c.waitFor(ctx, rv) {
		w := newWatcher(ctx, opts, 1)
		w.end(apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, c.Revision()), 1))
		return w, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var initial []watch.Event
	switch {
	case rv == 0 || opts.SendInitialEvents:
		c.mu.objects.Ascend(func(it item) bool {
			if opts.Predicate.Matches(it.obj) {
				initial = append(initial, watch.Event{Type: watch.Added, Object: it.obj})
			}
			return true
		})
		if opts.SendInitialEvents {
			initial = append(initial, watch.Event{Type: watch.Bookmark, Object: bookmarkObject(c.mu.rev, true)})
		}
	case rv < c.mu.floor:
		w := newWatcher(ctx, opts, 1)
		w.end(apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, c.mu.floor)))
		return w, nil
	default:
		probe := &watcher{pred: opts.Predicate}
		for _, e := range c.mu.history {
			if e.rev > rv {
				if out, ok := probe.transform(e); ok {
					initial = append(initial, out)
				}
			}
		}
	}
	w := newWatcher(ctx, opts, c.cfg.Buffer+len(initial))
	for _, ev := range initial {
		w.push(ev)
	}
	c.mu.watchers[w] = struct{}{}
	go func() {
		<-w.done
		c.mu.Lock()
		delete(c.mu.watchers, w)
		c.mu.Unlock()
	}()
	return w, nil
}

func bookmarkObject(rev int64, initialEnd bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetResourceVersion(strconv.FormatInt(rev, 10))
	if initialEnd {
		u.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return u
}
