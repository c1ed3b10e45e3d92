package flowcontrol

import (
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// schema is a FlowSchema as the classifier uses it.
type schema struct {
	name, uid  string
	precedence int32
	level      string // its PriorityLevelConfiguration's name
	// distinguisher is how its flows are told apart: ByUser, ByNamespace
	// or "" (one flow).
	distinguisher flowcontrolv1.FlowDistinguisherMethodType
	rules         []flowcontrolv1.PolicyRulesWithSubjects
}

// before orders schemas for matching: lowest matchingPrecedence first,
// then by name, as upstream.
func before(a, b *schema) int {
	if a.precedence != b.precedence {
		if a.precedence < b.precedence {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// matches reports whether one of s's rules takes request a: one of its
// subjects names a's user, and one of its resource rules (for a resource
// request) or non-resource rules (for the others) covers what a asks.
func (s *schema) matches(a *registry.Attributes) bool {
	// Loops, not closures: this runs for every request, and a closure
	// over a would escape.
	for i := range s.rules {
		r := &s.rules[i]
		named := false
		for _, sub := range r.Subjects {
			if subjectNames(sub, &a.User) {
				named = true
				break
			}
		}
		if !named {
			continue
		}
		if a.ResourceRequest {
			for j := range r.ResourceRules {
				if resourceRuleCovers(&r.ResourceRules[j], a) {
					return true
				}
			}
			continue
		}
		for j := range r.NonResourceRules {
			rule := &r.NonResourceRules[j]
			if listHas(rule.Verbs, a.Verb, flowcontrolv1.VerbAll) && pathCovered(rule.NonResourceURLs, a.Path) {
				return true
			}
		}
	}
	return false
}

// subjectNames reports whether sub names u: a user by name, a group u is
// in, or a service account (a name of "*" for each of the namespace's).
// "*" names every user or group.
func subjectNames(sub flowcontrolv1.Subject, u *registry.User) bool {
	switch sub.Kind {
	case flowcontrolv1.SubjectKindUser:
		return sub.User != nil && (sub.User.Name == flowcontrolv1.NameAll || sub.User.Name == u.Name)
	case flowcontrolv1.SubjectKindGroup:
		return sub.Group != nil && (sub.Group.Name == flowcontrolv1.NameAll || slices.Contains(u.Groups, sub.Group.Name))
	case flowcontrolv1.SubjectKindServiceAccount:
		if sub.ServiceAccount == nil {
			return false
		}
		// "system:serviceaccount:<namespace>:<name>", read without
		// building it.
		rest, ok := strings.CutPrefix(u.Name, "system:serviceaccount:")
		if !ok {
			return false
		}
		rest, ok = strings.CutPrefix(rest, sub.ServiceAccount.Namespace)
		if !ok || !strings.HasPrefix(rest, ":") {
			return false
		}
		return sub.ServiceAccount.Name == flowcontrolv1.NameAll || rest[1:] == sub.ServiceAccount.Name
	}
	return false
}

// resourceRuleCovers reports whether rule covers resource request a. A
// request without a namespace (of a cluster-scoped resource, or across
// all namespaces) is covered only by a rule with clusterScope.
func resourceRuleCovers(rule *flowcontrolv1.ResourcePolicyRule, a *registry.Attributes) bool {
	if !listHas(rule.Verbs, a.Verb, flowcontrolv1.VerbAll) || !listHas(rule.APIGroups, a.APIGroup, flowcontrolv1.APIGroupAll) ||
		!resourceListed(rule.Resources, a.Resource, a.Subresource) {
		return false
	}
	if a.Namespace == "" {
		return rule.ClusterScope
	}
	return listHas(rule.Namespaces, a.Namespace, flowcontrolv1.NamespaceEvery)
}

// resourceListed reports whether resources holds resource/subresource
// (resource alone without a subresource), or is "*" alone; without
// building the string.
func resourceListed(resources []string, resource, subresource string) bool {
	if len(resources) == 1 && resources[0] == flowcontrolv1.ResourceAll {
		return true
	}
	for _, r := range resources {
		if subresource == "" {
			if r == resource {
				return true
			}
			continue
		}
		if len(r) == len(resource)+1+len(subresource) && r[len(resource)] == '/' &&
			strings.HasPrefix(r, resource) && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

// listHas reports whether list holds x, or is the wildcard alone (as
// validation requires it to be).
func listHas(list []string, x, wildcard string) bool {
	return len(list) == 1 && list[0] == wildcard || slices.Contains(list, x)
}

// pathCovered reports whether one of the patterns covers path: "*"
// covers every path, and a pattern covers itself and every path under
// it ("/healthz" and "/healthz/*" both cover "/healthz/etcd").
func pathCovered(patterns []string, path string) bool {
	for _, p := range patterns {
		if p == flowcontrolv1.NonResourceAll || p == path {
			return true
		}
		prefix := strings.TrimSuffix(p, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
