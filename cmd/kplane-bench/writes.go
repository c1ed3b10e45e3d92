package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"
)

func bulkName(i int) string { return fmt.Sprintf("cm-%05d", i) }

// bulkNamePrefix is how each bulk ConfigMap's name starts in a JSON answer.
var bulkNamePrefix = []byte(`"name":"cm-`)

// bulkLabel selects the bulk ConfigMaps.
const bulkLabel = "app=kplane-bench"

// bulkValues are the payloads of the next n bulk ConfigMaps, made before
// a scenario's clock starts: the text payload takes the client about 7 µs
// a value.
func (r *runner) bulkValues(n int) []string {
	values := make([]string, n)
	for i := range values {
		values[i] = r.payload.value(r.made + i)
	}
	return values
}

// createBulk creates the next len(values) bulk ConfigMaps, holding values.
func (r *runner) createBulk(ctx context.Context, workers int, values []string) ([]time.Duration, error) {
	base, n := r.made, len(values)
	lat, err := parallel(ctx, workers, n, func(ctx context.Context, _, i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: bulkName(base + i), Labels: map[string]string{"app": "kplane-bench"}},
			Data:       map[string]string{"payload": values[i]},
		}
		_, err := r.cs.CoreV1().ConfigMaps(r.ns).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
	// On an error some creates after the first failure may have landed;
	// count only the contiguous ones we know of.
	if err == nil {
		r.made += n
	}
	return lat, err
}

// ensure tops the bulk ConfigMaps up to n, untimed.
func (r *runner) ensure(ctx context.Context, n int) error {
	if r.made >= n {
		return nil
	}
	if _, err := r.createBulk(ctx, r.sizes.Workers, r.bulkValues(n-r.made)); err != nil {
		return fmt.Errorf("creating ConfigMaps up to %d: %w", n, err)
	}
	return nil
}

// create: Workers clients create Creates ConfigMaps of 1 KiB.
func (r *runner) create(ctx context.Context) ([]Result, error) {
	values := r.bulkValues(r.sizes.Creates)
	s := r.begin()
	lat, err := r.createBulk(ctx, r.sizes.Workers, values)
	res := s.end("create", len(lat), lat)
	res.addExtra(map[string]any{"workers": r.sizes.Workers, "bytes": payloadBytes, "payload": r.payload})
	return []Result{res}, err
}

// get: Workers clients get bulk ConfigMaps round-robin, Gets in all.
func (r *runner) get(ctx context.Context) ([]Result, error) {
	if err := r.ensure(ctx, min(100, r.sizes.Objects)); err != nil {
		return nil, err
	}
	n := r.made
	s := r.begin()
	lat, err := parallel(ctx, r.sizes.Workers, r.sizes.Gets, func(ctx context.Context, _, i int) error {
		_, err := r.cs.CoreV1().ConfigMaps(r.ns).Get(ctx, bulkName(i%n), metav1.GetOptions{})
		return err
	})
	res := s.end("get", len(lat), lat)
	res.addExtra(map[string]any{"workers": r.sizes.Workers, "distinct_objects": n})
	return []Result{res}, err
}

// conflictBackoff is retry.DefaultRetry's shape (10 ms, no growth,
// jitter 0.1) with more steps, so that 8 writers on one object converge
// instead of exhausting DefaultRetry's 5 tries.
var conflictBackoff = wait.Backoff{Steps: 100, Duration: 10 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// updateConflicts: UpdateWorkers clients read-modify-write one ConfigMap
// (a counter) with retry.RetryOnConflict, Updates in all. The counter must
// end at Updates: a lost update is an error.
func (r *runner) updateConflicts(ctx context.Context) ([]Result, error) {
	const name = "conflict-target"
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	if _, err := r.createTarget(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": "0"}}); err != nil {
		return nil, err
	}
	var conflicts, attempts atomic.Int64
	s := r.begin()
	lat, err := parallel(ctx, r.sizes.UpdateWorkers, r.sizes.Updates, func(ctx context.Context, _, _ int) error {
		return retry.RetryOnConflict(conflictBackoff, func() error {
			attempts.Add(1)
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(cm.Data["n"])
			if err != nil {
				return fmt.Errorf("counter %q: %w", cm.Data["n"], err)
			}
			cm.Data["n"] = strconv.Itoa(n + 1)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				conflicts.Add(1)
			}
			return err
		})
	})
	res := s.end("update-conflicts", len(lat), lat)
	res.Conflicts = conflicts.Load()
	res.addExtra(map[string]any{"workers": r.sizes.UpdateWorkers, "attempts": attempts.Load()})
	if err != nil {
		return []Result{res}, err
	}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return []Result{res}, err
	}
	if cm.Data["n"] != strconv.Itoa(r.sizes.Updates) {
		return []Result{res}, fmt.Errorf("lost updates: the counter is %s after %d updates", cm.Data["n"], r.sizes.Updates)
	}
	return []Result{res}, nil
}

// mergePatch: PatchWorkers clients JSON-merge-patch their own key of one
// ConfigMap, Patches in all. A merge patch without a resourceVersion
// never conflicts: any 409 is an error, and every worker's last value
// must be there at the end.
func (r *runner) mergePatch(ctx context.Context) ([]Result, error) {
	const name = "patch-target"
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	if _, err := r.createTarget(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		return nil, err
	}
	var conflicts atomic.Int64
	last := make([]atomic.Int64, r.sizes.PatchWorkers)
	s := r.begin()
	lat, err := parallel(ctx, r.sizes.PatchWorkers, r.sizes.Patches, func(ctx context.Context, w, i int) error {
		patch := fmt.Sprintf(`{"data":{"w%d":"%d"}}`, w, i)
		_, err := cms.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			conflicts.Add(1)
		}
		if err == nil {
			last[w].Store(int64(i) + 1)
		}
		return err
	})
	res := s.end("merge-patch", len(lat), lat)
	res.Conflicts = conflicts.Load()
	res.addExtra(map[string]any{"workers": r.sizes.PatchWorkers})
	if err != nil {
		return []Result{res}, err
	}
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return []Result{res}, err
	}
	for w := range last {
		if v := last[w].Load(); v > 0 && cm.Data[fmt.Sprintf("w%d", w)] != strconv.FormatInt(v-1, 10) {
			return []Result{res}, fmt.Errorf("worker %d's last patch (%d) is not in the object: %q", w, v-1, cm.Data[fmt.Sprintf("w%d", w)])
		}
	}
	return []Result{res}, nil
}

// apply: ApplyWorkers clients server-side apply a 1 KiB ConfigMap each
// (applied-<worker>, force, as a controller applies what it owns), with
// a key that changes every time, Applies in all. At the end each object
// holds its worker's last value and one Apply entry for the bench.
func (r *runner) apply(ctx context.Context) ([]Result, error) {
	cms := r.cs.CoreV1().ConfigMaps(r.ns)
	last := make([]atomic.Int64, r.sizes.ApplyWorkers)
	name := func(w int) string { return fmt.Sprintf("applied-%d", w) }
	opts := metav1.ApplyOptions{FieldManager: "kplane-bench", Force: true}
	values := make([]string, r.sizes.ApplyWorkers) // each worker's payload, made before the clock starts
	for w := range values {
		values[w] = r.payload.value(w)
	}
	s := r.begin()
	lat, err := parallel(ctx, r.sizes.ApplyWorkers, r.sizes.Applies, func(ctx context.Context, w, i int) error {
		cm := corev1ac.ConfigMap(name(w), r.ns).
			WithLabels(map[string]string{"app": "kplane-bench"}).
			WithData(map[string]string{"payload": values[w], "n": strconv.Itoa(i)})
		_, err := cms.Apply(ctx, cm, opts)
		if err == nil {
			last[w].Store(int64(i) + 1)
		}
		return err
	})
	res := s.end("apply", len(lat), lat)
	res.addExtra(map[string]any{"workers": r.sizes.ApplyWorkers, "bytes": payloadBytes, "payload": r.payload})
	if err != nil {
		return []Result{res}, err
	}
	for w := range last {
		v := last[w].Load()
		if v == 0 {
			continue
		}
		cm, err := cms.Get(ctx, name(w), metav1.GetOptions{})
		if err != nil {
			return []Result{res}, err
		}
		if cm.Data["n"] != strconv.FormatInt(v-1, 10) {
			return []Result{res}, fmt.Errorf("worker %d's last apply (%d) is not in the object: %q", w, v-1, cm.Data["n"])
		}
		if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != "kplane-bench" || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
			return []Result{res}, fmt.Errorf("%s: managedFields %+v, want one Apply entry of kplane-bench", name(w), cm.ManagedFields)
		}
	}
	// apply-unchanged: each worker applies its last configuration again
	// and again, as a GitOps controller re-applies its manifests on every
	// sync; nothing changes, so no write may happen.
	rvs := make([]string, r.sizes.ApplyWorkers)
	for w := range rvs {
		if last[w].Load() == 0 {
			continue
		}
		cm, err := cms.Get(ctx, name(w), metav1.GetOptions{})
		if err != nil {
			return []Result{res}, err
		}
		rvs[w] = cm.ResourceVersion
	}
	s = r.begin()
	lat, err = parallel(ctx, r.sizes.ApplyWorkers, r.sizes.Applies, func(ctx context.Context, w, _ int) error {
		if rvs[w] == "" {
			return nil
		}
		cm := corev1ac.ConfigMap(name(w), r.ns).
			WithLabels(map[string]string{"app": "kplane-bench"}).
			WithData(map[string]string{"payload": values[w], "n": strconv.FormatInt(last[w].Load()-1, 10)})
		got, err := cms.Apply(ctx, cm, opts)
		if err == nil && got.ResourceVersion != rvs[w] {
			err = fmt.Errorf("%s: an apply of the configuration it matches wrote it (resourceVersion %s, was %s)", name(w), got.ResourceVersion, rvs[w])
		}
		return err
	})
	unchanged := s.end("apply-unchanged", len(lat), lat)
	unchanged.addExtra(map[string]any{"workers": r.sizes.ApplyWorkers, "bytes": payloadBytes, "payload": r.payload})
	return []Result{res, unchanged}, err
}
