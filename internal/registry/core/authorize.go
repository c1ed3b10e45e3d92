package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// RBAC authorizes requests by the cluster's Roles, ClusterRoles and their
// bindings, as kube-apiserver's --authorization-mode=RBAC does: a request
// is allowed if a rule of a role bound to its user (by name, by one of
// its groups, or as the ServiceAccount it is) allows its verb on its
// resource (or non-resource path). ClusterRoleBindings grant everywhere;
// RoleBindings grant in their namespace. Users in system:masters may do
// everything, as upstream's privileged-group authorizer lets them.
//
// RBAC holds the four kinds in memory, filled by a list and kept by
// watches (Run), as upstream's authorizer reads informers. Unlike
// upstream's, a refusal is never stale: before it refuses, RBAC catches
// up with every write the store acknowledged (catchUp), so a role or
// binding written before a request began applies to it.
type RBAC struct {
	Registry *registry.Registry
	Logger   *slog.Logger
	// Retry is how long a failed watch waits before it starts again.
	// Default 1 s.
	Retry time.Duration
	// Authorizer is every authorizer kplane asks (--authorization-mode),
	// RBAC among them: the checks of writes of roles, bindings and
	// admission policies (may the user bind, escalate, read the
	// parameters) ask it, as upstream's ask its whole chain. Nil: RBAC
	// alone.
	Authorizer registry.Authorizer

	mu            sync.RWMutex
	state         rbacState
	watches       []watch.Interface // of the four resources, while followed
	seen          []int64           // the revision each watch has reached
	changed       chan struct{}     // closed when seen changes
	storeRevision func(context.Context) (int64, error)

	syncOnce sync.Once
	synced   chan struct{}
}

// rbacState is what the authorizer knows: every role by name (a Role's
// key is namespace/name), and the bindings, each list in name order.
type rbacState struct {
	clusterRoles    map[string][]rbacv1.PolicyRule
	roles           map[string][]rbacv1.PolicyRule
	clusterBindings []*rbacv1.ClusterRoleBinding
	bindings        map[string][]*rbacv1.RoleBinding // by namespace
	// Who each binding names, so that a request visits only the
	// bindings of its user: of clusterBindings, and of each namespace's.
	clusterIndex bindingIndex
	indexes      map[string]bindingIndex
}

// subjectKey is whom a binding's subject names: a user (a ServiceAccount
// by its user name) or a group.
type subjectKey struct {
	group bool
	name  string
}

// bindingIndex holds, for each subject, the positions (ascending) in a
// list of bindings of those that name it.
type bindingIndex map[subjectKey][]int

// indexBindings indexes the n bindings whose subjects are subjects(i), in
// namespace ns (a ServiceAccount subject without one is of ns).
func indexBindings(n int, subjects func(i int) []rbacv1.Subject, ns string) bindingIndex {
	idx := bindingIndex{}
	for i := range n {
		for _, s := range subjects(i) {
			var k subjectKey
			switch s.Kind {
			case rbacv1.UserKind:
				k = subjectKey{name: s.Name}
			case rbacv1.GroupKind:
				k = subjectKey{group: true, name: s.Name}
			case rbacv1.ServiceAccountKind:
				saNS := ns
				if s.Namespace != "" {
					saNS = s.Namespace
				}
				if saNS == "" {
					continue
				}
				k = subjectKey{name: serviceAccountUser(saNS, s.Name)}
			default:
				continue
			}
			if l := idx[k]; len(l) == 0 || l[len(l)-1] != i {
				idx[k] = append(l, i)
			}
		}
	}
	return idx
}

// candidates appends to buf the positions, ascending, of the bindings
// that name user or one of its groups.
func (idx bindingIndex) candidates(user registry.User, buf []int) []int {
	out := append(buf, idx[subjectKey{name: user.Name}]...)
	for _, g := range user.Groups {
		out = append(out, idx[subjectKey{group: true, name: g}]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// privilegedGroup may do everything, bound or not.
const privilegedGroup = registry.PrivilegedGroup

// The four resources RBAC follows, in the order Run lists them.
var rbacResources = []string{"clusterroles", "roles", "clusterrolebindings", "rolebindings"}

// Synced is closed once RBAC holds every role and binding.
func (a *RBAC) Synced() <-chan struct{} {
	a.syncOnce.Do(func() { a.synced = make(chan struct{}) })
	return a.synced
}

// Run fills RBAC and keeps it until ctx ends.
func (a *RBAC) Run(ctx context.Context) error {
	if a.Logger == nil {
		a.Logger = slog.New(slog.DiscardHandler)
	}
	a.Synced()
	var res []*registry.Resource
	for _, name := range rbacResources {
		r, ok := a.Registry.Get(schema.GroupResource{Group: rbacv1.GroupName, Resource: name})
		if !ok {
			return fmt.Errorf("rbac: %s is not served", name)
		}
		res = append(res, r)
	}
	retryFollow(ctx, a.Logger, a.Retry, "rbac", func(ctx context.Context) error { return a.follow(ctx, res) })
	return nil
}

// follow lists the four resources, then applies their watches' events
// until one ends.
func (a *RBAC) follow(ctx context.Context, res []*registry.Resource) error {
	wctx, cancel := context.WithCancel(ctx)
	watches := make([]watch.Interface, len(res))
	var wg sync.WaitGroup
	// Every watch's goroutine has stopped when follow returns, so that
	// none applies an old event to the state the next follow lists.
	defer func() {
		cancel()
		for _, w := range watches {
			if w != nil {
				w.Stop()
			}
		}
		wg.Wait()
	}()
	state := rbacState{clusterRoles: map[string][]rbacv1.PolicyRule{}, roles: map[string][]rbacv1.PolicyRule{},
		bindings: map[string][]*rbacv1.RoleBinding{}, indexes: map[string]bindingIndex{}}
	seen := make([]int64, len(res))
	for i, r := range res {
		list, err := r.List(ctx, "v1", "", registry.ListOptions{})
		if err != nil {
			return err
		}
		seen[i], _ = strconv.ParseInt(list.GetResourceVersion(), 10, 64)
		for j := range list.Items {
			if err := state.apply(r.Kind().Resource, watch.Added, list.Items[j].Object); err != nil {
				a.Logger.Warn("rbac: reading an object", "resource", r.Kind().Resource, "name", list.Items[j].GetName(), "err", err)
			}
		}
		opts := registry.ListOptions{}
		opts.ResourceVersion = list.GetResourceVersion()
		opts.AllowBookmarks = true // the answers to catchUp's progress requests
		w, err := r.Watch(wctx, "v1", "", opts)
		if err != nil {
			return err
		}
		watches[i] = w
	}
	a.mu.Lock()
	a.state, a.watches, a.seen = state, watches, seen
	a.storeRevision = res[0].StoreRevision
	a.broadcastLocked()
	a.mu.Unlock()
	select {
	case <-a.synced:
	default:
		close(a.synced)
	}
	// One goroutine per watch; each event is applied under the lock.
	errs := make(chan error, len(watches))
	for i, w := range watches {
		resource := res[i].Kind().Resource
		wg.Go(func() {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					errs <- watchEnded(ev)
					return
				}
				obj, ok := ev.Object.(metav1.Object)
				if !ok {
					continue
				}
				rev, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
				a.mu.Lock()
				var err error
				if u, isObj := ev.Object.(runtime.Unstructured); isObj && ev.Type != watch.Bookmark {
					err = a.state.apply(resource, ev.Type, u.UnstructuredContent())
				}
				if rev > a.seen[i] {
					a.seen[i] = rev
					a.broadcastLocked()
				}
				a.mu.Unlock()
				if err != nil {
					a.Logger.Warn("rbac: reading an object", "resource", resource, "err", err)
				}
			}
			errs <- errWatchEnded
		})
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		return err
	}
}

// broadcastLocked wakes those waiting in catchUp.
func (a *RBAC) broadcastLocked() {
	if a.changed != nil {
		close(a.changed)
	}
	a.changed = make(chan struct{})
}

// catchUpWait bounds how long a refusal waits for RBAC to catch up.
const catchUpWait = 5 * time.Second

// catchUp waits until RBAC reflects every write the store has
// acknowledged. It reports whether it had to wait, that is whether the
// state may have changed.
func (a *RBAC) catchUp(ctx context.Context) bool {
	cur, ok := a.currentRevision(ctx)
	if !ok {
		return false
	}
	return a.reach(ctx, cur, 0, 1, 2, 3)
}

// currentRevision returns the store's revision now.
func (a *RBAC) currentRevision(ctx context.Context) (int64, bool) {
	a.mu.RLock()
	storeRevision := a.storeRevision
	a.mu.RUnlock()
	if storeRevision == nil {
		return 0, false
	}
	cur, err := storeRevision(ctx)
	return cur, err == nil
}

// reach waits until the watches of the resources at indexes (of
// rbacResources) have reached revision rev: an event at rev or later, or
// the bookmark a progress request brings once everything before it was
// delivered. It reports whether it had to wait. It gives up after
// catchUpWait.
func (a *RBAC) reach(ctx context.Context, rev int64, indexes ...int) bool {
	var timer *time.Timer
	waited := false
	for asked := false; ; asked = true {
		a.mu.RLock()
		var behind []watch.Interface
		for _, i := range indexes {
			if i < len(a.seen) && a.seen[i] < rev {
				behind = append(behind, a.watches[i])
			}
		}
		changed := a.changed
		a.mu.RUnlock()
		if len(behind) == 0 {
			return waited
		}
		waited = true
		if !asked {
			for _, w := range behind {
				if p, ok := w.(storage.ProgressRequester); ok {
					p.RequestProgress(ctx)
				}
			}
			timer = time.NewTimer(catchUpWait)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			a.Logger.Warn("rbac: did not catch up with the store's writes in time", "revision", rev)
			return waited
		case <-ctx.Done():
			return waited
		}
	}
}

// written waits until RBAC holds the role or binding obj of resource i
// that was just written: the write's revision is the object's.
func (a *RBAC) written(i int) func(context.Context, *unstructured.Unstructured) {
	return func(ctx context.Context, obj *unstructured.Unstructured) {
		if rev, err := strconv.ParseInt(obj.GetResourceVersion(), 10, 64); err == nil {
			a.reach(ctx, rev, i)
		}
	}
}

// deleted waits until RBAC no longer holds the role or binding of
// resource i that was just deleted: the store's revision now is at least
// the delete's.
func (a *RBAC) deleted(i int) func(context.Context, *unstructured.Unstructured) {
	return func(ctx context.Context, _ *unstructured.Unstructured) {
		if cur, ok := a.currentRevision(ctx); ok {
			a.reach(ctx, cur, i)
		}
	}
}

// apply records one event of resource. The object is only read (it may
// be shared with other watchers): the typed copy is the state's.
func (s *rbacState) apply(resource string, t watch.EventType, obj map[string]any) error {
	switch t {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return nil
	}
	deleted := t == watch.Deleted
	switch resource {
	case "clusterroles":
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &r); err != nil {
			return err
		}
		if deleted {
			delete(s.clusterRoles, r.Name)
		} else {
			s.clusterRoles[r.Name] = r.Rules
		}
	case "roles":
		var r rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &r); err != nil {
			return err
		}
		if deleted {
			delete(s.roles, r.Namespace+"/"+r.Name)
		} else {
			s.roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	case "clusterrolebindings":
		b := new(rbacv1.ClusterRoleBinding)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, b); err != nil {
			return err
		}
		s.clusterBindings = replaceBinding(s.clusterBindings, b, deleted, func(b *rbacv1.ClusterRoleBinding) string { return b.Name })
		s.clusterIndex = indexBindings(len(s.clusterBindings), func(i int) []rbacv1.Subject { return s.clusterBindings[i].Subjects }, "")
	case "rolebindings":
		b := new(rbacv1.RoleBinding)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, b); err != nil {
			return err
		}
		list := replaceBinding(s.bindings[b.Namespace], b, deleted, func(b *rbacv1.RoleBinding) string { return b.Name })
		if len(list) == 0 {
			delete(s.bindings, b.Namespace)
			delete(s.indexes, b.Namespace)
		} else {
			s.bindings[b.Namespace] = list
			s.indexes[b.Namespace] = indexBindings(len(list), func(i int) []rbacv1.Subject { return list[i].Subjects }, b.Namespace)
		}
	}
	return nil
}

// replaceBinding returns list, in name order, with b in place of the
// binding of its name, or without it if deleted.
func replaceBinding[B any](list []*B, b *B, deleted bool, name func(*B) string) []*B {
	i, found := slices.BinarySearchFunc(list, name(b), func(x *B, n string) int { return strings.Compare(name(x), n) })
	switch {
	case deleted && found:
		return slices.Delete(slices.Clone(list), i, i+1)
	case deleted:
		return list
	case found:
		list = slices.Clone(list)
		list[i] = b
		return list
	}
	return slices.Insert(slices.Clone(list), i, b)
}

// Authorize allows a request if a rule bound to its user allows it, and
// has no opinion otherwise: RBAC never denies. The reason of no opinion
// names the bindings whose roles are missing, as upstream's does; an
// allowance has none (the access reviews name the binding that allowed:
// Explaining). Until RBAC holds every role and binding, it waits.
func (a *RBAC) Authorize(ctx context.Context, attrs registry.Attributes) (registry.Decision, string, error) {
	return a.authorize(ctx, &attrs, false)
}

// Explaining is RBAC as an authorizer whose allowances say why, as
// upstream's do everywhere but its request filter: the reason names the
// binding that allowed it (RBAC: allowed by RoleBinding "b/ns" of
// ClusterRole "r" to User "u"). The access reviews and the admission
// policies' authorizer checks (check(...).reason()) show it.
func (a *RBAC) Explaining() registry.Authorizer { return explaining{a} }

type explaining struct{ a *RBAC }

func (e explaining) Authorize(ctx context.Context, attrs registry.Attributes) (registry.Decision, string, error) {
	return e.a.authorize(ctx, &attrs, true)
}

func (e explaining) RulesFor(ctx context.Context, u registry.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
	return e.a.RulesFor(ctx, u, ns)
}

func (a *RBAC) authorize(ctx context.Context, attrs *registry.Attributes, why bool) (registry.Decision, string, error) {
	if slices.Contains(attrs.User.Groups, privilegedGroup) {
		return registry.Allow, "", nil
	}
	select {
	case <-a.Synced():
	case <-ctx.Done():
		return registry.NoOpinion, "", ctx.Err()
	}
	allowed, reason := a.decide(attrs, why)
	if !allowed && a.catchUp(ctx) {
		allowed, reason = a.decide(attrs, why)
	}
	if allowed {
		return registry.Allow, reason, nil
	}
	return registry.NoOpinion, reason, nil
}

// Chain is the authorizer the checks of RBAC writes ask (may the user
// bind, escalate) and the reviews answer by: Authorizer, all of kplane's,
// as upstream's, or if nil RBAC alone, as --authorization-mode=RBAC
// makes it (after system:masters').
func (a *RBAC) Chain() registry.Authorizer {
	if a.Authorizer != nil {
		return a.Authorizer
	}
	return registry.Union{registry.Privileged, {Name: "rbac", Authorizer: a}}
}

// decide is authorize's answer from what RBAC holds now; with why, an
// allowance names the binding that allowed it.
func (a *RBAC) decide(attrs *registry.Attributes, why bool) (bool, string) {
	allowed := false
	var reason string
	var errs []error
	a.visitRules(attrs.User, attrs.Namespace, func(source func() string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if ruleAllows(attrs, rule) {
			allowed = true
			if why {
				reason = "RBAC: allowed by " + source()
			}
			return false
		}
		return true
	})
	if allowed {
		return true, reason
	}
	if len(errs) == 0 {
		return false, ""
	}
	return false, "RBAC: " + evaluationError(errs)
}

// RulesFor returns the rules bound to user in namespace ns (cluster-wide
// ones too), for a SelfSubjectRulesReview. As upstream's RBAC's, they are
// complete even if a binding's role is missing: the error says which.
func (a *RBAC) RulesFor(_ context.Context, user registry.User, ns string) ([]rbacv1.PolicyRule, bool, error) {
	rules, errs := a.boundRules(user, ns)
	if len(errs) > 0 {
		return rules, false, errors.New(evaluationError(errs))
	}
	return rules, false, nil
}

// boundRules returns the rules bound to user in namespace ns (cluster-wide
// ones too), and the errors met (bindings of missing roles). As
// upstream's, they are the bindings' only: system:masters has the rules
// of its binding to cluster-admin.
func (a *RBAC) boundRules(user registry.User, ns string) ([]rbacv1.PolicyRule, []error) {
	var rules []rbacv1.PolicyRule
	var errs []error
	a.visitRules(user, ns, func(_ func() string, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			rules = append(rules, *rule)
		}
		return true
	})
	return rules, errs
}

// visitRules calls visit with each rule bound to user: the
// ClusterRoleBindings' first, then, if ns is set, the RoleBindings' of
// ns (each in name order, only those the indexes say name the user or
// one of its groups), each binding's in its role's order, until visit
// returns false. A
// binding whose role is missing is visited as an error. source describes
// the binding that grants a rule, as upstream's reasons do.
func (a *RBAC) visitRules(user registry.User, ns string, visit func(source func() string, rule *rbacv1.PolicyRule, err error) bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	s := &a.state
	var buf [16]int
	for _, p := range s.clusterIndex.candidates(user, buf[:0]) {
		b := s.clusterBindings[p]
		i := subjectIndex(user, b.Subjects, "")
		if i < 0 {
			continue
		}
		rules, err := s.roleRules(b.RoleRef, "")
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := func() string {
			return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(&b.Subjects[i], ""))
		}
		for j := range rules {
			if !visit(source, &rules[j], nil) {
				return
			}
		}
	}
	if ns == "" {
		return
	}
	for _, p := range s.indexes[ns].candidates(user, buf[:0]) {
		b := s.bindings[ns][p]
		i := subjectIndex(user, b.Subjects, ns)
		if i < 0 {
			continue
		}
		rules, err := s.roleRules(b.RoleRef, ns)
		if err != nil {
			if !visit(nil, nil, err) {
				return
			}
			continue
		}
		source := func() string {
			return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(&b.Subjects[i], ns))
		}
		for j := range rules {
			if !visit(source, &rules[j], nil) {
				return
			}
		}
	}
}

// roleRules returns the rules of the role ref names: a ClusterRole, or a
// Role of namespace ns.
func (s *rbacState) roleRules(ref rbacv1.RoleRef, ns string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "ClusterRole":
		if rules, ok := s.clusterRoles[ref.Name]; ok {
			return rules, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrole"}, ref.Name)
	case "Role":
		if rules, ok := s.roles[ns+"/"+ref.Name]; ok {
			return rules, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: "role"}, ref.Name)
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// subjectIndex returns the index of the first of subjects that is user,
// or -1. A ServiceAccount subject without a namespace is one of the
// binding's namespace ns.
func subjectIndex(user registry.User, subjects []rbacv1.Subject, ns string) int {
	for i := range subjects {
		s := &subjects[i]
		switch s.Kind {
		case rbacv1.UserKind:
			if user.Name == s.Name {
				return i
			}
		case rbacv1.GroupKind:
			if slices.Contains(user.Groups, s.Name) {
				return i
			}
		case rbacv1.ServiceAccountKind:
			saNS := ns
			if s.Namespace != "" {
				saNS = s.Namespace
			}
			if saNS != "" && isServiceAccount(user.Name, saNS, s.Name) {
				return i
			}
		}
	}
	return -1
}

// isServiceAccount reports whether user is the name of ServiceAccount
// ns/name (serviceAccountUser's, without building it).
func isServiceAccount(user, ns, name string) bool {
	const prefix = "system:serviceaccount:"
	return len(user) == len(prefix)+len(ns)+1+len(name) && strings.HasPrefix(user, prefix) &&
		user[len(prefix):len(prefix)+len(ns)] == ns && user[len(prefix)+len(ns)] == ':' && user[len(prefix)+len(ns)+1:] == name
}

// describeSubject names a binding's subject in a reason.
func describeSubject(s *rbacv1.Subject, ns string) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

// ruleAllows reports whether rule allows the request attrs describes. A
// rule's "*" matches any verb, group, resource or URL; "*/x" any
// resource's subresource x; a URL ending in "*" every path it prefixes.
// Resource names, if the rule lists any, must include the request's.
func ruleAllows(attrs *registry.Attributes, rule *rbacv1.PolicyRule) bool {
	if !hasOrAll(rule.Verbs, attrs.Verb) {
		return false
	}
	if !attrs.ResourceRequest {
		for _, u := range rule.NonResourceURLs {
			if u == rbacv1.NonResourceAll || u == attrs.Path ||
				(strings.HasSuffix(u, "*") && strings.HasPrefix(attrs.Path, strings.TrimRight(u, "*"))) {
				return true
			}
		}
		return false
	}
	if !hasOrAll(rule.APIGroups, attrs.APIGroup) || !resourceMatches(rule.Resources, attrs.Resource, attrs.Subresource) {
		return false
	}
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, attrs.Name)
}

// hasOrAll reports whether list holds v or "*".
func hasOrAll(list []string, v string) bool {
	for _, x := range list {
		if x == "*" || x == v {
			return true
		}
	}
	return false
}

// resourceMatches reports whether a rule's resources match resource (and
// its subresource sub, if any).
func resourceMatches(list []string, resource, sub string) bool {
	combined := resource
	if sub != "" {
		combined = resource + "/" + sub
	}
	for _, r := range list {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case sub != "" && len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub):
			return true
		}
	}
	return false
}

// Install makes the access and rules reviews among kinds answer by a's
// chain (InstallAuthorizer); a
// write of a role or binding refused if it grants more than its writer
// holds (escalation.go); and a write or delete of one return once a
// holds it, so that it applies to the client's next request.
func (a *RBAC) Install(kinds []*registry.Kind) []*registry.Kind {
	kinds = InstallAuthorizer(kinds, a.Chain())
	for _, k := range kinds {
		if k.Group == admissionregistrationv1.GroupName {
			switch k.Resource {
			case "validatingadmissionpolicies", "mutatingadmissionpolicies":
				k.Admit = a.admitPolicy(k)
			case "validatingadmissionpolicybindings":
				k.Admit = a.admitPolicyBinding(k, "validatingadmissionpolicies")
			case "mutatingadmissionpolicybindings":
				k.Admit = a.admitPolicyBinding(k, "mutatingadmissionpolicies")
			}
		}
		if i := slices.Index(rbacResources, k.Resource); i >= 0 && k.Group == rbacv1.GroupName {
			k.Written, k.Deleted = a.written(i), a.deleted(i)
			if strings.HasSuffix(k.Resource, "bindings") {
				k.Admit = a.admitBinding(i)
			} else {
				k.Admit = a.admitRole(i)
			}
		}
	}
	return kinds
}

// evaluationError joins errs as upstream's aggregate error prints them.
func evaluationError(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}
