// Package controller contains FooReconciler, a deliberately small
// controller-runtime reconciler for the Foo kind that reproduces the
// behaviour described in the "seed 000" write-up on update conflicts.
//
// The reconciler reads each Foo through the manager's cached client and
// then writes it back, in one of five modes:
//
//   - ModeSingle sets spec.foo to "Hello" and calls Update once. The first
//     pass changes the object; the watch event for that change triggers
//     another pass whose Update writes identical content, which the API
//     server treats as a no-op (no new resourceVersion, no event), so the
//     controller goes quiet after a few reconciles.
//
//   - ModeTwoUpdates sets spec.foo to "Hello", updates, then sets it to
//     "World" and updates again. Each pass makes two real changes, and each
//     change produces a watch event, so the controller never settles. Worse,
//     the informer cache trails the server: a pass often starts from an
//     object whose resourceVersion is already out of date, and the API
//     server rejects the write with 409 Conflict ("the object has been
//     modified; please apply your changes to the latest version and try
//     again"). The error is returned, and the request is requeued with
//     rate-limited backoff.
//
//   - ModeRetry performs the same two changes through UpdateFoo, which wraps
//     a fresh Get, the mutation and the Update in retry.RetryOnConflict. The
//     conflicts still happen (they are counted), but they are absorbed by the
//     retry loop and Reconcile normally returns nil. Nothing about the
//     feedback loop has changed, though: every pass still makes two real
//     changes, which trigger more passes, forever. Retrying hides the
//     symptom, not the cause.
//
//   - ModeIdempotent compares the object with the desired state (spec.foo
//     == "Hello") and writes only when they differ, retrying on conflict.
//     Once the object is in the desired state, reconciles do nothing and
//     the controller settles.
//
//   - ModeMergePatch makes ModeTwoUpdates' two changes ("Hello", then
//     "World") as JSON merge patches built with client.MergeFrom, instead of
//     Updates. A merge patch names only the field it changes and carries no
//     resourceVersion, so the API server applies it to its current version
//     of the object: the stale cache no longer matters and no write is
//     rejected with 409. The feedback loop is untouched, though: each pass
//     still makes two real changes, so, like ModeRetry, it never settles.
//
// The lesson: a controller driven by a stale cache must expect 409s, and
// should either let them be retried or avoid them by patching only the
// fields it changes; but the only thing that stops a reconcile loop is a
// reconciler that converges, i.e. one that leaves an object in the desired
// state alone.
//
// FooReconciler keeps no global state: all its dependencies are exported
// fields and its activity is tallied in a caller-supplied *Counters, so a
// test can run several reconcilers side by side and inspect each one.
package controller
