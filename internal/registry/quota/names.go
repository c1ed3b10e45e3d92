package quota

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// quotasResource is the resource of ResourceQuotas.
var quotasResource = schema.GroupResource{Resource: "resourcequotas"}

// legacyNames are the resource names upstream counted objects by before
// count/<resource>: both count the same objects.
var legacyNames = map[schema.GroupResource]corev1.ResourceName{
	{Resource: "configmaps"}:             corev1.ResourceConfigMaps,
	{Resource: "resourcequotas"}:         corev1.ResourceQuotas,
	{Resource: "replicationcontrollers"}: corev1.ResourceReplicationControllers,
	{Resource: "secrets"}:                corev1.ResourceSecrets,
}

// countNames are the quota resource names that count gr's objects.
func countNames(gr schema.GroupResource) []corev1.ResourceName {
	names := []corev1.ResourceName{corev1.ResourceName("count/" + gr.String())}
	if legacy, ok := legacyNames[gr]; ok {
		names = append(names, legacy)
	}
	return names
}

// counted reports the resource whose objects name counts, if it is an
// object count.
func counted(name corev1.ResourceName) (schema.GroupResource, bool) {
	if rest, ok := strings.CutPrefix(string(name), "count/"); ok {
		if rest == "" {
			return schema.GroupResource{}, false
		}
		resource, group, _ := strings.Cut(rest, ".")
		return schema.GroupResource{Group: group, Resource: resource}, true
	}
	for gr, legacy := range legacyNames {
		if legacy == name {
			return gr, true
		}
	}
	return schema.GroupResource{}, false
}

// unserved reports whether upstream measures name with its evaluators of
// Pods, Services or PersistentVolumeClaims, kinds kplane does not serve:
// their usage here is 0, which upstream's evaluators report for a
// namespace without such objects (each tracked name defaults to zero).
func unserved(name corev1.ResourceName) bool {
	switch name {
	case "count/pods", corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
		"count/services", corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
		"count/persistentvolumeclaims", corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage:
		return true
	}
	s := string(name)
	if strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) || strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix) ||
		strings.Contains(s, ".storageclass.storage.k8s.io/") {
		return true
	}
	// An extended resource's requests (requests.example.com/gpu): a
	// qualified name outside kubernetes.io's domains.
	rest, ok := strings.CutPrefix(s, corev1.DefaultResourceRequestsPrefix)
	domain, _, qualified := strings.Cut(rest, "/")
	return ok && qualified && !strings.HasPrefix(rest, corev1.DefaultResourceRequestsPrefix) &&
		domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}

// countable reports whether k's objects are counted: stored objects of a
// namespaced kind, but not Events (core or events.k8s.io), which upstream
// has never counted.
func countable(k *registry.Kind) bool {
	if !k.Namespaced || !k.OwnsObjects() {
		return false
	}
	return !(k.Resource == "events" && (k.Group == "" || k.Group == "events.k8s.io"))
}

// intersect is the names of l that are among names, sorted.
func intersect(l corev1.ResourceList, names []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, n := range names {
		if _, ok := l[n]; ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// pretty is upstream's prettyPrint of a ResourceList: name=quantity,
// sorted by name, joined by commas.
func pretty(l corev1.ResourceList) string {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		q := l[n]
		parts[i] = string(n) + "=" + q.String()
	}
	return strings.Join(parts, ",")
}

// joinNames is upstream's prettyPrintResourceNames.
func joinNames(names []corev1.ResourceName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

// one is an object's count.
func one() resource.Quantity { return *resource.NewQuantity(1, resource.DecimalSI) }
