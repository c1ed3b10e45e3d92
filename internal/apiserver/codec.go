package apiserver

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// protobufType is the Kubernetes protobuf media type, which kubectl and
// typed clients use for built-in kinds.
const protobufType = "application/vnd.kubernetes.protobuf"

// readBody reads a request body within the size limit and returns it as
// JSON (YAML bodies are converted). Protobuf bodies are returned as they
// are with isProto set: only built-in kinds can decode them.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, _, err := s.readBodyProto(w, r)
	return body, err
}

func (s *Server) readBodyProto(w http.ResponseWriter, r *http.Request) (body []byte, isProto bool, err error) {
	body, err = s.readRaw(w, r)
	if err != nil {
		return nil, false, err
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == protobufType {
		return body, true, nil
	}
	body, err = toJSON(r, body)
	return body, false, err
}

func (s *Server) readRaw(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), r.ContentLength, s.cfg.MaxBodyBytes)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", s.cfg.MaxBodyBytes))
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return body, nil
}

// readBody reads a request body into one buffer of the announced length
// when there is one (io.ReadAll would grow its buffer from 512 bytes,
// copying), and reads on if the body is longer than announced.
func readBody(rd io.Reader, announced, limit int64) ([]byte, error) {
	if announced <= 0 || announced >= limit {
		return io.ReadAll(rd)
	}
	buf := make([]byte, announced+1) // one more, to see the end
	n, err := io.ReadFull(rd, buf)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return buf[:n], nil
	case nil:
		rest, err := io.ReadAll(rd)
		return append(buf, rest...), err
	}
	return nil, err
}

// errUnknownBodyFormat is the 415 of a body in a media type kplane does not
// read. It names protobuf for custom resources too, as upstream's, whose
// serializer lists it (and fails on it).
const errUnknownBodyFormat = "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, " + protobufType

// toJSON converts a JSON or YAML body to JSON; other media types are 415,
// as upstream's (which takes no YAML aliases, and no */*).
func toJSON(r *http.Request, body []byte) ([]byte, error) {
	mt := "application/json"
	if ct := r.Header.Get("Content-Type"); ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			mt = "" // 415, parameters that do not parse too
		}
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, &malformedYAML{err}
		}
		return j, nil
	}
	return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: errUnknownBodyFormat,
	}}
}

// malformedYAML is a YAML body that does not parse: a 400. An object's
// create or update says so in other words (unrecognized).
type malformedYAML struct{ err error }

func (e *malformedYAML) Error() string { return "error converting YAML to JSON: " + e.err.Error() }

func (e *malformedYAML) Status() metav1.Status { return apierrors.NewBadRequest(e.Error()).ErrStatus }

// unrecognized is kube-apiserver's answer to an object's body it cannot
// read (not JSON or YAML, or not an object), with the body summarized.
func unrecognized(kind, why string, raw []byte) error {
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %s (%s)", kind, why, summarize(raw)))
}

// summarize shows a body in an error as upstream's decoder does: its
// first 30 bytes, as text if it starts as a JSON object and in hex
// otherwise, with " ..." when there is more.
func summarize(raw []byte) string {
	const max = 30
	if len(raw) == 0 {
		return "<empty>"
	}
	shown, more := raw, ""
	if len(raw) > max {
		shown, more = raw[:max], " ..."
	}
	if raw[0] == '{' {
		return string(shown) + more
	}
	return hex.EncodeToString(shown) + more
}

// fieldValidation is the ?fieldValidation directive.
type fieldValidation string

const (
	validationIgnore fieldValidation = "Ignore"
	validationWarn   fieldValidation = "Warn"
	validationStrict fieldValidation = "Strict"
)

func parseFieldValidation(r *http.Request) (fieldValidation, error) {
	switch v := r.URL.Query().Get("fieldValidation"); v {
	case "":
		return validationWarn, nil // the default since Kubernetes 1.27
	case "Ignore", "Warn", "Strict":
		return fieldValidation(v), nil
	default:
		return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation parameter unsupported: %v", v))
	}
}

// decodeObject parses a create or update body for kind k at version v,
// and returns the body too: its JSON (YAML made JSON), or its protobuf as
// sent.
// Built-in kinds go through their Go type, which refuses wrong field
// types (400) and drops unknown fields, reporting them according to the
// field validation directive (Strict: 400; Warn: Warning headers).
func (s *Server) decodeObject(w http.ResponseWriter, r *http.Request, k *registry.Kind, v string) (*unstructured.Unstructured, []byte, error) {
	raw, err := s.readRaw(w, r)
	if err != nil {
		return nil, nil, err
	}
	body, isProto := raw, false
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == protobufType {
		isProto = true
	} else if body, err = toJSON(r, raw); err != nil {
		if my, ok := err.(*malformedYAML); ok {
			return nil, nil, unrecognized(k.Kind, my.err.Error(), raw)
		}
		return nil, nil, err
	}
	fv, err := parseFieldValidation(r)
	if err != nil {
		return nil, nil, err
	}
	if isProto {
		typed, err := decodeProto(k, v, body)
		if err != nil {
			return nil, nil, err
		}
		// The Go type's map, as its JSON would decode (a sixth of a
		// protobuf create's handling went to writing and reading that
		// JSON); the JSON itself for what the shortcut does not vouch
		// for.
		if obj, ok := registry.DecodeTyped(k, typed); ok {
			return obj, body, nil
		}
		data, err := json.Marshal(typed)
		if err != nil {
			return nil, nil, err
		}
		obj, err := decodeJSON(w, k, v, data, data, fv)
		return obj, body, err
	}
	obj, err := decodeJSON(w, k, v, body, raw, fv)
	return obj, body, err
}

// decodeJSON parses the JSON of a create or update body for kind k at
// version v, reporting unknown fields as the field validation directive
// fv says. raw is the body as sent (YAML before it was made JSON), which
// an error shows.
func decodeJSON(w http.ResponseWriter, k *registry.Kind, v string, body, raw []byte, fv fieldValidation) (*unstructured.Unstructured, error) {
	gv := k.GroupVersionKind(v).GroupVersion().String()
	// The body's apiVersion and kind come first, as the API's decoder
	// reads them: a malformed body, then a mismatch, are refused before
	// anything else. A scan finds them (a tenth of a create's handling
	// went to decoding the body for them); on any error the decode says
	// which, exactly as before.
	if k.Typed == nil {
		if err := checkCustomTypeMeta(body, raw, gv, k.Kind); err != nil {
			return nil, err
		}
	} else if a, kind, ok := storage.TypeMeta(body); !ok || (a != "" && a != gv) || (kind != "" && kind != k.Kind) {
		if err := checkTypeMeta(body, raw, gv, k.Kind); err != nil {
			return nil, err
		}
	}
	obj, strictErrs, err := registry.Decode(k, body)
	if err != nil {
		if err := checkTypeMeta(body, raw, gv, k.Kind); err != nil {
			return nil, err // malformed: the scan does not validate
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", k.Kind, v, k.Kind, err))
	}
	if len(strictErrs) > 0 {
		switch fv {
		case validationStrict:
			msgs := make([]string, len(strictErrs))
			for i, e := range strictErrs {
				msgs[i] = e.Error()
			}
			return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: strict decoding error: %s", k.Kind, v, k.Kind, strings.Join(msgs, ", ")))
		case validationWarn:
			warn := warner(w)
			for _, e := range strictErrs {
				warn(e.Error())
			}
		}
	}
	obj.SetAPIVersion(gv)
	if k.Typed != nil {
		// A custom resource keeps the kind it was sent with: another
		// kind of its group version is refused later (objectWrite).
		obj.SetKind(k.Kind)
	}
	return obj, nil
}

// checkCustomTypeMeta checks a custom resource's body as upstream's
// decoder of unstructured objects does: it must be an object, name a
// kind, and name the request's group version (its apiVersion is not
// defaulted, as a built-in kind's is). Another kind of that group
// version is left to validation, which refuses it with a 422.
func checkCustomTypeMeta(body, raw []byte, gv, kind string) error {
	a, sent, ok := storage.TypeMeta(body)
	if !ok {
		var err error
		if a, sent, err = probeTypeMeta(body, raw, kind); err != nil {
			return err
		}
	}
	if sent == "" {
		return unrecognized(kind, fmt.Sprintf("Object 'Kind' is missing in '%s'", raw), raw)
	}
	if a != gv {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", a, gv))
	}
	return nil
}

// checkTypeMeta decodes the body's apiVersion and kind and refuses a
// malformed body or one of another type than gv and kind.
func checkTypeMeta(body, raw []byte, gv, kind string) error {
	a, sent, err := probeTypeMeta(body, raw, kind)
	if err != nil {
		return err
	}
	if a != "" && a != gv {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", a, gv))
	}
	if sent != "" && sent != kind {
		if msg, ok := unknownConversion(gv, sent, kind); ok {
			return apierrors.NewBadRequest(msg)
		}
		return apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", sent, kind))
	}
	return nil
}

// unknownConversion is upstream's refusal of a body of another kind of
// the request's group version (a FlowSchema sent to
// prioritylevelconfigurations) that its scheme knows: the decoder reads
// the body as that kind, whose conversion to the resource's internal
// type does not exist. false: kplane does not know the kind sent.
func unknownConversion(gv, sent, kind string) (string, bool) {
	v, err := schema.ParseGroupVersion(gv)
	if err != nil || !protoScheme().Recognizes(v.WithKind(sent)) {
		return "", false
	}
	obj, err := protoScheme().New(v.WithKind(sent))
	if err != nil {
		return "", false
	}
	// Upstream's internal types are in a package named for the group
	// (core for the core group and events.k8s.io's Events).
	internal, _, _ := strings.Cut(v.Group, ".")
	if internal == "" || internal == "events" {
		internal = "core"
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: converting (%s) to (%s.%s): unknown conversion",
		sent, v.Version, kind, reflect.TypeOf(obj).Elem(), internal, kind), true
}

// probeTypeMeta decodes the apiVersion and kind of body, as upstream's
// decoder reads them first; a body that is not an object is refused in
// its words (unrecognized, showing raw, the body as sent).
func probeTypeMeta(body, raw []byte, kind string) (apiVersion, sent string, err error) {
	// Tagged as upstream's probe, whose Go type its errors show.
	var probe struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return "", "", unrecognized(kind, "couldn't get version/kind; json parse error: "+err.Error(), raw)
	}
	return probe.APIVersion, probe.Kind, nil
}

// decodeDeleteOptions reads DeleteOptions from the body (if any) and the
// query, as kube-apiserver does.
func (s *Server) decodeDeleteOptions(w http.ResponseWriter, r *http.Request) (metav1.DeleteOptions, error) {
	var opts metav1.DeleteOptions
	if r.ContentLength != 0 && r.Body != nil {
		body, isProto, err := s.readBodyProto(w, r)
		if err != nil {
			return opts, err
		}
		if isProto {
			if _, _, err := protoSerializer.Decode(body, nil, &opts); err != nil {
				return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid DeleteOptions: %v", err))
			}
		} else if len(bytes.TrimSpace(body)) > 0 {
			if err := json.Unmarshal(body, &opts); err != nil {
				return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid DeleteOptions: %v", err))
			}
			// Another kind is refused, before anything is deleted, with
			// the message of upstream's scheme.
			if opts.Kind != "" && opts.Kind != "DeleteOptions" {
				gv := cmp.Or(opts.APIVersion, "meta.k8s.io/v1")
				return opts, apierrors.NewBadRequest(fmt.Sprintf("no kind %q is registered for version %q in scheme %q", opts.Kind, gv, "pkg/runtime/scheme.go:111"))
			}
		}
	}
	q := r.URL.Query()
	if q.Has("dryRun") {
		opts.DryRun = q["dryRun"]
	}
	if v := q.Get("propagationPolicy"); v != "" {
		p := metav1.DeletionPropagation(v)
		opts.PropagationPolicy = &p
	}
	if v := q.Get("orphanDependents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid orphanDependents %q", v))
		}
		//lint:ignore SA1019 the legacy field clients still send
		opts.OrphanDependents = &b
	}
	if v := q.Get("gracePeriodSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", v))
		}
		opts.GracePeriodSeconds = &n
	}
	// The registry validates the combination (422 with causes).
	return opts, nil
}

// apply sets the write options of the directive: Strict refuses, Warn
// reports in Warning headers.
func (fv fieldValidation) apply(w http.ResponseWriter, o *registry.WriteOptions) {
	o.Strict = fv == validationStrict
	if fv == validationWarn {
		o.Warn = warner(w)
	}
}

// warner returns a function that adds a warning to w's answer, as
// upstream writes them: a Warning header "299 - <quoted text>".
// It may be called from several goroutines at once (admission webhooks
// run in parallel), but not once the answer is written.
func warner(w http.ResponseWriter) func(msg string) {
	var mu sync.Mutex
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}
}
