package mvcc

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Config configures a Store. The zero value is not valid: set Dir or
// InMemory.
type Config struct {
	// Dir holds the write-ahead log and snapshots. Required unless InMemory.
	Dir string
	// InMemory keeps nothing on disk: for tests. Everything is lost on Close.
	InMemory bool
	// MaxValueSize limits a value's size. Default kv.DefaultMaxValueSize.
	MaxValueSize int
	// SnapshotBytes is the least log written between snapshots; the log
	// also grows as large as the last snapshot before the next one, so
	// that snapshots of a large store cost at most a byte written per byte
	// logged. A larger value means fewer snapshots and a longer replay at
	// start. Default 64 MiB.
	SnapshotBytes int64
	// CompactionBatch is how many of the keys written since the last
	// compaction (one per revision) compaction trims per hold of the
	// store's lock, which bounds how long it delays writers. Default 1,000.
	CompactionBatch int
	// WatchBuffer is how many responses a watcher may have waiting for its
	// reader before the engine stops reading ahead for it. A watcher past
	// its buffer is not dropped: it resumes from history when its reader
	// catches up. Default 64.
	WatchBuffer int
	// WatchBatch caps the events in one watch response. Default 1,000.
	WatchBatch int
	// ProgressNotifyInterval is the period of progress responses on idle
	// watches opened with ProgressNotify. Default 1 minute.
	ProgressNotifyInterval time.Duration
	// Logger receives recovery and compaction logs. Nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxValueSize == 0 {
		c.MaxValueSize = kv.DefaultMaxValueSize
	}
	if c.SnapshotBytes == 0 {
		c.SnapshotBytes = 64 << 20
	}
	if c.CompactionBatch == 0 {
		c.CompactionBatch = 1000
	}
	if c.WatchBuffer == 0 {
		c.WatchBuffer = 64
	}
	if c.WatchBatch == 0 {
		c.WatchBatch = 1000
	}
	if c.ProgressNotifyInterval == 0 {
		c.ProgressNotifyInterval = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.InMemory && c.Dir != "":
		return errors.New("mvcc: Dir and InMemory are exclusive")
	case !c.InMemory && c.Dir == "":
		return errors.New("mvcc: Dir is required unless InMemory is set")
	case c.MaxValueSize < 0, c.SnapshotBytes < 0, c.CompactionBatch < 0,
		c.WatchBuffer < 0, c.WatchBatch < 0, c.ProgressNotifyInterval < 0:
		return fmt.Errorf("mvcc: negative limit in config %+v", c)
	}
	return nil
}
