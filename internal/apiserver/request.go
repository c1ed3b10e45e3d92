package apiserver

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// requestInfo is what a resource path names, parsed as kube-apiserver's
// RequestInfoFactory does.
type requestInfo struct {
	group, version       string
	namespace            string
	resource, name       string
	subresource          string
	watchPrefix          bool // the legacy /watch/ path form
	discovery            bool // /api/v1 or /apis/<g>/<v>
	groupOnly            bool // /apis/<g>
	namespacedCollection bool // the path had a /namespaces/<ns>/ segment
}

// namespaceSubresources are the subresources of a namespace, which a
// /namespaces/<name>/<x> path names instead of a resource.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

func parsePath(path string) (requestInfo, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var ri requestInfo
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		ri.version, parts = parts[1], parts[2:]
	case len(parts) == 2 && parts[0] == "apis":
		ri.group, ri.groupOnly = parts[1], true
		return ri, true
	case len(parts) >= 3 && parts[0] == "apis":
		ri.group, ri.version, parts = parts[1], parts[2], parts[3:]
	default:
		return ri, false
	}
	if len(parts) == 0 {
		ri.discovery = true
		return ri, true
	}
	if parts[0] == "watch" {
		ri.watchPrefix, parts = true, parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		ri.namespace = parts[1]
		if len(parts) > 2 && !namespaceSubresources[parts[2]] {
			ri.namespacedCollection = true
			parts = parts[2:]
		} else {
			// The namespace itself: /namespaces/<name>[/status|/finalize].
			ri.namespace = ""
			ri.resource, ri.name = "namespaces", parts[1]
			if len(parts) > 2 {
				ri.subresource = parts[2]
			}
			return ri, len(parts) <= 3
		}
	}
	if len(parts) == 0 || len(parts) > 3 {
		return ri, false
	}
	ri.resource = parts[0]
	if len(parts) > 1 {
		ri.name = parts[1]
	}
	if len(parts) > 2 {
		ri.subresource = parts[2]
	}
	return ri, true
}

// listOptions parses the query of a list, watch or deletecollection as
// kube-apiserver does: first each parameter (a malformed one is 400),
// then the watch defaults of the WatchList feature, on in Kubernetes
// 1.37 (a watch from "" or "0" that names neither sendInitialEvents nor
// resourceVersionMatch is a watch-list: it sends the state and, when
// bookmarks are allowed, ends it with the initial-events-end bookmark),
// then upstream's ValidateListOptions (every problem in one 422), then
// the field selector's fields and the resourceVersion (400). Whether
// it is a watch, for the defaults and the checks, is ?watch alone:
// upstream's /watch/ paths are checked as lists.
func listOptions(k *registry.Kind, version string, q url.Values) (registry.ListOptions, error) {
	var o registry.ListOptions
	var err error
	if s := q.Get("labelSelector"); s != "" {
		if o.Predicate.Label, err = labels.Parse(s); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
	}
	if s := q.Get("fieldSelector"); s != "" {
		if o.Predicate.Field, err = fields.ParseSelector(s); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
	}
	if s := q.Get("limit"); s != "" {
		if o.Limit, err = strconv.ParseInt(s, 10, 64); err != nil {
			return o, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", s))
		}
		o.Limit = max(o.Limit, 0) // a negative limit is none, as upstream
	}
	if s := q.Get("timeoutSeconds"); s != "" {
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return o, apierrors.NewBadRequest("invalid timeoutSeconds " + strconv.Quote(s))
		}
	}
	o.ResourceVersion = q.Get("resourceVersion")
	o.ResourceVersionMatch = metav1.ResourceVersionMatch(q.Get("resourceVersionMatch"))
	o.Continue = q.Get("continue")
	watch, _ := boolParam(q, "watch")
	o.AllowBookmarks, _ = boolParam(q, "allowWatchBookmarks")
	send, sendGiven := boolParam(q, "sendInitialEvents")
	if watch && !sendGiven && o.ResourceVersionMatch == "" && (o.ResourceVersion == "" || o.ResourceVersion == "0") {
		send, sendGiven = true, true
		o.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	}
	if errs := validateListOptions(o.ListOptions, watch, sendGiven); len(errs) > 0 {
		return o, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	o.SendInitialEvents, o.NoInitialEvents = send, sendGiven && !send
	if o.Predicate.Field != nil {
		for _, req := range o.Predicate.Field.Requirements() {
			if !k.SupportsField(version, req.Field) {
				return o, apierrors.NewBadRequest(k.FieldNotSupported(req.Field))
			}
		}
	}
	if _, err := storage.ParseResourceVersion(o.ResourceVersion); err != nil {
		return o, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
	}
	return o, nil
}

// validateListOptions are the checks of upstream's ValidateListOptions,
// in its order: a list's, or a watch's. sendGiven says the request (or
// the watch defaults) set sendInitialEvents.
func validateListOptions(o storage.ListOptions, watch, sendGiven bool) field.ErrorList {
	var errs field.ErrorList
	match := o.ResourceVersionMatch
	matchPath := field.NewPath("resourceVersionMatch")
	exact, notOlder := metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan
	if watch {
		if sendGiven && match != notOlder {
			errs = append(errs, field.Forbidden(matchPath, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
		}
		if match != "" {
			if !sendGiven {
				errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
			}
			if match != notOlder {
				errs = append(errs, field.NotSupported(matchPath, match, []string{string(notOlder)}))
			}
			if o.Continue != "" {
				errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch is forbidden when continue is provided"))
			}
		}
		return errs
	}
	if match != "" {
		if o.ResourceVersion == "" {
			errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch is forbidden unless resourceVersion is provided"))
		}
		if o.Continue != "" {
			errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch is forbidden when continue is provided"))
		}
		if match != exact && match != notOlder {
			errs = append(errs, field.NotSupported(matchPath, match, []string{string(exact), string(notOlder), ""}))
		}
		if match == exact && o.ResourceVersion == "0" {
			errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""))
		}
	}
	if sendGiven {
		errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"))
	}
	return errs
}

// boolParam reads a boolean query parameter by upstream's rule: given,
// any value but false and 0 (in any case), the empty one too, is true.
func boolParam(q url.Values, name string) (value, given bool) {
	v, ok := q[name]
	if !ok || len(v) == 0 {
		return false, false
	}
	switch strings.ToLower(v[0]) {
	case "false", "0":
		return false, true
	}
	return true, true
}

// watchParam reports whether a list is a watch (boolParam's rule).
func watchParam(q url.Values) bool {
	watch, _ := boolParam(q, "watch")
	return watch
}
