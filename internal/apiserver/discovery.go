package apiserver

import (
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"

	"github.com/kplane-dev/kplane/internal/registry"
)

// aggregatedType is the media type of aggregated discovery, which recent
// clients ask for first and which answers all of discovery in one request.
const aggregatedType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// wantsAggregated reports whether Accept asks for aggregated discovery
// (v2) before anything else.
func wantsAggregated(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt == "application/json" && params["as"] == "APIGroupDiscoveryList" && params["g"] == "apidiscovery.k8s.io" {
			return params["v"] == "v2"
		}
		if mt == "application/json" && params["as"] == "" {
			return false
		}
	}
	return false
}

// groupVersions collects the served groups: versions in priority order
// (v1 > v1beta1 > v1alpha1), each with its resources.
type servedGroup struct {
	name     string
	versions []string
	byVer    map[string][]*registry.Kind
}

func (s *Server) servedGroups() []*servedGroup {
	groups := map[string]*servedGroup{}
	for _, res := range s.cfg.Registry.Resources() {
		k := res.Kind()
		g := groups[k.Group]
		if g == nil {
			g = &servedGroup{name: k.Group, byVer: map[string][]*registry.Kind{}}
			groups[k.Group] = g
		}
		for _, v := range k.Versions {
			if _, seen := g.byVer[v]; !seen {
				g.versions = append(g.versions, v)
			}
			g.byVer[v] = append(g.byVer[v], k)
		}
	}
	out := make([]*servedGroup, 0, len(groups))
	for _, g := range groups {
		sort.Slice(g.versions, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(g.versions[i], g.versions[j]) > 0
		})
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *servedGroup) int {
		if pa, pb := groupPriority(a.name), groupPriority(b.name); pa != pb {
			return pb - pa
		}
		return strings.Compare(a.firstAPIService(), b.firstAPIService())
	})
	return out
}

// groupPriorities are kube-apiserver's group priorities (its
// APIServices' groupPriorityMinimum) for the built-in groups kplane
// serves; a CRD's group has 1000. Discovery lists the groups highest
// first, as upstream's aggregator does (client-go's discovery RESTMapper
// prefers groups in that order).
var groupPriorities = map[string]int{
	"events.k8s.io": 17750, "authentication.k8s.io": 17700, "authorization.k8s.io": 17600,
	"certificates.k8s.io": 17300, "rbac.authorization.k8s.io": 17000, "apiextensions.k8s.io": 16700,
	"admissionregistration.k8s.io": 16700, "coordination.k8s.io": 16500, "flowcontrol.apiserver.k8s.io": 16100,
	"storagemigration.k8s.io": 15800,
}

func groupPriority(group string) int {
	if p, ok := groupPriorities[group]; ok {
		return p
	}
	return 1000
}

// firstAPIService is the name of the first of the group's APIServices
// ("<version>.<group>") in name order, which orders groups of one
// priority upstream.
func (g *servedGroup) firstAPIService() string {
	first := ""
	for _, v := range g.versions {
		if n := v + "." + g.name; first == "" || n < first {
			first = n
		}
	}
	return first
}

func (s *Server) legacyVersions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, errMethodNotAllowed)
		return
	}
	if wantsAggregated(r) {
		s.countPath(w, r, "api", "apiserver")
		s.aggregated(w, func(g *servedGroup) bool { return g.name == "" })
		return
	}
	writeDiscovery(w, r, true, &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	})
}

// writeDiscovery answers a discovery document (the unaggregated forms) in
// JSON, YAML or protobuf, as Accept asks, as kube-apiserver v1.37.2 did:
// a media type with "as" is none of them (a Table of discovery is 406).
// /api, /api/v1 and a built-in group's versions are go-restful routes
// (restful), which first check Accept as a resource route does
// (negotiateRoute); the others (/apis, a group, a custom resource group's
// versions) only negotiate.
func writeDiscovery(w http.ResponseWriter, r *http.Request, restful bool, obj runtime.Object) {
	accept := r.Header.Get("Accept")
	if restful && !routeProduces(accept) {
		writeError(w, errNotProduced(false))
		return
	}
	f, ok := plainForm(accept)
	switch {
	case !ok:
		writeError(w, errNotAcceptable)
	case f == formProtobuf:
		writeProto(w, http.StatusOK, obj)
	default:
		write(w, f, http.StatusOK, obj)
	}
}

func apiGroup(g *servedGroup) metav1.APIGroup {
	out := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.name}
	for _, v := range g.versions {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
	}
	out.PreferredVersion = out.Versions[0]
	return out
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	if wantsAggregated(r) {
		s.countPath(w, r, "apis", "apiserver")
		s.aggregated(w, func(g *servedGroup) bool { return g.name != "" })
		return
	}
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range s.servedGroups() {
		if g.name != "" {
			ag := apiGroup(g)
			ag.TypeMeta = metav1.TypeMeta{} // a member of the list, as upstream's
			list.Groups = append(list.Groups, ag)
		}
	}
	writeDiscovery(w, r, false, list)
}

func (s *Server) group(w http.ResponseWriter, r *http.Request, name string) {
	for _, g := range s.servedGroups() {
		if g.name == name && name != "" {
			ag := apiGroup(g)
			writeDiscovery(w, r, false, &ag)
			return
		}
	}
	noGroup(w, r)
}

func (s *Server) groupVersion(w http.ResponseWriter, r *http.Request, group, ver string) {
	for _, g := range s.servedGroups() {
		if g.name != group {
			continue
		}
		kinds, ok := g.byVer[ver]
		if !ok {
			break
		}
		if r.Method != http.MethodGet {
			writeError(w, errMethodNotAllowed)
			return
		}
		gv := schema.GroupVersion{Group: group, Version: ver}.String()
		list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv,
			APIResources: []metav1.APIResource{}}
		if group == "" {
			list.APIVersion = "" // as upstream's /api/v1, alone
		}
		builtin := false
		for _, k := range kinds {
			list.APIResources = append(list.APIResources, apiResources(k, ver)...)
			builtin = builtin || k.Typed != nil
		}
		writeDiscovery(w, r, builtin, list)
		return
	}
	s.noRoute(w, r, group)
}

var (
	verbs       = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	statusVerbs = []string{"get", "patch", "update"}
)

// customVerbs are a custom resource's verbs, in the order
// apiextensions-apiserver's discovery lists them.
var customVerbs = []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}

// verbsOf returns the verbs of k's main resource.
func verbsOf(k *registry.Kind) []string {
	if k.Review != nil {
		return []string{"create"}
	}
	if k.NoDeleteCollection {
		return slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return v == "deletecollection" })
	}
	if k.Typed == nil {
		return customVerbs
	}
	return verbs
}

// storageVersionHash identifies the storage version, as upstream's
// discovery does, so that clients can tell when it changes (a guest's is
// its host's, as its objects are stored so).
func storageVersionHash(k *registry.Kind) string {
	if k.IsGuest() {
		k = k.Cohabit.Host // stored as its host
	}
	v := k.StorageVersion()
	if k.UpstreamStorageVersion != "" {
		v = k.UpstreamStorageVersion
	}
	sum := sha256.Sum256([]byte(k.Group + "/" + v + "/" + k.Kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// apiResources are kind k's entries in version v's discovery: the
// resource, then its subresources in that version.
func apiResources(k *registry.Kind, v string) []metav1.APIResource {
	out := []metav1.APIResource{{
		Name: k.Resource, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.Kind,
		Verbs: verbsOf(k), ShortNames: k.ShortNames, Categories: k.Categories,
	}}
	if k.Review == nil { // a review is never stored
		out[0].StorageVersionHash = storageVersionHash(k)
	}
	for _, sub := range k.UpdateSubresources { // before status, as upstream sorts them
		out = append(out, metav1.APIResource{Name: k.Resource + "/" + sub, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: statusVerbs})
	}
	if k.StatusIn(v) {
		out = append(out, metav1.APIResource{Name: k.Resource + "/status", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: statusVerbs})
	}
	if k.ScaleIn(v) != nil {
		out = append(out, metav1.APIResource{Name: k.Resource + "/scale", Namespaced: k.Namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: statusVerbs})
	}
	if k.Finalize {
		out = append(out, metav1.APIResource{Name: k.Resource + "/finalize", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: []string{"update"}})
	}
	for _, sub := range slices.Sorted(maps.Keys(k.ReviewSubresources)) {
		sk := k.ReviewSubresources[sub]
		out = append(out, metav1.APIResource{Name: k.Resource + "/" + sub, Namespaced: k.Namespaced,
			Group: sk.Group, Version: sk.StorageVersion(), Kind: sk.Kind, Verbs: []string{"create"}})
	}
	if k.Typed != nil {
		// A built-in kind's subresources come by name, as upstream's
		// installer sorts its paths (namespaces/finalize before
		// namespaces/status); a custom resource's status, then scale.
		slices.SortFunc(out[1:], func(a, b metav1.APIResource) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// aggregated answers aggregated discovery for the groups keep selects.
func (s *Server) aggregated(w http.ResponseWriter, keep func(*servedGroup) bool) {
	list := &apidiscoveryv2.APIGroupDiscoveryList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
		Items:    []apidiscoveryv2.APIGroupDiscovery{},
	}
	for _, g := range s.servedGroups() {
		if !keep(g) {
			continue
		}
		gd := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, k := range g.byVer[v] {
				gvk := k.GroupVersionKind(v)
				// Upstream's built-in resources name their own group and
				// version by leaving them out; custom resources name them.
				kind := &metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
				if k.Typed != nil {
					kind = &metav1.GroupVersionKind{Kind: gvk.Kind}
				}
				scope := apidiscoveryv2.ScopeCluster
				if k.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				rd := apidiscoveryv2.APIResourceDiscovery{
					Resource: k.Resource, SingularResource: k.Singular, Scope: scope, Verbs: verbsOf(k),
					ShortNames: k.ShortNames, Categories: k.Categories, ResponseKind: kind,
				}
				for _, sub := range k.UpdateSubresources {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: sub, Verbs: statusVerbs, ResponseKind: kind,
					})
				}
				if k.StatusIn(v) {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "status", Verbs: statusVerbs, ResponseKind: kind,
					})
				}
				if k.ScaleIn(v) != nil {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "scale", Verbs: statusVerbs,
						ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"},
					})
				}
				if k.Finalize {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: "finalize", Verbs: []string{"update"}, ResponseKind: kind,
					})
				}
				for sub, sk := range k.ReviewSubresources {
					rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: sub, Verbs: []string{"create"},
						ResponseKind: &metav1.GroupVersionKind{Group: sk.Group, Version: sk.StorageVersion(), Kind: sk.Kind},
					})
				}
				if k.Typed != nil {
					// Upstream lists a built-in kind's subresources by
					// name, a custom resource's status before scale.
					slices.SortFunc(rd.Subresources, func(a, b apidiscoveryv2.APISubresourceDiscovery) int {
						return strings.Compare(a.Subresource, b.Subresource)
					})
				}
				vd.Resources = append(vd.Resources, rd)
			}
			gd.Versions = append(gd.Versions, vd)
		}
		list.Items = append(list.Items, gd)
	}
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Content-Type", aggregatedType)
	writeJSONTyped(w, http.StatusOK, list)
}
