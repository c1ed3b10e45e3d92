package apiserver

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// writeStreamed, over HTTP/1.1 and HTTP/2: pieces arrive as one body; an
// error before the first piece is the answer; an error after it aborts
// the response, so the client's read fails instead of ending early.
func TestWriteStreamed(t *testing.T) {
	pool := sync.Pool{New: func() any { return new([]byte) }}
	piece := strings.Repeat("p", 100<<10)
	var whole strings.Builder
	for range 10 {
		whole.WriteString(piece)
	}
	whole.WriteString("end")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failAt := map[string]int{"/ok": -1, "/early": 0, "/late": 5}[r.URL.Path]
		writeStreamed(w, &pool, 4<<20, "text/plain", http.StatusOK, func(b []byte, flush func([]byte) error) ([]byte, error) {
			for i := range 10 {
				if i == failAt {
					return nil, errors.New("a stored object does not decode")
				}
				if err := flush(append(b[:0], piece...)); err != nil {
					return nil, err
				}
			}
			return append(b[:0], "end"...), nil
		})
	})
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		srv := httptest.NewUnstartedServer(handler)
		srv.EnableHTTP2 = proto == "HTTP/2.0"
		srv.StartTLS()
		client := srv.Client()
		get := func(path string) (*http.Response, []byte, error) {
			resp, err := client.Get(srv.URL + path)
			if err != nil {
				t.Fatalf("%s %s: %v", proto, path, err)
			}
			defer resp.Body.Close()
			if resp.Proto != proto {
				t.Fatalf("%s %s: served over %s", proto, path, resp.Proto)
			}
			body, err := io.ReadAll(resp.Body)
			return resp, body, err
		}
		resp, body, err := get("/ok")
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" || string(body) != whole.String() {
			t.Errorf("%s /ok: %d %s, %d bytes (want %d), %v", proto, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), whole.Len(), err)
		}
		resp, body, err = get("/early")
		if err != nil || resp.StatusCode != http.StatusInternalServerError || !bytes.Contains(body, []byte("a stored object does not decode")) {
			t.Errorf("%s /early: %d, %v: %s", proto, resp.StatusCode, err, body)
		}
		resp, body, err = get("/late")
		if err == nil {
			t.Errorf("%s /late: %d, read %d bytes and no error", proto, resp.StatusCode, len(body))
		}
		srv.Close()
	}
}
