package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Event is an audit.k8s.io/v1 Event, member for member as kube-apiserver
// writes one to its log.
type Event struct {
	Kind                     string            `json:"kind"`
	APIVersion               string            `json:"apiVersion"`
	Level                    Level             `json:"level"`
	AuditID                  string            `json:"auditID"`
	Stage                    Stage             `json:"stage"`
	RequestURI               string            `json:"requestURI"`
	Verb                     string            `json:"verb"`
	User                     UserInfo          `json:"user"`
	ImpersonatedUser         *UserInfo         `json:"impersonatedUser,omitempty"`
	SourceIPs                []string          `json:"sourceIPs,omitempty"`
	UserAgent                string            `json:"userAgent,omitempty"`
	ObjectRef                *ObjectReference  `json:"objectRef,omitempty"`
	ResponseStatus           *ResponseStatus   `json:"responseStatus,omitempty"`
	RequestObject            json.RawMessage   `json:"requestObject,omitempty"`
	ResponseObject           json.RawMessage   `json:"responseObject,omitempty"`
	RequestReceivedTimestamp MicroTime         `json:"requestReceivedTimestamp"`
	StageTimestamp           MicroTime         `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// UserInfo is an authentication.k8s.io/v1 UserInfo.
type UserInfo struct {
	Username string              `json:"username,omitempty"`
	UID      string              `json:"uid,omitempty"`
	Groups   []string            `json:"groups,omitempty"`
	Extra    map[string][]string `json:"extra,omitempty"`
}

// ObjectReference is what a resource request names.
type ObjectReference struct {
	Resource        string `json:"resource,omitempty"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name,omitempty"`
	UID             string `json:"uid,omitempty"`
	APIGroup        string `json:"apiGroup,omitempty"`
	APIVersion      string `json:"apiVersion,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Subresource     string `json:"subresource,omitempty"`
}

// ResponseStatus is the part of the answer an event keeps: the code, and
// when the answer is a Status its status, message, reason and details.
type ResponseStatus struct {
	Metadata struct{}        `json:"metadata"`
	Status   string          `json:"status,omitempty"`
	Message  string          `json:"message,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Details  json.RawMessage `json:"details,omitempty"`
	Code     int             `json:"code,omitempty"`
}

// MicroTime is a time written as metav1.MicroTime writes it: RFC 3339
// in UTC with microseconds.
type MicroTime time.Time

// MarshalJSON writes t as metav1.MicroTime does.
func (t MicroTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000000Z07:00") + `"`), nil
}

// Writer writes events to a log, one JSON line each, rotating the file
// as kube-apiserver's (lumberjack) does: once it would pass MaxSize, it
// is renamed with the time and a new one started; MaxBackups and MaxAge
// bound the old ones kept.
type Writer struct {
	path       string
	out        io.Writer // stdout for "-"
	maxSize    int64
	maxBackups int
	maxAge     time.Duration

	mu   sync.Mutex
	file *os.File
	size int64

	// With Batch: the lines wait in its queue for the goroutine that
	// writes them.
	batcher *batcher

	// The figures of /metrics: events sent to the log, and those lost
	// (a write that failed: "log"; a full queue: "buffered").
	events, writeErrors, dropped atomic.Uint64
}

// NewWriter opens the log at path ("-": standard output); maxSizeMB 0
// is 100 MB, maxBackups 0 keeps every old file, maxAgeDays 0 keeps them
// whatever their age.
func NewWriter(path string, maxSizeMB, maxBackups, maxAgeDays int) (*Writer, error) {
	if path == "-" {
		return &Writer{path: path, out: os.Stdout}, nil
	}
	if maxSizeMB <= 0 {
		maxSizeMB = 100
	}
	w := &Writer{path: path, maxSize: int64(maxSizeMB) << 20, maxBackups: maxBackups, maxAge: time.Duration(maxAgeDays) * 24 * time.Hour}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	w.file, w.size = f, info.Size()
	return nil
}

// The modes of --audit-log-mode, as kube-apiserver's.
const (
	// ModeBlocking writes each event before the request goes on; a
	// failed write is logged and counted, and the request goes on.
	ModeBlocking = "blocking"
	// ModeBlockingStrict is ModeBlocking, but a request whose first
	// event cannot be written is refused (500).
	ModeBlockingStrict = "blocking-strict"
	// ModeBatch queues the events for a goroutine that writes them in
	// batches: the request does not wait for the disk, and an event that
	// finds the queue full is lost (and counted).
	ModeBatch = "batch"
)

// BatchOptions are --audit-log-mode=batch's: the queue's size, the most
// events written at once and how long a batch waits to fill, and an
// optional bound on batches written per second.
type BatchOptions struct {
	BufferSize, MaxBatchSize int
	MaxBatchWait             time.Duration
	ThrottleEnable           bool
	ThrottleQPS              float64
	ThrottleBurst            int
}

// CheckMode checks --audit-<plugin>-mode (plugin log or webhook) and its
// batch options, with kube-apiserver's words.
func CheckMode(plugin, mode string, b BatchOptions) error {
	switch mode {
	case ModeBlocking, ModeBlockingStrict:
		return nil
	case ModeBatch:
	default:
		return fmt.Errorf("invalid audit %s mode %s, allowed modes are %q", plugin, mode, "batch,blocking,blocking-strict")
	}
	switch {
	case b.BufferSize <= 0:
		return fmt.Errorf("invalid audit batch %s buffer size %v, must be a positive number", plugin, b.BufferSize)
	case b.MaxBatchSize <= 0:
		return fmt.Errorf("invalid audit batch %s max batch size %v, must be a positive number", plugin, b.MaxBatchSize)
	case b.ThrottleEnable && b.ThrottleQPS <= 0:
		return fmt.Errorf("invalid audit batch %s throttle QPS %v, must be a positive number", plugin, b.ThrottleQPS)
	case b.ThrottleEnable && b.ThrottleBurst <= 0:
		return fmt.Errorf("invalid audit batch %s throttle burst %v, must be a positive number", plugin, b.ThrottleBurst)
	}
	return nil
}

// Batch makes w queue its events and write them in batches from now on,
// until Close (which writes what is queued first).
func (w *Writer) Batch(b BatchOptions) {
	w.batcher = newBatcher(b, false, &w.dropped, func(lines [][]byte) {
		if err := w.writeLine(bytes.Join(lines, nil)); err != nil {
			w.writeErrors.Add(uint64(len(lines)))
		}
	})
}

// Write writes e as one line or, in batch mode, queues it. The error is
// a failed write, or (batch) a full queue.
func (w *Writer) Write(e *Event) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	w.events.Add(1)
	if w.batcher != nil {
		return w.batcher.enqueue(line)
	}
	if err := w.writeLine(line); err != nil {
		w.writeErrors.Add(1)
		return err
	}
	return nil
}

// Figures returns the events sent to the log, and those lost: "log",
// a write that failed; "buffered", a full queue (batch mode).
func (w *Writer) Figures() Figures {
	return Figures{Events: w.events.Load(), Errors: map[string]uint64{"log": w.writeErrors.Load(), "buffered": w.dropped.Load()}}
}

// writeLine writes lines (one or more events' JSON lines) to the file,
// rotating it first if they would pass its size.
func (w *Writer) writeLine(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out != nil {
		_, err := w.out.Write(line)
		return err
	}
	if w.size > 0 && w.size+int64(len(line)) > w.maxSize {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.file.Write(line)
	w.size += int64(n)
	return err
}

// rotate renames the log after the time, opens a new one and drops the
// old files past the bounds.
func (w *Writer) rotate() error {
	if err := w.file.Close(); err != nil {
		return err
	}
	ext := filepath.Ext(w.path)
	base := strings.TrimSuffix(w.path, ext)
	backup := base + "-" + time.Now().UTC().Format("2006-01-02T15-04-05.000") + ext
	if err := os.Rename(w.path, backup); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if err := w.open(); err != nil {
		return err
	}
	olds, _ := filepath.Glob(base + "-*" + ext)
	sort.Sort(sort.Reverse(sort.StringSlice(olds))) // newest first
	for i, old := range olds {
		info, err := os.Stat(old)
		if err != nil {
			continue
		}
		if (w.maxBackups > 0 && i >= w.maxBackups) || (w.maxAge > 0 && time.Since(info.ModTime()) > w.maxAge) {
			os.Remove(old)
		}
	}
	return nil
}

// Close writes what is queued and closes the log. No Write may follow.
func (w *Writer) Close() error {
	if w.batcher != nil {
		w.batcher.close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		return w.file.Close()
	}
	return nil
}
