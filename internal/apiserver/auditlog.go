package apiserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/apiserver/audit"
	"github.com/kplane-dev/kplane/internal/registry"
)

// The audit log (Config.AuditPolicy, Config.AuditLog), as kube-apiserver
// writes it with --audit-policy-file and --audit-log-path (a request
// refused 401 gets one event: auditFailedAuthentication): each
// authenticated request the policy does not give level None gets an
// audit.k8s.io/v1 Event at its RequestReceived stage and at its end
// (ResponseComplete; a watch also at ResponseStarted, when its answer
// begins), each a JSON line, unless the policy omits the stage:
//   - who: the authenticated user, the impersonated one, the source IPs
//     (X-Forwarded-For's, then the peer's) and the user agent;
//   - what: the request URI, the verb and, for a resource request, the
//     object named;
//   - the answer's code, and for a refusal its Status's status, message
//     and reason;
//   - the authorization decision (allow or forbid) and its reason, as
//     annotations;
//   - at level Request and up, the request body as sent (JSON bodies);
//     at RequestResponse, the answer's body too (JSON, not watches).
//
// The policy is evaluated with the authenticated user, before
// impersonation, as upstream's audit filter runs before its
// impersonation filter.

// auditRecord is one request's event being built.
type auditRecord struct {
	log  audit.Backend
	ev   audit.Event
	omit []audit.Stage
	// noManagedFields: the objects logged leave out metadata.managedFields
	// (the policy's omitManagedFields).
	noManagedFields bool
	// body is the request's body as read, kept for level Request and up;
	// object, the object a create or update sent, as decoded.
	body   *bytes.Buffer
	object json.RawMessage
	// answer is the object a write answers, as JSON whatever the answer's
	// wire form (auditResponseObject).
	answer json.RawMessage
}

// auditResponseObject gives the audit record of ctx, at level
// RequestResponse, the object a write answers, as upstream's handlers
// log it: as JSON, whatever form the client asked for.
func auditResponseObject(ctx context.Context, obj *unstructured.Unstructured) {
	rec, _ := ctx.Value(auditKey{}).(*auditRecord)
	if rec == nil || obj == nil || rec.ev.Level != audit.LevelRequestResponse {
		return
	}
	rec.answer = rec.objectJSON(obj.Object)
}

type auditKey struct{}

// withAudit returns ctx carrying rec, for the handlers to give it the
// object a write sends (auditRequestObject).
func withAudit(ctx context.Context, rec *auditRecord) context.Context {
	return context.WithValue(ctx, auditKey{}, rec)
}

// auditRequestObject gives the audit record of ctx, if any, the object a
// create or update sent, decoded (whatever its wire form), as upstream's
// handlers log it: it completes the reference to the object, and is the
// event's requestObject at level Request and up.
func auditRequestObject(ctx context.Context, obj *unstructured.Unstructured) {
	rec, _ := ctx.Value(auditKey{}).(*auditRecord)
	if rec == nil || obj == nil {
		return
	}
	if ref := rec.ev.ObjectRef; ref != nil {
		ref.Name = cmp.Or(ref.Name, obj.GetName())
		ref.UID = cmp.Or(ref.UID, string(obj.GetUID()))
		ref.ResourceVersion = cmp.Or(ref.ResourceVersion, obj.GetResourceVersion())
	}
	if !rec.ev.Level.Less(audit.LevelRequest) {
		rec.object = rec.objectJSON(obj.Object)
	}
}

// objectJSON is obj as an event holds it: without managedFields if the
// policy says so, for an object and each item of a list.
func (rec *auditRecord) objectJSON(obj map[string]any) json.RawMessage {
	if rec.noManagedFields {
		obj = withoutManagedFields(obj)
		if items, ok := obj["items"].([]any); ok {
			stripped := make([]any, len(items))
			for i, it := range items {
				if m, ok := it.(map[string]any); ok {
					stripped[i] = withoutManagedFields(m)
				} else {
					stripped[i] = it
				}
			}
			obj["items"] = stripped
		}
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return data
}

// withoutManagedFields is a shallow copy of obj without
// metadata.managedFields.
func withoutManagedFields(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok || md["managedFields"] == nil {
		return maps.Clone(obj)
	}
	out := maps.Clone(obj)
	md = maps.Clone(md)
	delete(md, "managedFields")
	out["metadata"] = md
	return out
}

// bodyJSON is a JSON body as an event holds it (objectJSON's rules).
func (rec *auditRecord) bodyJSON(data []byte) json.RawMessage {
	if !json.Valid(data) {
		return nil
	}
	if rec.noManagedFields {
		var obj map[string]any
		if json.Unmarshal(data, &obj) == nil {
			return rec.objectJSON(obj)
		}
	}
	return compactJSON(data)
}

// startAudit begins r's audit record, if the policy logs it, and writes
// its RequestReceived event; nil if r is not audited. The error is that
// event's write's.
func (s *Server) startAudit(r *http.Request, auditID string, received time.Time) (*auditRecord, error) {
	if s.cfg.AuditLog == nil {
		return nil, nil
	}
	rec := s.newAuditRecord(r, requestUser(r), auditID, received)
	if rec == nil {
		return nil, nil
	}
	// The body of a patch or delete is logged as sent, at level Request
	// and up (a create's or update's object as decoded:
	// auditRequestObject).
	if !rec.ev.Level.Less(audit.LevelRequest) && r.Body != nil && r.Body != http.NoBody && isJSON(r.Header.Get("Content-Type")) {
		rec.body = &bytes.Buffer{}
		r.Body = teeBody{r.Body, rec.body}
	}
	return rec, rec.write(audit.StageRequestReceived, received)
}

// auditFailedAuthentication writes the one event of a request refused
// 401, as upstream's failed-authentication audit does: the policy asked
// with no user, the stage ResponseStarted, the refusal's Status.
func (s *Server) auditFailedAuthentication(r *http.Request, auditID string, received time.Time) {
	if s.cfg.AuditLog == nil {
		return
	}
	rec := s.newAuditRecord(r, registry.User{}, auditID, received)
	if rec == nil {
		return
	}
	rec.ev.ResponseStatus = &audit.ResponseStatus{Status: metav1.StatusFailure, Message: "Unauthorized",
		Reason: string(metav1.StatusReasonUnauthorized), Code: http.StatusUnauthorized}
	rec.write(audit.StageResponseStarted, time.Now())
}

// newAuditRecord is the record of r, sent by u, at the level the policy
// gives it; nil at level None.
func (s *Server) newAuditRecord(r *http.Request, u registry.User, auditID string, received time.Time) *auditRecord {
	attrs := requestAttributes(r, u)
	level, omit, noManagedFields := s.cfg.AuditPolicy.Decide(audit.Attributes{
		User: u.Name, Groups: u.Groups, Verb: attrs.Verb, ResourceRequest: attrs.ResourceRequest,
		APIGroup: attrs.APIGroup, Resource: attrs.Resource, Subresource: attrs.Subresource,
		Namespace: attrs.Namespace, Name: attrs.Name, Path: attrs.Path,
	})
	s.countAuditLevel(level)
	if level == audit.LevelNone {
		return nil
	}
	rec := &auditRecord{log: s.cfg.AuditLog, omit: omit, noManagedFields: noManagedFields, ev: audit.Event{
		Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: level, AuditID: auditID,
		RequestURI: r.URL.RequestURI(), Verb: attrs.Verb,
		User:      audit.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra},
		SourceIPs: sourceIPs(r), UserAgent: r.UserAgent(),
		RequestReceivedTimestamp: audit.MicroTime(received),
	}}
	if attrs.ResourceRequest {
		rec.ev.ObjectRef = &audit.ObjectReference{Resource: attrs.Resource, Namespace: attrs.Namespace, Name: attrs.Name,
			APIGroup: attrs.APIGroup, APIVersion: attrs.APIVersion, Subresource: attrs.Subresource}
	}
	return rec
}

// write writes the event at stage, unless the policy omits it.
func (rec *auditRecord) write(stage audit.Stage, at time.Time) error {
	if slices.Contains(rec.omit, stage) {
		return nil
	}
	ev := rec.ev
	ev.Stage, ev.StageTimestamp = stage, audit.MicroTime(at)
	return rec.log.Write(&ev)
}

// authorized records the authorization decision.
func (rec *auditRecord) authorized(allowed bool, reason string) {
	if rec == nil {
		return
	}
	decision := "forbid"
	if allowed {
		decision = "allow"
	}
	rec.annotate("authorization.k8s.io/decision", decision)
	rec.annotate("authorization.k8s.io/reason", reason)
}

// annotate adds an admission annotation (registry.AddAuditAnnotation),
// as upstream's admission attributes add theirs to the event.
func (rec *auditRecord) annotate(key, value string) {
	if rec.ev.Annotations == nil {
		rec.ev.Annotations = map[string]string{}
	}
	rec.ev.Annotations[key] = value
}

// impersonated records the user the request acts as.
func (rec *auditRecord) impersonated(r *http.Request) {
	if rec == nil {
		return
	}
	if u, ok := registry.UserFrom(r.Context()); ok && u.Name != rec.ev.User.Username {
		rec.ev.ImpersonatedUser = &audit.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	}
}

// finish writes the ResponseComplete event of the answer aw saw.
func (rec *auditRecord) finish(aw *auditWriter) {
	code := aw.code
	if code == 0 {
		code = http.StatusOK
	}
	st := &audit.ResponseStatus{Code: code}
	var status struct {
		Kind, Status, Message, Reason string
		Details                       json.RawMessage
	}
	if json.Unmarshal(aw.body.Bytes(), &status) == nil && status.Kind == "Status" {
		st.Status, st.Message, st.Reason, st.Details = status.Status, status.Message, status.Reason, status.Details
	}
	rec.ev.ResponseStatus = st
	switch {
	case rec.object != nil:
		rec.ev.RequestObject = rec.object
	case rec.body != nil && rec.body.Len() > 0:
		rec.ev.RequestObject = rec.bodyJSON(rec.body.Bytes())
	}
	switch {
	case rec.ev.Level != audit.LevelRequestResponse:
	case rec.answer != nil && code < 300:
		rec.ev.ResponseObject = rec.answer
	case aw.keep:
		rec.ev.ResponseObject = rec.bodyJSON(aw.body.Bytes())
	}
	rec.write(audit.StageResponseComplete, time.Now())
}

func compactJSON(data []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, data) != nil {
		return nil
	}
	return b.Bytes()
}

// isJSON reports whether a Content-Type is a JSON one (objects, JSON
// and merge patches).
func isJSON(ct string) bool {
	ct, _, _ = strings.Cut(ct, ";")
	ct = strings.TrimSpace(ct)
	return ct == "application/json" || strings.HasSuffix(ct, "+json")
}

// sourceIPs are the client's addresses as upstream lists them: those
// X-Forwarded-For names, then X-Real-Ip's, then the peer's.
func sourceIPs(r *http.Request) []string {
	var ips []string
	for _, v := range strings.Split(r.Header.Get("X-Forwarded-For"), ",") {
		if ip := net.ParseIP(strings.TrimSpace(v)); ip != nil {
			ips = append(ips, ip.String())
		}
	}
	if ip := net.ParseIP(strings.TrimSpace(r.Header.Get("X-Real-Ip"))); ip != nil && !slices.Contains(ips, ip.String()) {
		ips = append(ips, ip.String())
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip != nil && !slices.Contains(ips, ip.String()) {
		ips = append(ips, ip.String())
	}
	return ips
}

// teeBody copies what is read of a request's body.
type teeBody struct {
	body io.ReadCloser
	copy *bytes.Buffer
}

func (t teeBody) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	t.copy.Write(p[:n])
	return n, err
}

func (t teeBody) Close() error { return t.body.Close() }

// auditWriter sees the answer for its audit record: the code, the body
// of a refusal (and of any answer, for level RequestResponse), and, for
// a watch, when the answer begins (ResponseStarted).
type auditWriter struct {
	http.ResponseWriter
	rec     *auditRecord
	code    int
	watch   bool
	started bool
	keep    bool // keep the whole body (RequestResponse, not a watch)
	body    bytes.Buffer
}

// maxAuditBody bounds the answer bytes kept for one event;
// maxStatusBody those kept of any answer, which may be a Status.
const (
	maxAuditBody  = 3 << 20
	maxStatusBody = 4 << 10
)

func (w *auditWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
		if w.watch && !w.started {
			// As upstream's: the code is known once the answer begins.
			w.started = true
			w.rec.ev.ResponseStatus = &audit.ResponseStatus{Code: code}
			w.rec.write(audit.StageResponseStarted, time.Now())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	limit := maxStatusBody
	if w.keep || w.code >= 300 {
		limit = maxAuditBody
	}
	if !w.watch && w.body.Len()+len(p) <= limit {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *auditWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
