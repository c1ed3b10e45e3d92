package kv

import (
	"context"
	"errors"
	"fmt"
)

// Store is an MVCC key-value store with etcd's revision semantics. All
// methods are safe for concurrent use. Byte slices handed to a Store or
// returned by it must not be modified afterwards.
type Store interface {
	// Range reads one key, or the keys in [key, opts.End), at opts.Revision
	// (0 means the current revision). Keys come back in byte order.
	//
	// It returns ErrCompacted when opts.Revision is below the compaction
	// point, ErrFutureRevision when it is above the current revision, and
	// ErrEmptyKey for an empty key.
	Range(ctx context.Context, key string, opts RangeOptions) (RangeResponse, error)

	// Create writes key only if it is absent (it has no live generation).
	// On a lost compare the response has Succeeded false and Prev holds the
	// existing value.
	Create(ctx context.Context, key string, value []byte) (WriteResponse, error)

	// Update writes key only if its ModRevision equals modRevision. On a lost
	// compare, including when the key is absent, the response has Succeeded
	// false and Prev holds the current value, or nil if the key is absent.
	Update(ctx context.Context, key string, value []byte, modRevision int64) (WriteResponse, error)

	// Delete removes key only if its ModRevision equals modRevision. On
	// success Prev holds the deleted value. On a lost compare the response
	// has Succeeded false and Prev holds the current value, or nil.
	Delete(ctx context.Context, key string, modRevision int64) (WriteResponse, error)

	// Watch follows one key, or the keys in [key, opts.End), from
	// opts.Revision (0 means the revision after the current one). A start
	// revision in the future is allowed: events begin when it is reached.
	//
	// Errors that come from history, such as a start revision below the
	// compaction point, arrive on the watcher's channel as a final response
	// with Err set. Watch itself returns an error only for invalid arguments
	// or a closed store.
	Watch(ctx context.Context, key string, opts WatchOptions) (Watcher, error)

	// Compact drops history below revision: afterwards reads and watches
	// at revisions lower than it fail with ErrCompacted, while reads at
	// revision and later are unchanged. It returns ErrCompacted when
	// revision is not above the current compaction point and
	// ErrFutureRevision when it is above the current revision.
	Compact(ctx context.Context, revision int64) error

	// Close releases the store. Watchers are ended with ErrClosed and later
	// calls fail with ErrClosed.
	Close() error
}

// OrderedUpdater is implemented by engines that order a write before they
// make it durable, as the embedded engine's group commit does.
// UpdateOrdered is Update, and calls ordered with the response (always a
// successful one) once the write has its revision and every later write
// will come after it, but before it is durable; it returns, as Update
// does, once it is durable. A caller that serializes the writers of a key
// can hand the next writer the value written from ordered, so that the
// writes of one hot key share fsyncs. That writer's answer must then
// wait for this write to be durable, as its own successful write does.
type OrderedUpdater interface {
	UpdateOrdered(ctx context.Context, key string, value []byte, modRevision int64, ordered func(WriteResponse)) (WriteResponse, error)
}

// KeyValue is one version of a key.
type KeyValue struct {
	Key            string
	Value          []byte
	CreateRevision int64
	ModRevision    int64
	Version        int64
}

// RangeOptions selects what Range reads.
type RangeOptions struct {
	// End, when not empty, makes the read cover [key, End). Use PrefixEnd
	// to read a prefix.
	End string
	// Revision to read at; 0 means the current revision.
	Revision int64
	// Limit caps the number of keys returned; 0 means no limit.
	Limit int64
	// CountOnly returns the count and no key-values.
	CountOnly bool
	// NoCount is for a caller that reads KVs and More only: Count is left
	// 0, and the embedded engine stops at the key after Limit instead of
	// counting every key to the end of the range (etcd counts anyway).
	NoCount bool
}

// RangeResponse is the answer to Range.
type RangeResponse struct {
	// Revision is the store revision the read was served at.
	Revision int64
	// KVs are the keys read, in key order, at most Limit of them.
	KVs []KeyValue
	// Count is the number of keys in the range at Revision, ignoring Limit.
	Count int64
	// More reports that Limit cut the answer short.
	More bool
}

// WriteResponse is the answer to Create, Update and Delete.
type WriteResponse struct {
	// Succeeded reports whether the compare held and the write happened.
	Succeeded bool
	// Revision is the revision of the write when it succeeded, and the
	// store's current revision when it did not.
	Revision int64
	// KV is the value written by a successful Create or Update.
	KV *KeyValue
	// Prev is the value before a successful write (nil for Create), or the
	// current value when the compare was lost (nil if the key is absent).
	Prev *KeyValue
}

// WatchOptions configures Watch.
type WatchOptions struct {
	// End, when not empty, makes the watch cover [key, End).
	End string
	// Revision is the first revision to deliver; 0 means the revision after
	// the current one.
	Revision int64
	// ProgressNotify asks for periodic progress responses while the watch
	// is idle. The period is the engine's.
	ProgressNotify bool
}

// Watcher is one open watch.
type Watcher interface {
	// Responses delivers events and progress notifications. It is closed
	// after a response carrying Err, or without one after Close or the
	// cancellation of the watch's context.
	Responses() <-chan WatchResponse
	// RequestProgress asks for a progress response. It is sent once every
	// event up to the current revision has been delivered.
	RequestProgress(ctx context.Context) error
	// Close ends the watch and releases its resources. It is idempotent.
	Close()
}

// WatchResponse is one message on a watch.
type WatchResponse struct {
	// Events holds whole revisions, in revision order.
	Events []Event
	// Revision is the revision up to which this watch has delivered every
	// matching event: the last event's revision, or for a progress
	// notification the store revision it reports.
	Revision int64
	// Progress marks a progress notification (no events).
	Progress bool
	// CompactRevision is the compaction point when Err is ErrCompacted.
	CompactRevision int64
	// Err, if set, ends the watch: no response follows it.
	Err error
}

// EventType says what kind of write an event reports.
type EventType int

const (
	// Put is a create or an update.
	Put EventType = iota
	// Delete is a delete.
	Delete
)

func (t EventType) String() string {
	switch t {
	case Put:
		return "PUT"
	case Delete:
		return "DELETE"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one write seen by a watcher.
type Event struct {
	Type EventType
	// KV is the key after the write. For a Delete only Key and ModRevision
	// are set, as in etcd.
	KV KeyValue
	// PrevKV is the key's value before the write. It is nil only for a
	// create; a Delete always carries it.
	PrevKV *KeyValue
}

// IsCreate reports whether the event created a new generation of its key.
func (e Event) IsCreate() bool {
	return e.Type == Put && e.KV.CreateRevision == e.KV.ModRevision
}

// Sentinel errors. Engines wrap them with context; compare with errors.Is.
var (
	// ErrCompacted: the requested revision is below the compaction point.
	ErrCompacted = errors.New("kv: required revision has been compacted")
	// ErrFutureRevision: the requested revision is above the current one.
	ErrFutureRevision = errors.New("kv: required revision is a future revision")
	// ErrClosed: the store was closed, or failed and can no longer serve.
	ErrClosed = errors.New("kv: store is closed")
	// ErrEmptyKey: a key is required.
	ErrEmptyKey = errors.New("kv: key is empty")
	// ErrKeyTooLarge: the key exceeds MaxKeySize.
	ErrKeyTooLarge = errors.New("kv: key is too large")
	// ErrValueTooLarge: the value exceeds the store's value size limit.
	ErrValueTooLarge = errors.New("kv: value is too large")
	// ErrUnavailable: the engine lost its backend (for example the
	// connection to etcd). The operation's outcome may be unknown; watches
	// end with it and must be re-established from a known revision.
	ErrUnavailable = errors.New("kv: store unavailable")
)

const (
	// DefaultMaxValueSize is the default limit on a value's size, 1.5 MiB:
	// etcd's default --max-request-bytes.
	DefaultMaxValueSize = 3 << 19
	// MaxKeySize is the limit on a key's size, well above any key the
	// object layer builds.
	MaxKeySize = 4 << 10
)

// CheckKey returns ErrEmptyKey or ErrKeyTooLarge, wrapped, for a key no
// engine accepts.
func CheckKey(key string) error {
	if key == "" {
		return ErrEmptyKey
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrKeyTooLarge, len(key), MaxKeySize)
	}
	return nil
}

// CheckWrite validates a key and a value against the limits, with limit the
// store's value size limit.
func CheckWrite(key string, value []byte, limit int) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(value) > limit {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), limit)
	}
	return nil
}

// PrefixEnd returns the end of the range that holds every key starting with
// prefix, for RangeOptions.End and WatchOptions.End: the prefix with its
// last byte below 0xff incremented and the rest cut off. A prefix made only
// of 0xff bytes has no such end and yields "".
func PrefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// InRange reports whether key lies in the range given by start and end,
// with end "" meaning the single key start.
func InRange(key, start, end string) bool {
	if end == "" {
		return key == start
	}
	return key >= start && key < end
}

// FinishWatch sends resp, a watch's final response, on out, for engines.
// It gives up if cancelled is closed (the reader has gone). Once closing is
// closed it must not wait for a reader that has stopped reading, so it
// drops whatever is still buffered and sends resp alone: the reader then
// sees a prefix of the events and the error, never a gap, and must resume
// from the last revision it saw anyway. The caller must be out's only sender.
func FinishWatch(out chan WatchResponse, resp WatchResponse, cancelled, closing <-chan struct{}) {
	select {
	case out <- resp:
		return
	case <-cancelled:
		return
	case <-closing:
	}
	for {
		select {
		case <-out:
			continue
		default:
		}
		select {
		case out <- resp:
			return
		default:
		}
	}
}
