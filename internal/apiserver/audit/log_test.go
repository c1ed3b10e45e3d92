package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
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
