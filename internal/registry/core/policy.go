package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The default roles and bindings kplane keeps, as kube-apiserver's
// bootstrap policy keeps its own (the ones a control plane without nodes,
// scheduler or controller-manager needs): the admin role and its binding
// to system:masters; the user-facing roles admin, edit and view, and the
// rules that aggregate into them; what every authenticated client may do (discovery,
// the self reviews) and what anyone may (health and version); what an
// authenticating proxy (system:auth-delegator), a monitoring system and
// service accounts (the issuer's keys, cluster trust bundles, which kplane
// does not serve) may do. Their rules are upstream's, so that a rules
// review (kubectl auth can-i --list) lists what upstream's does. Each carries upstream's label kubernetes.io/bootstrapping
// and annotation rbac.authorization.kubernetes.io/autoupdate.
//
// Each start creates the missing ones and gives the others back the rules,
// subjects, labels and annotations they lack (an addition of a user's
// stays), unless the user set autoupdate to "false", as upstream's
// reconciliation does.

const (
	bootstrapLabel      = "kubernetes.io/bootstrapping"
	autoupdateAnnotaion = rbacv1.AutoUpdateAnnotationKey
)

func defaultClusterRoles() []rbacv1.ClusterRole {
	get := []string{"get"}
	create := []string{"create"}
	all := []string{rbacv1.VerbAll}
	role := func(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
		return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	return []rbacv1.ClusterRole{
		role("cluster-admin",
			rbacv1.PolicyRule{Verbs: all, APIGroups: all, Resources: all},
			rbacv1.PolicyRule{Verbs: all, NonResourceURLs: all}),
		role("system:discovery", rbacv1.PolicyRule{Verbs: get, NonResourceURLs: []string{
			"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}}),
		role("system:basic-user",
			rbacv1.PolicyRule{Verbs: create, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
			rbacv1.PolicyRule{Verbs: create, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}}),
		role("system:public-info-viewer", rbacv1.PolicyRule{Verbs: get, NonResourceURLs: []string{
			"/healthz", "/livez", "/readyz", "/version", "/version/"}}),
		role("system:auth-delegator",
			rbacv1.PolicyRule{Verbs: create, APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}},
			rbacv1.PolicyRule{Verbs: create, APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}}),
		role("system:monitoring",
			rbacv1.PolicyRule{Verbs: get, NonResourceURLs: []string{
				"/flagz", "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis", "/readyz", "/readyz/*", "/statusz"}},
			rbacv1.PolicyRule{Verbs: get, APIGroups: []string{""}, Resources: []string{"nodes/metrics"}}),
		role("system:service-account-issuer-discovery", rbacv1.PolicyRule{Verbs: get, NonResourceURLs: []string{
			"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/"}}),
		role("system:cluster-trust-bundle-discovery", rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"},
			APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}}),
		// The user-facing roles: their rules are those of the roles
		// labeled to aggregate into them (RoleAggregation), each
		// aggregating into the next (view into edit into admin).
		aggregated("admin", ""),
		aggregated("edit", "admin"),
		aggregated("view", "edit"),
		aggregateTo("admin",
			rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"localsubjectaccessreviews"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings", "roles"}, Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
		),
		aggregateTo("edit",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"extensions"}, Resources: []string{"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "networkpolicies"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
			rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}},
		),
		aggregateTo("view",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"bindings", "limitranges", "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers", "horizontalpodautoscalers/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "cronjobs/status", "jobs", "jobs/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"extensions"}, Resources: []string{"daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets", "poddisruptionbudgets/status"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingresses/status", "networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaims/status", "resourceclaimtemplates"}, Verbs: []string{"get", "list", "watch"}},
		),
	}
}

// aggregated is the user-facing role name, whose rules are gathered from
// the roles labeled aggregate-to-<name>, and which aggregates into role
// into (if set).
func aggregated(name, into string) rbacv1.ClusterRole {
	r := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{aggregateLabel + name: "true"}}},
	}}
	if into != "" {
		r.Labels = map[string]string{aggregateLabel + into: "true"}
	}
	return r
}

// aggregateTo is the default role system:aggregate-to-<into>, whose rules
// aggregate into role into.
func aggregateTo(into string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-" + into, Labels: map[string]string{aggregateLabel + into: "true"}},
		Rules:      rules,
	}
}

// aggregateLabel, followed by a role's name, labels the roles whose rules
// aggregate into it.
const aggregateLabel = "rbac.authorization.k8s.io/aggregate-to-"

func defaultClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: name}
	}
	binding := func(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}
	}
	return []rbacv1.ClusterRoleBinding{
		binding("cluster-admin", group(privilegedGroup)),
		binding("system:discovery", group("system:authenticated")),
		binding("system:basic-user", group("system:authenticated")),
		binding("system:public-info-viewer", group("system:authenticated"), group("system:unauthenticated")),
		binding("system:monitoring", group("system:monitoring")),
		binding("system:service-account-issuer-discovery", group("system:serviceaccounts")),
		binding("system:cluster-trust-bundle-discovery", group("system:serviceaccounts")),
	}
}

// The namespaced defaults: in kube-system, the role that reads the
// ConfigMap in which kplane publishes how it authenticates clients
// (AuthenticationInfo), for servers that delegate authentication to it,
// bound as upstream binds it. An operator's chart binds its webhook
// server's account to the role.
const (
	authenticationInfoName = "extension-apiserver-authentication"
	authenticationReader   = "extension-apiserver-authentication-reader"
)

func defaultRoles() []rbacv1.Role {
	return []rbacv1.Role{{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: authenticationReader},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{authenticationInfoName}}},
	}}
}

func defaultRoleBindings() []rbacv1.RoleBinding {
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}
	}
	return []rbacv1.RoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "system::" + authenticationReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: authenticationReader},
		Subjects:   []rbacv1.Subject{user("system:kube-controller-manager"), user("system:kube-scheduler")},
	}}
}

// policyObjects returns the default roles, then the default bindings, as
// the objects the registry stores, each with its resource: cluster-scoped
// ones, then namespaced ones.
func policyObjects() (resources []string, objs []*unstructured.Unstructured, err error) {
	add := func(resource, kind string, typed any) error {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion(rbacv1.SchemeGroupVersion.String())
		u.SetKind(kind)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[bootstrapLabel] = "rbac-defaults"
		u.SetLabels(labels)
		if u.Object["rules"] == nil {
			delete(u.Object, "rules") // an aggregated role's, written by RoleAggregation
		}
		u.SetAnnotations(map[string]string{autoupdateAnnotaion: "true"})
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		resources, objs = append(resources, resource), append(objs, u)
		return nil
	}
	for _, r := range defaultClusterRoles() {
		if err := add("clusterroles", "ClusterRole", &r); err != nil {
			return nil, nil, err
		}
	}
	for _, b := range defaultClusterRoleBindings() {
		if err := add("clusterrolebindings", "ClusterRoleBinding", &b); err != nil {
			return nil, nil, err
		}
	}
	for _, r := range defaultRoles() {
		if err := add("roles", "Role", &r); err != nil {
			return nil, nil, err
		}
	}
	for _, b := range defaultRoleBindings() {
		if err := add("rolebindings", "RoleBinding", &b); err != nil {
			return nil, nil, err
		}
	}
	return resources, objs, nil
}

// reconcilePolicy creates the default object want of resource res if
// have (the stored one) is nil, or gives have what it lacks of want.
func reconcilePolicy(ctx context.Context, res *registry.Resource, want, have *unstructured.Unstructured) error {
	opts := registry.WriteOptions{FieldManager: "kube-apiserver"}
	ns := want.GetNamespace()
	if have == nil {
		_, err := res.Create(ctx, "v1", ns, want.DeepCopy(), opts)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Made meanwhile (another kplane on the same etcd): as stored.
		if have, err = res.Get(ctx, "v1", ns, want.GetName(), metav1.GetOptions{}); err != nil {
			return err
		}
	}
	if have.GetAnnotations()[autoupdateAnnotaion] == "false" {
		return nil
	}
	labels, annotations := missingStrings(want.GetLabels(), have.GetLabels()), missingStrings(want.GetAnnotations(), have.GetAnnotations())
	list := "rules"
	if _, isBinding := want.Object["roleRef"]; isBinding {
		if jsonKey(have.Object["roleRef"]) != jsonKey(want.Object["roleRef"]) {
			// A binding's role never changes: it is made again.
			uid := have.GetUID()
			if _, _, err := res.Delete(ctx, "v1", ns, have.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}, opts); err != nil {
				return err
			}
			_, err := res.Create(ctx, "v1", ns, want.DeepCopy(), opts)
			return err
		}
		list = "subjects"
	}
	var items []any
	if list == "rules" {
		var err error
		if items, err = missingRules(want, have); err != nil {
			return err
		}
	} else {
		items = missingItems(want.Object[list], have.Object[list])
	}
	wantRule, _ := want.Object["aggregationRule"].(map[string]any)
	haveRule, _ := have.Object["aggregationRule"].(map[string]any)
	selectors := missingItems(wantRule["clusterRoleSelectors"], haveRule["clusterRoleSelectors"])
	if len(labels)+len(annotations)+len(items)+len(selectors) == 0 {
		return nil // the common start: nothing lacking, nothing copied
	}
	next := have.DeepCopy()
	next.SetLabels(merged(next.GetLabels(), labels))
	next.SetAnnotations(merged(next.GetAnnotations(), annotations))
	if len(items) > 0 {
		next.Object[list] = append(asList(next.Object[list]), items...)
	}
	if len(selectors) > 0 {
		rule, _ := next.Object["aggregationRule"].(map[string]any)
		if rule == nil {
			rule = map[string]any{}
			next.Object["aggregationRule"] = rule
		}
		rule["clusterRoleSelectors"] = append(asList(rule["clusterRoleSelectors"]), selectors...)
	}
	_, err := res.Update(ctx, "v1", ns, next.GetName(), next, opts)
	return err
}

// missingRules returns the single permissions of want's rules that no
// rule of have's covers (broken down: one group, resource, verb and name,
// or one URL and verb, each), in want's order, as upstream's
// reconciliation adds them: a rule an operator widened still covers its
// original, and adds nothing.
func missingRules(want, have *unstructured.Unstructured) ([]any, error) {
	if len(missingItems(want.Object["rules"], have.Object["rules"])) == 0 {
		return nil, nil // the common start: every rule as written
	}
	rules := func(obj *unstructured.Unstructured) ([]rbacv1.PolicyRule, error) {
		var r struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"rules": obj.Object["rules"]}, &r)
		return r.Rules, err
	}
	w, err := rules(want)
	if err != nil {
		return nil, err
	}
	h, err := rules(have)
	if err != nil {
		return nil, fmt.Errorf("clusterrole %s: %w", have.GetName(), err)
	}
	var missing []any
	for _, r := range uncovered(h, w) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			return nil, err
		}
		missing = append(missing, m)
	}
	return missing, nil
}

// missingItems returns the items of the list want that the list have
// lacks, in want's order.
func missingItems(want, have any) []any {
	held := map[string]bool{}
	for _, h := range asList(have) {
		held[jsonKey(h)] = true
	}
	var missing []any
	for _, w := range asList(want) {
		if !held[jsonKey(w)] {
			missing = append(missing, w)
		}
	}
	return missing
}

func asList(v any) []any { l, _ := v.([]any); return l }

// missingStrings returns the entries of want whose keys have lacks.
func missingStrings(want, have map[string]string) map[string]string {
	var missing map[string]string
	for k, v := range want {
		if _, ok := have[k]; !ok {
			if missing == nil {
				missing = map[string]string{}
			}
			missing[k] = v
		}
	}
	return missing
}

// merged returns m with the entries of add.
func merged(m, add map[string]string) map[string]string {
	if len(add) == 0 {
		return m
	}
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// jsonKey is a JSON value written out, map keys sorted: equal keys,
// equal values.
func jsonKey(v any) string {
	var b strings.Builder
	writeKey(&b, v)
	return b.String()
}

func writeKey(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			writeKey(b, v[k])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, x := range v {
			writeKey(b, x)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case string:
		b.WriteString(strconv.Quote(v))
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// storedPolicy returns the roles and bindings stored, by resource and
// namespace/name (/name for the cluster's): one list of each, read from
// the store (Bootstrap runs before the watch caches).
func storedPolicy(ctx context.Context, reg *registry.Registry) (map[string]map[string]*unstructured.Unstructured, error) {
	stored := map[string]map[string]*unstructured.Unstructured{}
	for _, resource := range []string{"clusterroles", "clusterrolebindings", "roles", "rolebindings"} {
		res, ok := rbacResource(reg, resource)
		if !ok {
			continue
		}
		list, err := res.ListFromStore(ctx, "v1", "")
		if err != nil {
			return nil, err
		}
		byName := map[string]*unstructured.Unstructured{}
		for i := range list.Items {
			byName[list.Items[i].GetNamespace()+"/"+list.Items[i].GetName()] = &list.Items[i]
		}
		stored[resource] = byName
	}
	return stored, nil
}

// rbacResource returns the served RBAC resource name.
func rbacResource(reg *registry.Registry, name string) (*registry.Resource, bool) {
	return reg.Get(schema.GroupResource{Group: rbacv1.GroupName, Resource: name})
}
