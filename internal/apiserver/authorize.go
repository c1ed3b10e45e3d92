package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// authorize decides whether r may do what it asks, by Config.Authorizer.
// If so, it returns r carrying its user (registry.WithUser), for the
// checks of RBAC writes; if not, it has answered as kube-apiserver's
// authorization filter does (403, or 500 if no authorizer allowed and one
// failed: a webhook it could not call), and returns nil. It runs after
// authentication and before routing, as upstream's filter, so a path
// that names nothing served is refused as well. A client certificate of
// group system:masters (kplane's admin) passes without building its
// user: it may do everything.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, rec *auditRecord) *http.Request {
	if s.cfg.Authorizer == nil {
		s.auth.authorized(registry.Allow, nil, 0)
		rec.authorized(true, "")
		return r
	}
	u, hasUser := registry.UserFrom(r.Context())
	if !hasUser {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 &&
			slices.Contains(r.TLS.VerifiedChains[0][0].Subject.Organization, "system:masters") {
			s.auth.authorized(registry.Allow, nil, 0)
			rec.authorized(true, "")
			return r
		}
		u = requestUser(r)
		r = r.WithContext(registry.WithUser(r.Context(), u))
	}
	attrs := requestAttributes(r, u)
	authz := s.cfg.Authorizer
	if rec != nil {
		authz = s.explaining // the audit log says why
	}
	start := time.Now()
	d, reason, err := authz.Authorize(r.Context(), attrs)
	s.auth.authorized(d, err, time.Since(start))
	switch {
	case d == registry.Allow:
		// An authorizer may allow despite another's error.
		rec.authorized(true, reason)
		return r
	case err != nil:
		// No authorizer allowed, and one could not decide: upstream
		// answers 500, in plain text, rather than 403.
		if rec != nil {
			rec.annotate("authorization.k8s.io/reason", "internal error")
		}
		internalError(w, r, err)
		return nil
	}
	rec.authorized(false, reason)
	refuse(w, r, forbidden(attrs, reason))
	return nil
}

// internalError answers 500 in plain text, as upstream's filters answer a
// failure that is not the request's: the request's URI and the error,
// HTML-escaped.
func internalError(w http.ResponseWriter, r *http.Request, err error) {
	http.Error(w, htmlEscaper.Replace(fmt.Sprintf("Internal Server Error: %q: %v", r.RequestURI, err)), http.StatusInternalServerError)
}

// requestAttributes is what r asks to do, read off its path, method and
// query as kube-apiserver's RequestInfoFactory reads them:
//   - /api/<v>/... and /apis/<g>/<v>/... with a resource are resource
//     requests; everything else (discovery, /version, /healthz, ...) is a
//     non-resource request whose verb is the method, lowercased;
//   - the verb of a resource request is the method's: get, create,
//     update, patch, delete. A GET without a name is a list, or a watch
//     (?watch, or the /watch/ prefix); a DELETE without one a
//     deletecollection;
//   - /namespaces/<ns>/<resource>... is in namespace ns; a namespace's
//     own path (/namespaces/<name>[/status|/finalize]) is in namespace
//     <name>;
//   - a list or watch whose field selector requires one metadata.name
//     asks for that name;
//   - a list, watch or deletecollection (not by a /watch/ path) carries
//     its selectors' requirements (registry.SelectorAttributes).
func requestAttributes(r *http.Request, u registry.User) registry.Attributes {
	a := registry.Attributes{User: u, Path: r.URL.Path, Verb: lowerMethod(r.Method)}
	var segments [10]string // enough for every resource path, on the stack
	parts := splitPath(strings.Trim(r.URL.Path, "/"), segments[:0])
	if len(parts) < 3 || (parts[0] != "api" && parts[0] != "apis") {
		return a
	}
	if parts[0] == "apis" {
		if len(parts) < 4 {
			return a
		}
		a.APIGroup, parts = parts[1], parts[1:]
	}
	a.ResourceRequest = true
	a.APIVersion, parts = parts[1], parts[2:]
	watchPath := parts[0] == "watch" && len(parts) >= 2
	if watchPath {
		a.Verb, parts = "watch", parts[1:]
	} else {
		switch r.Method {
		case http.MethodPost:
			a.Verb = "create"
		case http.MethodGet, http.MethodHead:
			a.Verb = "get"
		case http.MethodPut:
			a.Verb = "update"
		case http.MethodPatch:
			a.Verb = "patch"
		case http.MethodDelete:
			a.Verb = "delete"
		default:
			a.Verb = ""
		}
	}
	if parts[0] == "namespaces" && len(parts) > 1 {
		a.Namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			parts = parts[2:]
		}
	}
	a.Resource = parts[0]
	if len(parts) >= 2 {
		a.Name = parts[1]
	}
	if len(parts) >= 3 {
		a.Subresource = parts[2]
	}
	if a.Name == "" && a.Verb == "get" {
		a.Verb = "list"
		q := r.URL.Query()
		if watchParam(q) {
			a.Verb = "watch"
		}
		if sel, err := fields.ParseSelector(q.Get("fieldSelector")); err == nil {
			if name, ok := sel.RequiresExactMatch("metadata.name"); ok && pathSegmentName(name) {
				a.Name = name
			}
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	// The selectors of a collection's list, watch or delete; not of the
	// /watch/ paths', whose one-object form takes none.
	if !watchPath && (a.Verb == "list" || a.Verb == "watch" || a.Verb == "deletecollection") {
		if q := r.URL.Query(); q.Has("fieldSelector") || q.Has("labelSelector") {
			a.FieldSelector, a.LabelSelector = registry.SelectorAttributes(q.Get("fieldSelector"), q.Get("labelSelector"))
		}
	}
	return a
}

// pathSegmentName reports whether name may be a path segment, as a name
// a field selector asks for must be to be authorized by name.
func pathSegmentName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/%")
}

// forbidden is the 403 kube-apiserver answers a request its authorizer
// did not allow: "<resource> "<name>" is forbidden: User "<user>" cannot
// <verb> resource ..." or, for a path, "forbidden: User ... cannot <verb>
// path ...", then the authorizer's reason if it gave one.
func forbidden(a registry.Attributes, reason string) error {
	var msg string
	switch {
	case !a.ResourceRequest:
		msg = fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	default:
		resource := a.Resource
		if a.Subresource != "" {
			resource += "/" + a.Subresource
		}
		if a.Namespace != "" {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", a.User.Name, a.Verb, resource, a.APIGroup, a.Namespace)
		} else {
			msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", a.User.Name, a.Verb, resource, a.APIGroup)
		}
	}
	msg = htmlEscaper.Replace(msg)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(msg))
}

// htmlEscaper escapes what upstream escapes in a 403's message.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// lowerMethod is method in lower case, the verb of a non-resource
// request; without an allocation for the usual ones.
func lowerMethod(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "post"
	case http.MethodPut:
		return "put"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	case http.MethodHead:
		return "head"
	}
	return strings.ToLower(method)
}

// splitPath appends the "/"-separated segments of p to into, as
// strings.Split would return them.
func splitPath(p string, into []string) []string {
	for {
		i := strings.IndexByte(p, '/')
		if i < 0 {
			return append(into, p)
		}
		into, p = append(into, p[:i]), p[i+1:]
	}
}
