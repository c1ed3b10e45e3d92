package apiserver_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A list answer of 128 KiB or more is gzip-compressed for a remote
// client that takes gzip, as kube-apiserver compresses it, and expands to
// the same bytes as the plain answer; smaller lists, loopback clients,
// clients that do not take gzip, and watches get plain answers.
func TestListCompression(t *testing.T) {
	h := newInProcess(t)
	createConfigMaps(t, h, 400, func(int) string { return strings.Repeat("x", 1024) }) // ~560 KB as JSON
	get := func(path, remote, acceptEncoding, accept string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.RemoteAddr = remote
		if acceptEncoding != "" {
			r.Header.Set("Accept-Encoding", acceptEncoding)
		}
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		return w
	}
	const list = "/api/v1/namespaces/default/configmaps"
	const remote, local = "192.0.2.7:40000", "127.0.0.1:40000"
	for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf", "application/json;as=Table;v=v1;g=meta.k8s.io"} {
		plain := get(list, local, "gzip", accept)
		if plain.Header().Get("Content-Encoding") != "" || plain.Body.Len() < 128<<10 {
			t.Fatalf("%s, loopback: Content-Encoding %q, %d bytes", accept, plain.Header().Get("Content-Encoding"), plain.Body.Len())
		}
		if accept == "application/json;as=Table;v=v1;g=meta.k8s.io" {
			continue // a Table of 400 rows is under 128 KiB
		}
		zipped := get(list, remote, "gzip, deflate", accept)
		if zipped.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(zipped.Header().Get("Vary"), "Accept-Encoding") {
			t.Fatalf("%s, remote: Content-Encoding %q, Vary %q", accept, zipped.Header().Get("Content-Encoding"), zipped.Header().Get("Vary"))
		}
		n := zipped.Body.Len()
		zr, err := gzip.NewReader(zipped.Body)
		if err != nil {
			t.Fatal(err)
		}
		expanded, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || n*4 > len(expanded) {
			t.Fatalf("%s: %d bytes compressed to %d", accept, len(expanded), n)
		}
		// The same list but for its resourceVersion, which the two
		// answers share (nothing was written between them).
		if !bytes.Equal(expanded, plain.Body.Bytes()) {
			t.Fatalf("%s: the expanded answer differs from the plain one", accept)
		}
	}
	for _, c := range []struct{ name, path, remote, acceptEncoding string }{
		{"no gzip", list, remote, ""},
		{"gzip refused", list, remote, "gzip;q=0, identity"},
		{"small list", list + "?limit=10", remote, "gzip"},
		{"one object", list + "/cm-0001", remote, "gzip"},
	} {
		if w := get(c.path, c.remote, c.acceptEncoding, "application/json"); w.Header().Get("Content-Encoding") != "" {
			t.Errorf("%s: Content-Encoding %q", c.name, w.Header().Get("Content-Encoding"))
		}
	}
}
