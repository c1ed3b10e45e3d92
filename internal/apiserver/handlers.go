package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// resources routes /api/... and /apis/... requests.
func (s *Server) resources(w http.ResponseWriter, r *http.Request) {
	switch strings.Trim(r.URL.Path, "/") {
	case "api": // /api/, as /api
		s.legacyVersions(w, r)
		return
	case "apis":
		s.groups(w, r)
		return
	}
	ri, ok := parsePath(r.URL.Path)
	switch {
	case !ok:
		s.noRoute(w, r, ri.group)
		return
	case ri.groupOnly:
		s.group(w, r, ri.group)
		return
	case ri.discovery:
		s.groupVersion(w, r, ri.group, ri.version)
		return
	}
	s.resource(w, r, ri)
}

// resource serves a request on the resource ri names.
func (s *Server) resource(w http.ResponseWriter, r *http.Request, ri requestInfo) {
	res, ok := s.cfg.Registry.Lookup(ri.group, ri.version, ri.resource)
	if !ok {
		s.noRoute(w, r, ri.group)
		return
	}
	k := res.Kind()
	deprecation := k.VersionWarnings[ri.version]
	if deprecation != "" {
		warner(w)(deprecation) // on every answer, errors too, as upstream's
	}
	switch m := installed(ri, k); {
	case m == 0:
		writeError(w, errNoRoute)
		return
	case !m.allows(r.Method):
		writeError(w, errMethodNotAllowed)
		return
	}
	watch := r.Method == http.MethodGet && (ri.watchPrefix || (ri.name == "" && watchParam(r.URL.Query())))
	series := s.countRequest(w, r, ri, watch)
	if deprecation != "" {
		s.requests.requestedDeprecated(ri) // a route served: counted
	}
	// What the answer can be is settled first, as upstream's routes and
	// handlers settle it: a client that accepts none of it gets 406 before
	// anything is read or written.
	f, err := negotiateRoute(r, k, ri, watch)
	if err != nil {
		writeError(w, err)
		return
	}
	h := &handler{s: s, res: res, kind: k, ri: ri, form: f}
	if ri.subresource == "scale" {
		h.scale(w, r)
		return
	}
	if sk := k.ReviewSubresources[ri.subresource]; sk != nil {
		h.subreview(w, r, sk)
		return
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case watch:
			if series != nil {
				series.running.Add(1)
				defer series.running.Add(-1)
			}
			h.watch(w, r)
		case ri.name == "":
			h.list(w, r)
		default:
			h.get(w, r)
		}
	case http.MethodPost:
		h.create(w, r)
	case http.MethodPut:
		h.update(w, r)
	case http.MethodPatch:
		h.patch(w, r)
	case http.MethodDelete:
		if ri.name == "" {
			h.deleteCollection(w, r)
		} else {
			h.delete(w, r)
		}
	}
}

// handler serves one request on one resource.
type handler struct {
	s    *Server
	res  *registry.Resource
	kind *registry.Kind
	ri   requestInfo
	form form // the answer's, negotiated (negotiateRoute)
}

// negotiateRoute is the form of the answer to a request on a resource
// route. For a built-in kind upstream's router (go-restful) first checks
// Accept against what the route produces, comparing media types without
// their parameters, a lone */* matching and application/* not, and
// answers its own 406; its handler then negotiates the form
// (negotiateAccept). A custom resource's handler only negotiates.
func negotiateRoute(r *http.Request, k *registry.Kind, ri requestInfo, watch bool) (form, error) {
	proto := protoCapable(k, ri.version)
	switch sk := k.ReviewSubresources[ri.subresource]; {
	case sk != nil:
		proto = protoCapable(sk, sk.StorageVersion())
	case ri.subresource == "scale":
		proto = false // as upstream's custom resources' Scale
	}
	if k.Typed != nil && !routeProduces(r.Header.Get("Accept")) {
		return 0, errNotProduced(r.Method == http.MethodGet && (ri.name == "" || watch))
	}
	f, err := negotiateAccept(r, proto)
	if err == nil && watch && f == formYAML {
		// YAML has no stream form: upstream does not fall back to a
		// lower range, it refuses.
		return 0, errNoWatchStream
	}
	return f, err
}

// errNoWatchStream is upstream's 406 for a watch negotiated to YAML.
var errNoWatchStream = &apierrors.StatusError{ErrStatus: metav1.Status{
	Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
	Message: "only the following media types are accepted: application/json;stream=watch, " + protobufType + ";stream=watch",
}}

// errNotProduced is go-restful's 406, naming what the route produces: a
// list's route its watch streams too.
func errNotProduced(list bool) error {
	produces := "application/json, application/yaml, " + protobufType
	if list {
		produces += ", application/json;stream=watch, " + protobufType + ";stream=watch"
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: "406: Not Acceptable\n\nAvailable representations: " + produces,
		Details: &metav1.StatusDetails{},
	}}
}

// routeProduces reports whether go-restful would find that a route
// producing the media types produced (a built-in kind's: JSON, YAML and
// protobuf, the default) produces something in accept: Accept's media
// types compared without their parameters, a lone */* matching.
func routeProduces(accept string, produced ...string) bool {
	if accept == "" {
		return true
	}
	if len(produced) == 0 {
		produced = []string{"application/json", "application/yaml", protobufType}
	}
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(part, ";")
		if mt = strings.TrimSpace(mt); mt == "*/*" || slices.Contains(produced, mt) {
			return true
		}
	}
	return false
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := requestContext(r)
	defer cancel()
	q := r.URL.Query()
	if export, _ := strconv.ParseBool(q.Get("export")); export {
		writeError(w, apierrors.NewBadRequest("the export parameter, deprecated since v1.14, is no longer supported"))
		return
	}
	opts := metav1.GetOptions{ResourceVersion: q.Get("resourceVersion")}
	if f := h.form; f != formYAML && (f != formTable || tableOptions(r) == nil) {
		// The common case, served from the stored JSON as it is (or from
		// the protobuf form kept with the record, or the stored metadata).
		rec, asStored, err := h.res.GetRecord(ctx, h.ri.version, h.ri.namespace, h.ri.name, opts)
		if err != nil {
			writeError(w, err)
			return
		}
		switch {
		case asStored && f == formJSON:
			writeJSONFrom(w, http.StatusOK, func(b []byte) ([]byte, error) { return rec.AppendJSON(b, rec.Rev) })
			return
		case asStored && f == formProtobuf:
			writeProtoRecord(w, h.kind, h.ri.version, http.StatusOK, rec)
			return
		case asStored && f == formMetadata:
			writeJSONFrom(w, http.StatusOK, func(b []byte) ([]byte, error) { return appendPartial(b, rec, rec.Rev, nil) })
			return
		case asStored && f == formMetadataProto:
			writePartialProto(w, http.StatusOK, rec, rec.Rev, nil)
			return
		}
		obj, err := h.res.Present(r.Context(), h.ri.version, rec)
		if err != nil {
			writeError(w, err)
			return
		}
		h.s.writeObject(w, r, h.form, h.kind, h.ri.version, http.StatusOK, obj)
		return
	}
	obj, err := h.res.Get(ctx, h.ri.version, h.ri.namespace, h.ri.name, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	h.s.writeObject(w, r, h.form, h.kind, h.ri.version, http.StatusOK, obj)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := requestContext(r)
	defer cancel()
	w, done := compressed(w, r)
	defer done()
	opts, err := listOptions(h.kind, h.ri.version, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	if f := h.form; f != formYAML && (f != formTable || tableOptions(r) == nil) {
		// The common case, served from the stored JSON as it is (or
		// decoded from it straight into the Go types, for protobuf; a
		// Table's cells from the objects decoded, its rows' metadata
		// from the records).
		recs, ok, err := h.res.ListRecords(ctx, h.ri.version, h.ri.namespace, opts)
		if err != nil {
			writeError(w, err)
			return
		}
		if ok {
			switch f {
			case formMetadata:
				writeStreamed(w, &listBuffers, maxPooledList, "application/json", http.StatusOK, func(b []byte, flush func([]byte) error) ([]byte, error) {
					b, err := writeMetaList(b, recs, listPiece, flush)
					if err != nil {
						return nil, apierrors.NewInternalError(err)
					}
					return append(b, '\n'), nil
				})
				return
			case formTable:
				members, all := h.kind.TableMembers(h.ri.version)
				writeTable(w, h.s.tableFor(h.kind, h.ri.version, r), recordsMeta(recs), len(recs.Items), func(i int) (tableRow, error) {
					return recordRow(recs.Items[i], members, all)
				})
				return
			case formProtobuf, formMetadataProto:
				writeStreamed(w, &listBuffers, maxPooledList, protobufType, http.StatusOK, func(b []byte, flush func([]byte) error) ([]byte, error) {
					var err error
					if f == formProtobuf {
						b, err = writeProtoList(b, h.kind, h.ri.version, recs, listPiece, flush)
					} else {
						b, err = writePartialProtoList(b, recs, listPiece, flush)
					}
					if err != nil {
						return nil, apierrors.NewInternalError(err)
					}
					return b, nil
				})
				return
			}
			gv := h.kind.GroupVersionKind(h.ri.version).GroupVersion().String()
			writeStreamed(w, &listBuffers, maxPooledList, "application/json", http.StatusOK, func(b []byte, flush func([]byte) error) ([]byte, error) {
				b = slices.Grow(b, min(256+listSize(recs), listPiece+64<<10))
				b, err := recs.WriteJSON(b, gv, h.kind.ListKind, bareItems(h.kind), listPiece, flush)
				if err != nil {
					return nil, err
				}
				return append(b, '\n'), nil // as upstream's encoder ends it
			})
			return
		}
	}
	list, err := h.res.List(ctx, h.ri.version, h.ri.namespace, opts)
	if err != nil {
		writeError(w, err)
		return
	}
	h.s.writeList(w, r, h.form, h.kind, h.ri.version, list)
}

// recordsMeta is a record list's ListMeta.
func recordsMeta(l *storage.RecordList) metav1.ListMeta {
	return metav1.ListMeta{ResourceVersion: strconv.FormatInt(l.ResourceVersion, 10), Continue: l.Continue, RemainingItemCount: l.Remaining}
}

// listBuffers hold list answers while they are written. Without them a
// paged walk of a large store would leave a page of garbage per page:
// ~500 MB for a million small objects, enough to grow the heap toward
// twice what is live. A list is written in pieces of listPiece bytes, so
// a list of any length goes through one pooled buffer; buffers that grew
// past maxPooledList (around an object near the size limit) are left to
// the GC.
var listBuffers = sync.Pool{New: func() any { return new([]byte) }}

const (
	maxPooledList = 4 << 20
	listPiece     = 256 << 10
)

// listSize is about the size of a list's JSON.
func listSize(l *storage.RecordList) int {
	n := 0
	for _, it := range l.Items {
		n += len(it.Value) + 40
	}
	return n
}

// warnings returns ctx carrying a way to add a warning to w's answer
// (registry.AddWarning), for a write of a kind that may warn, or while
// admission webhooks, which may too, are configured; and then the
// request's WebhookTime too, which the webhooks' calls add to.
func (h *handler) warnings(ctx context.Context, w http.ResponseWriter) context.Context {
	admission := h.s.cfg.Registry.AdmissionActive()
	if h.kind.Warnings == nil && !admission {
		return ctx
	}
	if sw := statusWriterOf(w); admission && sw != nil {
		ctx = registry.WithWebhookTime(ctx, &sw.webhooks)
	}
	return registry.WithWarnings(ctx, warner(w))
}

func (h *handler) create(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	ctx = h.warnings(ctx, w)
	obj, wo, err := h.objectWrite(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if h.kind.Review != nil {
		ctx = registry.WithUser(ctx, requestUser(r)) // the review may be about who asks
	}
	out, enc, err := h.res.CreateEncoded(ctx, h.ri.version, h.ri.namespace, obj, wo)
	if err != nil {
		writeError(w, err)
		return
	}
	h.s.writeObjectEncoded(w, r, h.form, h.kind, h.ri.version, http.StatusCreated, out, enc)
}

// subreview answers a create on a review subresource of an object
// (serviceaccounts/token), whose body is of the subresource's kind sk.
func (h *handler) subreview(w http.ResponseWriter, r *http.Request, sk *registry.Kind) {
	ctx, cancel := requestContext(r)
	defer cancel()
	sh := &handler{s: h.s, res: h.res, kind: sk, ri: h.ri}
	sh.ri.version = sk.StorageVersion()
	obj, wo, err := sh.objectWrite(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx = registry.WithWarnings(registry.WithUser(ctx, requestUser(r)), warner(w))
	out, err := h.res.CreateSubreview(ctx, h.ri.subresource, h.ri.namespace, h.ri.name, obj, wo)
	if err != nil {
		writeError(w, err)
		return
	}
	h.s.writeObjectEncoded(w, r, h.form, sk, sk.StorageVersion(), http.StatusCreated, out, nil)
}

func (h *handler) update(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	ctx = h.warnings(ctx, w)
	obj, wo, err := h.objectWrite(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	wo.Subresource = h.ri.subresource
	out, enc, created, err := h.res.UpdateOrCreateEncoded(ctx, h.ri.version, h.ri.namespace, h.ri.name, obj, wo)
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	h.s.writeObjectEncoded(w, r, h.form, h.kind, h.ri.version, code, out, enc)
}

// objectWrite reads a create or update request: its options, then its
// body.
func (h *handler) objectWrite(w http.ResponseWriter, r *http.Request) (*unstructured.Unstructured, registry.WriteOptions, error) {
	kind := "UpdateOptions"
	if r.Method == http.MethodPost {
		kind = "CreateOptions"
	}
	wo, err := writeOptions(r, kind)
	if err != nil {
		return nil, wo, err
	}
	obj, body, err := h.s.decodeObject(w, r, h.kind, h.ri.version)
	if err != nil {
		return nil, wo, err
	}
	auditRequestObject(r.Context(), obj)
	if kind := obj.GetKind(); kind != h.kind.Kind {
		// A custom resource sent as another kind of its group version:
		// the object goes on as the resource's kind, and the registry
		// refuses the write where upstream's validation does.
		wo.SentKind = kind
		obj.SetKind(h.kind.Kind)
	}
	if r.Method == http.MethodPut && !wo.DryRun {
		// Lets an update that changed nothing be answered from the store
		// when it comes again (registry/noopwrites.go).
		sum := sha256.Sum256(body)
		wo.BodySum = &sum
	}
	fv, _ := parseFieldValidation(r) // checked by decodeObject
	fv.apply(w, &wo)
	return obj, wo, nil
}

func (h *handler) patch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	ctx = h.warnings(ctx, w)
	body, po, err := h.patchRequest(w, r, registry.PatchTypes(h.kind))
	if err != nil {
		writeError(w, err)
		return
	}
	out, enc, created, err := h.res.PatchEncoded(ctx, h.ri.version, h.ri.namespace, h.ri.name, body, po)
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	h.s.writeObjectEncoded(w, r, h.form, h.kind, h.ri.version, code, out, enc)
}

// patchRequest reads a PATCH: its media type, which must be one of
// accepted, its options (dryRun, fieldManager, force, fieldValidation),
// checked in that order, and its body.
func (h *handler) patchRequest(w http.ResponseWriter, r *http.Request, accepted []string) ([]byte, registry.PatchOptions, error) {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	pt := types.PatchType(strings.TrimSpace(ct))
	if !slices.Contains(accepted, string(pt)) {
		if h.kind.Typed != nil {
			// Upstream's router refuses a type no patch route of a
			// built-in kind consumes; apiextensions-apiserver's handler
			// of custom resources answers with the list below.
			return nil, registry.PatchOptions{}, errUnsupportedPatch
		}
		return nil, registry.PatchOptions{}, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(accepted, ", "),
		}}
	}
	q := r.URL.Query()
	opts := metav1.PatchOptions{DryRun: q["dryRun"], FieldManager: q.Get("fieldManager"), FieldValidation: q.Get("fieldValidation")}
	if force, given := boolParam(q, "force"); given {
		opts.Force = &force
	}
	if errs := metavalidation.ValidatePatchOptions(&opts, pt); len(errs) > 0 {
		return nil, registry.PatchOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		return nil, registry.PatchOptions{}, err
	}
	body, err := h.s.readRaw(w, r)
	if err != nil {
		return nil, registry.PatchOptions{}, err
	}
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType:
		// Upstream's first check, before the object is read.
		if !json.Valid(body) {
			return nil, registry.PatchOptions{}, apierrors.NewBadRequest("invalid JSON patch")
		}
	}
	po := registry.PatchOptions{
		WriteOptions: registry.WriteOptions{
			DryRun: len(opts.DryRun) > 0, Subresource: h.ri.subresource,
			FieldManager:     registry.ManagerName(opts.FieldManager, r.UserAgent()),
			SentFieldManager: opts.FieldManager, SentFieldValidation: opts.FieldValidation,
		},
		Type:  pt,
		Force: opts.Force != nil && *opts.Force,
	}
	fv.apply(w, &po.WriteOptions)
	return body, po, nil
}

// scale serves the /scale subresource: GET, PUT and PATCH of an
// autoscaling/v1 Scale.
func (h *handler) scale(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	var out any
	var err error
	switch r.Method {
	case http.MethodGet:
		out, err = h.res.GetScale(ctx, h.ri.version, h.ri.namespace, h.ri.name)
	case http.MethodPut:
		var wo registry.WriteOptions
		if wo, err = writeOptions(r, "UpdateOptions"); err != nil {
			break
		}
		wo.Subresource = "scale"
		var body []byte
		if body, err = h.s.readBody(w, r); err != nil {
			break
		}
		want := &autoscalingv1.Scale{}
		if err = json.Unmarshal(body, want); err != nil {
			err = apierrors.NewBadRequest(fmt.Sprintf("Scale in version \"v1\" cannot be handled as a Scale: %v", err))
			break
		}
		out, err = h.res.UpdateScale(ctx, h.ri.version, h.ri.namespace, h.ri.name, wo, func(*autoscalingv1.Scale) (*autoscalingv1.Scale, error) {
			return want.DeepCopy(), nil
		})
	case http.MethodPatch:
		var body []byte
		var po registry.PatchOptions
		if body, po, err = h.patchRequest(w, r, registry.ScalePatchTypes); err != nil {
			break
		}
		out, err = h.res.PatchScale(ctx, h.ri.version, h.ri.namespace, h.ri.name, body, po)
	default:
		err = errMethodNotAllowed
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if h.form == formTable && len(h.kind.ScaleColumns) > 0 {
		h.s.writeScaleTable(w, r, h.kind, out)
		return
	}
	write(w, h.form, http.StatusOK, out)
}

// writeScaleTable answers a Scale as a Table (kubectl get
// --subresource=scale): NAME and the kind's ScaleColumns.
func (s *Server) writeScaleTable(w http.ResponseWriter, r *http.Request, k *registry.Kind, scale any) {
	if err := tableOptions(r); err != nil {
		writeError(w, err)
		return
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(scale)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	obj := &unstructured.Unstructured{Object: m}
	t := newTable(&registry.Kind{Kind: "Scale", Columns: k.ScaleColumns}, "", r.URL.Query().Get("includeObject"), s.cfg.Registry.Now())
	writeJSONFrom(w, http.StatusOK, func(b []byte) ([]byte, error) {
		return t.write(b, metav1.ListMeta{ResourceVersion: obj.GetResourceVersion()}, 1, func(int) (tableRow, error) { return tableRow{obj: obj}, nil }, 0, nil)
	})
}

// writeOptions reads the options of a create or update (dryRun,
// fieldManager, fieldValidation) and validates them as kube-apiserver
// does before it reads the body: a 422 naming kind, CreateOptions or
// UpdateOptions.
func writeOptions(r *http.Request, kind string) (registry.WriteOptions, error) {
	q := r.URL.Query()
	dry, manager, validation := q["dryRun"], q.Get("fieldManager"), q.Get("fieldValidation")
	var errs field.ErrorList
	if kind == "CreateOptions" {
		errs = metavalidation.ValidateCreateOptions(&metav1.CreateOptions{DryRun: dry, FieldManager: manager, FieldValidation: validation})
	} else {
		errs = metavalidation.ValidateUpdateOptions(&metav1.UpdateOptions{DryRun: dry, FieldManager: manager, FieldValidation: validation})
	}
	if len(errs) > 0 {
		return registry.WriteOptions{}, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return registry.WriteOptions{
		DryRun: len(dry) > 0, FieldManager: registry.ManagerName(manager, r.UserAgent()),
		SentFieldManager: manager, SentFieldValidation: validation,
	}, nil
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	ctx = h.warnings(ctx, w)
	opts, err := h.s.decodeDeleteOptions(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	out, deleted, err := h.res.Delete(ctx, h.ri.version, h.ri.namespace, h.ri.name, opts, registry.WriteOptions{DryRun: len(opts.DryRun) > 0})
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	// Upstream answers 202 to a delete that asked for cascading through the
	// legacy orphanDependents=false and left the object in place.
	//lint:ignore SA1019 legacy field
	if !deleted && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	if u, ok := out.(*unstructured.Unstructured); ok {
		h.s.writeObject(w, r, h.form, h.kind, h.ri.version, code, u)
		return
	}
	writeStatus(w, h.form, code, out.(*metav1.Status)) // the object is gone: a Success Status
}

func (h *handler) deleteCollection(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.s.writeContext(r, h.kind.WritesByUser)
	defer cancel()
	ctx = h.warnings(ctx, w)
	lo, err := listOptions(h.kind, h.ri.version, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	opts, err := h.s.decodeDeleteOptions(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	list, err := h.res.DeleteCollection(ctx, h.ri.version, h.ri.namespace, lo, opts, registry.WriteOptions{DryRun: len(opts.DryRun) > 0})
	if err != nil {
		writeError(w, err)
		return
	}
	h.s.writeList(w, r, h.form, h.kind, h.ri.version, list)
}
