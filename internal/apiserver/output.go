package apiserver

import (
	"cmp"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// form is the shape of a response the client asked for in Accept.
type form int

const (
	formJSON form = iota
	formYAML
	formTable
	formMetadata      // PartialObjectMetadata(List)
	formProtobuf      // application/vnd.kubernetes.protobuf, built-in kinds only
	formMetadataProto // PartialObjectMetadata(List) in protobuf, any kind
)

// negotiateAccept picks the form of a response as kube-apiserver's content
// negotiation does: Accept's media ranges are taken by q-value, the more
// specific first among equals (type/subtype, then type/*, then */*), and
// in the order sent among those; the first that kplane can produce wins,
// a wildcard standing for JSON. Protobuf is offered when proto is set
// (objects and lists of built-in kinds). So client-go's typed clients,
// which send "application/vnd.kubernetes.protobuf,application/json", and
// controller-runtime's for built-in kinds ("…protobuf, */*") get
// protobuf, as from kube-apiserver. PartialObjectMetadata(List) of
// meta.k8s.io/v1 comes in protobuf for every kind, built-in or custom, as
// client-go's metadata client asks for it first (v1beta1's list message
// numbers its fields differently, and is offered in JSON only). Unlike
// kube-apiserver, a range with
// q=0 is not acceptable (RFC 9110). CBOR is not offered. A client that
// accepts nothing kplane can produce gets 406, with the media types
// upstream's handlers list (protobuf too: its custom resources'
// serializer names it, though it encodes only errors in it).
//
// The resource routes negotiate once, before anything is read or
// written (resources); a Table's options are checked when one is written
// (tableOptions).
func negotiateAccept(r *http.Request, proto bool) (form, error) {
	accept := r.Header.Get("Accept")
	if strings.TrimSpace(accept) == "" {
		return formJSON, nil
	}
	for _, m := range acceptRanges(accept) {
		if m.mt == protobufType {
			switch as := m.params["as"]; {
			case as == "" && proto:
				return formProtobuf, nil
			case (as == "PartialObjectMetadata" || as == "PartialObjectMetadataList") && m.params["g"] == "meta.k8s.io" && m.params["v"] == "v1":
				return formMetadataProto, nil
			}
			continue
		}
		if f, ok := formOf(m.mt, m.params); ok {
			return f, nil
		}
	}
	return 0, errNotAcceptable
}

// errNotAcceptable is upstream's handlers' 406.
var errNotAcceptable = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
	Message: "only the following media types are accepted: application/json, application/yaml, " + protobufType,
}}

// mediaRange is one entry of Accept.
type mediaRange struct {
	mt       string
	params   map[string]string
	q        float64
	specific int // 2: type/subtype, 1: type/*, 0: */*
}

// acceptRanges are the valid entries of Accept, the preferred first.
func acceptRanges(accept string) []mediaRange {
	var ranges []mediaRange
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil || q <= 0 || q > 1 {
				continue
			}
		}
		specific := 2
		switch {
		case mt == "*/*":
			specific = 0
		case strings.HasSuffix(mt, "/*"):
			specific = 1
		}
		ranges = append(ranges, mediaRange{mt, params, q, specific})
	}
	slices.SortStableFunc(ranges, func(a, b mediaRange) int {
		if a.q != b.q {
			return cmp.Compare(b.q, a.q)
		}
		return b.specific - a.specific
	})
	return ranges
}

// tableOptions refuses a Table's TableOptions as upstream refuses them.
func tableOptions(r *http.Request) error {
	switch v := r.URL.Query().Get("includeObject"); v {
	case "", "None", "Metadata", "Object":
		return nil
	default:
		bad := field.Invalid(field.NewPath("includeObject"), v, "must be 'Metadata', 'Object', 'None', or empty")
		return apierrors.NewBadRequest("Unable to convert to Table as requested: " + bad.Error())
	}
}

// formOf is the form of an Accept entry other than protobuf, if kplane
// can produce it.
func formOf(mt string, params map[string]string) (form, bool) {
	switch mt {
	case "application/json", "*/*", "application/*":
		switch params["as"] {
		case "":
			return formJSON, true
		case "Table":
			if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
				return formTable, true
			}
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			if params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") {
				return formMetadata, true
			}
		}
	case "application/yaml":
		if params["as"] == "" && params["stream"] == "" { // YAML has no stream form
			return formYAML, true
		}
	}
	return 0, false
}

// write encodes v in the negotiated plain form (JSON or YAML).
func write(w http.ResponseWriter, f form, code int, v any) {
	if f != formYAML {
		writeJSON(w, code, v)
		return
	}
	data, err := json.Marshal(v)
	if err == nil {
		data, err = yaml.JSONToYAML(data)
	}
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(code)
	w.Write(data)
}

func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, f form, k *registry.Kind, v string, code int, obj *unstructured.Unstructured) {
	s.writeObjectEncoded(w, r, f, k, v, code, obj, nil)
}

// writeObjectEncoded is writeObject, with the object's JSON from the store
// when enc is not nil: the answer to a write, in JSON, needs no encode.
// answerBuffers hold the JSON of single-object answers while they are
// written; buffers that grew past maxPooledAnswer are left to the GC.
var answerBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxPooledAnswer = 64 << 10

func (s *Server) writeObjectEncoded(w http.ResponseWriter, r *http.Request, f form, k *registry.Kind, v string, code int, obj *unstructured.Unstructured, enc *storage.Encoded) {
	auditResponseObject(r.Context(), obj)
	if f == formTable {
		if err := tableOptions(r); err != nil {
			writeError(w, err)
			return
		}
	}
	if f == formJSON && enc != nil {
		writeJSONFrom(w, code, func(b []byte) ([]byte, error) { return enc.AppendJSON(b), nil })
		return
	}
	switch f {
	case formTable:
		t := s.tableFor(k, v, r)
		writeJSONFrom(w, code, func(b []byte) ([]byte, error) {
			// A single object's table has its resourceVersion, as upstream's.
			return t.write(b, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()}, 1, func(int) (tableRow, error) { return tableRow{obj: obj}, nil }, 0, nil)
		})
	case formMetadata:
		writeJSONFrom(w, code, func(b []byte) ([]byte, error) { return appendPartial(b, nil, 0, obj) })
	case formMetadataProto:
		writePartialProto(w, code, nil, 0, obj)
	case formProtobuf:
		if enc != nil {
			writeProtoJSON(w, k, v, code, func(b []byte) ([]byte, error) { return enc.AppendJSON(b), nil })
		} else {
			writeProtoObject(w, k, v, code, obj)
		}
	default:
		write(w, f, code, obj)
	}
}

// writeJSONFrom answers code with the JSON object that appendJSON
// appends, assembled in a pooled buffer.
func writeJSONFrom(w http.ResponseWriter, code int, appendJSON func([]byte) ([]byte, error)) {
	writePooled(w, &answerBuffers, maxPooledAnswer, "application/json", code, func(b []byte) ([]byte, error) {
		b, err := appendJSON(b)
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	})
}

// writePooled answers code with the body that build appends to a buffer
// from pool, written whole (writeStreamed without pieces). build's error
// is the answer instead.
func writePooled(w http.ResponseWriter, pool *sync.Pool, maxPooled int, contentType string, code int, build func([]byte) ([]byte, error)) {
	writeStreamed(w, pool, maxPooled, contentType, code, func(b []byte, _ func([]byte) error) ([]byte, error) { return build(b) })
}

// writeStreamed answers code with a body that build writes in pieces
// through flush, returning the last piece, all built in one buffer from
// pool. The buffer goes back once written, unless it grew past
// maxPooled: a write that succeeded leaves the server no reference to it
// (one that failed may have left an HTTP/2 frame still being written
// from it, so that buffer is left to the GC). An error before the first
// piece is written is the answer. After it the status has gone out, so
// the response is aborted: the client sees a failed request, never a
// body cut short that might parse.
func writeStreamed(w http.ResponseWriter, pool *sync.Pool, maxPooled int, contentType string, code int, build func(b []byte, flush func([]byte) error) ([]byte, error)) {
	bp := pool.Get().(*[]byte)
	started, failed := false, false
	flush := func(p []byte) error {
		if !started {
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(code)
			started = true
		}
		_, err := w.Write(p)
		failed = err != nil
		return err
	}
	b, err := build((*bp)[:0], flush)
	if err == nil {
		err = flush(b)
	}
	switch {
	case err == nil:
		if cap(b) <= maxPooled {
			*bp = b[:0]
			pool.Put(bp)
		}
	case failed: // the client is gone; the buffer may still be read
	case !started:
		pool.Put(bp)
		writeError(w, err)
	default:
		panic(http.ErrAbortHandler)
	}
}

func (s *Server) writeList(w http.ResponseWriter, r *http.Request, f form, k *registry.Kind, v string, list *unstructured.UnstructuredList) {
	if f == formTable {
		if err := tableOptions(r); err != nil {
			writeError(w, err)
			return
		}
	}
	switch f {
	case formTable:
		writeTable(w, s.tableFor(k, v, r), listMeta(list), len(list.Items), func(i int) (tableRow, error) {
			return tableRow{obj: &list.Items[i]}, nil
		})
	case formMetadata:
		out := &metav1.PartialObjectMetadataList{
			TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"},
			ListMeta: listMeta(list),
		}
		for i := range list.Items {
			out.Items = append(out.Items, *partial(&list.Items[i]))
		}
		writeJSON(w, http.StatusOK, out)
	case formMetadataProto:
		data, err := partialListProto(list.Items, listMeta(list))
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		w.Header().Set("Content-Type", protobufType)
		w.WriteHeader(http.StatusOK)
		w.Write(data)
	case formProtobuf:
		typed, err := protoList(k, v, len(list.Items), func(i int, b []byte) ([]byte, error) {
			return storage.AppendJSON(b, list.Items[i].Object)
		}, listMeta(list))
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeProto(w, http.StatusOK, typed)
	default:
		if list.Items == nil {
			list.Items = []unstructured.Unstructured{}
		}
		if bareItems(k) {
			for i := range list.Items {
				delete(list.Items[i].Object, "apiVersion")
				delete(list.Items[i].Object, "kind")
			}
		} else if list.GetContinue() == "" {
			// As RecordList.WriteJSON: a custom resource's list always
			// has a continue.
			unstructured.SetNestedField(list.Object, "", "metadata", "continue")
		}
		write(w, f, http.StatusOK, list)
	}
}

// bareItems reports whether the items of k's lists go without their
// apiVersion and kind: kube-apiserver leaves them out of a built-in
// kind's list (its items are Go values converted for the list, which
// alone gets a type), and keeps them in a custom resource's (stored
// objects, each with its own).
func bareItems(k *registry.Kind) bool { return k != nil && k.Typed != nil }

func listMeta(list *unstructured.UnstructuredList) metav1.ListMeta {
	return metav1.ListMeta{
		ResourceVersion:    list.GetResourceVersion(),
		Continue:           list.GetContinue(),
		RemainingItemCount: list.GetRemainingItemCount(),
	}
}

// writeTable answers with a table of n rows, row(i) giving each, written
// in pieces through a pooled buffer.
func writeTable(w http.ResponseWriter, t *tableOf, lm metav1.ListMeta, n int, row func(i int) (tableRow, error)) {
	writeStreamed(w, &listBuffers, maxPooledList, "application/json", http.StatusOK, func(b []byte, flush func([]byte) error) ([]byte, error) {
		b, err := t.write(b, lm, n, row, listPiece, flush)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return append(b, '\n'), nil
	})
}

// flushFull hands b to flush and returns it emptied once it holds
// flushAt bytes or more, so that a list of any length is written in
// pieces of about flushAt through one buffer; a nil flush never flushes.
func flushFull(b []byte, flushAt int, flush func([]byte) error) ([]byte, error) {
	if flush == nil || len(b) < flushAt {
		return b, nil
	}
	if err := flush(b); err != nil {
		return nil, err
	}
	return b[:0], nil
}
