package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The log is rotated once it would pass its size, keeping as many old
// files as asked, each a whole number of JSON lines.
func TestWriterRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := NewWriter(path, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 100<<10)
	for i := 0; i < 35; i++ { // ~3.5 MB: three rotations
		if err := w.Write(&Event{Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: LevelMetadata, AuditID: big, StageTimestamp: MicroTime(time.Now())}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // rotated names differ by the millisecond
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "audit-*.log"))
	if len(old) != 2 {
		t.Errorf("rotated files %v, want 2 kept", old)
	}
	lines := 0
	for _, f := range append(old, path) {
		info, err := os.Stat(f)
		if err != nil || info.Size() > 1<<20 {
			t.Errorf("%s: %v, %d bytes", f, err, info.Size())
		}
		file, _ := os.Open(f)
		sc := bufio.NewScanner(file)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines++
			if !json.Valid(sc.Bytes()) {
				t.Errorf("%s: a line that is not JSON", f)
			}
		}
		file.Close()
	}
	if lines == 0 || lines >= 35 {
		t.Errorf("%d lines in the files kept, want some dropped with the oldest file", lines)
	}
}

// An event is written member for member as kube-apiserver writes one,
// times with microseconds.
func TestEventJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 6, 43, 3, 582482000, time.UTC)
	data, err := json.Marshal(&Event{Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: LevelMetadata, AuditID: "id", Stage: StageResponseComplete,
		RequestURI: "/api/v1/namespaces", Verb: "create", User: UserInfo{Username: "admin", Groups: []string{"system:masters"}},
		SourceIPs: []string{"127.0.0.1"}, ObjectRef: &ObjectReference{Resource: "namespaces", Name: "a", APIVersion: "v1"},
		ResponseStatus: &ResponseStatus{Code: 201}, RequestReceivedTimestamp: MicroTime(at), StageTimestamp: MicroTime(at),
		Annotations: map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"id","stage":"ResponseComplete","requestURI":"/api/v1/namespaces","verb":"create","user":{"username":"admin","groups":["system:masters"]},"sourceIPs":["127.0.0.1"],"objectRef":{"resource":"namespaces","name":"a","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-28T06:43:03.582482Z","stageTimestamp":"2026-11-28T06:43:03.582482Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`
	if string(data) != want {
		t.Errorf("event\n%s\nwant\n%s", data, want)
	}
}

// In batch mode the events are written by a goroutine, in order, every
// one of them by Close; an event that finds the queue full is lost and
// counted.
func TestWriterBatches(t *testing.T) {
	for _, b := range []BatchOptions{
		{BufferSize: 100, MaxBatchSize: 1},
		{BufferSize: 100, MaxBatchSize: 7, MaxBatchWait: 5 * time.Millisecond},
		{BufferSize: 100, MaxBatchSize: 400},
	} {
		path := filepath.Join(t.TempDir(), "audit.log")
		w, err := NewWriter(path, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.Batch(b)
		for i := range 50 {
			if err := w.Write(&Event{Kind: "Event", AuditID: strconv.Itoa(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		for i, l := range lines {
			var e struct {
				AuditID string `json:"auditID"`
			}
			if err := json.Unmarshal([]byte(l), &e); err != nil || e.AuditID != strconv.Itoa(i) {
				t.Fatalf("%+v: line %d: %s (%v)", b, i, l, err)
			}
		}
		f := w.Figures()
		if events, failed, dropped := f.Events, f.Errors["log"], f.Errors["buffered"]; len(lines) != 50 || events != 50 || failed != 0 || dropped != 0 {
			t.Errorf("%+v: %d lines; %d events, %d failed, %d dropped", b, len(lines), events, failed, dropped)
		}
	}

	// Throttled to two batches a second, one at a time: the queue of two
	// fills while the writer waits, and the rest are lost.
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := NewWriter(path, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Batch(BatchOptions{BufferSize: 2, MaxBatchSize: 1, ThrottleEnable: true, ThrottleQPS: 2, ThrottleBurst: 1})
	lost := 0
	for i := range 20 {
		if err := w.Write(&Event{AuditID: strconv.Itoa(i)}); err == ErrQueueFull {
			lost++
		}
	}
	w.Close()
	data, _ := os.ReadFile(path)
	f := w.Figures()
	events, dropped := f.Events, f.Errors["buffered"]
	if written := strings.Count(string(data), "\n"); lost == 0 || int(dropped) != lost || written+lost != 20 || events != 20 {
		t.Errorf("throttled: %d written, %d lost (%d counted) of %d", written, lost, dropped, events)
	}
	if err := w.Write(&Event{}); err == nil {
		t.Error("a write after Close was taken")
	}
}

// Modes and batch options are checked with kube-apiserver's words.
func TestCheckMode(t *testing.T) {
	ok := BatchOptions{BufferSize: 10, MaxBatchSize: 1}
	for _, c := range []struct {
		mode string
		b    BatchOptions
		err  string
	}{
		{ModeBlocking, BatchOptions{}, ""},
		{ModeBlockingStrict, BatchOptions{}, ""},
		{ModeBatch, ok, ""},
		{"fast", ok, `invalid audit log mode fast, allowed modes are "batch,blocking,blocking-strict"`},
		{ModeBatch, BatchOptions{MaxBatchSize: 1}, "invalid audit batch log buffer size 0, must be a positive number"},
		{ModeBatch, BatchOptions{BufferSize: 1}, "invalid audit batch log max batch size 0, must be a positive number"},
		{ModeBatch, BatchOptions{BufferSize: 1, MaxBatchSize: 1, ThrottleEnable: true, ThrottleBurst: 1}, "invalid audit batch log throttle QPS 0, must be a positive number"},
	} {
		err := CheckMode("log", c.mode, c.b)
		if (err == nil) != (c.err == "") || err != nil && err.Error() != c.err {
			t.Errorf("%s %+v: %v, want %q", c.mode, c.b, err, c.err)
		}
	}
}
