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

// listOptions parses the query of a list, watch or deletecollection.
func listOptions(k *registry.Kind, version string, q url.Values) (registry.ListOptions, bool, error) {
	var o registry.ListOptions
	var err error
	if s := q.Get("labelSelector"); s != "" {
		if o.Predicate.Label, err = labels.Parse(s); err != nil {
			return o, false, apierrors.NewBadRequest(err.Error())
		}
	}
	if s := q.Get("fieldSelector"); s != "" {
		sel, err := fields.ParseSelector(s)
		if err != nil {
			return o, false, apierrors.NewBadRequest(err.Error())
		}
		for _, req := range sel.Requirements() {
			if !k.SupportsField(version, req.Field) {
				return o, false, apierrors.NewBadRequest(k.FieldNotSupported(req.Field))
			}
		}
		o.Predicate.Field = sel
	}
	o.ResourceVersion = q.Get("resourceVersion")
	if _, err := storage.ParseResourceVersion(o.ResourceVersion); err != nil {
		return o, false, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", o.ResourceVersion))
	}
	o.ResourceVersionMatch = metav1.ResourceVersionMatch(q.Get("resourceVersionMatch"))
	switch o.ResourceVersionMatch {
	case "", metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan:
	default:
		return o, false, invalidList("resourceVersionMatch", string(o.ResourceVersionMatch), "supported values: \"Exact\", \"NotOlderThan\"")
	}
	if s := q.Get("limit"); s != "" {
		if o.Limit, err = strconv.ParseInt(s, 10, 64); err != nil {
			return o, false, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", s))
		}
		o.Limit = max(o.Limit, 0) // a negative limit is none, as upstream

	}
	o.Continue = q.Get("continue")
	if s := q.Get("timeoutSeconds"); s != "" {
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return o, false, apierrors.NewBadRequest("invalid timeoutSeconds " + strconv.Quote(s))
		}
	}
	watch := watchParam(q)
	o.AllowBookmarks = boolParam(q, "allowWatchBookmarks")
	o.SendInitialEvents = boolParam(q, "sendInitialEvents")
	// The checks of ValidateListOptions upstream.
	if o.ResourceVersionMatch != "" && o.ResourceVersion == "" && !o.SendInitialEvents {
		return o, false, invalidList("resourceVersionMatch", string(o.ResourceVersionMatch), "resourceVersionMatch is forbidden unless resourceVersion is provided")
	}
	if o.ResourceVersionMatch == metav1.ResourceVersionMatchExact && o.ResourceVersion == "0" {
		return o, false, invalidList("resourceVersionMatch", "Exact", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"")
	}
	if o.Continue != "" && o.ResourceVersion != "" && o.ResourceVersion != "0" {
		return o, false, invalidList("resourceVersion", o.ResourceVersion, "specifying resource version is not allowed when using continue")
	}
	if q.Has("sendInitialEvents") {
		if !watch {
			return o, false, invalidList("sendInitialEvents", q.Get("sendInitialEvents"), "sendInitialEvents is forbidden for list")
		}
		if o.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			return o, false, invalidList("resourceVersionMatch", string(o.ResourceVersionMatch), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
		}
		if o.SendInitialEvents && !o.AllowBookmarks {
			return o, false, invalidList("allowWatchBookmarks", "false", "allowWatchBookmarks must be true when sendInitialEvents is true")
		}
	}
	return o, watch, nil
}

// invalidList is the 422 kube-apiserver's ValidateListOptions gives.
func invalidList(path, value, msg string) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "",
		field.ErrorList{field.Forbidden(field.NewPath(path), msg)})
}

// watchParam reports whether a list is a watch, by upstream's rule: any
// value of ?watch but false and 0 (in any case), the empty one too.
func watchParam(q url.Values) bool {
	v, ok := q["watch"]
	if !ok || len(v) == 0 {
		return false
	}
	switch strings.ToLower(v[0]) {
	case "false", "0":
		return false
	}
	return true
}

func boolParam(q url.Values, name string) bool {
	v := q.Get(name)
	return v == "true" || v == "1"
}
