package controller

import (
	"log/slog"
	"sync/atomic"
)

// Counters tallies what a FooReconciler has done. All fields are safe for
// concurrent use. A nil *Counters is valid and counts nothing.
type Counters struct {
	// Reconciles is the number of Reconcile calls.
	Reconciles atomic.Int64
	// Conflicts is the number of Update or Patch calls rejected with 409
	// Conflict, including those later retried by retry.RetryOnConflict.
	Conflicts atomic.Int64
	// Updates is the number of Update calls that succeeded (including
	// no-op updates that did not change the stored object).
	Updates atomic.Int64
	// Patches is the number of Patch calls that succeeded (including
	// patches that did not change the stored object).
	Patches atomic.Int64
	// Errors is the number of Reconcile calls that returned an error.
	Errors atomic.Int64
}

// CountersSnapshot is a point-in-time copy of Counters.
type CountersSnapshot struct {
	Reconciles int64
	Conflicts  int64
	Updates    int64
	Patches    int64
	Errors     int64
}

// Snapshot returns the current values. The fields are read one at a time,
// so the result is not an atomic view across all counters.
func (c *Counters) Snapshot() CountersSnapshot {
	if c == nil {
		return CountersSnapshot{}
	}
	return CountersSnapshot{
		Reconciles: c.Reconciles.Load(),
		Conflicts:  c.Conflicts.Load(),
		Updates:    c.Updates.Load(),
		Patches:    c.Patches.Load(),
		Errors:     c.Errors.Load(),
	}
}

// LogValue implements slog.LogValuer.
func (s CountersSnapshot) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("reconciles", s.Reconciles),
		slog.Int64("conflicts", s.Conflicts),
		slog.Int64("updates", s.Updates),
		slog.Int64("patches", s.Patches),
		slog.Int64("errors", s.Errors),
	)
}

func (c *Counters) incReconciles() {
	if c != nil {
		c.Reconciles.Add(1)
	}
}

func (c *Counters) incConflicts() {
	if c != nil {
		c.Conflicts.Add(1)
	}
}

func (c *Counters) incUpdates() {
	if c != nil {
		c.Updates.Add(1)
	}
}

func (c *Counters) incPatches() {
	if c != nil {
		c.Patches.Add(1)
	}
}

func (c *Counters) incErrors() {
	if c != nil {
		c.Errors.Add(1)
	}
}
