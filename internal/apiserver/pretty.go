package apiserver

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// prettyRequested reports whether a request asks for indented JSON, as
// kube-apiserver decides it: ?pretty (a boolean; one that does not parse
// is false), else a User-Agent of curl, Wget or a browser.
func prettyRequested(r *http.Request) bool {
	if strings.Contains(r.URL.RawQuery, "pretty") {
		if p := r.URL.Query().Get("pretty"); p != "" {
			b, _ := strconv.ParseBool(p)
			return b
		}
	}
	ua := r.UserAgent()
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

// prettyWriter indents a JSON answer of the API (objects, lists, tables,
// discovery, errors) with two spaces and no final newline, as upstream's
// pretty serializer writes it. Other media types (protobuf, YAML) pass
// through. It holds the answer until the handler returns (finish), so it
// is not used for watches.
type prettyWriter struct {
	http.ResponseWriter
	code    int
	decided bool
	json    bool
	buf     bytes.Buffer
}

func (p *prettyWriter) WriteHeader(code int) {
	if p.decided {
		return
	}
	p.decided = true
	mt, params, _ := mime.ParseMediaType(p.Header().Get("Content-Type"))
	p.json = mt == "application/json" && params["stream"] == ""
	if p.json {
		p.code = code
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *prettyWriter) Write(b []byte) (int, error) {
	if !p.decided {
		p.WriteHeader(http.StatusOK)
	}
	if !p.json {
		return p.ResponseWriter.Write(b)
	}
	return p.buf.Write(b)
}

// finish writes the held answer, indented.
func (p *prettyWriter) finish() {
	if !p.json {
		return
	}
	var out bytes.Buffer
	body := p.buf.Bytes()
	if json.Indent(&out, bytes.TrimRight(body, "\n"), "", "  ") == nil {
		body = out.Bytes()
	}
	p.Header().Del("Content-Length")
	p.ResponseWriter.WriteHeader(p.code)
	p.ResponseWriter.Write(body)
}

// indentedJSON writes v as indented JSON, as upstream writes /version and
// the root paths whatever the client.
func indentedJSON(w http.ResponseWriter, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// apiPath reports whether path is under /api or /apis, where answers may
// be indented.
func apiPath(path string) bool {
	return path == "/api" || path == "/apis" || strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/apis/")
}

// isWatch reports whether a request may stream a watch (?watch, or the
// legacy /watch/ path), whose events are never held.
func isWatch(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/watch/") || (strings.Contains(r.URL.RawQuery, "watch") && watchParam(r.URL.Query()))
}
