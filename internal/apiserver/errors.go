package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/storage"
)

// writeError answers err as a metav1.Status, as kube-apiserver's
// responsewriters.ErrorNegotiated does: in the form the request's Accept
// asks for among JSON, YAML and protobuf, whatever the route (a custom
// resource's errors come in protobuf too), never as a Table or metadata;
// to a client that accepts none of them, in indented JSON. A Status with
// a retry delay sets Retry-After.
func writeError(w http.ResponseWriter, err error) {
	writeErrorFor(w, acceptOf(w), err)
}

// refuse answers r with err before it is routed (authentication,
// impersonation, authorization), indented for curl and browsers on every
// path, as upstream's refusals are.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	accept := r.Header.Get("Accept")
	if !prettyRequested(r) {
		writeErrorFor(w, accept, err)
		return
	}
	pw := &prettyWriter{ResponseWriter: w}
	writeErrorFor(pw, accept, err)
	pw.finish()
}

// acceptOf is the Accept of the request w answers, which the server's
// statusWriter under the handlers' writers holds.
func acceptOf(w http.ResponseWriter) string {
	if sw := statusWriterOf(w); sw != nil {
		return sw.accept
	}
	return ""
}

// statusWriterOf is the server's statusWriter under the handlers' writers
// of w (pretty printing, compression); nil if there is none.
func statusWriterOf(w http.ResponseWriter) *statusWriter {
	for {
		switch x := w.(type) {
		case *statusWriter:
			return x
		case *prettyWriter:
			w = x.ResponseWriter
		case *compressWriter:
			w = x.ResponseWriter
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// writeErrorFor is writeError for a request that sent accept.
func writeErrorFor(w http.ResponseWriter, accept string, err error) {
	st := statusOf(err)
	code := int(st.Code)
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	f, ok := plainForm(accept)
	if !ok {
		data, _ := json.MarshalIndent(st, "", "  ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(data)
		return
	}
	writeStatus(w, f, code, st)
}

// writeStatus writes st in the plain encoding of form f: protobuf for
// the protobuf forms, YAML, or JSON (for the JSON ones: a Status is
// never a Table or metadata), as upstream writes a Status answer.
func writeStatus(w http.ResponseWriter, f form, code int, st *metav1.Status) {
	switch f {
	case formProtobuf, formMetadataProto:
		var buf bytes.Buffer
		if protoSerializer.Encode(st, &buf) != nil {
			writeJSON(w, code, st) // not expected: a Status always encodes
			return
		}
		w.Header().Set("Content-Type", protobufType)
		w.WriteHeader(code)
		w.Write(buf.Bytes())
	case formYAML:
		write(w, formYAML, code, st)
	default:
		writeJSON(w, code, st)
	}
}

// plainForm is the form of an answer that has no other (an error's
// Status, a discovery document) for a request that sent accept: the first
// of Accept's ranges that names JSON, YAML or protobuf as such (a range
// with "as" is a conversion, which such answers are not given). ok is
// false when there is none.
func plainForm(accept string) (f form, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return formJSON, true
	}
	for _, m := range acceptRanges(accept) {
		if m.params["as"] != "" {
			continue
		}
		switch m.mt {
		case "application/json", "application/*", "*/*":
			return formJSON, true
		case "application/yaml":
			if m.params["stream"] == "" { // YAML has no stream form
				return formYAML, true
			}
		case protobufType:
			return formProtobuf, true
		}
	}
	return 0, false
}

func statusOf(err error) *metav1.Status {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return &st
}

// encodeJSON encodes v. Objects and lists take the fast encoder, and a
// shared watch-cache object its cached bytes, so nothing is re-encoded or
// re-scanned per client.
func encodeJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case *storage.Shared:
		data, err := x.MarshalJSON()
		return bytes.TrimSuffix(data, []byte("\n")), err
	case *storage.RecordJSON:
		return x.JSON()
	case *unstructured.Unstructured:
		return storage.AppendJSON(make([]byte, 0, 2048), x.Object)
	case *unstructured.UnstructuredList:
		return storage.AppendList(make([]byte, 0, 2048*(1+len(x.Items))), x)
	}
	return json.Marshal(v)
}

// writeJSON writes v as JSON with the given code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := encodeJSON(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(statusOf(apierrors.NewInternalError(err)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(data)
	w.Write([]byte("\n"))
}

// writeJSONTyped writes v as JSON, keeping a Content-Type already set.
func writeJSONTyped(w http.ResponseWriter, code int, v any) {
	data, err := encodeJSON(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.WriteHeader(code)
	w.Write(data)
}
