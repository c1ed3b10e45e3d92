package apiserver_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkWatchListHTTP2 is an informer's first sync as client-go makes
// it (a watch-list: sendInitialEvents, the initial events ended by a
// bookmark), of 10,000 ConfigMaps of 1 KiB in protobuf, over a real TLS
// connection in HTTP/1.1 and HTTP/2. Client and server share the process,
// so the figure holds both sides' cost of the transport, as on a machine
// a controller shares with kplane.
func BenchmarkWatchListHTTP2(b *testing.B) {
	h := newInProcess(b)
	createConfigMaps(b, h, 10000, func(int) string { return strings.Repeat("x", 1024) })
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		b.Run("proto="+proto, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(h)
			srv.EnableHTTP2 = proto == "HTTP/2.0"
			srv.StartTLS()
			defer srv.Close()
			client := srv.Client()
			const query = "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+query, nil)
				req.Header.Set("Accept", "application/vnd.kubernetes.protobuf;stream=watch")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.Proto != proto {
					b.Fatalf("answered over %s, want %s", resp.Proto, proto)
				}
				n, err := readUntilBookmark(resp.Body)
				cancel()
				resp.Body.Close()
				if err != nil {
					b.Fatal(err)
				}
				if n != 10000+1 {
					b.Fatalf("%d events before and with the bookmark, want 10,001", n)
				}
			}
		})
	}
}

// readUntilBookmark reads length-prefixed protobuf watch events up to
// and including the first BOOKMARK, as client-go's decoder frames them,
// and returns how many it read.
func readUntilBookmark(body io.Reader) (int, error) {
	r := bufio.NewReaderSize(body, 32<<10)
	var size [4]byte
	var frame []byte
	for n := 1; ; n++ {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return n - 1, err
		}
		l := binary.BigEndian.Uint32(size[:])
		if cap(frame) < int(l) {
			frame = make([]byte, l)
		}
		frame = frame[:l]
		if _, err := io.ReadFull(r, frame); err != nil {
			return n - 1, err
		}
		if strings.Contains(string(frame[:min(len(frame), 64)]), "BOOKMARK") {
			return n, nil
		}
		if n > 20000 {
			return n, fmt.Errorf("no bookmark after %d events", n)
		}
	}
}
