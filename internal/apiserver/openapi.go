package apiserver

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/builder3/util"
	"k8s.io/kube-openapi/pkg/schemamutation"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/openapi"
)

// The OpenAPI documents describe every served kind as kube-apiserver
// publishes it, for kubectl explain, client-side validation and the
// query-parameter checks clients make (kubectl sends ?fieldValidation to
// a server whose patch operations list it, and lets the server judge
// unknown fields):
//
//   - /openapi/v2 is one Swagger 2.0 document of every group version, in
//     JSON or, when asked (client-go's discovery client asks only for it),
//     in gnostic's protobuf form. Defaults are pruned from its schemas, as
//     kube-openapi's handler.PruneDefaults does upstream.
//   - /openapi/v3 lists each group version at
//     /openapi/v3/<api/v1|apis/group/version>?hash=<ETag>; each of those
//     is an OpenAPI 3.0 document of that group version's paths and the
//     schemas they reach. A $ref with siblings is wrapped in allOf
//     (kube-openapi's builder3/util.WrapRefs), as upstream.
//
// Built-in kinds are described from their Go types (package
// registry/openapi); custom resources from their CRD's schema
// (Kind.OpenAPI), as apiextensions-apiserver's
// pkg/controller/openapi/builder does: named <reversed group>.<version>.<Kind>,
// with x-kubernetes-group-version-kind, apiVersion, kind and metadata (a
// $ref to ObjectMeta) added, and a <ListKind> definition beside it. For v2
// the schema is first made something kubectl's v2 parser accepts, as
// pkg/controller/openapi/v2.ToStructuralOpenAPIV2 does.
//
// ETags are the uppercase hex SHA-512 of the JSON document, as
// kube-openapi's handler and handler3 compute them; a v3 request with a
// stale ?hash= is redirected (301) to the current one, and one with the
// current hash may be cached forever.
//
// The documents are built on the first request that needs them, not at
// startup, and kept until the set of served kinds changes: a CRD added,
// removed or changed replaces its *registry.Kind, so the slice of Kind
// pointers Registry.Resources returns is the cache key.

// openAPIDoc is one encoded document, kept gzip-compressed: the
// documents of a server with hundreds of CRDs are tens of MB of JSON
// (15 MB for /openapi/v2 with 300), and their schemas compress tenfold
// or more. Clients that accept gzip (client-go and kubectl do, through
// Go's transport) get the compressed bytes; others get them expanded.
type openAPIDoc struct {
	gz       []byte // the JSON document, gzip-compressed
	etag     string // uppercase hex SHA-512 of the JSON
	modified time.Time

	protoOnce sync.Once // v2 only: the protobuf form, encoded on first use
	protoGz   []byte    // gzip-compressed
	protoErr  error
}

func newOpenAPIDoc(v any, now time.Time) (*openAPIDoc, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512(data)
	gz, err := gzipBytes(data)
	if err != nil {
		return nil, err
	}
	return &openAPIDoc{gz: gz, etag: strings.ToUpper(fmt.Sprintf("%x", sum)), modified: now}, nil
}

// json is the document's JSON, expanded.
func (d *openAPIDoc) json() ([]byte, error) { return gunzipBytes(d.gz) }

// protobuf returns the document in gnostic's OpenAPI v2 protobuf form,
// which client-go's discovery client (OpenAPISchema) asks for,
// gzip-compressed.
func (d *openAPIDoc) protobuf() ([]byte, error) {
	d.protoOnce.Do(func() {
		data, err := d.json()
		if err != nil {
			d.protoErr = err
			return
		}
		doc, err := openapiv2.ParseDocument(data)
		if err != nil {
			d.protoErr = err
			return
		}
		pb, err := proto.Marshal(doc)
		if err != nil {
			d.protoErr = err
			return
		}
		d.protoGz, d.protoErr = gzipBytes(pb)
	})
	return d.protoGz, d.protoErr
}

// gzipBytes compresses b at gzip's default level: on these documents it
// is both smaller and quicker than BestSpeed (15 MB of /openapi/v2: 0.3 MB
// in 80 ms, against 1.4 MB in 86 ms), and a document is compressed once.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

func gunzipBytes(gz []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// openAPIDocs are the documents of one set of served kinds.
type openAPIDocs struct {
	kinds []*registry.Kind // the key: the kinds they describe, in Resources order
	// v2 builds the v2 document on first use: it is the largest (every
	// definition in one), and kubectl and client-go read v3.
	v2 func() (*openAPIDoc, error)
	v3 map[string]*openAPIDoc // by group version path ("api/v1", "apis/g/v")
	// v3Kinds are the kinds each v3 document describes: the next build
	// keeps a document whose kinds are the same (a CRD change rebuilds
	// its own group version's, not the hundreds of others).
	v3Kinds map[string][]*registry.Kind
	root    *openAPIDoc // the /openapi/v3 index
}

// openAPICache holds the documents of the latest set of served kinds.
type openAPICache struct {
	mu struct {
		sync.Mutex // guards docs; held while building, so concurrent requests build once
		docs       *openAPIDocs
	}
}

// openAPIDocs returns the documents of the kinds served now, built on the
// first call after the set of kinds changed.
func (s *Server) openAPIDocs() (*openAPIDocs, error) {
	resources := s.cfg.Registry.Resources()
	kinds := make([]*registry.Kind, len(resources))
	for i, res := range resources {
		kinds[i] = res.Kind()
	}
	c := &s.openapi
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.mu.docs; d != nil && sameKinds(d.kinds, kinds) {
		return d, nil
	}
	d, err := buildOpenAPI(kinds, c.mu.docs, s.Info().GitVersion, time.Now())
	if err != nil {
		return nil, err
	}
	c.mu.docs = d
	return d, nil
}

func sameKinds(a, b []*registry.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Media types of the OpenAPI v2 protobuf form; kube-openapi's handler
// accepts both and answers with the second.
const (
	mimeOpenAPIV2ProtoOld = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	mimeOpenAPIV2Proto    = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
)

// acceptedTypes returns the media types of Accept, highest quality first
// ("*/*" for an empty header).
func acceptedTypes(r *http.Request) []string {
	type clause struct {
		mt string
		q  float64
	}
	var cs []clause
	// Not mime.ParseMediaType: "spec.v2@v1.0" is no RFC 2045 token.
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		fields := strings.Split(part, ";")
		mt := strings.ToLower(strings.TrimSpace(fields[0]))
		if mt == "" {
			continue
		}
		q := 1.0
		for _, p := range fields[1:] {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if q > 0 {
			cs = append(cs, clause{mt, q})
		}
	}
	if len(cs) == 0 {
		return []string{"*/*"}
	}
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].q > cs[j].q })
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.mt
	}
	return out
}

func acceptsJSON(mt string) bool {
	return mt == "application/json" || mt == "application/*" || mt == "*/*"
}

// serveDoc writes gz, a gzip-compressed document, with d's ETag: as it
// is to a client that accepts gzip, expanded to others. http.ServeContent
// answers If-None-Match with 304.
func serveDoc(w http.ResponseWriter, r *http.Request, contentType string, d *openAPIDoc, gz []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Etag", strconv.Quote(d.etag))
	h.Add("Vary", "Accept-Encoding")
	data := gz
	if acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
	} else {
		var err error
		if data, err = gunzipBytes(gz); err != nil {
			h.Del("Etag")
			h.Del("Vary")
			writeError(w, apierrors.NewInternalError(err))
			return
		}
	}
	http.ServeContent(w, r, "", d.modified, bytes.NewReader(data))
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (or any coding) with a quality above zero.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := 1.0
			if k, val, ok := strings.Cut(strings.TrimSpace(params), "="); ok && strings.TrimSpace(k) == "q" {
				if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
					q = f
				}
			}
			if q > 0 {
				return true
			}
		}
	}
	return false
}

func (s *Server) openAPIV2(w http.ResponseWriter, r *http.Request) {
	docs, err := s.openAPIDocs()
	var v2 *openAPIDoc
	if err == nil {
		v2, err = docs.v2()
	}
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Add("Vary", "Accept")
	for _, mt := range acceptedTypes(r) {
		switch {
		case acceptsJSON(mt):
			serveDoc(w, r, "application/json", v2, v2.gz)
			return
		case mt == mimeOpenAPIV2Proto || mt == mimeOpenAPIV2ProtoOld:
			data, err := v2.protobuf()
			if err != nil {
				writeError(w, apierrors.NewInternalError(err))
				return
			}
			serveDoc(w, r, mimeOpenAPIV2Proto, v2, data)
			return
		}
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

// openAPIV3Root lists the group versions, each at a URL with the hash of
// its document, so clients can cache them.
func (s *Server) openAPIV3Root(w http.ResponseWriter, r *http.Request) {
	s.countPath(w, r, "openapi/v3", "")
	docs, err := s.openAPIDocs()
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	serveDoc(w, r, "application/json", docs.root, docs.root.gz)
}

func (s *Server) openAPIV3(w http.ResponseWriter, r *http.Request) {
	s.countPath(w, r, "openapi/v3/", "")
	docs, err := s.openAPIDocs()
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	gv := strings.TrimPrefix(r.URL.Path, "/openapi/v3/")
	d, ok := docs.v3[gv]
	if !ok {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
		return
	}
	w.Header().Add("Vary", "Accept")
	for _, mt := range acceptedTypes(r) {
		if !acceptsJSON(mt) {
			continue
		}
		if hash := r.URL.Query().Get("hash"); hash != "" {
			if hash != d.etag {
				http.Redirect(w, r, v3URL(gv, d.etag), http.StatusMovedPermanently)
				return
			}
			// The hash names this content for good (handler3 does the same).
			w.Header().Set("Cache-Control", "public, immutable")
			w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
		}
		serveDoc(w, r, "application/json", d, d.gz)
		return
	}
	w.WriteHeader(http.StatusNotAcceptable)
}

func v3URL(gv, etag string) string {
	return "/openapi/v3/" + gv + "?" + url.Values{"hash": {etag}}.Encode()
}

// openAPIGroupVersion is one group version's kinds.
type openAPIGroupVersion struct {
	group, version string
	kinds          []*registry.Kind
}

func (gv *openAPIGroupVersion) path() string {
	if gv.group == "" {
		return "api/" + gv.version
	}
	return "apis/" + gv.group + "/" + gv.version
}

// Definition names the operations refer to besides the kinds'.
const (
	defStatus        = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	defDeleteOptions = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	defPatch         = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
	defWatchEvent    = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"
	defScale         = "io.k8s.api.autoscaling.v1.Scale"
	defObjectMeta    = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	defListMeta      = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
)

// openAPIModel names each kind's and list kind's definition.
type openAPIModel struct {
	kind, list map[schema.GroupVersionKind]string
}

// buildOpenAPI builds every document for kinds; prev, when not nil, are
// the documents of the kinds before, whose v3 documents are kept where
// they describe the same kinds (all of them kept only while the
// built-in kinds, which every document's shared definitions come from,
// are the same).
func buildOpenAPI(kinds []*registry.Kind, prev *openAPIDocs, gitVersion string, now time.Time) (*openAPIDocs, error) {
	if prev != nil && !sameKinds(builtIn(prev.kinds), builtIn(kinds)) {
		prev = nil
	}
	// The built-in kinds, their lists and Status, from their Go types, and
	// what the operations read and write besides the kinds: the body of a
	// delete, the events of a watch, the Scale of a /scale subresource.
	// Upstream lists DeleteOptions and WatchEvent under every built-in
	// group version, the core one always.
	typed := map[schema.GroupVersionKind]runtime.Object{
		// Status, as upstream registers it: in the core group.
		{Version: "v1", Kind: "Status"}:                    &metav1.Status{},
		{Version: "v1", Kind: "DeleteOptions"}:             &metav1.DeleteOptions{},
		{Version: "v1", Kind: "WatchEvent"}:                &metav1.WatchEvent{},
		autoscalingv1.SchemeGroupVersion.WithKind("Scale"): &autoscalingv1.Scale{},
	}
	for _, k := range kinds {
		if k.Typed == nil {
			continue
		}
		for _, sk := range k.ReviewSubresources {
			typed[sk.GroupVersionKind(sk.StorageVersion())] = sk.Typed() // a TokenRequest
		}
		for _, v := range k.Versions {
			gv := schema.GroupVersion{Group: k.Group, Version: v}
			typed[gv.WithKind("DeleteOptions")] = &metav1.DeleteOptions{}
			typed[gv.WithKind("WatchEvent")] = &metav1.WatchEvent{}
			typed[k.GroupVersionKind(v)] = k.Typed()
			listGVK := schema.GroupVersionKind{Group: k.Group, Version: v, Kind: k.ListKind}
			if list, err := protoScheme().New(listGVK); err == nil {
				typed[listGVK] = list
			}
		}
	}
	defsV3, err := openapi.Definitions(typed, openapi.V3RefPrefix)
	if err != nil {
		return nil, err
	}
	// metav1.Patch is no runtime.Object; its definition is a bare object.
	defsV3[defPatch] = patchSchema()
	model := openAPIModel{kind: map[schema.GroupVersionKind]string{}, list: map[schema.GroupVersionKind]string{}}
	for name, def := range defsV3 {
		for _, gvk := range gvksOf(def) {
			if isListOf(kinds, gvk) {
				model.list[gvk] = name
			} else {
				model.kind[gvk] = name
			}
		}
	}

	// Custom resources, from their CRDs' schemas (their definitions are
	// made with their group version's document).
	for _, k := range kinds {
		if k.Typed != nil {
			continue
		}
		for _, v := range k.Versions {
			model.kind[k.GroupVersionKind(v)] = crModelName(k.Group, v, k.Kind)
			model.list[schema.GroupVersionKind{Group: k.Group, Version: v, Kind: k.ListKind}] = crModelName(k.Group, v, k.ListKind)
		}
	}

	// Group versions, in a stable order.
	byPath := map[string]*openAPIGroupVersion{}
	var gvs []*openAPIGroupVersion
	for _, k := range kinds {
		for _, v := range k.Versions {
			gv := &openAPIGroupVersion{group: k.Group, version: v}
			if prev, ok := byPath[gv.path()]; ok {
				gv = prev
			} else {
				byPath[gv.path()] = gv
				gvs = append(gvs, gv)
			}
			gv.kinds = append(gv.kinds, k)
		}
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].path() < gvs[j].path() })

	info := map[string]any{"title": "Kubernetes", "version": gitVersion}
	docs := &openAPIDocs{kinds: kinds, v3: map[string]*openAPIDoc{}, v3Kinds: map[string][]*registry.Kind{}}

	// v2: one document, defaults pruned, built when first asked for.
	docs.v2 = sync.OnceValues(func() (*openAPIDoc, error) {
		defsV2, err := openapi.Definitions(typed, openapi.V2RefPrefix)
		if err != nil {
			return nil, err
		}
		defsV2[defPatch] = patchSchema()
		for _, k := range kinds {
			if k.Typed != nil {
				continue
			}
			for _, v := range k.Versions {
				name, listName := crModelName(k.Group, v, k.Kind), crModelName(k.Group, v, k.ListKind)
				defsV2[name] = crSchema(k, v, true)
				defsV2[listName] = crListSchema(k, v, name, openapi.V2RefPrefix)
			}
		}
		pathsV2 := map[string]any{}
		for _, gv := range gvs {
			for _, k := range gv.kinds {
				addPaths(pathsV2, gv, k, model, false)
			}
		}
		for name, def := range defsV2 {
			defsV2[name] = pruneDefaults(def)
		}
		return newOpenAPIDoc(map[string]any{
			"swagger": "2.0", "info": info, "paths": pathsV2, "definitions": defsV2,
			"securityDefinitions": map[string]any{"BearerToken": map[string]any{
				"type": "apiKey", "name": "authorization", "in": "header",
				"description": "Bearer Token authentication",
			}},
			"security": []any{map[string]any{"BearerToken": []string{}}},
		}, now)
	})

	// v3: a document per group version, with the schemas its paths reach.
	rootPaths := map[string]any{}
	for _, gv := range gvs {
		docs.v3Kinds[gv.path()] = gv.kinds
		if d := prev.v3Doc(gv.path(), gv.kinds); d != nil {
			docs.v3[gv.path()] = d
			rootPaths[gv.path()] = map[string]string{"serverRelativeURL": v3URL(gv.path(), d.etag)}
			continue
		}
		paths := map[string]any{}
		for _, k := range gv.kinds {
			addPaths(paths, gv, k, model, true)
			if k.Typed == nil {
				name, listName := crModelName(k.Group, gv.version, k.Kind), crModelName(k.Group, gv.version, k.ListKind)
				defsV3[name] = crSchema(k, gv.version, false)
				defsV3[listName] = crListSchema(k, gv.version, name, openapi.V3RefPrefix)
			}
		}
		schemas := map[string]*spec.Schema{}
		for _, name := range reachable(paths, defsV3) {
			schemas[name] = util.WrapRefs(defsV3[name])
			if name == defDeleteOptions || name == defWatchEvent {
				schemas[name] = gvksFor(schemas[name], gv.group)
			}
		}
		d, err := newOpenAPIDoc(map[string]any{
			"openapi": "3.0.0", "info": info, "paths": paths,
			"components": map[string]any{
				"schemas": schemas,
				"securitySchemes": map[string]any{"BearerToken": map[string]any{
					"type": "apiKey", "name": "authorization", "in": "header",
					"description": "Bearer Token authentication",
				}},
			},
		}, now)
		if err != nil {
			return nil, err
		}
		docs.v3[gv.path()] = d
		rootPaths[gv.path()] = map[string]string{"serverRelativeURL": v3URL(gv.path(), d.etag)}
	}
	if docs.root, err = newOpenAPIDoc(map[string]any{"paths": rootPaths}, now); err != nil {
		return nil, err
	}
	return docs, nil
}

// v3Doc returns the v3 document at path when it describes kinds, the
// same *registry.Kind values in the same order; else nil. A nil d has
// none.
func (d *openAPIDocs) v3Doc(path string, kinds []*registry.Kind) *openAPIDoc {
	if d == nil || !sameKinds(d.v3Kinds[path], kinds) {
		return nil
	}
	return d.v3[path]
}

// builtIn are the kinds of kinds described by their Go types.
func builtIn(kinds []*registry.Kind) []*registry.Kind {
	var out []*registry.Kind
	for _, k := range kinds {
		if k.Typed != nil {
			out = append(out, k)
		}
	}
	return out
}

// gvksFor is a copy of def (DeleteOptions, WatchEvent: every group's)
// whose x-kubernetes-group-version-kind names only the core group and
// group, as upstream's document of a group version names them.
func gvksFor(def *spec.Schema, group string) *spec.Schema {
	out := *def
	out.Extensions = spec.Extensions{}
	for k, v := range def.Extensions {
		out.Extensions[k] = v
	}
	var keep []any
	for _, gvk := range gvksOf(def) {
		if gvk.Group == "" || gvk.Group == group {
			keep = append(keep, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
	}
	out.Extensions["x-kubernetes-group-version-kind"] = keep
	return &out
}

// gvksOf reads a definition's x-kubernetes-group-version-kind.
func gvksOf(def *spec.Schema) []schema.GroupVersionKind {
	list, _ := def.Extensions["x-kubernetes-group-version-kind"].([]any)
	var out []schema.GroupVersionKind
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			g, _ := m["group"].(string)
			v, _ := m["version"].(string)
			k, _ := m["kind"].(string)
			out = append(out, schema.GroupVersionKind{Group: g, Version: v, Kind: k})
		}
	}
	return out
}

// isListOf reports whether gvk is the list kind of one of kinds.
func isListOf(kinds []*registry.Kind, gvk schema.GroupVersionKind) bool {
	for _, k := range kinds {
		if k.Group == gvk.Group && k.ListKind == gvk.Kind && k.Serves(gvk.Version) {
			return true
		}
	}
	return false
}

// reachable returns the names of the definitions the paths refer to,
// directly or through other definitions, sorted.
func reachable(paths map[string]any, defs map[string]*spec.Schema) []string {
	seen := map[string]bool{}
	var visit func(name string)
	collect := &schemamutation.Walker{
		SchemaCallback: schemamutation.SchemaCallBackNoop,
		RefCallback: func(ref *spec.Ref) *spec.Ref {
			visit(strings.TrimPrefix(ref.String(), openapi.V3RefPrefix))
			return ref
		},
	}
	visit = func(name string) {
		if seen[name] || defs[name] == nil {
			return
		}
		seen[name] = true
		collect.WalkSchema(defs[name])
	}
	// The paths hold their $refs as strings.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				visit(strings.TrimPrefix(ref, openapi.V3RefPrefix))
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(paths)
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// pruneDefaults returns s without any default, as the v2 document
// publishes schemas (kube-openapi's handler.PruneDefaults).
func pruneDefaults(s *spec.Schema) *spec.Schema {
	w := &schemamutation.Walker{
		SchemaCallback: func(s *spec.Schema) *spec.Schema {
			if s.Default == nil {
				return s
			}
			c := *s
			c.Default = nil
			return &c
		},
		RefCallback: schemamutation.RefCallbackNoop,
	}
	return w.WalkSchema(s)
}

// Operations.

// operationName is the group and version part of upstream's operation
// IDs: "CoreV1", "CoordinationV1", "RbacAuthorizationV1", "WebappMyDomainV1".
func operationName(group, version string) string {
	if group == "" {
		group = "core"
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(group+"."+version, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// addPaths adds kind k's operations in gv to paths, in the v3 form or the
// v2 form.
func addPaths(paths map[string]any, gv *openAPIGroupVersion, k *registry.Kind, model openAPIModel, v3 bool) {
	prefix := openapi.V2RefPrefix
	if v3 {
		prefix = openapi.V3RefPrefix
	}
	gvk := k.GroupVersionKind(gv.version)
	ref := func(name string) map[string]any {
		if name == "" {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"$ref": prefix + name}
	}
	obj := ref(model.kind[gvk])
	list := ref(model.list[schema.GroupVersionKind{Group: k.Group, Version: gv.version, Kind: k.ListKind}])
	status := ref(defStatus)

	param := func(name, in, typ, desc string) map[string]any {
		p := map[string]any{"name": name, "in": in, "description": desc}
		if v3 {
			p["schema"] = map[string]any{"type": typ, "uniqueItems": true}
		} else {
			p["type"], p["uniqueItems"] = typ, true
		}
		if in == "path" {
			p["required"] = true
		}
		return p
	}
	query := func(name, typ string) map[string]any { return param(name, "query", typ, queryDocs[name]) }
	write := []map[string]any{query("dryRun", "string"), query("fieldManager", "string"), query("fieldValidation", "string")}
	listParams := []map[string]any{query("allowWatchBookmarks", "boolean"), query("continue", "string"), query("fieldSelector", "string"),
		query("labelSelector", "string"), query("limit", "integer"), query("resourceVersion", "string"),
		query("resourceVersionMatch", "string"), query("sendInitialEvents", "boolean"), query("timeoutSeconds", "integer"), query("watch", "boolean")}
	deleteParams := []map[string]any{query("dryRun", "string"), query("gracePeriodSeconds", "integer"),
		query("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean"), query("orphanDependents", "boolean"), query("propagationPolicy", "string")}

	opID := operationName(k.Group, gv.version)
	namespaced := ""
	if k.Namespaced {
		namespaced = "Namespaced"
	}
	// op builds one operation. body is the request body's schema (nil for
	// none); codes are the success codes, each answered with resp.
	op := func(verb, action, sub string, body, resp map[string]any, codes []string, params ...map[string]any) map[string]any {
		id := verb + opID + namespaced + k.Kind + sub
		if verb == "deletecollection" {
			id = "delete" + opID + "Collection" + namespaced + k.Kind + sub // upstream's form
		}
		o := map[string]any{
			"operationId":                     id,
			"description":                     operationDescription(verb, sub, k.Kind),
			"tags":                            []string{strings.ToLower(opID[:1]) + opID[1:]},
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": map[string]string{"group": k.Group, "version": gv.version, "kind": k.Kind},
		}
		ps := make([]any, 0, len(params)+1)
		for _, p := range params {
			ps = append(ps, p)
		}
		responses := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
		for _, code := range codes {
			desc := map[string]string{"200": "OK", "201": "Created", "202": "Accepted"}[code]
			if v3 {
				responses[code] = map[string]any{"description": desc, "content": map[string]any{
					"application/json": map[string]any{"schema": resp}, "application/yaml": map[string]any{"schema": resp},
				}}
			} else {
				responses[code] = map[string]any{"description": desc, "schema": resp}
			}
		}
		o["responses"] = responses
		consumes := []string{"*/*"}
		if verb == "patch" {
			consumes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
			if k.Typed == nil {
				consumes = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
			}
		}
		if body != nil {
			// A delete's DeleteOptions body is optional.
			required := action != "delete" && action != "deletecollection"
			if v3 {
				content := map[string]any{}
				for _, c := range consumes {
					content[c] = map[string]any{"schema": body}
				}
				rb := map[string]any{"content": content}
				if required {
					rb["required"] = true
				}
				o["requestBody"] = rb
			} else {
				bp := map[string]any{"name": "body", "in": "body", "schema": body}
				if required {
					bp["required"] = true
				}
				ps = append([]any{bp}, ps...)
			}
		}
		if !v3 {
			o["consumes"] = consumes
			o["produces"] = []string{"application/json", "application/yaml"}
			o["schemes"] = []string{"https"}
		}
		o["parameters"] = ps
		return o
	}
	patchBody := ref(defPatch)
	deleteBody := ref(defDeleteOptions)
	watchEvent := ref(defWatchEvent)
	scale := ref(defScale)
	pathParams := func(name bool) []any {
		var ps []any
		if name {
			ps = append(ps, param("name", "path", "string", "name of the "+k.Kind))
		}
		if k.Namespaced {
			ps = append(ps, param("namespace", "path", "string", "object name and auth scope, such as for teams and projects"))
		}
		return append(ps, query("pretty", "string"))
	}

	// The deprecated /watch/ paths, which upstream publishes for built-in
	// kinds only (apiextensions-apiserver's builder has no watch routes).
	// watch builds one of their operations.
	watch := func(name bool, id string) map[string]any {
		action, desc := "watchlist", "watch individual changes to a list of "+k.Kind+". deprecated: use the 'watch' parameter with a list operation instead."
		if name {
			action, desc = "watch", "watch changes to an object of kind "+k.Kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
		}
		o := withID(op("watch", action, "", nil, watchEvent, []string{"200"}, listParams...), id)
		o["description"] = desc
		return streams(o, v3)
	}
	if k.Review != nil {
		// A review is created and answered, never stored: its collection
		// takes creates, and that is all.
		collection := "/" + gv.path() + "/" + k.Resource
		if k.Namespaced {
			collection = "/" + gv.path() + "/namespaces/{namespace}/" + k.Resource
		}
		paths[collection] = map[string]any{
			"post":       op("create", "post", "", obj, obj, []string{"200", "201", "202"}, write...),
			"parameters": pathParams(false),
		}
		return
	}
	watchRoot := "/" + gv.path() + "/watch/"
	// A built-in kind's list also answers as a watch stream
	// (?watch=true), which upstream lists among what it produces; a
	// custom resource's list operation lists JSON and YAML only.
	listOp := func(o map[string]any) map[string]any {
		if k.Typed == nil {
			return o
		}
		return streams(o, v3)
	}

	root := "/" + gv.path() + "/"
	if k.Namespaced {
		paths[root+k.Resource] = map[string]any{
			"get":        listOp(withID(op("list", "list", "", nil, list, []string{"200"}, listParams...), "list"+opID+k.Kind+"ForAllNamespaces")),
			"parameters": []any{query("pretty", "string")},
		}
		if k.Typed != nil {
			paths[watchRoot+k.Resource] = map[string]any{
				"get":        watch(false, "watch"+opID+k.Kind+"ListForAllNamespaces"),
				"parameters": []any{query("pretty", "string")},
			}
			watchRoot += "namespaces/{namespace}/"
		}
		root += "namespaces/{namespace}/"
	}
	if k.Typed != nil {
		paths[watchRoot+k.Resource] = map[string]any{
			"get":        watch(false, "watch"+opID+namespaced+k.Kind+"List"),
			"parameters": pathParams(false),
		}
		paths[watchRoot+k.Resource+"/{name}"] = map[string]any{
			"get":        watch(true, "watch"+opID+namespaced+k.Kind),
			"parameters": pathParams(true),
		}
	}
	collection := map[string]any{
		"get":        listOp(op("list", "list", "", nil, list, []string{"200"}, listParams...)),
		"post":       op("create", "post", "", obj, obj, []string{"200", "201", "202"}, write...),
		"parameters": pathParams(false),
	}
	if !k.NoDeleteCollection {
		collection["delete"] = op("deletecollection", "deletecollection", "", deleteBody, status, []string{"200"}, append(deleteParams, listParams...)...)
	}
	paths[root+k.Resource] = collection
	paths[root+k.Resource+"/{name}"] = map[string]any{
		"get":        op("read", "get", "", nil, obj, []string{"200"}),
		"put":        op("replace", "put", "", obj, obj, []string{"200", "201"}, write...),
		"patch":      op("patch", "patch", "", patchBody, obj, []string{"200", "201"}, append(write, query("force", "boolean"))...),
		"delete":     op("delete", "delete", "", deleteBody, status, []string{"200", "202"}, deleteParams...),
		"parameters": pathParams(true),
	}
	if k.ScaleIn(gv.version) != nil {
		paths[root+k.Resource+"/{name}/scale"] = map[string]any{
			"get":        op("read", "get", "Scale", nil, scale, []string{"200"}),
			"put":        op("replace", "put", "Scale", scale, scale, []string{"200", "201"}, write...),
			"patch":      op("patch", "patch", "Scale", patchBody, scale, []string{"200", "201"}, append(write, query("force", "boolean"))...),
			"parameters": pathParams(true),
		}
	}
	for sub, sk := range k.ReviewSubresources {
		// A create of another kind, answered (serviceaccounts/token).
		sgvk := sk.GroupVersionKind(sk.StorageVersion())
		sobj := ref(model.kind[sgvk])
		create := op("create", "post", strings.ToUpper(sub[:1])+sub[1:], sobj, sobj, []string{"200", "201", "202"}, write...)
		create["x-kubernetes-group-version-kind"] = map[string]string{"group": sgvk.Group, "version": sgvk.Version, "kind": sgvk.Kind}
		paths[root+k.Resource+"/{name}/"+sub] = map[string]any{
			"post":       create,
			"parameters": pathParams(true),
		}
	}
	if k.Finalize {
		paths[root+k.Resource+"/{name}/finalize"] = map[string]any{
			"put":        op("replace", "put", "Finalize", obj, obj, []string{"200", "201"}, write...),
			"parameters": pathParams(true),
		}
	}
	subs := slices.Clone(k.UpdateSubresources)
	if k.StatusIn(gv.version) {
		subs = append(subs, "status")
	}
	for _, sub := range subs {
		title := strings.ToUpper(sub[:1]) + sub[1:]
		paths[root+k.Resource+"/{name}/"+sub] = map[string]any{
			"get":        op("read", "get", title, nil, obj, []string{"200"}),
			"put":        op("replace", "put", title, obj, obj, []string{"200", "201"}, write...),
			"patch":      op("patch", "patch", title, patchBody, obj, []string{"200", "201"}, append(write, query("force", "boolean"))...),
			"parameters": pathParams(true),
		}
	}
}

// streams adds the watch stream media type to what operation o produces.
func streams(o map[string]any, v3 bool) map[string]any {
	const stream = "application/json;stream=watch"
	if !v3 {
		o["produces"] = append(o["produces"].([]string), stream)
		return o
	}
	for _, r := range o["responses"].(map[string]any) {
		if content, ok := r.(map[string]any)["content"].(map[string]any); ok {
			content[stream] = content["application/json"]
		}
	}
	return o
}

// patchSchema is metav1.Patch's definition, which upstream generates
// from the empty struct.
func patchSchema() *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        []string{"object"},
		Description: metav1.Patch{}.SwaggerDoc()[""],
	}}
}

func withID(op map[string]any, id string) map[string]any {
	op["operationId"] = id
	return op
}

// operationDescription is upstream's summary of an operation
// ("read the specified ConfigMap", "partially update status of the
// specified Foo").
func operationDescription(verb, sub, kind string) string {
	if sub != "" {
		sub = " " + strings.ToLower(sub) + " of"
	}
	switch verb {
	case "list":
		return "list or watch objects of kind " + kind
	case "read", "replace":
		return verb + sub + " the specified " + kind
	case "patch":
		return "partially update" + sub + " the specified " + kind
	case "deletecollection":
		return "delete collection of " + kind
	case "delete":
		return "delete " + article(kind) + kind
	default:
		return verb + sub + " " + article(kind) + kind
	}
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("AEIOU", rune(noun[0])) {
		return "an "
	}
	return "a "
}

// queryDocs describes the query parameters, in the words of the
// apimachinery option types' field docs.
var queryDocs = func() map[string]string {
	docs := map[string]string{}
	for _, m := range []map[string]string{
		metav1.ListOptions{}.SwaggerDoc(), metav1.DeleteOptions{}.SwaggerDoc(),
		metav1.CreateOptions{}.SwaggerDoc(), metav1.PatchOptions{}.SwaggerDoc(),
	} {
		for k, v := range m {
			if k != "" {
				docs[k] = v
			}
		}
	}
	docs["pretty"] = "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."
	return docs
}()

// Custom resources.

// crModelName is the definition name apiextensions-apiserver gives a
// custom kind: the group reversed, then version and kind
// ("my.domain.webapp.v1.Foo" for webapp.my.domain/v1 Foo).
func crModelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + kind
}

var (
	typeMetaDocs    = metav1.TypeMeta{}.SwaggerDoc()
	objectMetaDoc   = metav1.PartialObjectMetadata{}.SwaggerDoc()["metadata"]
	listMetaDoc     = metav1.PartialObjectMetadataList{}.SwaggerDoc()["metadata"]
	apiVersionEmbed = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
	kindEmbed       = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)

func stringProp(desc string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Description: desc}}
}

func refProp(ref, desc string) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(ref), Description: desc}}
}

// crSchema is the definition of custom kind k in version v, as
// apiextensions-apiserver's builder.buildKubeNative makes it.
func crSchema(k *registry.Kind, v string, v2 bool) *spec.Schema {
	prefix := openapi.V3RefPrefix
	if v2 {
		prefix = openapi.V2RefPrefix
	}
	var out, src *spec.Schema
	if k.OpenAPI != nil {
		src = k.OpenAPI(v)
	}
	switch {
	case src == nil:
		// Without a schema kubectl must not assume the object has only
		// apiVersion, kind and metadata.
		out = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	case v2 && preservesUnknown(src):
		// kubectl's v2 validation would refuse fields outside properties.
		out = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	default:
		out = cloneSchema(src)
		if v2 {
			toV2(out)
		} else {
			unfoldIntOrString(out)
		}
		out.SetProperty("metadata", refProp(prefix+defObjectMeta, objectMetaDoc))
		out.SetProperty("apiVersion", stringProp(typeMetaDocs["apiVersion"]))
		out.SetProperty("kind", stringProp(typeMetaDocs["kind"]))
		addEmbedded(out, prefix, v2)
	}
	out.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": k.Group, "version": v, "kind": k.Kind}})
	addSelectableFields(out, k, v)
	return out
}

// addSelectableFields lists the version's selectable fields on its kind's
// and list kind's definitions, as upstream's builder does
// (x-kubernetes-selectable-fields, fieldPath without the leading dot).
func addSelectableFields(s *spec.Schema, k *registry.Kind, v string) {
	names := k.VersionFields[v]
	if len(names) == 0 {
		return
	}
	fields := make([]any, len(names))
	for i, n := range names {
		fields[i] = map[string]any{"fieldPath": n}
	}
	s.AddExtension("x-kubernetes-selectable-fields", fields)
}

// crListSchema is the definition of k's list kind in version v
// (builder.buildListSchema).
func crListSchema(k *registry.Kind, v, itemName, prefix string) *spec.Schema {
	s := &spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        []string{"object"},
		Description: k.ListKind + " is a list of " + k.Kind,
		Required:    []string{"items"},
	}}
	items := spec.Schema{SchemaProps: spec.SchemaProps{
		Type:        []string{"array"},
		Description: "List of " + k.Resource + ". More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
		Items:       &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(prefix + itemName)}}},
	}}
	s.SetProperty("items", items)
	s.SetProperty("metadata", refProp(prefix+defListMeta, listMetaDoc))
	s.SetProperty("apiVersion", stringProp(typeMetaDocs["apiVersion"]))
	s.SetProperty("kind", stringProp(typeMetaDocs["kind"]))
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": k.Group, "version": v, "kind": k.ListKind}})
	addSelectableFields(s, k, v)
	return s
}

func cloneSchema(s *spec.Schema) *spec.Schema {
	data, err := json.Marshal(s)
	if err != nil {
		panic(err) // a spec.Schema always encodes
	}
	out := &spec.Schema{}
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

func boolExt(s *spec.Schema, name string) bool {
	b, _ := s.Extensions.GetBool(name)
	return b
}

func preservesUnknown(s *spec.Schema) bool {
	return boolExt(s, "x-kubernetes-preserve-unknown-fields")
}

func hasType(s *spec.Schema, typ string) bool {
	return len(s.Type) == 1 && s.Type[0] == typ
}

// forEachChild calls f on each schema directly below s that a structural
// schema may have: properties, items, additionalProperties.
func forEachChild(s *spec.Schema, f func(*spec.Schema)) {
	for name, p := range s.Properties {
		f(&p)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		f(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		f(s.AdditionalProperties.Schema)
	}
}

// toV2 makes s, in place, a schema kubectl's OpenAPI v2 parser takes, as
// apiextensions-apiserver's v2.ToStructuralOpenAPIV2 does: no junctors; a
// nullable value loses its type and its shape; a value that keeps unknown
// fields loses its properties and items (and its object type); an array
// without items loses its type; a nullable field is not required.
func toV2(s *spec.Schema) {
	s.AllOf, s.AnyOf, s.OneOf, s.Not = nil, nil, nil, nil
	if s.Nullable {
		s.Type, s.Nullable = nil, false
		s.Items, s.Properties = nil, nil
	}
	preserve := preservesUnknown(s)
	if preserve {
		s.Items, s.Properties = nil, nil
	}
	if s.Items == nil && hasType(s, "array") {
		s.Type = nil
	}
	if preserve && hasType(s, "object") {
		s.Type = nil
	}
	for name, p := range s.Properties {
		if p.Nullable {
			s.Required = without(s.Required, name)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && s.AdditionalProperties.Schema.Nullable {
		s.Required = nil
	}
	forEachChild(s, toV2)
}

func without(list []string, x string) []string {
	var out []string
	for _, e := range list {
		if e != x {
			out = append(out, e)
		}
	}
	return out
}

// intOrStringAnyOf is what an x-kubernetes-int-or-string value is
// published with in v3 (structural schema's Unfold).
func intOrStringAnyOf() []spec.Schema {
	return []spec.Schema{
		{SchemaProps: spec.SchemaProps{Type: []string{"integer"}}},
		{SchemaProps: spec.SchemaProps{Type: []string{"string"}}},
	}
}

func isIntOrStringAnyOf(list []spec.Schema) bool {
	return len(list) == 2 && hasType(&list[0], "integer") && hasType(&list[1], "string")
}

// unfoldIntOrString gives each x-kubernetes-int-or-string value the
// anyOf of integer and string, unless it spells it out already.
func unfoldIntOrString(s *spec.Schema) {
	if boolExt(s, "x-kubernetes-int-or-string") {
		switch {
		case isIntOrStringAnyOf(s.AnyOf), len(s.AllOf) > 0 && isIntOrStringAnyOf(s.AllOf[0].AnyOf):
		case s.AnyOf == nil:
			s.AnyOf = intOrStringAnyOf()
		default:
			s.AllOf = append([]spec.Schema{{SchemaProps: spec.SchemaProps{AnyOf: intOrStringAnyOf()}}}, s.AllOf...)
		}
	}
	forEachChild(s, unfoldIntOrString)
}

// addEmbedded gives each x-kubernetes-embedded-resource value apiVersion,
// kind and metadata, and requires apiVersion and kind
// (builder.addEmbeddedProperties). In v2 a value that keeps unknown
// fields is left alone: kubectl would refuse the fields it does not list.
func addEmbedded(s *spec.Schema, prefix string, v2 bool) {
	forEachChild(s, func(c *spec.Schema) { addEmbedded(c, prefix, v2) })
	if v2 && preservesUnknown(s) {
		return
	}
	if !boolExt(s, "x-kubernetes-embedded-resource") {
		return
	}
	s.SetProperty("apiVersion", stringProp(apiVersionEmbed))
	s.SetProperty("kind", stringProp(kindEmbed))
	s.SetProperty("metadata", refProp(prefix+defObjectMeta, objectMetaDoc))
	for _, f := range []string{"kind", "apiVersion"} {
		if !contains(s.Required, f) {
			s.Required = append(s.Required, f)
		}
	}
}

func contains(list []string, x string) bool {
	for _, e := range list {
		if e == x {
			return true
		}
	}
	return false
}
