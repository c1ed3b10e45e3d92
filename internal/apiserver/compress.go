package apiserver

import (
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"sync"
)

// minCompressed is the smallest list answer that is gzip-compressed, as
// kube-apiserver's APIResponseCompression compresses answers of 128 KiB
// or more.
const minCompressed = 128 << 10

// gzipWriters are gzip writers at level 1 (kube-apiserver's level since
// kubernetes#112299: the least CPU, for a ratio within 1.1–1.3× of the
// best), reset for each answer.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// compressed returns the writer a list answer goes through: w itself,
// unless the client takes gzip and is not on this machine, when it is a
// writer that compresses an answer of minCompressed bytes or more. done
// finishes the compressed stream, once the answer is written.
//
// kube-apiserver compresses for every client that takes gzip, which is
// every Go client (net/http asks for it and expands it unseen). Over
// loopback that only spends CPU on both sides, so kplane compresses for
// remote clients only: a list of 10,000 ConfigMaps goes from 14.6 MB to
// about a tenth of that.
func compressed(w http.ResponseWriter, r *http.Request) (out http.ResponseWriter, done func()) {
	if !acceptsGzip(r) || isLoopback(r.RemoteAddr) || prettyRequested(r) {
		return w, func() {}
	}
	cw := &compressWriter{ResponseWriter: w}
	return cw, cw.close
}

// isLoopback reports whether a request's remote address is on this
// machine.
func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// compressWriter holds the status until the first write, which decides:
// a first write of minCompressed bytes or more (list answers are written
// in pieces of listPiece, or whole when smaller) starts a gzip stream;
// a smaller one, and everything after it, goes out as it is.
type compressWriter struct {
	http.ResponseWriter
	code    int
	decided bool
	gz      *gzip.Writer
}

func (c *compressWriter) WriteHeader(code int) {
	if c.decided {
		c.ResponseWriter.WriteHeader(code)
		return
	}
	c.code = code
}

func (c *compressWriter) Write(p []byte) (int, error) {
	if !c.decided {
		c.decided = true
		h := c.ResponseWriter.Header()
		h.Add("Vary", "Accept-Encoding")
		if len(p) >= minCompressed && h.Get("Content-Encoding") == "" {
			h.Set("Content-Encoding", "gzip")
			h.Del("Content-Length")
			c.gz = gzipWriters.Get().(*gzip.Writer)
			c.gz.Reset(c.ResponseWriter)
		}
		if c.code != 0 {
			c.ResponseWriter.WriteHeader(c.code)
		}
	}
	if c.gz != nil {
		return c.gz.Write(p)
	}
	return c.ResponseWriter.Write(p)
}

func (c *compressWriter) close() {
	if !c.decided && c.code != 0 {
		// A status without a body (an error writes one; this is for
		// completeness).
		c.ResponseWriter.WriteHeader(c.code)
	}
	if c.gz == nil {
		return
	}
	if c.gz.Close() == nil {
		c.gz.Reset(io.Discard)
		gzipWriters.Put(c.gz)
	}
	c.gz = nil
}
