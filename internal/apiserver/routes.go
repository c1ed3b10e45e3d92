package apiserver

import (
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// methods is a set of HTTP methods: those kube-apiserver installs on one
// shape of path. A method outside the set gets 405, and a path with no
// set at all 404, both before the request is counted in the metrics, as
// upstream's router answers them before its instrumented handlers.
type methods uint8

const (
	mGet methods = 1 << iota
	mPost
	mPut
	mPatch
	mDelete
)

// allows reports whether the set holds method. HEAD and OPTIONS are in
// no set: kube-apiserver answers both with 405 on its resources.
func (m methods) allows(method string) bool {
	var bit methods
	switch method {
	case http.MethodGet:
		bit = mGet
	case http.MethodPost:
		bit = mPost
	case http.MethodPut:
		bit = mPut
	case http.MethodPatch:
		bit = mPatch
	case http.MethodDelete:
		bit = mDelete
	}
	return m&bit != 0
}

// installed returns the methods served on ri's path for kind k, or 0
// where kube-apiserver installs no route:
//   - a collection in a namespace, or of a cluster-scoped kind: GET (list,
//     watch), POST (create) and DELETE (deletecollection), unless the kind
//     has no deletecollection;
//   - a namespaced kind across all namespaces: GET only, so that no
//     request creates there or deletes everything in every namespace,
//     and no object of it is addressed outside its namespace;
//   - an object: GET, PUT, PATCH and DELETE;
//   - the legacy /watch/ form of either: GET;
//   - /status and /scale of a kind that has them: GET, PUT and PATCH;
//     /finalize: PUT. Deleting through a subresource deletes nothing;
//   - a review's collection (Kind.Review), and a review subresource
//     (Kind.ReviewSubresources, serviceaccounts/token): POST only.
func installed(ri requestInfo, k *registry.Kind) methods {
	if k.Review != nil {
		// A review's collection takes creates; nothing else is there.
		if ri.name == "" && ri.subresource == "" && !ri.watchPrefix && ri.namespacedCollection == k.Namespaced {
			return mPost
		}
		return 0
	}
	switch {
	case ri.namespacedCollection && !k.Namespaced:
		return 0
	case k.Namespaced && !ri.namespacedCollection:
		if ri.name != "" {
			return 0
		}
		return mGet
	case ri.subresource != "":
		if ri.name == "" || ri.watchPrefix {
			return 0
		}
		switch {
		case ri.subresource == "status" && k.StatusIn(ri.version), ri.subresource == "scale" && k.ScaleIn(ri.version) != nil,
			slices.Contains(k.UpdateSubresources, ri.subresource):
			return mGet | mPut | mPatch
		case ri.subresource == "finalize" && k.Finalize:
			return mPut
		case k.ReviewSubresources[ri.subresource] != nil:
			return mPost
		}
		return 0
	case ri.watchPrefix:
		return mGet
	case ri.name != "":
		return mGet | mPut | mPatch | mDelete
	case k.NoDeleteCollection:
		return mGet | mPost
	}
	return mGet | mPost | mDelete
}

// The answers of kube-apiserver's router where no route matches (a
// resource, version or subresource it does not serve), the route has no
// handler for the method, or none consumes the media type of a patch: the
// same generic Status for every path.
var (
	errNoRoute          = apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
	errMethodNotAllowed = apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
	errUnsupportedPatch = apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", "415: Unsupported Media Type", 0, false)
)

// noGroup answers a path under /apis/<group>/ for a group not served. No
// handler of kube-apiserver claims such a path, so its last one answers
// with Go's plain-text 404, not a Status.
func noGroup(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }

// noRoute answers a path under /api/ or /apis/<group>/ that names nothing
// served: the generic 404 in a group of built-in kinds, as upstream's
// router answers; noGroup's where the group is not served, or holds only
// custom resources (upstream's CRD handler passes a resource or version
// it does not know on, to the plain 404: a deleted CRD's path). Only such
// paths pay for looking the group up.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request, group string) {
	for _, res := range s.cfg.Registry.Resources() {
		if k := res.Kind(); k.Group == group && k.Typed != nil {
			writeError(w, errNoRoute)
			return
		}
	}
	if group == "" {
		writeError(w, errNoRoute) // /api/...: the core group's paths
		return
	}
	noGroup(w, r)
}

// route serves r by the server's mux, except a path that is not clean
// (an empty segment, "." or ".."), which Go's mux would redirect to its
// clean form (307, which a client follows with the same method and
// body). kube-apiserver never redirects: see unclean.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; strings.Contains(p, "//") || strings.Contains(p, "/.") && !cleanDots(p) {
		s.unclean(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// cleanDots reports whether p, which has a "/.", has no "." or ".."
// segment (it may have names that start with a dot).
func cleanDots(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// unclean answers a path that is not clean as kube-apiserver v1.37.2
// does. Paths of its go-restful routes (under /api/, or /apis/<group>/ of
// a built-in group) are served with trailing slashes collapsed, which
// go-restful ignores, and are otherwise the generic 404 Status; every
// other path (custom resources', /apis//, //api/..., //version) falls to
// its last handler's plain-text 404.
//
// An empty namespace (/namespaces//<resource>) is upstream's namespace
// parameter left empty, for custom resources too: a GET of the collection
// lists across namespaces, and any request on an object is 400
// "Namespace parameter required.". On a built-in kind's collection (a
// go-restful route upstream), a DELETE is that 400 too, a POST creates
// in no namespace, which fails validation (422), and other methods are
// 405; a custom resource's collection takes none of them (404).
func (s *Server) unclean(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if base := strings.TrimRight(p, "/") + "/"; len(base) < len(p) && !strings.Contains(base, "//") && cleanDots(base) && s.restful(base) {
		s.mux.ServeHTTP(w, withPath(r, base))
		return
	}
	if gv, rest, ok := strings.Cut(p, "/namespaces//"); ok && !strings.Contains(rest, "//") && cleanDots(rest) {
		resource, name, _ := strings.Cut(strings.TrimSuffix(rest, "/"), "/")
		if ri, ok := parsePath(gv + "/" + resource); ok && !ri.discovery && !ri.groupOnly {
			if _, served := s.cfg.Registry.Lookup(ri.group, ri.version, ri.resource); served {
				builtin := s.restful(p)
				switch {
				case name != "" || r.Method == http.MethodDelete && builtin:
					writeError(w, apierrors.NewBadRequest("Namespace parameter required."))
					return
				case r.Method == http.MethodGet:
					s.mux.ServeHTTP(w, withPath(r, gv+"/"+resource))
					return
				case builtin:
					if ri, ok := parsePath(gv + "/namespaces/-/" + resource); ok {
						ri.namespace = ""
						s.resource(w, r, ri)
						return
					}
				}
			}
		}
	}
	if s.restful(p) {
		writeError(w, errNoRoute)
		return
	}
	noGroup(w, r)
}

// restful reports whether upstream's go-restful container would take
// path p: the core group's paths, and a built-in group's.
func (s *Server) restful(p string) bool {
	rest, ok := strings.CutPrefix(p, "/api")
	if ok && (rest == "" || rest[0] == '/') {
		return true
	}
	rest, ok = strings.CutPrefix(p, "/apis/")
	if !ok {
		return false
	}
	group, _, _ := strings.Cut(rest, "/")
	if group == "" {
		return false
	}
	for _, res := range s.cfg.Registry.Resources() {
		if k := res.Kind(); k.Group == group && k.Typed != nil {
			return true
		}
	}
	return false
}

// withPath is r for path p.
func withPath(r *http.Request, p string) *http.Request {
	c := *r
	u := *r.URL
	u.Path, u.RawPath = p, ""
	c.URL = &u
	return &c
}
