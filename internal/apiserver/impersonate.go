package apiserver

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Impersonation (kubectl --as, --as-group, --as-uid; client-go's
// rest.Config.Impersonate): a request's Impersonate-User,
// Impersonate-Group, Impersonate-Uid and Impersonate-Extra-<key> headers
// make it run as that user, if its sender may impersonate them, as
// kube-apiserver v1.37 decides with constrained impersonation on (its
// default). The modes are tried in upstream's order, the one that last
// worked for the sender first, and the first refusal is the answer if
// none allows:
//   - serviceaccount (a ServiceAccount's user name alone): the sender
//     needs impersonate-on:serviceaccount:<verb> on what the request
//     does, and impersonate:serviceaccount on the account;
//   - user-info (any other user): impersonate-on:user-info:<verb> on the
//     request, and impersonate:user-info on the user, uid, groups (never
//     "" or system:masters) and extra values (keys domain-prefixed paths,
//     lowercase; four or more values or groups are first asked as "*");
//   - legacy: impersonate on users, serviceaccounts and groups (core
//     group) and on uids and userextras/<key> (authentication.k8s.io).
//
// The node modes are not served (kplane has no nodes): a node's user
// name is impersonated by the legacy mode alone. Upstream remembers the
// checks that passed for a while; kplane asks its authorizer every time,
// so a revoked permission ends at once.

// wantedUser is whom a request's headers ask to impersonate.
type wantedUser struct {
	name, uid string
	groups    []string
	extra     map[string][]string
}

// impersonationHeaders reads r's Impersonate-* headers: nil without
// Impersonate-User, which the others need (400 otherwise, upstream's
// words: its Go form of the user asked).
func impersonationHeaders(h http.Header) (*wantedUser, error) {
	w := &wantedUser{name: h.Get("Impersonate-User"), uid: h.Get("Impersonate-Uid"), groups: h.Values("Impersonate-Group")}
	hasExtra := false
	for name, values := range h {
		key, ok := strings.CutPrefix(name, "Impersonate-Extra-")
		if !ok {
			continue
		}
		hasExtra = true
		if len(values) == 0 {
			continue
		}
		key = strings.ToLower(key)
		if unescaped, err := url.PathUnescape(key); err == nil {
			key = unescaped
		}
		if w.extra == nil {
			w.extra = map[string][]string{}
		}
		w.extra[key] = append(w.extra[key], values...)
	}
	if w.name == "" {
		if w.uid != "" || len(w.groups) > 0 || hasExtra {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("requested &user.DefaultInfo{Name:%q, UID:%q, Groups:%s, Extra:%s} without impersonating a user name",
				w.name, w.uid, goStrings(w.groups), goExtra(w.extra)))
		}
		return nil, nil
	}
	return w, nil
}

// goStrings and goExtra print as Go's %#v does.
func goStrings(s []string) string {
	if s == nil {
		return "[]string(nil)"
	}
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[]string{" + strings.Join(q, ", ") + "}"
}

func goExtra(m map[string][]string) string {
	if m == nil {
		return "map[string][]string(nil)"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%q:%s", k, goStrings(m[k])))
	}
	return "map[string][]string{" + strings.Join(parts, ", ") + "}"
}

// impersonate applies r's impersonation headers, if any: it returns r
// as the impersonated user (registry.WithUser), the headers removed, or
// nil once it has refused the request (400, or upstream's 403).
func (s *Server) impersonate(w http.ResponseWriter, r *http.Request) *http.Request {
	if !hasImpersonation(r.Header) {
		return r
	}
	wanted, err := impersonationHeaders(r.Header)
	if err != nil {
		refuse(w, r, err)
		return nil
	}
	if wanted == nil {
		return r
	}
	r = r.Clone(r.Context())
	for name := range r.Header {
		if strings.HasPrefix(name, "Impersonate-") {
			r.Header.Del(name)
		}
	}
	requestor := requestUser(r)
	attrs := requestAttributes(r, requestor)
	u, err := s.impersonation.user(r, s.cfg.Authorizer, wanted, &attrs)
	if err != nil {
		refuse(w, r, err)
		return nil
	}
	return r.WithContext(registry.WithUser(r.Context(), u))
}

// hasImpersonation reports, cheaply, whether h may ask to impersonate.
func hasImpersonation(h http.Header) bool {
	for name := range h {
		if strings.HasPrefix(name, "Impersonate-") {
			return true
		}
	}
	return false
}

// impersonation remembers, per sender, the mode that last allowed it, to
// try first, as upstream does (which refusal a sender sees depends on
// it).
type impersonation struct {
	mu   sync.Mutex
	last map[string]int
}

const (
	modeServiceAccount = iota
	modeUserInfo
	modeLegacy
)

// user returns the user the request with attributes attrs impersonates,
// or the first refusal.
func (im *impersonation) user(r *http.Request, authz registry.Authorizer, wanted *wantedUser, attrs *registry.Attributes) (registry.User, error) {
	requestor := attrs.User
	order := []int{modeServiceAccount, modeUserInfo, modeLegacy}
	im.mu.Lock()
	if last, ok := im.last[requestor.Name]; ok {
		order = append([]int{last}, slices.DeleteFunc(order, func(m int) bool { return m == last })...)
	}
	im.mu.Unlock()
	var firstErr error
	for _, mode := range order {
		u, applies, err := checkMode(r, authz, mode, wanted, attrs)
		if !applies {
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		im.mu.Lock()
		if im.last == nil || len(im.last) >= 4096 {
			im.last = map[string]int{}
		}
		im.last[requestor.Name] = mode
		im.mu.Unlock()
		return u, nil
	}
	return registry.User{}, firstErr
}

// checkMode checks one mode: whether it applies to wanted, and if so the
// user it makes or its refusal.
func checkMode(r *http.Request, authz registry.Authorizer, mode int, wanted *wantedUser, attrs *registry.Attributes) (registry.User, bool, error) {
	ns, saName, isSA := splitServiceAccount(wanted.name)
	_, isNode := strings.CutPrefix(wanted.name, "system:node:")
	verb, group := "impersonate", "" // legacy: users, groups, serviceaccounts in the core group
	constrained := mode != modeLegacy
	switch mode {
	case modeServiceAccount:
		if !isSA || wanted.uid != "" || len(wanted.groups) > 0 || len(wanted.extra) > 0 {
			return registry.User{}, false, nil
		}
		verb = "impersonate:serviceaccount"
	case modeUserInfo:
		if isSA || isNode {
			return registry.User{}, false, nil
		}
		verb = "impersonate:user-info"
	}
	if constrained {
		group = "authentication.k8s.io"
		on := *attrs
		on.Verb = "impersonate-on:" + strings.TrimPrefix(verb, "impersonate:") + ":" + attrs.Verb
		if err := check(r, authz, on); err != nil {
			return registry.User{}, true, err
		}
	}
	requestor := attrs.User
	ask := func(g, resource, sub, ns, name string) registry.Attributes {
		return registry.Attributes{User: requestor, Verb: verb, ResourceRequest: true, APIGroup: g, APIVersion: "v1",
			Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	u := registry.User{Name: wanted.name, UID: wanted.uid, Groups: slices.Clone(wanted.groups), Extra: wanted.extra}
	userAttrs := ask(group, "users", "", "", wanted.name)
	if isSA {
		userAttrs.Resource, userAttrs.Namespace, userAttrs.Name = "serviceaccounts", ns, saName
		if constrained && len(wanted.groups) > 0 {
			return registry.User{}, true, forbidden(userAttrs, fmt.Sprintf("when impersonating a service account, cannot impersonate groups %q", wanted.groups))
		}
		if len(wanted.groups) == 0 {
			u.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
		}
	}
	if err := check(r, authz, userAttrs); err != nil {
		return registry.User{}, true, err
	}
	if wanted.uid != "" {
		if err := check(r, authz, ask("authentication.k8s.io", "uids", "", "", wanted.uid)); err != nil {
			return registry.User{}, true, err
		}
	}
	if len(wanted.groups) > 0 {
		groupAttrs := ask(group, "groups", "", "", "")
		if constrained {
			if slices.Contains(wanted.groups, "") {
				return registry.User{}, true, forbidden(groupAttrs, "impersonating the empty string group is not allowed")
			}
			if slices.Contains(wanted.groups, "system:masters") {
				groupAttrs.Name = "system:masters"
				return registry.User{}, true, forbidden(groupAttrs, "impersonating the system:masters group is not allowed")
			}
		}
		allGroups := false
		if constrained && len(wanted.groups) >= 4 {
			groupAttrs.Name = "*"
			allGroups = check(r, authz, groupAttrs) == nil
		}
		for _, g := range wanted.groups {
			if allGroups {
				break
			}
			groupAttrs.Name = g
			if err := check(r, authz, groupAttrs); err != nil {
				return registry.User{}, true, err
			}
		}
	}
	if len(wanted.extra) > 0 {
		extraAttrs := ask("authentication.k8s.io", "userextras", "", "", "")
		if constrained {
			if err := validateExtra(wanted.extra); err != nil {
				return registry.User{}, true, forbidden(extraAttrs, err.Error())
			}
		}
		allExtra := false
		if constrained && largeExtra(wanted.extra) {
			extraAttrs.Subresource, extraAttrs.Name = "*", "*"
			allExtra = check(r, authz, extraAttrs) == nil
		}
		for _, key := range slices.Sorted(maps.Keys(wanted.extra)) {
			if allExtra {
				break
			}
			extraAttrs.Subresource = key
			for _, v := range wanted.extra[key] {
				extraAttrs.Name = v
				if err := check(r, authz, extraAttrs); err != nil {
					return registry.User{}, true, err
				}
			}
		}
	}
	switch {
	case u.Name == "system:anonymous":
		if !slices.Contains(u.Groups, "system:unauthenticated") {
			u.Groups = append(u.Groups, "system:unauthenticated")
		}
	case !slices.Contains(u.Groups, "system:unauthenticated") && !slices.Contains(u.Groups, "system:authenticated"):
		u.Groups = append(u.Groups, "system:authenticated")
	}
	return u, true, nil
}

// check asks authz (none allows everything) about attrs; anything but
// an allowance (an error too) is upstream's 403 with the authorizer's
// reason.
func check(r *http.Request, authz registry.Authorizer, attrs registry.Attributes) error {
	if authz == nil {
		return nil
	}
	if d, reason, _ := authz.Authorize(r.Context(), attrs); d != registry.Allow {
		return forbidden(attrs, reason)
	}
	return nil
}

// splitServiceAccount splits a ServiceAccount's user name
// (system:serviceaccount:<namespace>:<name>), as upstream's SplitUsername.
func splitServiceAccount(user string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") ||
		len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return ns, name, true
}

// validateExtra refuses, as constrained impersonation does, extra keys
// that are not lowercase domain-prefixed paths, and empty values.
func validateExtra(extra map[string][]string) error {
	fp := field.NewPath("extra", "key")
	for _, key := range slices.Sorted(maps.Keys(extra)) {
		values := extra[key]
		if key == "" {
			return fmt.Errorf("impersonating the empty string key in extra is not allowed")
		}
		if err := validation.IsDomainPrefixedPath(fp, key).ToAggregate(); err != nil {
			return fmt.Errorf("impersonating an invalid key in extra is not allowed: %w", err)
		}
		if key != strings.ToLower(key) {
			return fmt.Errorf("impersonating a non-lowercase key in extra is not allowed: %q", key)
		}
		if len(values) == 0 {
			return fmt.Errorf("impersonating empty values in extra is not allowed")
		}
		if slices.Contains(values, "") {
			return fmt.Errorf("impersonating the empty string value in extra is not allowed")
		}
	}
	return nil
}

// largeExtra reports whether extra has four or more keys or values.
func largeExtra(extra map[string][]string) bool {
	n := 0
	for _, v := range extra {
		n += len(v)
	}
	return len(extra) >= 4 || n >= 4
}
