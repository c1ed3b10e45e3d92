package webhook

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Run follows the configurations' watches until ctx ends, reading them
// all again after any change: the writes through this kplane are applied
// before they return (Install), but one made through another kplane on
// the same etcd reaches this one only so, a moment later, as upstream's
// informers do.
func (w *Webhooks) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := w.follow(ctx)
		if ctx.Err() != nil {
			break
		}
		if w.Logger != nil {
			w.Logger.Warn("following the admission webhook configurations; again in a second", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// follow watches the configuration resources from now, reads the configurations
// (anything written before the watches started is in that reading), then
// reads them again after each change, until a watch ends.
func (w *Webhooks) follow(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	resources := []schema.GroupResource{mutatingResource, validatingResource,
		policyResource, bindingResource, mutatingPolicyResource, mutatingBindingResource}
	ended := make(chan error, len(resources))
	for _, gr := range resources {
		res, ok := w.Registry.Get(gr)
		if !ok {
			if gr != mutatingResource && gr != validatingResource {
				continue // a registry without them (tests)
			}
			return errors.New(gr.String() + " is not served")
		}
		wi, err := res.Watch(ctx, "v1", "", registry.ListOptions{NoInitialEvents: true})
		if err != nil {
			return err
		}
		go func() {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				if ev.Type != watch.Bookmark {
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			}
			ended <- errors.New(gr.String() + ": the watch ended")
		}()
	}
	for {
		if err := w.Load(ctx); err != nil {
			return err
		}
		select {
		case <-changed:
		case err := <-ended:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}
