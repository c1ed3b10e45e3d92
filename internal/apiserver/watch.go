package apiserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/storage"
)

// watch streams events as kube-apiserver does over HTTP/1.1 and HTTP/2:
// a 200 response of newline-separated JSON objects {"type", "object"},
// or, to a client that negotiates protobuf (client-go's typed clients, for
// built-in kinds, and for metadata watches of any kind), of
// length-prefixed metav1.WatchEvent messages, flushed as they come; a
// watch-list to a remote client that takes gzip comes gzip-compressed.
// The watch ends at the client's timeoutSeconds (or
// a randomized server timeout), when the client goes, or with an ERROR
// event (410 Gone and the like), after which the client relists.
func (h *handler) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts, err := listOptions(h.kind, h.ri.version, q)
	if err != nil {
		writeError(w, err)
		return
	}
	if h.ri.name != "" { // /watch/<resource>/<name>
		one := fields.OneTermEqualSelector("metadata.name", h.ri.name)
		if opts.Predicate.Field != nil {
			one = fields.AndSelectors(opts.Predicate.Field, one)
		}
		opts.Predicate.Field = one
	}
	f := h.form
	if f == formTable {
		if err := tableOptions(r); err != nil {
			writeError(w, err)
			return
		}
	}
	timeout := h.s.cfg.MinWatchTimeout + time.Duration(rand.Int64N(int64(h.s.cfg.MinWatchTimeout)))
	// listOptions checked that it is a number; 0 or less is none, as
	// upstream.
	if n, _ := strconv.ParseInt(q.Get("timeoutSeconds"), 10, 64); n > 0 {
		timeout = time.Duration(n) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	defer context.AfterFunc(h.s.stopping, cancel)() // the server is shutting down
	// JSON and metadata events are written from the stored JSON, never
	// decoded; protobuf events from the message made once per event.
	opts.EncodedOnly = f == formJSON || f == formMetadata || f == formProtobuf || f == formMetadataProto
	wi, err := h.res.Watch(ctx, h.ri.version, h.ri.namespace, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	defer wi.Stop()
	flusher, _ := w.(http.Flusher)
	if f == formProtobuf || f == formMetadataProto {
		w.Header().Set("Content-Type", protobufType+";stream=watch")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	out := watchOut{w: w, flusher: flusher}
	if opts.SendInitialEvents && opts.AllowBookmarks && acceptsGzip(r) && !isLoopback(r.RemoteAddr) {
		// A watch-list (an informer's first sync, streamed) to a remote
		// client that takes gzip is compressed, as kube-apiserver does
		// (WatchListCompression): its initial events are the whole
		// list. Like kplane's lists, not over loopback.
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		out.gzip = true
	}
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	defer out.flush() // end a gzip member written and not flushed
	gv := h.kind.GroupVersionKind(h.ri.version).GroupVersion().String()
	var buf bytes.Buffer
	sent := h.s.watchEvents.of(watchEventLabels{h.ri.group, h.ri.resource, h.ri.version})
	// send writes one event; false ends the watch.
	send := func(ev watch.Event) bool {
		if ev.Type == watch.Bookmark && !opts.AllowBookmarks {
			return true
		}
		buf.Reset()
		frame := h.frame
		if f == formProtobuf || f == formMetadataProto {
			frame = h.protoFrame
		}
		if err := frame(&buf, r, f, gv, ev); err != nil {
			h.s.cfg.Logger.Error("watch: encoding an event", "err", err)
			return false
		}
		if _, err := out.Write(buf.Bytes()); err != nil {
			return false
		}
		sent.sent(buf.Len())
		if ev.Type == watch.Error {
			out.flush()
			if st, ok := ev.Object.(*metav1.Status); ok {
				h.s.cfg.Logger.Debug("watch ended with an error event", "resource", h.kind.GroupResource().String(),
					"code", st.Code, "reason", st.Reason, "message", st.Message)
			}
			return false
		}
		return true
	}
	if q, ok := wi.(storage.EventQueue); ok {
		// The cache's queue, read here: a batch of events, one flush.
		var batch []watch.Event
		for {
			if batch, ok = q.Next(ctx, batch); !ok {
				return
			}
			for i, ev := range batch {
				if !send(ev) {
					return
				}
				// Let the object (and the JSON it keeps) go once
				// written, not when the whole batch is.
				batch[i] = watch.Event{}
			}
			out.flush()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok || !send(ev) {
				return
			}
			// Flush once the burst is written, not per event.
			if len(wi.ResultChan()) == 0 {
				out.flush()
			}
		}
	}
}

// watchOut is where a watch's events go: the response, or a gzip stream
// in it whose every flush ends a gzip member (a reader takes the members
// as one stream), so that an idle watch holds no compressor.
//
// A burst of events is gathered and handed to the response in pieces of
// up to watchChunk bytes, not event by event. Each write to an HTTP/2
// response beyond its 4 KiB buffer waits for the connection's serve loop
// to take the frame: a watch-list of 10,000 ConfigMaps of 1.6 KB was
// about 4,000 of those hand-offs (BenchmarkWatchListHTTP2: 62 → 36 ms
// once gathered). The buffer is borrowed for a burst and given back at
// its flush, so an idle watch holds none.
type watchOut struct {
	w       http.ResponseWriter
	flusher http.Flusher
	gzip    bool
	gz      *gzip.Writer // the member being written
	pending *[]byte      // the burst not yet handed to w; nil between bursts
}

// watchChunk is how much of a burst watchOut gathers before handing it
// to the response: two HTTP/2 DATA frames of the default 16 KiB. 16, 32
// and 64 KiB gave the same watch-list times (BenchmarkWatchListHTTP2);
// the smaller, the less a thousand watchers' bursts hold at once.
const watchChunk = 32 << 10

var watchBuffers = sync.Pool{New: func() any { b := make([]byte, 0, watchChunk); return &b }}

func (o *watchOut) Write(p []byte) (int, error) {
	if !o.gzip {
		return o.gather(p)
	}
	if o.gz == nil {
		o.gz = gzipWriters.Get().(*gzip.Writer)
		o.gz.Reset(writerFunc(o.gather))
	}
	return o.gz.Write(p)
}

// gather adds p to the burst, handing the burst to the response once it
// holds watchChunk bytes.
func (o *watchOut) gather(p []byte) (int, error) {
	if o.pending == nil {
		o.pending = watchBuffers.Get().(*[]byte)
	}
	*o.pending = append(*o.pending, p...)
	if len(*o.pending) >= watchChunk {
		if err := o.handOver(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// handOver writes the gathered burst to the response.
func (o *watchOut) handOver() error {
	if o.pending == nil || len(*o.pending) == 0 {
		return nil
	}
	_, err := o.w.Write(*o.pending)
	*o.pending = (*o.pending)[:0]
	return err
}

// flush sends what was written: the gzip member ended, the burst handed
// over, then the response flushed. The member's data is sync-flushed
// before it ends: a reader (Go's gzip.Reader) hands over a member's last
// bytes only once it has read the next member's header, so without the
// sync flush the last event of a burst would wait for the next burst.
func (o *watchOut) flush() {
	if o.gz != nil {
		if o.gz.Flush() == nil && o.gz.Close() == nil {
			o.gz.Reset(io.Discard)
			gzipWriters.Put(o.gz)
		}
		o.gz = nil
	}
	o.handOver()
	if o.pending != nil {
		if cap(*o.pending) <= 4*watchChunk { // an event larger than that is not kept
			watchBuffers.Put(o.pending)
		}
		o.pending = nil
	}
	if o.flusher != nil {
		o.flusher.Flush()
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// frame writes one event line. The object of a shared cache event is
// marshalled through its cached JSON: encoded once for every watcher.
func (h *handler) frame(buf *bytes.Buffer, r *http.Request, f form, gv string, ev watch.Event) error {
	var obj any = ev.Object
	switch ev.Type {
	case watch.Bookmark:
		obj = h.bookmark(gv, ev)
	case watch.Error:
		if st, ok := eventStatus(ev); ok {
			obj = st
		}
	default:
		if f == formTable || f == formMetadata {
			if row, ok := asRow(ev.Object); ok {
				return writeFrame(buf, ev.Type, func(b []byte) ([]byte, error) {
					if f == formMetadata {
						return appendPartial(b, row.rec, row.rev, row.obj)
					}
					if row.obj == nil { // a record only: decoded for the cells
						var err error
						if row.obj, err = row.rec.Decode(row.rev); err != nil {
							return nil, err
						}
					}
					lm := metav1.ListMeta{ResourceVersion: row.obj.GetResourceVersion()} // the event's object's, as upstream's
					return h.s.tableFor(h.kind, h.ri.version, r).write(b, lm, 1, func(int) (tableRow, error) { return row, nil }, 0, nil)
				})
			}
		}
	}
	if o, ok := obj.(*storage.RecordJSON); ok && o.Alone() {
		rec, rev := o.Record()
		return writeFrame(buf, ev.Type, func(b []byte) ([]byte, error) { return rec.AppendJSON(b, rev) })
	}
	data, err := encodeJSON(obj)
	if err != nil {
		return err
	}
	return writeFrame(buf, ev.Type, func(b []byte) ([]byte, error) { return append(b, data...), nil })
}

// protoFrame writes one event in protobuf. The message of a cache event's
// object is made once for every watcher of the event; a metadata watch's
// PartialObjectMetadata, for each watcher.
func (h *handler) protoFrame(buf *bytes.Buffer, _ *http.Request, f form, gv string, ev watch.Event) error {
	k, v := h.kind, h.ri.version
	var obj []byte
	var err error
	switch {
	case ev.Type == watch.Error:
		st, ok := eventStatus(ev)
		if !ok {
			return fmt.Errorf("an error event's object of type %T", ev.Object)
		}
		var b bytes.Buffer
		err = protoSerializer.Encode(st, &b)
		obj = b.Bytes()
	case f == formMetadataProto && ev.Type == watch.Bookmark:
		obj, err = partialProtoObject(nil, 0, h.bookmark(gv, ev))
	case f == formMetadataProto:
		row, ok := asRow(ev.Object)
		if !ok {
			return fmt.Errorf("a watch event's object of type %T", ev.Object)
		}
		obj, err = partialProtoObject(row.rec, row.rev, row.obj)
	case ev.Type == watch.Bookmark:
		obj, err = protoObject(k, v, h.bookmark(gv, ev).Object)
	default:
		switch o := ev.Object.(type) {
		case *storage.RecordJSON:
			if o.Alone() {
				rec, rev := o.Record()
				b, err := appendRecordWatchEvent(buf.AvailableBuffer(), k, v, ev.Type, rec, rev)
				if err != nil {
					return err
				}
				buf.Write(b)
				return nil
			}
			obj, err = o.Other(func(rec *storage.Record, rev int64) ([]byte, error) { return recordProtoObjectAt(k, v, rec, rev) })
		case *storage.Shared:
			obj, err = protoObject(k, v, o.Object)
		case *unstructured.Unstructured:
			obj, err = protoObject(k, v, o.Object)
		default:
			err = fmt.Errorf("a watch event's object of type %T", ev.Object)
		}
	}
	if err != nil {
		return err
	}
	buf.Write(appendProtoWatchEvent(buf.AvailableBuffer(), ev.Type, obj))
	return nil
}

// bookmark is a BOOKMARK event's object: the kind, its resourceVersion,
// and its annotations (k8s.io/initial-events-end).
func (h *handler) bookmark(gv string, ev watch.Event) *unstructured.Unstructured {
	m, _ := ev.Object.(metav1.Object)
	bm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gv, "kind": h.kind.Kind}}
	if m != nil {
		bm.SetResourceVersion(m.GetResourceVersion())
		bm.SetAnnotations(m.GetAnnotations())
	}
	return bm
}

// eventStatus is an ERROR event's Status, its kind and apiVersion set.
func eventStatus(ev watch.Event) (*metav1.Status, bool) {
	st, ok := ev.Object.(*metav1.Status)
	if !ok {
		return nil, false
	}
	cp := *st
	cp.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	return &cp, true
}

// writeFrame writes an event line of type typ, its object appended by
// object.
func writeFrame(buf *bytes.Buffer, typ watch.EventType, object func([]byte) ([]byte, error)) error {
	b := append(buf.AvailableBuffer(), `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","object":`...)
	b, err := object(b)
	if err != nil {
		return err
	}
	buf.Write(append(b, "}\n"...))
	return nil
}

// asRow returns the object of a watch event as a table row: decoded, with
// its record when it has one (cache events carry a *storage.Shared
// around an object decoded from its record, or, for watchers that
// asked for EncodedOnly, a *storage.RecordJSON).
func asRow(o any) (tableRow, bool) {
	switch u := o.(type) {
	case *unstructured.Unstructured:
		return tableRow{obj: u}, true
	case *storage.Shared:
		rec, rev := u.Record()
		return tableRow{obj: u.Unstructured, rec: rec, rev: rev}, true
	case *storage.RecordJSON:
		rec, rev := u.Record()
		return tableRow{rec: rec, rev: rev}, true
	}
	return tableRow{}, false
}
